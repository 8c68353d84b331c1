#!/usr/bin/env bash
# The fault suite: three `taskd run` daemons (scheduler, worker, recovery;
# 16 worker slots each) on a PRIVATE MariaDB and a PRIVATE Redis (own ports,
# own data directory, database taskd_faults, key prefix faults:), so that it
# can stop and restart them without disturbing anything else on the machine.
#
# It submits --tasks tasks (default 5000) spread over about 24 s; their exec
# handler sleeps 50 ms and appends "TASK_ID TASK_ATTEMPT" to a file. While
# they run it:
#   1. SIGKILLs node-1 and starts it again a second later;
#   2. SIGSTOPs node-2 for 6 s (heartbeat TTL 3 s), then SIGCONTs it;
#   3. FLUSHALLs Redis;
#   4. restarts Redis (empty: no persistence);
#   5. restarts MariaDB (every connection is cut).
# Timings: worker.heartbeat_interval 1s, heartbeat_ttl 3s, recovery.interval
# 1s, dispatch_window 5s, worker.shutdown_grace 5s.
#
# Beside them it submits --chains chains (default 100) of three steps (a
# task, then a child with its result, then a grandchild) and --batches
# batches (default 20) of --batch-size members (default 10), the last
# --batch-dead of which (default 2) fail without retry and die, each batch
# with a callback task.
#
# --direct of the --tasks (default a fifth) are submitted by another
# process through the Go API, which dispatches each at submit: inserted
# dispatched and pushed to Redis after the commit. Its MariaDB link is
# slowed (50 ms each way) and its Redis link goes through a proxy, on which
#   6. every connection is reset for a second just as a submit commits: the
#      push fails and the task is handed back to pending;
#   7. every byte is dropped just as a submit commits, and the submitter is
#      SIGKILLed half a second later, before its push: recovery must
#      re-dispatch the task after the dispatch window. The submitter is
#      started again a second later and submits the rest.
# Each is tried up to three times until it hit a submit.
#
# It then waits (at most --timeout, default 120s) until every task
# ended, stops the daemons with SIGTERM and prints two lines on stdout:
#
#   submitted=N succeeded=N lost=N ran-twice=N stale-writes-rejected=N max-recovery-seconds=X
#   chains=N chains-complete=N children=N batches=N callbacks=N callback-counts-right=N
#   direct=N dispatched-at-submit=N handed-back=N left-to-recovery=N killed-before-push=N
#
#   submitted      plain tasks (--tasks, the direct ones included) created in
#                  task_center
#   succeeded      of those, tasks in status 3 (succeeded)
#   lost           tasks not succeeded at the end, plus succeeded tasks whose
#                  handler left no line for the succeeded attempt
#   ran-twice      tasks whose handler appended more than one line
#                  (at-least-once: reported, never a failure)
#   stale-writes-rejected
#                  "stale message dropped" + "stale result rejected by the
#                  fence" lines in the daemons' logs (one per fenced write a
#                  stale worker attempted)
#   max-recovery-seconds
#                  for each fault, the time from the fault (database clock)
#                  to the successful completion (task_run.finished_at) of
#                  each task that was in flight (dispatched or running) at
#                  that moment; the longest over all faults and tasks. So it
#                  is "fault to successful completion", not the gap between
#                  attempts. Per-fault figures are printed on stderr.
#   chains-complete
#                  chains whose root, one child and one grandchild each
#                  succeeded exactly once
#   children       children found (2 per chain when none is missing)
#   callbacks      callback tasks found (1 per batch)
#   callback-counts-right
#                  callbacks that succeeded once with the right counts in
#                  their payload (succeeded and dead members)
#   dispatched-at-submit
#                  direct tasks their submit pushed itself (the Go API's
#                  Result.Dispatched)
#   handed-back, left-to-recovery
#                  direct tasks whose push failed, handed back to pending or,
#                  the hand-back failing too, left to recovery (the
#                  submitter's log)
#   killed-before-push
#                  direct tasks a SIGKILLed submitter had committed
#                  dispatched and whose first attempt never ran
#
# It exits 1 when a task is lost (direct ones included), when no submit
# handed back a task or no submitter was killed before its push, when a
# chain lacks a child or has two,
# when a batch has no callback, two, or one with wrong counts, when any
# task has two 'succeeded' rows in
# task_run, when the task center and the run log disagree (every task in
# status 3 must have exactly one succeeded run, whose attempt equals
# task_center.attempt), or when a daemon does not exit 0 on SIGTERM; 2 on bad
# usage; 0 otherwise.
#
# Usage: scripts/faults.sh [--tasks N] [--direct N] [--chains N] [--batches N] [--keep] [--timeout 120s] [--concurrency 16] [-v]
#   --keep   keep the work directory (logs, data, out.txt) even on success;
#            it is always kept, and named on stderr, when the suite fails.
# Needs Go, redis-server and mariadbd (apt-get install redis-server
# mariadb-server). Every process it starts is stopped on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

keep=0
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) keep=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0
		;;
	--tasks | --timeout | --concurrency | --sleep | --spread | --redis-port | --mysql-port | --chains | --batches | --batch-size | --batch-dead | --direct)
		[ $# -ge 2 ] || {
			echo "error: $1 needs a value" >&2
			exit 2
		}
		args+=("$1" "$2")
		shift
		;;
	--tasks=* | --timeout=* | --concurrency=* | --sleep=* | --spread=* | --redis-port=* | --mysql-port=* | --chains=* | --batches=* | --batch-size=* | --batch-dead=* | --direct=* | -v)
		args+=("$1")
		;;
	*)
		echo "error: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done

need_go
command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (apt-get install redis-server)"
[ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ] || command -v mariadbd >/dev/null 2>&1 ||
	die "mariadbd is missing (apt-get install mariadb-server)"

work="$(mktemp -d "${TMPDIR:-/tmp}/taskd-faults.XXXXXX")"
pid=""
status=1
cleanup() {
	trap - EXIT INT TERM HUP
	if [ -n "$pid" ]; then
		# The engine runs in its own process group with everything it
		# started (daemons, redis-server, mariadbd): stop the group.
		kill -TERM -- "-$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 -- "-$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ "$keep" = 1 ] || [ "$status" != 0 ]; then
		echo "faults: work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

go build -o "$work/taskd" ./cmd/taskd
go build -o "$work/faults" ./scripts/faults

# setsid: the engine leads a new process group, so the trap can stop all it
# started even if it dies without cleaning up.
setsid "$work/faults" --bin "$work/taskd" --dir "$work/run" ${args[@]+"${args[@]}"} &
pid=$!
set +e
wait "$pid"
status=$?
set -e
pid=""
exit "$status"
