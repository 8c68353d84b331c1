package cli

import (
	"testing"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"
)

// TestPrintableOutput prints a handler's output as a terminal would leave
// it, without its escape sequences: `taskd show` wrote them raw to the
// operator's terminal, and a \r in `taskd list` sent the cursor back over
// the row.
func TestPrintableOutput(t *testing.T) {
	t.Parallel()
	out := "进度 10%\r进度 100%\n\x1b[31m红色错误\x1b[0m\ttab\x07bell\r\n\x1b]0;owned\x07title\u009b2Jc1\n"
	require.Equal(t, "进度 100%\n红色错误\ttab\\x07bell\ntitle\\x9b2Jc1\n", printable(out))
	require.Equal(t, "进度 100%", oneLine(out, 40))
	require.Equal(t, "红色错误 tab\\x07bell", oneLine("\x1b[31m红色错误\x1b[0m\ttab\x07bell", 40))

	// At most n columns, cut between characters.
	long := "错误：数据库连接失败😱 retry later"
	for n := 2; n <= 40; n++ {
		s := oneLine(long, n)
		require.LessOrEqual(t, uniseg.StringWidth(s), n, "%d: %q", n, s)
	}
	require.Equal(t, "错误：数…", oneLine(long, 9))
	require.Equal(t, long, oneLine(long, 40))
}
