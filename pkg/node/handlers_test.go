package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// handlers.CODE.timeout reaches each kind of handler the node runs.
func TestHandlersTimeout(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Handlers: map[string]config.HandlerSpec{
		"a": {Exec: []string{"true"}, Timeout: time.Second},
		"b": {Pool: []string{"true"}, Timeout: 2 * time.Second},
		"c": {HTTP: "http://127.0.0.1:1/x", Timeout: 3 * time.Second},
		"d": {HTTP: "http://127.0.0.1:1/x"},
	}}
	reg := node.Handlers(cfg, nil, nil)
	for code, want := range map[string]time.Duration{"a": time.Second, "b": 2 * time.Second, "c": 3 * time.Second, "d": time.Minute} {
		h, ok := reg.Lookup(code)
		require.True(t, ok)
		require.Equal(t, want, handler.AttemptTimeout(h, time.Minute), code)
	}
}
