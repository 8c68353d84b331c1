package taskd_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's map of the code names every package under pkg/, so the
// next engineer finds each one from there (it once named 13 of 24).
func TestReadmeMapsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	entries, err := os.ReadDir("pkg")
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(e.Name()) + ` {2,}\S`)
			require.True(t, line.Match(readme), "README.md's Development map does not describe pkg/%s", e.Name())
		}
	}
}
