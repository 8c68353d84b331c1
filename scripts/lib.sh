# Shared helpers of the scripts in this folder. Source it; do not run it.
# shellcheck shell=bash

# REPO is the repository root.
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

say() { printf '==> %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# need_go puts Go on PATH (it is often installed in /usr/local/go without
# being on PATH) or explains how to install it and exits 1.
need_go() {
	if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
		export PATH="$PATH:/usr/local/go/bin"
	fi
	if ! command -v go >/dev/null 2>&1; then
		local want
		want="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$REPO/go.mod" | head -n1)"
		cat >&2 <<EOF
error: Go is not installed (taskd needs Go ${want:-1.26} or newer).
Install it from https://go.dev/dl/, e.g. on Linux amd64:
  curl -fsSLO https://go.dev/dl/go${want:-1.26}.linux-amd64.tar.gz
  sudo rm -rf /usr/local/go && sudo tar -C /usr/local -xzf go${want:-1.26}.linux-amd64.tar.gz
  export PATH=\$PATH:/usr/local/go/bin
then run this script again.
EOF
		exit 1
	fi
}

# run_timeout SECONDS CMD...: CMD, killed after SECONDS where timeout(1)
# exists (it does not on a stock macOS).
run_timeout() {
	local secs="$1"
	shift
	if command -v timeout >/dev/null 2>&1; then
		timeout "$secs" "$@"
	else
		"$@"
	fi
}

# parse_dsn DSN sets DSN_USER, DSN_PASS, DSN_HOST, DSN_PORT and DSN_DB from a
# go-sql-driver DSN of the form user[:pass]@tcp(host[:port])/db[?params].
# It returns 1 when DSN is not of that form.
parse_dsn() {
	local re='^([^:@]*)(:([^@]*))?@tcp\(([^:)]+)(:([0-9]+))?\)/([^?]*)'
	if [[ "$1" =~ $re ]]; then
		DSN_USER="${BASH_REMATCH[1]}"
		DSN_PASS="${BASH_REMATCH[3]}"
		DSN_HOST="${BASH_REMATCH[4]}"
		DSN_PORT="${BASH_REMATCH[6]:-3306}"
		DSN_DB="${BASH_REMATCH[7]}"
		return 0
	fi
	return 1
}

# mysql_tcp runs the mysql client over TCP with the DSN_* credentials.
# An empty password is passed as --password= so that an option file cannot
# supply another one; a real one goes through MYSQL_PWD, not the command line.
mysql_tcp() {
	if [ -z "$DSN_PASS" ]; then
		mysql --protocol=tcp -h "$DSN_HOST" -P "$DSN_PORT" -u "$DSN_USER" --password= "$@"
	else
		MYSQL_PWD="$DSN_PASS" mysql --protocol=tcp -h "$DSN_HOST" -P "$DSN_PORT" -u "$DSN_USER" "$@"
	fi
}
