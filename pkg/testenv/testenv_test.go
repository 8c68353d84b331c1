package testenv_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// Every test's connection runs under MySQL 8's default sql_mode, the
// stricter one: a GROUP BY that names a column it does not group by, or
// a zero date, fails here as it would there.
func TestSessionsRunUnderMySQL8Mode(t *testing.T) {
	if os.Getenv("TASKD_TEST_MYSQL_DSN") != "" {
		t.Skip("TASKD_TEST_MYSQL_DSN names the server and its settings")
	}
	env := testenv.New(t)
	var mode string
	require.NoError(t, env.Store.DB().QueryRow(`SELECT @@SESSION.sql_mode`).Scan(&mode))
	for _, m := range []string{"ONLY_FULL_GROUP_BY", "STRICT_TRANS_TABLES", "NO_ZERO_DATE"} {
		require.Contains(t, strings.Split(mode, ","), m)
	}
	_, err := env.Store.DB().Exec(`SELECT task_code, id FROM task_center GROUP BY task_code`)
	require.ErrorContains(t, err, "GROUP BY")
}
