package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/config"
)

// The configuration reference in the README and the example configuration
// name every key the code knows, so neither can drift from the code.
func TestEveryKeyIsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("../../config/taskd.yaml")
	require.NoError(t, err)
	for _, key := range config.Keys() {
		section, leaf, _ := strings.Cut(key, ".")
		require.True(t, strings.Contains(string(readme), "`"+key+"`") || strings.Contains(string(readme), leaf+"`"),
			"README.md does not document %s", key)
		require.True(t, strings.Contains(string(example), "\n"+section+":"), "config/taskd.yaml has no %s section", section)
		require.True(t, strings.Contains(string(example), "\n  "+leaf+":"), "config/taskd.yaml does not show %s", key)
	}
}
