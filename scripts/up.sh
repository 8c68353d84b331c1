#!/usr/bin/env bash
# Run the system on this machine: services, build, schema, two `taskd run`
# nodes (node-a and node-b) with config/taskd.yaml, and a few sample tasks
# for the `hello` handler. Stop the nodes with scripts/down.sh.
#
# Logs and pid files go to .run/. TASKD_* variables are honoured as by taskd
# itself (e.g. TASKD_MYSQL_DSN, TASKD_REDIS_PREFIX).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

CONFIG=config/taskd.yaml
RUN="$REPO/.run"
NODES=(node-a node-b)
taskd() { bin/taskd --config "$CONFIG" "$@"; }

need_go
# The task center database: the DSN taskd will use (TASKD_MYSQL_DSN, else
# mysql.dsn of the config file).
dsn="${TASKD_MYSQL_DSN:-$(sed -n 's/^[[:space:]]*dsn:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}.*/\1/p' "$CONFIG" | head -n1)}"
say "checking services"
bash scripts/services.sh --mysql-dsn "$dsn" --redis-addr "${TASKD_REDIS_ADDR:-127.0.0.1:6379}"

say "building bin/taskd and bin/tasktop"
go build -o bin/ ./cmd/taskd ./cmd/tasktop

if parse_dsn "$dsn" && [ -n "$DSN_DB" ]; then
	say "creating database $DSN_DB on $DSN_HOST:$DSN_PORT if missing"
	mysql_tcp -e "CREATE DATABASE IF NOT EXISTS \`$DSN_DB\` CHARACTER SET utf8mb4"
else
	warn "cannot read the database name from DSN '$dsn'; make sure the database exists"
fi

say "applying the schema"
taskd migrate

bash scripts/down.sh --quiet
mkdir -p "$RUN"
for n in "${NODES[@]}"; do
	say "starting $n (log: .run/$n.log)"
	# Text logs are easier to read in a file than the JSON used off a
	# terminal; nohup keeps the node alive when this terminal closes.
	TASKD_LOG_FORMAT="${TASKD_LOG_FORMAT:-text}" nohup bin/taskd --config "$CONFIG" run --node-id "$n" \
		>"$RUN/$n.log" 2>&1 </dev/null &
	echo $! >"$RUN/$n.pid"
done

# Wait until both nodes have started (or one has died).
for n in "${NODES[@]}"; do
	pid="$(cat "$RUN/$n.pid")"
	for _ in $(seq 1 100); do
		grep -q "taskd node started" "$RUN/$n.log" 2>/dev/null && break
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$RUN/$n.log" >&2
			die "$n exited at start (log above, in .run/$n.log)"
		fi
		sleep 0.1
	done
	grep -q "taskd node started" "$RUN/$n.log" || die "$n did not start within 10s (see .run/$n.log)"
done

# id_of reads the task id from an action's `-o json` result ("ids": [42]).
id_of() { tr -d ' \n' | sed -n 's/.*"ids":\[\([0-9][0-9]*\).*/\1/p'; }

say "submitting sample tasks to the hello handler"
oneoff="$(taskd -o json submit hello --payload '{"greeting":"one-off"}' | id_of)"
echo "one-off task:       $oneoff"
delayed="$(taskd -o json submit hello --delay 3s --payload '{"greeting":"delayed 3s"}' | id_of)"
echo "delayed task (3s):  $delayed"
cron="$(taskd -o json cron add hello '*/5 * * * * *' --name demo --payload '{"greeting":"every 5s"}' | id_of)"
echo "periodic task:      $cron (hello, every 5 seconds, name demo)"
first="" last=""
for i in $(seq 1 20); do
	id="$(taskd -o json submit hello --payload "{\"greeting\":\"batch\",\"n\":$i}" | id_of)"
	first="${first:-$id}" last="$id"
done
echo "batch of 20:        $first..$last"

say "waiting 8s for the nodes to run them"
sleep 8

say "bin/taskd list"
taskd list --limit 30
echo
say "bin/taskd cron list"
taskd cron list
echo
say "bin/taskd show $oneoff"
taskd show "$oneoff"

cat <<EOF

The nodes keep running (the periodic task fires every 5 seconds):
  logs:  .run/node-a.log  .run/node-b.log
  look:  bin/taskd --config $CONFIG list      bin/taskd --config $CONFIG cron list
  watch: bin/tasktop --config $CONFIG          (the terminal UI; q quits)
  stop:  scripts/down.sh
Remove the demo periodic task with: bin/taskd --config $CONFIG cron remove hello --name demo
EOF
