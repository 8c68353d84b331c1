#!/usr/bin/env bash
# Make sure MariaDB/MySQL (127.0.0.1:3306) and Redis (127.0.0.1:6379) answer:
#   - reachable: nothing is done;
#   - installed but stopped: they are started;
#   - missing: as root with apt-get, mariadb-server and redis-server are
#     installed and started; otherwise the script says what to install and
#     exits 1.
# Then it waits (at most TASKD_SERVICES_WAIT seconds, default 30) until both
# answer, and makes sure MySQL's root can log in over TCP with an empty
# password (what config/taskd.yaml and the tests use).
#
# A service that TASKD_TEST_MYSQL_DSN or TASKD_TEST_REDIS_ADDR points
# elsewhere is left alone; so is one that --mysql-dsn DSN or --redis-addr
# ADDR (what scripts/up.sh will use: TASKD_MYSQL_DSN, TASKD_REDIS_ADDR)
# points elsewhere, and a --mysql-dsn of another account than root without
# a password is only checked, not set up. Safe to run any number of times.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WAIT="${TASKD_SERVICES_WAIT:-30}"
MYSQL_HOST=127.0.0.1 MYSQL_PORT=3306
REDIS_HOST=127.0.0.1 REDIS_PORT=6379

mysql_dsn="" redis_addr=""
while [ $# -gt 0 ]; do
	case "$1" in
	--mysql-dsn) mysql_dsn="${2:-}"; shift 2 ;;
	--redis-addr) redis_addr="${2:-}"; shift 2 ;;
	*) die "unknown argument $1 (want --mysql-dsn DSN, --redis-addr HOST:PORT)" ;;
	esac
done
mysql_dsn="${TASKD_TEST_MYSQL_DSN:-$mysql_dsn}"
redis_addr="${TASKD_TEST_REDIS_ADDR:-$redis_addr}"

# local HOST:PORT: the address is the one this script manages.
local_addr() { case "$1" in 127.0.0.1:"$2" | localhost:"$2") return 0 ;; esac; return 1; }

manage_mysql=1 manage_redis=1
# The account the caller logs in with over TCP: root without a password
# (what config/taskd.yaml and the tests use) unless a DSN says otherwise.
DSN_USER=root DSN_PASS="" DSN_HOST="$MYSQL_HOST" DSN_PORT="$MYSQL_PORT"
if [ -n "$mysql_dsn" ]; then
	if [ -n "${TASKD_TEST_MYSQL_DSN:-}" ]; then
		manage_mysql=0
		say "MySQL: TASKD_TEST_MYSQL_DSN is set; leaving MySQL to it"
	elif ! parse_dsn "$mysql_dsn" || ! local_addr "$DSN_HOST:$DSN_PORT" "$MYSQL_PORT"; then
		manage_mysql=0
		say "MySQL: the DSN names another server; leaving MySQL to it"
	fi
fi
# scripts/up.sh's Redis may have a password (the tests' may not).
if [ -n "$redis_addr" ] && [ -z "${TASKD_TEST_REDIS_ADDR:-}" ] && [ -n "${TASKD_REDIS_PASSWORD:-}" ]; then
	export REDISCLI_AUTH="$TASKD_REDIS_PASSWORD"
fi
if [ -n "$redis_addr" ] && ! local_addr "$redis_addr" "$REDIS_PORT"; then
	manage_redis=0
	say "Redis: $redis_addr is another server; leaving Redis to it"
fi
if [ "$manage_mysql" = 0 ] && [ "$manage_redis" = 0 ]; then
	exit 0
fi

is_root() { [ "$(id -u)" = 0 ]; }

# tcp_open HOST PORT: something accepts connections there.
tcp_open() { run_timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

mysql_up() {
	if command -v mysqladmin >/dev/null 2>&1; then
		# 0 whenever the server answers, even with "access denied".
		mysqladmin --protocol=tcp -h "$MYSQL_HOST" -P "$MYSQL_PORT" --connect-timeout=2 ping >/dev/null 2>&1
	else
		tcp_open "$MYSQL_HOST" "$MYSQL_PORT"
	fi
}

redis_up() {
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(run_timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
	else
		run_timeout 3 bash -c "exec 3<>/dev/tcp/$REDIS_HOST/$REDIS_PORT && printf 'PING\r\n' >&3 && read -r l <&3 && [[ \$l == +PONG* ]]" 2>/dev/null
	fi
}

mariadbd_bin() {
	local b
	for b in /usr/sbin/mariadbd /usr/sbin/mysqld; do
		if [ -x "$b" ]; then
			echo "$b"
			return 0
		fi
	done
	command -v mariadbd 2>/dev/null || command -v mysqld 2>/dev/null || return 1
}

redis_bin() { command -v redis-server 2>/dev/null || { [ -x /usr/bin/redis-server ] && echo /usr/bin/redis-server; }; }

# --- install what is missing -------------------------------------------------

need_mysql=0 need_redis=0
if [ "$manage_mysql" = 1 ] && ! mysql_up; then need_mysql=1; fi
if [ "$manage_redis" = 1 ] && ! redis_up; then need_redis=1; fi
if [ "$manage_mysql" = 1 ] && [ "$need_mysql" = 0 ]; then say "MySQL: already running on $MYSQL_HOST:$MYSQL_PORT"; fi
if [ "$manage_redis" = 1 ] && [ "$need_redis" = 0 ]; then say "Redis: already running on $REDIS_HOST:$REDIS_PORT"; fi

missing=()
if [ "$need_mysql" = 1 ] && ! mariadbd_bin >/dev/null; then
	missing+=(mariadb-server)
fi
if [ "$manage_mysql" = 1 ] && ! command -v mysql >/dev/null 2>&1; then
	missing+=(mariadb-client) # mysql and mysqladmin: the checks below use them
fi
if [ "$need_redis" = 1 ] && ! redis_bin >/dev/null; then
	missing+=(redis-server)
fi
if [ "${#missing[@]}" -gt 0 ]; then
	if is_root && command -v apt-get >/dev/null 2>&1; then
		say "installing ${missing[*]} with apt-get"
		export DEBIAN_FRONTEND=noninteractive
		# A fresh VM's own apt run (apt-daily) holds the lock for a while.
		apt-get -o DPkg::Lock::Timeout=300 update -q
		# The packages' own service start may fail without an init system;
		# the server is started below either way.
		apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" </dev/null
	else
		cat >&2 <<EOF
error: missing: ${missing[*]}
Install them, e.g. on Debian/Ubuntu:
  sudo apt-get update && sudo apt-get install -y ${missing[*]}
on macOS:
  brew install mariadb redis && brew services start mariadb && brew services start redis
(MySQL 8 instead of MariaDB 10.6+ works too; Redis 6.2+), have them listen on
127.0.0.1:3306 and 127.0.0.1:6379, and run this script again.
EOF
		exit 1
	fi
fi

# --- start what is stopped -----------------------------------------------------

start_mysql() {
	local bin datadir
	bin="$(mariadbd_bin)" || die "MySQL: no mariadbd/mysqld binary found"
	if tcp_open "$MYSQL_HOST" "$MYSQL_PORT"; then
		die "MySQL: $MYSQL_HOST:$MYSQL_PORT is taken by a program that does not answer as MySQL; free the port"
	fi
	if ! is_root; then
		die "MySQL is installed but not running, and starting it needs root. Run:
  sudo start-stop-daemon --start --oknodo --background --exec $bin -- --user=mysql
(or: sudo service mariadb start), then run this script again."
	fi
	datadir="$(my_print_defaults --mysqld 2>/dev/null | sed -n 's/^--datadir=//p' | tail -n1)"
	datadir="${datadir:-/var/lib/mysql}"
	mkdir -p /run/mysqld
	chown mysql:mysql /run/mysqld 2>/dev/null || true
	if [ ! -d "$datadir/mysql" ]; then
		say "MySQL: initialising the data directory $datadir"
		mkdir -p "$datadir"
		chown mysql:mysql "$datadir" 2>/dev/null || true
		local initdb
		initdb="$(command -v mariadb-install-db || command -v mysql_install_db || true)"
		[ -n "$initdb" ] || die "MySQL: $datadir is empty and mariadb-install-db is missing"
		"$initdb" --user=mysql --datadir="$datadir" --skip-test-db >/dev/null
	fi
	# By its pid file: --exec alone matches any mariadbd, such as a test's
	# private server on another port, and then starts nothing.
	local pidfile
	pidfile="$(my_print_defaults --mysqld 2>/dev/null | sed -n 's/^--pid-file=//p' | tail -n1)"
	pidfile="${pidfile:-/run/mysqld/mysqld.pid}"
	say "MySQL: starting $bin"
	start-stop-daemon --start --oknodo --background --pidfile "$pidfile" --exec "$bin" -- --user=mysql
}

start_redis() {
	local bin dir=/tmp logfile="" said
	bin="$(redis_bin)" || die "Redis: no redis-server binary found"
	# Something holds the port but does not answer PING as a Redis open to
	# us would: a Redis with a password, or another program. A server
	# started on it could not bind, and would only say so in its log.
	if tcp_open "$REDIS_HOST" "$REDIS_PORT"; then
		said="$(run_timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>&1 | head -n1 || true)"
		die "Redis: $REDIS_HOST:$REDIS_PORT is taken, but PING there answers '${said:-nothing}'. A Redis with a
password: scripts/up.sh takes TASKD_REDIS_PASSWORD, the tests want a Redis without one (TASKD_TEST_REDIS_ADDR);
another program: free the port."
	fi
	# Redis keeps nothing on disk here (--save "" --appendonly no); --dir only
	# keeps it from writing into the current directory.
	if [ -d /var/lib/redis ] && [ -w /var/lib/redis ]; then dir=/var/lib/redis; fi
	if [ -d /var/log/redis ] && [ -w /var/log/redis ]; then logfile=/var/log/redis/redis-server.log; fi
	say "Redis: starting $bin"
	"$bin" --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no \
		--dir "$dir" --logfile "$logfile" >/dev/null
}

if [ "$need_mysql" = 1 ] && ! mysql_up; then start_mysql; fi
if [ "$need_redis" = 1 ] && ! redis_up; then start_redis; fi

# --- wait ------------------------------------------------------------------------

deadline=$((SECONDS + WAIT))
while :; do
	ok=1
	if [ "$manage_mysql" = 1 ] && ! mysql_up; then ok=0; fi
	if [ "$manage_redis" = 1 ] && ! redis_up; then ok=0; fi
	[ "$ok" = 1 ] && break
	if [ "$SECONDS" -ge "$deadline" ]; then
		[ "$manage_mysql" = 1 ] && ! mysql_up && warn "MySQL does not answer on $MYSQL_HOST:$MYSQL_PORT (see its error log, e.g. /var/log/mysql/error.log)"
		[ "$manage_redis" = 1 ] && ! redis_up && warn "Redis does not answer on $REDIS_HOST:$REDIS_PORT"
		die "services not ready after ${WAIT}s"
	fi
	sleep 0.5
done

# --- root over TCP with an empty password ---------------------------------------

# root_open lets root log in over TCP with an empty password, on a server
# whose root has no password (a fresh Debian install lets root in through
# the unix socket only). A root with a password is never changed.
root_open() {
	local auth version
	auth="$(mysql -uroot -N -e "SELECT authentication_string FROM mysql.user WHERE user = 'root' AND host = 'localhost'" 2>/dev/null)" || return 0
	case "$auth" in "" | invalid) ;; *) return 0 ;; esac
	say "MySQL: letting root log in over TCP with an empty password"
	version="$(mysql -uroot -N -e 'SELECT VERSION()')"
	if [[ "$version" == *MariaDB* ]]; then
		mysql -uroot -e "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; FLUSH PRIVILEGES;"
	else
		mysql -uroot -e "ALTER USER root@localhost IDENTIFIED WITH caching_sha2_password BY ''; FLUSH PRIVILEGES;"
	fi
	if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
		# With skip-name-resolve, 127.0.0.1 does not match root@localhost.
		mysql -uroot -e "CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY '';
			GRANT ALL PRIVILEGES ON *.* TO root@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
	fi
}

if [ "$manage_mysql" = 1 ]; then
	command -v mysql >/dev/null 2>&1 || die "the mysql client is missing (apt-get install mariadb-client)"
	if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
		if [ "$DSN_USER" = root ] && [ -z "$DSN_PASS" ] && is_root && mysql -uroot -e 'SELECT 1' >/dev/null 2>&1; then
			root_open
		fi
		if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
			if [ "$DSN_USER" != root ] || [ -n "$DSN_PASS" ]; then
				die "MySQL answers, but $DSN_USER cannot log in over TCP with the password of the DSN:
  $(mysql_tcp -e 'SELECT 1' 2>&1 | head -n1)"
			fi
			die "MySQL answers, but root cannot log in over TCP with an empty password:
  $(mysql_tcp -e 'SELECT 1' 2>&1 | head -n1)
taskd's example config and tests use root:@tcp(127.0.0.1:3306). Either allow that (MariaDB, as root:
mysql -uroot -e \"ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket\"),
or point TASKD_MYSQL_DSN (scripts/up.sh) and TASKD_TEST_MYSQL_DSN (the tests) at an account that works."
		fi
	fi
fi

say "services ready"
