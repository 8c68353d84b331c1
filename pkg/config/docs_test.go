package config_test

import (
	"fmt"
	"os"
	"reflect"
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
		// A nested key (tasktop.serve.listen) is shown indented one more
		// step per level.
		parts := strings.Split(leaf, ".")
		for i, p := range parts {
			require.True(t, strings.Contains(string(example), "\n  "+strings.Repeat("  ", i)+p+":"),
				"config/taskd.yaml does not show %s", key)
		}
	}
}

// docs/configuration.md has one table row per key, with the key's default
// and environment variable as the code has them, and no row for a key the
// code does not know; every field of a handler and a queue is described.
func TestConfigurationReference(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	rows := map[string][]string{} // key -> cells
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
		}
		require.NotContains(t, rows, cells[0], "docs/configuration.md: two rows for %s", cells[0])
		rows[cells[0]] = cells
	}

	v := config.NewViper()
	for _, key := range config.Keys() {
		cells, ok := rows[key]
		require.True(t, ok, "docs/configuration.md has no row for %s", key)
		delete(rows, key)
		require.Equal(t, formatDefault(v.Get(key)), cells[1], "docs/configuration.md: default of %s", key)
		require.Equal(t, "TASKD_"+strings.ToUpper(strings.ReplaceAll(key, ".", "_")), cells[2],
			"docs/configuration.md: environment variable of %s", key)
	}
	for _, spec := range []struct {
		prefix string
		typ    reflect.Type
	}{
		{"handlers.CODE.", reflect.TypeFor[config.HandlerSpec]()},
		{"queues.NAME.", reflect.TypeFor[config.QueueConfig]()},
	} {
		for f := range spec.typ.Fields() {
			key := spec.prefix + f.Tag.Get("mapstructure")
			require.Contains(t, rows, key, "docs/configuration.md does not describe %s", key)
			delete(rows, key)
		}
	}
	require.Empty(t, rows, "docs/configuration.md describes keys the code does not know")
}

// formatDefault writes a default as the reference shows it.
func formatDefault(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return `""`
		}
		return v
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	default:
		return fmt.Sprint(v)
	}
}
