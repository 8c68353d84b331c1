package node_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/testenv"
)

// A node whose MySQL takes the connection and never answers says in its
// log, within seconds, what it is still waiting for: an attempt lasts up
// to the dial and read timeouts (40 s), and the log said nothing until
// the attempt failed.
func TestOpenSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	host := testenv.NewHungServer(t)
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("node:\n  id: vm\nmysql:\n  dsn: %q\n", "root:@tcp("+host.Addr()+")/taskd")), 0o600))
	cfg, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second) // SIGTERM
	defer cancel()
	_, err = node.Open(ctx, cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	require.Error(t, err)
	require.Contains(t, logs.String(), `level=WARN msg="no answer yet; still waiting" node=vm to=mysql addr=`+host.Addr()+" after=5s", logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "no answer yet"), "once per attempt")
}
