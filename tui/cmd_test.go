package tui

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A flag's bad value is worded like a bad configuration value, not in the
// parser's words, and is a usage error.
func TestBadFlagValue(t *testing.T) {
	for _, args := range [][]string{{"--refresh", "5"}, {"serve", "--refresh", "5"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 2, Main(context.Background(), args, &stdout, &stderr), args)
		require.Equal(t, "tasktop: bad value \"5\" for --refresh: want a duration such as 500ms, 30s or 5m\n", stderr.String(), args)
	}
}
