package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// Redis at maxmemory under noeviction (the policy taskd requires) refuses
// every command that may use memory, even one that moves a message from a
// queue to a processing list. Without more care a full Redis wedges for
// good: workers cannot take, so nothing is acked and nothing frees memory,
// and heartbeats fail, so live workers look dead.
//
// Redis 7 lets a script declare flags=allow-oom: what moves or overwrites
// (take, reshard moves, quarantine) and the small writes that keep a
// cluster alive (heartbeats, per-minute counters, alert states, events)
// run as such scripts, while pushes of new messages stay refused and leave
// their tasks pending in the task center. Acks free memory: a single one
// is an LREM, never refused, and a batch a script that only shrinks its
// list, run with allow-oom. Before Redis 7 the same scripts and commands run plain.

// allowOOM is the shebang that lets a script run at maxmemory.
const allowOOM = "#!lua flags=allow-oom\n"

// script is a Lua script that runs with allow-oom where the server has
// script flags.
type script struct {
	flagged, plain *redis.Script
}

func newScript(src string) *script {
	return &script{flagged: redis.NewScript(allowOOM + src), plain: redis.NewScript(src)}
}

// pick is the form of s this server runs.
func (b *Broker) pick(s *script) *redis.Script {
	if b.scriptFlags {
		return s.flagged
	}
	return s.plain
}

// run runs s on c (the client or a pipeline).
func (b *Broker) run(ctx context.Context, c redis.Scripter, s *script, keys []string, args ...any) *redis.Cmd {
	return b.pick(s).Run(ctx, c, keys, args...)
}

// oomWriteSrc runs one command on one key (KEYS[1]): the command is
// ARGV[1], its further arguments the rest.
const oomWriteSrc = `return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))`

// write queues on pipe the command cmd on key with args, run even at
// maxmemory where the server allows it. Only for writes whose memory is
// small and bounded (they overwrite, or are trimmed).
func (b *Broker) write(ctx context.Context, pipe redis.Pipeliner, cmd, key string, args ...any) redis.Cmder {
	if !b.scriptFlags {
		return pipe.Do(ctx, append([]any{cmd, key}, args...)...)
	}
	// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT, and the
	// script is a few bytes.
	return pipe.Eval(ctx, allowOOM+oomWriteSrc, []string{key}, append([]any{cmd}, args...)...)
}

// hasScriptFlags reports whether the server runs script flags (Redis 7+),
// from its INFO server.
func hasScriptFlags(ctx context.Context, rdb redis.UniversalClient) bool {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return false // INFO disabled (some managed Redis): run plain
	}
	version, _ := InfoField(info, "redis_version")
	return ScriptFlagsIn(version)
}

// ScriptFlagsIn reports whether a server of version (INFO's
// redis_version, e.g. "7.0.15") runs script flags: Redis 7 or later.
func ScriptFlagsIn(version string) bool {
	v, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(v)
	return err == nil && n >= 7
}

// InfoField returns a field of an INFO reply.
func InfoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

// Memory is how much memory Redis uses against its limit.
type Memory struct {
	// Used is used_memory, Max maxmemory (0: no limit), in bytes. On a
	// Cluster they are the fullest master's.
	Used int64 `json:"used_bytes"`
	Max  int64 `json:"max_bytes"`
}

// Ratio is Used / Max, or 0 without a limit.
func (m Memory) Ratio() float64 {
	if m.Max <= 0 {
		return 0
	}
	return float64(m.Used) / float64(m.Max)
}

// Full reports whether Redis refuses new messages: used_memory above a
// maxmemory with noeviction fails every write but the allow-oom scripts.
func (m Memory) Full() bool { return m.Max > 0 && m.Used > m.Max }

// Near reports whether Redis uses at least near of its maxmemory (a share;
// 0 or negative, the alert rule off: only when Full): the alert rule's
// condition, and when `taskd stats` and tasktop warn.
func (m Memory) Near(near float64) bool {
	return m.Full() || (m.Max > 0 && near > 0 && m.Ratio() >= near)
}

// FullFix is what to do about a Redis near or at its maxmemory: the
// queues' backlog is one thing that fills it, and keys of other programs
// on the same server another (stats and doctor each named only one).
const FullFix = "raise maxmemory, or find what fills Redis: the queues' backlog (taskd stats), or other keys (redis-cli --bigkeys)"

// Warning says, in one line, that Redis is Near near and what follows, or
// "" when it is not: what `taskd stats` prints.
func (m Memory) Warning(near float64) string {
	if !m.Near(near) {
		return ""
	}
	used := fmt.Sprintf("%s of its maxmemory of %s (%.0f%%)", task.ByteSize(m.Used), task.ByteSize(m.Max), 100*m.Ratio())
	if m.Full() {
		return "Redis is full, it uses " + used + ": pushes are refused and due tasks wait in the task center; " + FullFix
	}
	return "Redis is nearly full, it uses " + used + ": past 100% pushes are refused and due tasks wait in the task center"
}

// Memory reads Redis's memory use (INFO memory); on a Cluster, that of the
// master closest to its limit.
func (b *Broker) Memory(ctx context.Context) (Memory, error) {
	read := func(ctx context.Context, c redis.Cmdable) (Memory, error) {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return Memory{}, fmt.Errorf("redis memory: %w", err)
		}
		var m Memory
		for name, dst := range map[string]*int64{"used_memory": &m.Used, "maxmemory": &m.Max} {
			v, ok := InfoField(info, name)
			if !ok {
				return Memory{}, fmt.Errorf("redis memory: no %s in INFO memory", name)
			}
			if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
				return Memory{}, fmt.Errorf("redis memory: %s: %w", name, err)
			}
		}
		return m, nil
	}
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		return read(ctx, b.rdb)
	}
	var mu sync.Mutex
	var fullest Memory
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		m, err := read(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if m.Ratio() > fullest.Ratio() || fullest == (Memory{}) {
			fullest = m
		}
		return nil
	})
	return fullest, err
}

// IsOOM reports whether err is Redis refusing a command at maxmemory
// (under noeviction): a push that found no room, not a broken link.
func IsOOM(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}
