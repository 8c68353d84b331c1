package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// Unqueuing the messages of tasks killed while dispatched: in a queue no
// worker takes from, they stayed queued for good, so its backlog, the
// header's "waiting" and the no-consumer alert went on counting tasks the
// operator had killed. A worker that takes one drops it (the kill notice,
// the fence); unqueuing them makes that rarer and the figures true.
//
// The ids go to a set beside the queue's lists (its hash tag, for Redis
// Cluster), and a script reads each list a chunk at a time, marking the
// messages of those tasks and removing the marks: Redis is never held for
// more than one chunk, whatever the backlog. Messages pushed meanwhile only
// shift the indexes forward (a chunk read twice); workers take from the
// other end.

// unqueueChunk is how many messages one script call reads.
const unqueueChunk = 1000

// unqueueScript reads ARGV[2] messages of the list KEYS[1] from index
// ARGV[1], replaces those whose "id:attempt" is in the set KEYS[2] with the
// mark ARGV[3], and removes the marks. It returns {removed, read}. It only
// shrinks the list, so it runs at maxmemory too.
var unqueueScript = newScript(`
local start = tonumber(ARGV[1])
local items = redis.call('LRANGE', KEYS[1], start, start + tonumber(ARGV[2]) - 1)
local marked = 0
for i, m in ipairs(items) do
  local id, attempt = string.match(m, '^{"id":(%d+),"attempt":(%d+)')
  if id and redis.call('SISMEMBER', KEYS[2], id .. ':' .. attempt) == 1 then
    redis.call('LSET', KEYS[1], start + i - 1, ARGV[3])
    marked = marked + 1
  end
end
if marked > 0 then
  redis.call('LREM', KEYS[1], marked, ARGV[3])
end
return {marked, #items}
`)

// Unqueue removes the queued messages of attempts (task id -> attempt)
// from queue q's lists: every priority of the shards 0 to span-1 (the
// task center's, which a process that does not follow the queues' state
// does not know). It returns how many it removed. Messages a worker
// already took, or holds, and those of other attempts (a retry's) are not
// touched.
func (b *Broker) Unqueue(ctx context.Context, q string, span int, attempts map[int64]int) (int64, error) {
	if len(attempts) == 0 {
		return 0, nil
	}
	members := make([]any, 0, len(attempts))
	for id, attempt := range attempts {
		members = append(members, strconv.FormatInt(id, 10)+":"+strconv.Itoa(attempt))
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	mark := "unqueued:" + hex.EncodeToString(token)
	set := b.Keys.Prefix + "unqueue:{" + q + "}:" + hex.EncodeToString(token)
	defer b.rdb.Del(context.WithoutCancel(ctx), set)
	for len(members) > 0 {
		chunk := members[:min(len(members), unqueueChunk)]
		members = members[len(chunk):]
		pipe := b.rdb.Pipeline()
		pipe.SAdd(ctx, set, chunk...)
		pipe.Expire(ctx, set, time.Minute) // an unqueuing cut short leaves nothing behind
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("unqueue messages of %s: %w", q, err)
		}
	}
	var removed int64
	for s := range max(span, 1) {
		for p := 0; p <= task.MaxPriority; p++ {
			n, err := b.unqueueLane(ctx, b.Keys.Lane(q, s, p), set, mark)
			removed += n
			if err != nil {
				return removed, fmt.Errorf("unqueue messages of %s: %w", q, err)
			}
		}
	}
	return removed, nil
}

// unqueueLane removes from lane the messages of the tasks in set, a
// chunk at a time.
func (b *Broker) unqueueLane(ctx context.Context, lane, set, mark string) (int64, error) {
	var removed int64
	for start := int64(0); ; {
		res, err := b.run(ctx, b.rdb, unqueueScript, []string{lane, set}, start, unqueueChunk, mark).Int64Slice()
		if err != nil {
			return removed, err
		}
		n, read := res[0], res[1]
		removed += n
		if read < unqueueChunk {
			return removed, nil
		}
		start += read - n
	}
}
