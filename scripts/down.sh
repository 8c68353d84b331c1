#!/usr/bin/env bash
# Stop the `taskd run` nodes that scripts/up.sh started (pid files in .run/):
# SIGTERM, then wait for each to drain and exit. A node still running after
# TASKD_STOP_WAIT seconds (default 60: the worker's 30s shutdown grace plus
# its result flush) is killed with SIGKILL.
#   --quiet   say nothing when there is nothing to stop
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

quiet=0
[ "${1:-}" = "--quiet" ] && quiet=1
WAIT="${TASKD_STOP_WAIT:-60}"
RUN="$REPO/.run"

# is_ours PID: the process is alive and is a `taskd ... run` (not some other
# process that reused the pid).
is_ours() {
	local cmd
	kill -0 "$1" 2>/dev/null || return 1
	cmd="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 0 # no /proc: trust the pid file
	[[ "$cmd" == *taskd* && "$cmd" == *" run "* ]]
}

pids=() names=()
shopt -s nullglob
for f in "$RUN"/*.pid; do
	pid="$(cat "$f")"
	name="$(basename "$f" .pid)"
	if [[ "$pid" =~ ^[0-9]+$ ]] && is_ours "$pid"; then
		say "stopping $name (pid $pid)"
		kill -TERM "$pid"
		pids+=("$pid") names+=("$name")
	else
		rm -f "$f"
	fi
done
if [ "${#pids[@]}" = 0 ]; then
	[ "$quiet" = 1 ] || say "no taskd nodes running"
	exit 0
fi

deadline=$((SECONDS + WAIT))
rc=0
for i in "${!pids[@]}"; do
	pid="${pids[$i]}" name="${names[$i]}"
	while is_ours "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
	if is_ours "$pid"; then
		warn "$name (pid $pid) still running after ${WAIT}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		rc=1
	else
		say "$name stopped"
	fi
	rm -f "$RUN/$name.pid"
done
exit "$rc"
