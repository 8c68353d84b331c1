#!/usr/bin/env bash
# Local Redis topologies for tests, of redis-server processes on loopback:
#
#   scripts/redis-cluster.sh cluster start|stop|addr   3 masters + 3 replicas, ports 7101-7106
#   scripts/redis-cluster.sh sentinel start|stop|addr  master 7201, replica 7202, Sentinels 7211-7213 (master name "taskd")
#
# REDIS_TOPOLOGY_PORTS, when set, lists the ports to use instead (six for a
# cluster: masters first; five for sentinel: master, replica, Sentinels),
# so that tests run beside another run or a leftover set pick free ones.
#
# Data and logs live in .run/redis-<kind>/; nothing is persisted. `start`
# stops an earlier set first and waits until the topology answers
# (cluster_state:ok, or the Sentinels agree on the master). `addr` prints
# the address to use: the masters (cluster) or the Sentinels (sentinel),
# e.g. 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kind="${1:-}"
action="${2:-}"
usage="usage: scripts/redis-cluster.sh cluster|sentinel start|stop|addr"
dir="$REPO/.run/redis-$kind"
case "$kind" in
cluster) defaults="7101 7102 7103 7104 7105 7106" ;;
sentinel) defaults="7201 7202 7211 7212 7213" ;;
*) die "$usage" ;;
esac
# The ports of the running set, else those asked for, else the defaults.
if [ "$action" != start ] && [ -f "$dir/ports" ]; then
	ports="$(cat "$dir/ports")"
else
	ports="${REDIS_TOPOLOGY_PORTS:-$defaults}"
fi
read -r -a port <<<"$ports"
[ "${#port[@]}" = "$(wc -w <<<"$defaults")" ] || die "REDIS_TOPOLOGY_PORTS: $(wc -w <<<"$defaults") ports for $kind, got: $ports"
command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed (apt-get install redis-server)"

addr() { # the addresses of ports 1..3 (cluster) or 3..5 (sentinel)
	local from=0
	[ "$kind" = sentinel ] && from=2
	local out="" p
	for p in "${port[@]:$from:3}"; do out="$out,127.0.0.1:$p"; done
	echo "${out#,}"
}

# stop ends the servers this directory started (by their pid files), so a
# set of another run on other ports is left alone.
stop() {
	local f pid
	for f in "$dir"/*/redis.pid "$dir"/*/sentinel.pid; do
		[ -f "$f" ] || continue
		pid="$(cat "$f")"
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$dir"
}

server() { # port [extra redis-server args...]
	local p="$1"
	shift
	mkdir -p "$dir/$p"
	redis-server --port "$p" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
		--dir "$dir/$p" --logfile "$dir/$p/redis.log" --pidfile "$dir/$p/redis.pid" "$@"
}

wait_for() { # description command...
	local what="$1"
	shift
	for _ in $(seq 150); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	tail -n 3 "$dir"/*/*.log >&2 || true
	die "$what did not come up (logs in $dir)"
}

start_cluster() {
	local p addrs=""
	for p in "${port[@]}"; do
		# validity factor 0: a replica may always take over (tests kill
		# masters on purpose; production keeps the default).
		server "$p" --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
			--cluster-replica-validity-factor 0
		addrs="$addrs 127.0.0.1:$p"
	done
	for p in "${port[@]}"; do wait_for "redis $p" redis-cli -p "$p" ping; done
	# shellcheck disable=SC2086
	redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(tail -n 3 "$dir/create.log")"
	for p in "${port[@]}"; do
		wait_for "cluster state on $p" sh -c "redis-cli -p $p cluster info | grep -q cluster_state:ok"
	done
	# Every replica in sync, so a master killed at once can be replaced.
	wait_for "three replicas in sync" sh -c "for p in $ports; do redis-cli -p \$p info replication; done | grep -c master_link_status:up | grep -qx 3"
	say "Redis Cluster up: TASKD_TEST_REDIS_ADDR=$(addr)"
}

start_sentinel() {
	local m="${port[0]}" r="${port[1]}" p
	server "$m"
	server "$r" --replicaof 127.0.0.1 "$m"
	wait_for "redis $m" redis-cli -p "$m" ping
	wait_for "replica $r" sh -c "redis-cli -p $r info replication | grep -q master_link_status:up"
	for p in "${port[@]:2:3}"; do
		mkdir -p "$dir/$p"
		cat >"$dir/$p/sentinel.conf" <<CONF
port $p
bind 127.0.0.1
daemonize yes
dir $dir/$p
logfile $dir/$p/sentinel.log
pidfile $dir/$p/sentinel.pid
sentinel monitor taskd 127.0.0.1 $m 2
sentinel down-after-milliseconds taskd 2000
sentinel failover-timeout taskd 10000
CONF
		redis-server "$dir/$p/sentinel.conf" --sentinel
	done
	for p in "${port[@]:2:3}"; do
		wait_for "sentinel $p" sh -c "redis-cli -p $p sentinel get-master-addr-by-name taskd | grep -qx $m"
	done
	wait_for "sentinels to see each other" sh -c "redis-cli -p ${port[2]} sentinel master taskd | grep -A1 '^num-other-sentinels' | grep -q 2"
	say "Redis Sentinel up: TASKD_TEST_REDIS_SENTINEL=taskd@$(addr)"
}

case "$action" in
start)
	stop
	mkdir -p "$dir"
	echo "$ports" >"$dir/ports"
	"start_$kind"
	;;
stop) stop ;;
addr) addr ;;
*) die "$usage" ;;
esac
