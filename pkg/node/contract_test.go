package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// MayContract decides from the registry alone: a contract step runs once
// every live process knows it; an empty registry only with --contract; a
// registry that cannot be read, never.
func TestMayContract(t *testing.T) {
	t.Parallel()
	const step = 11
	old := broker.Process{ID: "web-1-4242-ab", Node: "web-1", Host: "web-1.example", PID: 4242, Version: "1.4.0", Schema: 10}
	unsaid := broker.Process{ID: "web-2-77-cd", Node: "web-2", Host: "web-2.example", PID: 77, Version: "1.3.0"} // before Schema existed
	fresh := broker.Process{ID: "web-3-9-ef", Node: "web-3", Host: "web-3.example", PID: 9, Version: "1.5.0", Schema: 11}
	newer := broker.Process{ID: "web-4-9-ef", Node: "web-4", Host: "web-4.example", PID: 9, Version: "1.6.0", Schema: 12}

	for _, force := range []bool{false, true} {
		require.Empty(t, node.MayContract(step, []broker.Process{fresh, newer}, nil, force), "every process knows the step")

		why := node.MayContract(step, []broker.Process{fresh, old}, nil, force)
		require.Contains(t, why, "1 live process of an older release: node web-1 on web-1.example pid 4242 (taskd 1.4.0)")
		require.NotContains(t, why, "web-3")

		why = node.MayContract(step, []broker.Process{unsaid}, nil, force)
		require.Contains(t, why, "node web-2 on web-2.example pid 77 (taskd 1.3.0)", "a process that does not say is older")

		why = node.MayContract(step, nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), force)
		require.Contains(t, why, "cannot be read (dial tcp 127.0.0.1:1: connect: connection refused)")
	}
	require.Contains(t, node.MayContract(step, []broker.Process{old}, nil, false), "run `taskd migrate` again once every node runs this release")
	require.Contains(t, node.MayContract(step, []broker.Process{old}, nil, true), "upgrade or stop them, then run `taskd migrate --contract` again")

	why := node.MayContract(step, nil, nil, false)
	require.Contains(t, why, "no live process in the Redis registry")
	require.Contains(t, why, "`taskd migrate --contract` once no older node is running")
	require.Empty(t, node.MayContract(step, nil, nil, true), "--contract: the operator says no older node runs")

	var many []broker.Process
	for i := range 5 {
		p := old
		p.Node, p.PID = fmt.Sprintf("old-%d", i), i+1
		many = append(many, p)
	}
	why = node.MayContract(step, many, nil, false)
	require.Contains(t, why, "5 live processes of an older release: node old-0")
	require.Contains(t, why, "node old-2 on web-1.example pid 3 (taskd 1.4.0) and 2 more")
	require.NotContains(t, why, "old-3")
}

// A node's process heartbeat says which schema its binary knows.
func TestProcessBeatCarriesSchema(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	startNode(t, env, nil, "node:\n  roles: [recovery]\n")
	var procs []broker.Process
	var err error
	require.Eventually(t, func() bool {
		procs, err = env.Broker.Processes(context.Background(), time.Minute)
		return err == nil && len(procs) == 1 && procs[0].PID != 0
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, store.LatestVersion(), procs[0].Schema)
	require.Positive(t, procs[0].Schema)
}
