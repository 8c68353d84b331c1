package task_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/task"
)

func TestByteSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0:             "0 bytes",
		900:           "900 bytes",
		1 << 10:       "1.0 KiB",
		512 << 10:     "512.0 KiB",
		8_283_750:     "7.9 MiB",
		5 << 19:       "2.5 MiB",
		100 << 20:     "100.0 MiB",
		3 << 29:       "1.5 GiB",
		(1 << 10) - 1: "1023 bytes",
	} {
		require.Equal(t, want, task.ByteSize(n), "%d", n)
	}
}
