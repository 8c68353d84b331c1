#!/usr/bin/env bash
# Local Redis topologies for tests, of redis-server processes on loopback:
#
#   scripts/redis-cluster.sh cluster start|stop   3 masters + 3 replicas, ports 7101-7106
#   scripts/redis-cluster.sh sentinel start|stop  master 7201, replica 7202, Sentinels 7211-7213 (master name "taskd")
#
# Data and logs live in .run/redis-<kind>/; nothing is persisted. `start`
# stops an earlier set first and waits until the topology answers
# (cluster_state:ok, or the Sentinels agree on the master). It prints the
# address to use:
#   cluster:  TASKD_TEST_REDIS_ADDR=127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
#   sentinel: TASKD_TEST_REDIS_SENTINEL=taskd@127.0.0.1:7211,127.0.0.1:7212,127.0.0.1:7213
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kind="${1:-}"
action="${2:-}"
case "$kind" in
cluster) ports="7101 7102 7103 7104 7105 7106" ;;
sentinel) ports="7201 7202 7211 7212 7213" ;;
*) die "usage: scripts/redis-cluster.sh cluster|sentinel start|stop" ;;
esac
dir="$REPO/.run/redis-$kind"
command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed (apt-get install redis-server)"

stop() {
	for p in $ports; do
		redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
	done
	for p in $ports; do
		for _ in $(seq 50); do
			redis-cli -p "$p" ping >/dev/null 2>&1 || break
			sleep 0.1
		done
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
	die "$what did not come up (logs in $dir)"
}

start_cluster() {
	local p addrs=""
	for p in $ports; do
		# validity factor 0: a replica may always take over (tests kill
		# masters on purpose; production keeps the default).
		server "$p" --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
			--cluster-replica-validity-factor 0
		addrs="$addrs 127.0.0.1:$p"
	done
	for p in $ports; do wait_for "redis $p" redis-cli -p "$p" ping; done
	# shellcheck disable=SC2086
	redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(tail -n 3 "$dir/create.log")"
	for p in $ports; do
		wait_for "cluster state on $p" sh -c "redis-cli -p $p cluster info | grep -q cluster_state:ok"
	done
	# Every replica in sync, so a master killed at once can be replaced.
	wait_for "three replicas in sync" sh -c "for p in $ports; do redis-cli -p \$p info replication; done | grep -c master_link_status:up | grep -qx 3"
	say "Redis Cluster up: TASKD_TEST_REDIS_ADDR=127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"
}

start_sentinel() {
	server 7201
	server 7202 --replicaof 127.0.0.1 7201
	wait_for "redis 7201" redis-cli -p 7201 ping
	wait_for "replica 7202" sh -c "redis-cli -p 7202 info replication | grep -q master_link_status:up"
	for p in 7211 7212 7213; do
		mkdir -p "$dir/$p"
		cat >"$dir/$p/sentinel.conf" <<CONF
port $p
bind 127.0.0.1
daemonize yes
dir $dir/$p
logfile $dir/$p/sentinel.log
pidfile $dir/$p/sentinel.pid
sentinel monitor taskd 127.0.0.1 7201 2
sentinel down-after-milliseconds taskd 2000
sentinel failover-timeout taskd 10000
CONF
		redis-server "$dir/$p/sentinel.conf" --sentinel
	done
	for p in 7211 7212 7213; do
		wait_for "sentinel $p" sh -c "redis-cli -p $p sentinel get-master-addr-by-name taskd | grep -q 7201"
	done
	wait_for "sentinels to see each other" sh -c "redis-cli -p 7211 sentinel master taskd | grep -A1 '^num-other-sentinels' | grep -q 2"
	say "Redis Sentinel up: TASKD_TEST_REDIS_SENTINEL=taskd@127.0.0.1:7211,127.0.0.1:7212,127.0.0.1:7213"
}

case "$action" in
start)
	stop
	mkdir -p "$dir"
	"start_$kind"
	;;
stop) stop ;;
*) die "usage: scripts/redis-cluster.sh cluster|sentinel start|stop" ;;
esac
