#!/usr/bin/env bash
# What a slow queue's backlog costs the task center, and whether it holds
# up another queue: `taskd run` with a queue `slow` (10 slots running
# `sleep 0.05`, about 190 tasks/s) and a queue `quick` (4 slots running
# `true`), on a private database and Redis prefix. It INSERTs a backlog
# for `slow` seed-style (one INSERT ... SELECT, NOW() as the due time),
# starts the daemon, INSERTs one row for `quick` 5 s later, and prints
#
#   quick-dispatched-after=S   seconds from the quick row's INSERT to its success, to 0.2 s (or "never" within 30 s)
#   tasks=N per-s=R mysql-us-per-task=M taskd-us-per-task=T statements-per-task=Q fsyncs-per-task=F
#   mysql-ms-per-s=M taskd-ms-per-s=T
#
# With PAUSE=1 the queue `slow` is paused before the daemon starts: no slow
# task runs, and the last line is what its paused backlog costs.
#
# for the 20 s after the daemon's first 8 (the CPU figures are the server's
# and the daemon's, from /proc; the script's own look for the quick row, a
# SELECT every 0.2 s, is among the statements). Other clients of the same server add to
# them: run it on a quiet machine, and compare binaries alternating.
#
#   scripts/slow-backlog.sh                     # bin/taskd, a backlog of 20,000
#   BIN=/tmp/taskd-old BACKLOG=50000 scripts/slow-backlog.sh
#   PAUSE=1 BACKLOG=100000 scripts/slow-backlog.sh
#
# Needs the mysql and redis-cli clients, a MariaDB server on this host and
# Redis; bin/taskd (go build -o bin/taskd ./cmd/taskd) unless BIN is set.
# MYSQL_HOST (default 127.0.0.1), MYSQL_USER (root), MYSQL_PWD (empty) and
# REDIS_ADDR (127.0.0.1:6379) reach them.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${BIN:-$REPO/bin/taskd}
backlog=${BACKLOG:-20000}
host=${MYSQL_HOST:-127.0.0.1}
user=${MYSQL_USER:-root}
export MYSQL_PWD=${MYSQL_PWD:-}
redis=${REDIS_ADDR:-127.0.0.1:6379}
my=(-h"$host" -u"$user")
command -v mysql >/dev/null 2>&1 || die "slow-backlog: the mysql client is missing (apt-get install mariadb-client)"
command -v redis-cli >/dev/null 2>&1 || die "slow-backlog: redis-cli is missing (apt-get install redis-tools)"
[ -x "$bin" ] || die "slow-backlog: build the binary first: go build -o bin/taskd ./cmd/taskd (or set BIN)"
mpid=$(pidof mariadbd mysqld 2>/dev/null | awk '{print $1}')
[ -n "$mpid" ] || die "slow-backlog: no mariadbd or mysqld on this host (the figures are its CPU)"

db="taskd_slow_$$"
prefix="slow$$:"
work=$(mktemp -d)
dpid=""
cleanup() {
	[ -z "$dpid" ] || { kill -TERM "$dpid" 2>/dev/null || true; wait "$dpid" 2>/dev/null || true; }
	mysql "${my[@]}" -e "DROP DATABASE IF EXISTS $db" || true
	redis-cli -u "redis://$redis" --scan --pattern "$prefix*" | xargs -r -n 500 redis-cli -u "redis://$redis" DEL >/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/taskd.yaml" <<EOF
node: { id: slow-backlog }
mysql: { dsn: "$user:$MYSQL_PWD@tcp($host:3306)/$db" }
redis: { addr: "$redis", prefix: "$prefix" }
log: { level: warn }
handlers:
  slow: { exec: ["sleep", "0.05"] }
  quick: { exec: ["true"] }
queues:
  slow: { concurrency: 10 }
  quick: { concurrency: 4 }
EOF
q() { mysql "${my[@]}" -N "$db" -e "$1"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
status() {
	mysql "${my[@]}" -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Innodb_data_fsyncs')" | sort
}
succeeded() { q "SELECT COUNT(*) FROM task_center WHERE task_code = 'slow' AND status = 3"; }

mysql "${my[@]}" -e "CREATE DATABASE $db"
"$bin" --config "$work/taskd.yaml" migrate >/dev/null
q "INSERT INTO task_center (task_code, payload, plan_next_run_at) SELECT 'slow', '{}', NOW() FROM seq_1_to_$backlog"
[ "${PAUSE:-0}" = 0 ] || "$bin" --config "$work/taskd.yaml" pause slow --yes >/dev/null
"$bin" --config "$work/taskd.yaml" run >"$work/run.log" 2>&1 &
dpid=$!

# wait_quick SECONDS: look for the quick row's success every 0.2 s for
# that long, once it is found only sleep.
after=never
wait_quick() {
	local i
	for ((i = 0; i < $1 * 5; i++)); do
		sleep 0.2
		if [ "$after" = never ] && [ "$(q "SELECT status FROM task_center WHERE task_code = 'quick'")" = 3 ]; then
			after=$(awk -v a="$inserted" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		fi
	done
}
sleep 5
q "INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('quick', '{}', NOW())"
inserted=$(date +%s.%N)
wait_quick 3
n0=$(succeeded) m0=$(ticks "$mpid") t0=$(ticks "$dpid")
status >"$work/s0"
wait_quick 20
n1=$(succeeded) m1=$(ticks "$mpid") t1=$(ticks "$dpid")
status >"$work/s1"
kill -0 "$dpid" 2>/dev/null || die "slow-backlog: the daemon exited; its log: $(tail -3 "$work/run.log")"
[ "$after" != never ] || wait_quick 7
n=$((n1 - n0))
[ "$n" -gt 0 ] || [ "${PAUSE:-0}" != 0 ] || die "slow-backlog: no task succeeded in the measured 20 s; the daemon's log: $(tail -3 "$work/run.log")"
hz=$(getconf CLK_TCK)
join "$work/s0" "$work/s1" | awk -v n="$n" -v after="$after" -v m=$((m1 - m0)) -v t=$((t1 - t0)) -v hz="$hz" '
	{ d[$1] = $3 - $2 }
	END {
		printf "quick-dispatched-after=%s\n", after
		if (n > 0)
			printf "tasks=%d per-s=%.0f mysql-us-per-task=%.0f taskd-us-per-task=%.0f statements-per-task=%.2f fsyncs-per-task=%.2f\n",
				n, n / 20, m * 1e6 / hz / n, t * 1e6 / hz / n, d["Questions"] / n, d["Innodb_data_fsyncs"] / n
		printf "mysql-ms-per-s=%.1f taskd-ms-per-s=%.1f statements-per-s=%.1f\n", m * 1e3 / hz / 20, t * 1e3 / hz / 20, d["Questions"] / 20
	}'
