package node_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
)

// An exec handler's permanent_exit_codes reach the handler the node runs.
func TestHandlersPermanentExit(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Handlers: map[string]config.HandlerSpec{
		"import": {Exec: []string{"/bin/sh", "-c", "exit 65"}, PermanentExitCodes: []int{65}},
		"resize": {Exec: []string{"/bin/sh", "-c", "exit 65"}},
	}}
	reg := node.Handlers(cfg, nil, nil)
	for code, permanent := range map[string]bool{"import": true, "resize": false} {
		h, ok := reg.Lookup(code)
		require.True(t, ok)
		_, err := h.Handle(context.Background(), &handler.Request{ID: 1, Code: code, Attempt: 1})
		require.ErrorContains(t, err, "exit status 65")
		require.Equal(t, permanent, errors.Is(err, handler.ErrPermanent), code)
	}
}
