package doctor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// GRANT lines as MariaDB and MySQL print them.
func TestGrantedOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lines    []string
		have     []string
		perTable bool
		roles    bool
	}{
		{"all on everything", []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"},
			[]string{"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "INDEX"}, false, false},
		{"runtime only", []string{"GRANT USAGE ON *.* TO `taskd`@`%` IDENTIFIED BY PASSWORD '*AB'",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON `taskd`.* TO `taskd`@`%`"}, []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, false, false},
		{"another database", []string{"GRANT ALL PRIVILEGES ON `other`.* TO `taskd`@`%`"}, nil, false, false},
		{"a pattern", []string{"GRANT SELECT, INSERT ON `task%`.* TO `taskd`@`%`"}, []string{"SELECT", "INSERT"}, false, false},
		{"an escaped underscore is literal", []string{"GRANT SELECT ON `task\\_%`.* TO `u`@`%`"}, nil, false, false},
		{"per table and columns", []string{"GRANT SELECT, UPDATE (`status`) ON `taskd`.`task_center` TO `u`@`%`"}, nil, true, false},
		{"a role", []string{"GRANT `taskd_rw` TO `u`@`%`", "GRANT USAGE ON *.* TO `u`@`%`"}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have, perTable, roles := grantedOn(tc.lines, "taskd")
			var got []string
			for _, p := range append(runPrivileges, migratePrivileges...) {
				if have[p] {
					got = append(got, p)
				}
			}
			require.Equal(t, tc.have, got)
			require.Equal(t, tc.perTable, perTable)
			require.Equal(t, tc.roles, roles)
		})
	}
}

func TestMatchDB(t *testing.T) {
	t.Parallel()
	require.True(t, matchDB("*", "taskd"))
	require.True(t, matchDB("`taskd`", "taskd"))
	require.True(t, matchDB("`task\\_%`", "task_prod"))
	require.False(t, matchDB("`task\\_%`", "taskd"), "an escaped _ is a literal underscore")
	require.True(t, matchDB("`task_`", "taskd"), "_ is any one character")
	require.False(t, matchDB("`taskd`", "taskd2"))
}
