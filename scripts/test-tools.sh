#!/usr/bin/env bash
# Tools that some tests need besides MySQL and Redis:
#   php         PHP CLI with PDO MySQL and phpredis (Debian: php-cli php-mysql
#               php-redis): the PHP round trip, clients/php and the pool handler
#   phpunit     PHPUnit (Debian: phpunit): runs clients/php's tests besides
#               their plain PHP runner
#   supervisor  supervisord and supervisorctl: the Supervisor program
#   rpm         rpm -qlp: listing the rpm package
#   tmux        the terminal tasktop's end-to-end test drives
#   promtool    Prometheus's rule checker (Debian: prometheus): the rules in deploy/prometheus
#   ssh         OpenSSH's client (Debian: openssh-client): tasktop serve's end-to-end test
# Missing ones are installed with apt-get when this runs as root on
# Debian/Ubuntu. Elsewhere the script says what is missing and exits 3; the
# tests that need a tool then skip, saying so. Any other failure exits 1.
#
#   scripts/test-tools.sh              all of them
#   scripts/test-tools.sh php rpm      only these
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# grep without -q: it must read all of php's output, or pipefail sees SIGPIPE.
have_php() { command -v php >/dev/null 2>&1 && [ "$(php -m 2>/dev/null | grep -ci -e '^pdo_mysql$' -e '^redis$')" = 2 ]; }
have_phpunit() { command -v phpunit >/dev/null 2>&1; }
have_supervisor() { command -v supervisord >/dev/null 2>&1 && command -v supervisorctl >/dev/null 2>&1; }
have_rpm() { command -v rpm >/dev/null 2>&1; }
have_tmux() { command -v tmux >/dev/null 2>&1; }
have_promtool() { command -v promtool >/dev/null 2>&1; }
have_ssh() { command -v ssh >/dev/null 2>&1; }

tools=("$@")
[ "${#tools[@]}" -gt 0 ] || tools=(php phpunit supervisor rpm tmux promtool ssh)

missing=() packages=()
for tool in "${tools[@]}"; do
	case "$tool" in
	php) have_php || { missing+=(php) packages+=(php-cli php-mysql php-redis); } ;;
	phpunit) have_phpunit || { missing+=(phpunit) packages+=(phpunit); } ;;
	supervisor) have_supervisor || { missing+=(supervisor) packages+=(supervisor); } ;;
	rpm) have_rpm || { missing+=(rpm) packages+=(rpm); } ;;
	tmux) have_tmux || { missing+=(tmux) packages+=(tmux); } ;;
	promtool) have_promtool || { missing+=(promtool) packages+=(prometheus); } ;;
	ssh) have_ssh || { missing+=(ssh) packages+=(openssh-client); } ;;
	*) die "unknown tool '$tool' (php, phpunit, supervisor, rpm, tmux, promtool, ssh)" ;;
	esac
done
if [ "${#missing[@]}" = 0 ]; then
	say "test tools present: ${tools[*]}"
	exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	warn "missing test tools: ${missing[*]}; install ${packages[*]} (Debian/Ubuntu: sudo apt-get install -y ${packages[*]}); the tests that need them are skipped"
	exit 3
fi

say "installing ${packages[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
# Tests may call this at the same time: wait for dpkg's lock instead of failing.
lock=(-o DPkg::Lock::Timeout=300)
# A fresh machine has no package lists; an update is cheap next to a failed install.
if ! apt-get install -y -q --no-install-recommends "${lock[@]}" "${packages[@]}" </dev/null >/dev/null 2>&1; then
	apt-get update -q "${lock[@]}" >/dev/null
	apt-get install -y -q --no-install-recommends "${lock[@]}" "${packages[@]}" </dev/null
fi

for tool in "${missing[@]}"; do
	"have_$tool" || die "$tool is still missing after installing ${packages[*]}"
done
say "installed: ${missing[*]}"
