package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// Unqueuing the messages of tasks killed while dispatched: in a queue no
// worker takes from, they stayed for good, so its backlog, the header's
// "waiting" and the no-consumer alert went on counting tasks the operator
// had killed, and in a Redis at maxmemory they held the memory a kill of
// a flood of tasks was meant to free. A worker that takes one drops it
// (the kill notice, the fence); unqueuing them makes that rarer and the
// figures true.
//
// A script reads each list a chunk at a time, marking the messages of the
// attempts it was given and removing the marks: Redis is never held for
// more than one chunk, whatever the backlog, and the script only shrinks
// the list, so it runs at maxmemory too. Messages pushed meanwhile only
// shift the indexes forward (a chunk read twice); workers take from the
// other end.

// unqueueChunk is how many messages one script call reads, and how many
// attempts it is given.
const unqueueChunk = 1000

// unqueueScript reads ARGV[2] messages of the list KEYS[1] from index
// ARGV[1], replaces those whose "id:attempt" is among ARGV[4..] with the
// mark ARGV[3], and removes the marks. It returns {removed, read}.
var unqueueScript = newScript(`
local want = {}
for i = 4, #ARGV do want[ARGV[i]] = true end
local start = tonumber(ARGV[1])
local items = redis.call('LRANGE', KEYS[1], start, start + tonumber(ARGV[2]) - 1)
local marked = 0
for i, m in ipairs(items) do
  local id, attempt = string.match(m, '^{"id":(%d+),"attempt":(%d+)')
  if id and want[id .. ':' .. attempt] then
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
	members := make([]string, 0, len(attempts))
	for id, attempt := range attempts {
		members = append(members, strconv.FormatInt(id, 10)+":"+strconv.Itoa(attempt))
	}
	slices.Sort(members)
	mark := "unqueued:" + rand.Text()
	// The lists that hold messages: a kill by filter over a long history
	// names many cancelled tasks, and most of a queue's lanes are empty.
	pipe := b.rdb.Pipeline()
	var lanes []string
	var lens []*redis.IntCmd
	for s := range max(span, 1) {
		for p := 0; p <= task.MaxPriority; p++ {
			lanes = append(lanes, b.Keys.Lane(q, s, p))
			lens = append(lens, pipe.LLen(ctx, lanes[len(lanes)-1]))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("unqueue messages of %s: %w", q, err)
	}
	var removed int64
	// A kill of more attempts than a chunk reads the lists once for each
	// chunk of them: a queue's lists hold a window of its tasks, not its
	// backlog.
	for chunk := range slices.Chunk(members, unqueueChunk) {
		for i, lane := range lanes {
			if lens[i].Val() == 0 {
				continue
			}
			n, err := b.unqueueLane(ctx, lane, mark, chunk)
			removed += n
			if err != nil {
				return removed, fmt.Errorf("unqueue messages of %s: %w", q, err)
			}
		}
	}
	return removed, nil
}

// unqueueLane removes from lane the messages of members, a chunk of the
// lane at a time.
func (b *Broker) unqueueLane(ctx context.Context, lane, mark string, members []string) (int64, error) {
	args := make([]any, 0, 3+len(members))
	args = append(args, 0, unqueueChunk, mark)
	for _, m := range members {
		args = append(args, m)
	}
	var removed int64
	for start := int64(0); ; {
		args[0] = start
		res, err := b.run(ctx, b.rdb, unqueueScript, []string{lane}, args...).Int64Slice()
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
