#!/usr/bin/env bash
# The test command: services, test tools (scripts/test-tools.sh), gofmt,
# go vet, then the whole test suite with the race detector against the real
# MariaDB/MySQL and Redis on 127.0.0.1 (or TASKD_TEST_MYSQL_DSN /
# TASKD_TEST_REDIS_ADDR).
#
# Arguments are passed to `go test`, e.g. scripts/test.sh -run TestSubmit
# or scripts/test.sh -run NONE to check everything but the tests.
# Exits non-zero when any step fails.
set -uo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

need_go
results=()
failed=0
record() { # record NAME RC
	if [ "$2" = 0 ]; then
		results+=("PASS  $1")
	else
		results+=("FAIL  $1")
		failed=1
	fi
}
summary() {
	echo
	echo "==== summary ===="
	printf '%s\n' "${results[@]}"
	if [ "$failed" = 0 ]; then echo "all steps passed"; else echo "some steps FAILED"; fi
}

say "services"
bash scripts/services.sh
rc=$?
record "services (MySQL, Redis)" "$rc"
if [ "$rc" != 0 ]; then
	summary
	exit 1
fi

say "test tools (PHP, Supervisor, rpm, tmux, promtool)"
bash scripts/test-tools.sh
rc=$?
# 3: cannot install here (not root, no apt): the tests that need them skip.
if [ "$rc" = 3 ]; then rc=0; fi
record "test tools (PHP, Supervisor, rpm, tmux, promtool)" "$rc"

say "gofmt -l"
unformatted="$(gofmt -l . 2>&1)"
rc=$?
if [ -n "$unformatted" ]; then
	echo "$unformatted"
	echo "these files need gofmt -w"
	rc=1
fi
record "gofmt" "$rc"

say "go vet ./..."
go vet ./...
record "go vet" "$?"

if [ "$(go env CGO_ENABLED)" != 1 ] || ! command -v "$(go env CC)" >/dev/null 2>&1; then
	warn "the race detector needs cgo and a C compiler (apt-get install gcc); CGO_ENABLED=$(go env CGO_ENABLED)"
	record "go test -race (no C compiler)" 1
else
	# The build cache grows by a few GB for each source tree built with
	# -race (20 GB after a day of runs here); a disk near full fails the
	# run with "no space left on device". Start from an empty cache then.
	avail_kb="$(df --output=avail -k "$(go env GOCACHE)" 2>/dev/null | tail -n 1)"
	if [ -n "$avail_kb" ] && [ "$avail_kb" -lt $((${TASKD_TEST_MIN_FREE_GB:-8} * 1024 * 1024)) ]; then
		warn "only $((avail_kb / 1024 / 1024)) GB free on the build cache's disk: go clean -cache"
		go clean -cache
	fi
	say "go test -race -count=1 -timeout 20m ./... $*"
	go test -race -count=1 -timeout 20m ./... "$@"
	record "go test -race" "$?"
fi

summary
exit "$failed"
