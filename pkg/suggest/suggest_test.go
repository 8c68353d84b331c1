package suggest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/suggest"
)

func TestNearest(t *testing.T) {
	t.Parallel()
	statuses := []string{"pending", "dispatched", "running", "succeeded", "failed", "dead", "cancelled"}
	for _, c := range []struct{ typed, want string }{
		{"runing", "running"},      // a letter left out
		{"pnding", "pending"},      // another
		{"sucseeded", "succeeded"}, // one changed
		{"daed", "dead"},           // two swapped
		{"RUNNING", "running"},     // case does not count
		{"bogus", ""},              // nothing near
		{"", ""},
	} {
		require.Equal(t, c.want, suggest.Nearest(c.typed, statuses), c.typed)
	}
	// The last segment of a dotted key is what was mistyped.
	keys := []string{"mysql.dsn", "mysql.read_dsn", "redis.addr"}
	require.Equal(t, "mysql.dsn", suggest.Nearest("mysql.dns", keys))
	require.Equal(t, "", suggest.Nearest("mysql.password", keys))
	require.Equal(t, ` (did you mean "redis.addr"?)`, suggest.DidYouMean("redis.adr", keys))
	require.Equal(t, "", suggest.DidYouMean("queue", nil))
}
