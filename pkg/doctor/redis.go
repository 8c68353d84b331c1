package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/task"
)

func checkRedis(ctx context.Context, r *Report, cfg *config.Config, br *broker.Broker, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rdb := br.Client()
	server, _ := rdb.Info(ctx, "server").Result()
	version, _ := broker.InfoField(server, "redis_version")
	addr := cfg.Redis.Addr
	if len(cfg.Redis.Addrs) > 0 {
		addr = strings.Join(cfg.Redis.Addrs, ",")
	}
	r.ok("redis", "%s answers (Redis %s), key prefix %q", addr, version, cfg.Redis.Prefix)
	if cfg.Redis.Password != "" {
		checkRedisAuth(ctx, r, rdb, cfg.Redis.Password, addr)
	}
	switch {
	case version == "":
		r.add("redis.oom", Warn, "make sure the server is Redis 7 or later",
			"cannot read the server's version (INFO disabled?): scripts run without allow-oom, so at maxmemory workers cannot take or ack until memory is freed")
	case !broker.ScriptFlagsIn(version):
		r.add("redis.oom", Warn, "upgrade to Redis 7 or later, or keep maxmemory well above scheduler.window messages per queue",
			"Redis %s has no script flags: at maxmemory, takes, acks and heartbeats fail until memory is freed (Redis 7 lets them run)", version)
	default:
		r.ok("redis.oom", "Redis %s: takes, acks and heartbeats run at maxmemory (allow-oom scripts)", version)
	}

	switch policy, err := br.EvictionPolicy(ctx); {
	case err != nil:
		r.add("redis.eviction", Warn, "make sure the server's maxmemory-policy is noeviction",
			"cannot read maxmemory-policy (CONFIG is disabled on some managed services): %v", err)
	case policy != "noeviction":
		r.add("redis.eviction", Fail, "maxmemory-policy noeviction in redis.conf, and CONFIG SET maxmemory-policy noeviction",
			"maxmemory-policy is %s: Redis may evict queued tasks; taskd run refuses to start", policy)
	default:
		r.ok("redis.eviction", "maxmemory-policy noeviction")
	}

	// The memory the alert rule watches, read and judged the same way
	// (broker.Memory.Near: a negative threshold, the rule off, fails only
	// a full Redis).
	threshold := cfg.Alerts.RedisMemoryThreshold
	alertAt := fmt.Sprintf("alert at %.0f%%", 100*threshold)
	if threshold < 0 {
		alertAt = "memory alert off"
	}
	switch m, err := br.Memory(ctx); {
	case err != nil:
		r.add("redis.memory", Warn, "", "cannot read INFO memory: %v", err)
	case m.Max == 0:
		r.add("redis.memory", Warn, "set maxmemory (with noeviction) below the host's memory",
			"no maxmemory: Redis uses %s and may grow until the host runs out of memory", task.ByteSize(m.Used))
	case m.Near(threshold):
		r.add("redis.memory", Fail, broker.FullFix,
			"%s of %s used (%.0f%%, %s): pushes will fail with OOM", task.ByteSize(m.Used), task.ByteSize(m.Max), 100*m.Ratio(), alertAt)
	default:
		r.ok("redis.memory", "%s of %s used (%.0f%%, %s)", task.ByteSize(m.Used), task.ByteSize(m.Max), 100*m.Ratio(), alertAt)
	}

	persistence, err := rdb.Info(ctx, "persistence").Result()
	if err != nil {
		r.add("redis.persistence", Warn, "", "cannot read INFO persistence: %v", err)
	} else {
		aof, _ := broker.InfoField(persistence, "aof_enabled")
		rdbStatus, _ := broker.InfoField(persistence, "rdb_last_bgsave_status")
		aofStatus, _ := broker.InfoField(persistence, "aof_last_write_status")
		saves, _ := rdb.ConfigGet(ctx, "save").Result()
		switch {
		case rdbStatus == "err" || aofStatus == "err":
			r.add("redis.persistence", Warn, "look at the Redis log: the disk may be full",
				"the last write to disk failed (rdb_last_bgsave_status %s, aof_last_write_status %s)", rdbStatus, aofStatus)
		case aof != "1" && strings.TrimSpace(saves["save"]) == "":
			r.add("redis.persistence", Warn, "appendonly yes (or save points) in redis.conf",
				"neither AOF nor snapshots: after a restart taskd re-pushes every dispatched task from MySQL (nothing lost, but a burst)")
		case aof == "1":
			r.ok("redis.persistence", "append-only file enabled")
		default:
			r.ok("redis.persistence", "snapshots (save %s)", strings.TrimSpace(saves["save"]))
		}
	}

	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		r.ok("redis.cluster", "not a Cluster")
		return
	}
	info, err := cc.ClusterInfo(ctx).Result()
	if err != nil {
		r.add("redis.cluster", Fail, "", "cannot read CLUSTER INFO: %v", err)
		return
	}
	state, _ := broker.InfoField(info, "cluster_state")
	assigned, _ := broker.InfoField(info, "cluster_slots_assigned")
	failing, _ := broker.InfoField(info, "cluster_slots_fail")
	if state != "ok" || assigned != "16384" || (failing != "" && failing != "0") {
		r.add("redis.cluster", Fail, "assign every slot to a live master (redis-cli --cluster fix)",
			"cluster_state %s, %s of 16384 slots assigned, %s failing: queues on missing slots stop", state, assigned, failing)
		return
	}
	r.ok("redis.cluster", "all 16384 slots assigned and served")
}

// checkRedisAuth says whether the server asks for the configured password.
// The client sends it at every connection, and a server that asks for
// none answers with an error the client lets pass, so the connection
// works either way: an operator who set the password believes the queues
// closed to anyone else who reaches the port, and nothing else says they
// are not. AUTH again on a connection answers which it is.
func checkRedisAuth(ctx context.Context, r *Report, rdb redis.UniversalClient, password, addr string) {
	switch err := rdb.Do(ctx, "AUTH", password).Err(); {
	case err != nil && strings.Contains(err.Error(), "without any password configured"):
		r.add("redis.auth", Warn, "set requirepass (or an ACL user) in redis.conf, or remove redis.password",
			"redis.password is set, but Redis asks for none: whoever reaches %s can read and change the queues", addr)
	case err != nil:
		r.add("redis.auth", Warn, "", "cannot check the password: %v", err)
	default:
		r.ok("redis.auth", "Redis asks for a password, and takes redis.password")
	}
}
