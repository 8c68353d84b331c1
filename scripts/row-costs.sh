#!/usr/bin/env bash
# What MariaDB spends per row on each of taskd's hot statements, on the real
# schema: the claim's read of its candidates, the claim (compare-and-set),
# the result and the history row, each run alone over 100,000 tasks in
# statements of the sizes the daemon sends, with the server's CPU read from
# /proc before and after. A variant changes the schema after the migrations
# (an ALTER TABLE), so that each index's share can be told apart:
#
#   scripts/row-costs.sh                      # the schema as it is: one idx_lane
#   scripts/row-costs.sh old                  # the three indexes idx_lane replaced, instead of it
#   scripts/row-costs.sh both                 # those three beside idx_lane (contract step 0011 pending)
#   scripts/row-costs.sh nolane "ALTER TABLE task_center DROP KEY idx_lane"
#
# The claim's read goes through idx_lane, or through idx_claim when the
# variant has only that.
#
# Needs the mysql client and a MariaDB server on this host (the CPU figure
# is the server process's), and bin/taskd (go build -o bin/taskd ./cmd/taskd).
# MYSQL_HOST (default 127.0.0.1), MYSQL_USER (root) and MYSQL_PWD (empty)
# reach the server; TASKS sets the number of rows. Other clients of the same server add to the figures:
# run it on a quiet machine, twice.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

label=${1:-schema}
alter=${2:-}
# The indexes of migrations 0001 and 0009 that 0010's idx_lane replaces.
old_keys="ADD KEY IF NOT EXISTS idx_claim (priority, claim_key, id, wait_status, wait_queue, wait_code),
	ADD KEY IF NOT EXISTS idx_inflight (inflight_at), ADD KEY IF NOT EXISTS idx_finished (finished_at)"
if [ -z "$alter" ]; then
	case $label in
	old) alter="ALTER TABLE task_center DROP KEY idx_lane, $old_keys" ;;
	both) alter="ALTER TABLE task_center $old_keys" ;;
	esac
fi
N=${TASKS:-100000}
host=${MYSQL_HOST:-127.0.0.1}
user=${MYSQL_USER:-root}
export MYSQL_PWD=${MYSQL_PWD:-}
my=(-h"$host" -u"$user")
pid=$(pidof mariadbd mysqld 2>/dev/null | awk '{print $1}')
[ -n "$pid" ] || { echo "row-costs: no mariadbd or mysqld on this host (the figures are its CPU)" >&2; exit 1; }
[ -x "$REPO/bin/taskd" ] || { echo "row-costs: build bin/taskd first: go build -o bin/taskd ./cmd/taskd" >&2; exit 1; }
db="taskd_rowcosts_$$"
work=$(mktemp -d)
trap 'mysql "${my[@]}" -e "DROP DATABASE IF EXISTS $db" || true; rm -rf "$work"' EXIT
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# The redo the server wrote: a statement that moves records (a column
# that changes size) writes several times what one in place writes.
lsn() { mysql "${my[@]}" -N -e "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'" | awk '{print $2}'; }
hz=$(getconf CLK_TCK)

mysql "${my[@]}" -e "CREATE DATABASE $db"
"$REPO/bin/taskd" --mysql-dsn "$user:$MYSQL_PWD@tcp($host:3306)/$db" migrate >/dev/null
[ -z "$alter" ] || mysql "${my[@]}" "$db" -e "$alter"
has_key() {
	[ "$(mysql "${my[@]}" -N "$db" -e "SELECT COUNT(*) FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND INDEX_NAME = '$1'")" != 0 ]
}
# The claim's read of one priority's due tasks (pkg/store/queries.go).
read_by="lane = 5 AND lane_at <= NOW(3) ORDER BY lane_at, id"
if ! has_key idx_lane && has_key idx_claim; then
	read_by="priority = 5 AND claim_key <= NOW(3) ORDER BY claim_key, id"
fi
mysql "${my[@]}" "$db" -e "INSERT INTO task_center (task_code, queue, payload, plan_next_run_at)
	SELECT 'noop', 'noop', '{}', NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_$N"

# gen KIND BATCH: the statements of one kind over ids 1..N, BATCH rows each,
# as the daemon writes them (pkg/store/queries.go: 500 ids per claim
# statement, about 140 results per transaction in a burn-down).
gen() {
	awk -v kind="$1" -v n="$N" -v b="$2" -v by="$read_by" 'BEGIN {
		for (s = 1; s <= n; s += b) {
			e = s + b - 1; if (e > n) e = n
			ids = s; rows = ""
			for (i = s + 1; i <= e; i++) ids = ids ", " i
			if (kind == "select") {
				printf "SELECT id, attempt, task_code, payload FROM task_center WHERE %s LIMIT %d;\n", by, b
			} else if (kind == "claim") {
				printf "START TRANSACTION; UPDATE task_center FORCE INDEX (PRIMARY) SET status = 1, attempt = attempt + 1, dispatched_at = NOW(3), worker_id = \x27\x27, claim_token = 777 WHERE id IN (%s) AND attempt = 0 AND status IN (0, 4) AND plan_next_run_at <= NOW(3); COMMIT;\n", ids
			} else if (kind == "result") {
				printf "START TRANSACTION; UPDATE task_center FORCE INDEX (PRIMARY) SET status = 3, last_result = \x27\x27, finished_at = NOW(3), started_at = NOW(3), last_run_at = NOW(3), claim_token = 12345 WHERE id IN (%s) AND attempt = 1 AND status = 1; COMMIT;\n", ids
			} else {
				for (i = s; i <= e; i++) rows = rows (i > s ? ", " : "") sprintf("(%d, 1, \x27noop\x27, \x27noop\x27, \x27vm-1234-abcdef\x27, \x27bench\x27, NOW(3) - INTERVAL 300 MICROSECOND, NOW(3), \x27succeeded\x27, NULL, 0)", i)
				printf "START TRANSACTION; INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, node, started_at, finished_at, outcome, result, duration_ms) VALUES %s; COMMIT;\n", rows
			}
		}
	}'
}

total=0
for k in "select 1000" "claim 500" "result 140" "history 140"; do
	set -- $k
	gen "$1" "$2" >"$work/$1.sql"
	sleep 1 # let purge of the previous step settle
	l0=$(lsn)
	a=$(ticks)
	mysql "${my[@]}" "$db" <"$work/$1.sql" >/dev/null
	b=$(ticks)
	l1=$(lsn)
	us=$(awk -v d=$((b - a)) -v hz="$hz" -v n="$N" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
	total=$(awk -v t="$total" -v u="$us" 'BEGIN { printf "%.1f", t + u }')
	printf '%-12s %-8s %6s µs/row %6d B redo/row\n' "$label" "$1" "$us" $(((l1 - l0) / N))
done
printf '%-12s %-8s %6s µs/task\n' "$label" "total" "$total"
