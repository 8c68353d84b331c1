package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// A submitter's own configuration does not set the shards it pushes to:
// the task center records none here (no daemon configured them), so the
// daemons take from one shard, and a submit configured with four pushed
// three tasks in four to shards no worker read.
func TestProducerPushesToTheRecordedShards(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	cfg := configWith(t, env, "queues:\n  q:\n    shards: 4\n")
	p := node.NewProducer(cfg, env.Store, env.Broker, nil)
	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i].Code = "q"
	}
	_, err := p.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := env.Broker.Client().LLen(ctx, env.Broker.Keys.Lane("q", 0, task.DefaultPriority)).Result()
		return err == nil && n == 8
	}, 5*time.Second, 10*time.Millisecond, "every message in the one shard the daemons take from")
}
