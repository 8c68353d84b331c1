package store

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
)

// The migrations guard their ALTER TABLE clauses with IF [NOT] EXISTS, so
// that a step cut short (by a crash, or a lost connection between two of
// its statements) runs again cleanly. MariaDB reads those guards; MySQL 8
// has none on ALTER TABLE's clauses and refuses the whole statement as a
// syntax error. So Migrate resolves every guard itself, on both servers,
// against information_schema just before the statement runs: a clause
// whose guard is false is left out, the others go without the guard words,
// and a statement left with no clause is not sent.

var (
	// alterTable is an ALTER TABLE statement: its table and its clauses.
	alterTable = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+` + "`?" + `(\w+)` + "`?" + `\s+(.*)$`)
	// guardedClause is a clause with a guard: what it adds or drops, the
	// guard, the object's name and the rest of the clause.
	guardedClause = regexp.MustCompile(`(?is)^(ADD|DROP)\s+(COLUMN|KEY|INDEX|UNIQUE\s+KEY|UNIQUE\s+INDEX)\s+IF\s+(NOT\s+)?EXISTS\s+` +
		"`?" + `(\w+)` + "`?" + `(.*)$`)
	// tableOption is a clause that says how to alter, not what.
	tableOption = regexp.MustCompile(`(?i)^(ALGORITHM|LOCK)\s*=`)
)

// schemaObjects are the columns and indexes of the table a statement
// alters, by lower-case name.
type schemaObjects struct {
	columns, indexes map[string]bool
}

// has reports whether the table has the column (kind COLUMN) or the
// index (any other kind) name.
func (o schemaObjects) has(kind, name string) bool {
	if kind == "COLUMN" {
		return o.columns[strings.ToLower(name)]
	}
	return o.indexes[strings.ToLower(name)]
}

// portable returns stmt as both servers run it: each guarded clause of
// an ALTER TABLE is left out when its guard is false and loses its guard
// words otherwise, against the table's columns and indexes as schema
// reads them (only for a statement with a guard). It returns "" when no
// clause is left to do; any other statement as it is.
func portable(stmt string, schema func(table string) (schemaObjects, error)) (string, error) {
	m := alterTable.FindStringSubmatch(stmt)
	if m == nil {
		return stmt, nil
	}
	table, clauses := m[1], splitClauses(m[2])
	if !slices.ContainsFunc(clauses, guardedClause.MatchString) {
		return stmt, nil
	}
	have, err := schema(table)
	if err != nil {
		return "", err
	}
	kept := make([]string, 0, len(clauses))
	for _, c := range clauses {
		g := guardedClause.FindStringSubmatch(c)
		if g == nil {
			kept = append(kept, c)
			continue
		}
		op, kind, name := strings.ToUpper(g[1]), strings.Join(strings.Fields(strings.ToUpper(g[2])), " "), g[4]
		if (op == "ADD") == have.has(kind, name) { // ADD IF NOT EXISTS of what is there, DROP IF EXISTS of what is not
			continue
		}
		kept = append(kept, op+" "+kind+" "+name+g[5])
	}
	if !slices.ContainsFunc(kept, func(c string) bool { return !tableOption.MatchString(c) }) {
		return "", nil // nothing left but how to do it (ALGORITHM=COPY)
	}
	return "ALTER TABLE " + table + "\n  " + strings.Join(kept, ",\n  "), nil
}

// splitClauses splits the clauses of an ALTER TABLE at the commas outside
// parentheses and quotes, trimming each.
func splitClauses(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// tableSchema reads the columns and indexes of a table in the
// connection's database, for portable.
func tableSchema(ctx context.Context, c *sql.Conn) func(table string) (schemaObjects, error) {
	return func(table string) (schemaObjects, error) {
		cols, err := names(ctx, c, "schema", `SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
		if err != nil {
			return schemaObjects{}, err
		}
		idx, err := names(ctx, c, "schema", `SELECT DISTINCT LOWER(INDEX_NAME) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table)
		return schemaObjects{columns: cols, indexes: idx}, err
	}
}
