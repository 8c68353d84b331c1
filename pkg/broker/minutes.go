package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Per-minute counters are hashes whose fields are "<unix minute>:<kind>",
// one a minute and kind of count: a worker's throughput
// ({prefix}throughput:W, kinds "pfd") and a queue's ended attempts
// ({prefix}qstats:{Q}, kinds "sfci"). Fields of minutes older than the
// hash's keep are deleted by the writes, and the hash expires keep after
// its last write.

func minuteField(m int64, kind byte) string {
	return strconv.FormatInt(m, 10) + ":" + string(kind)
}

// addMinute adds n[i] to the counter of kinds[i] in minute m of key (zeros
// are not written), deletes the fields of the minutes from since-keep to
// m-keep (at most an hour of them), and keeps the hash keep long. A writer
// passes as since its previous write's minute (m-1 when it writes every
// minute or does not know), so no field outlives keep by much whatever the
// gaps between writes.
func (b *Broker) addMinute(ctx context.Context, pipe redis.Pipeliner, key string, keep time.Duration, m, since int64, kinds string, n ...int64) {
	for i := range kinds {
		if n[i] != 0 {
			// Counted even at maxmemory: the hash is bounded by keep.
			b.write(ctx, pipe, "HINCRBY", key, minuteField(m, kinds[i]), n[i])
		}
	}
	k := int64(keep / time.Minute)
	var old []string
	for om := max(min(since, m-1), m-60) - k; om <= m-k; om++ {
		for i := range kinds {
			old = append(old, minuteField(om, kinds[i]))
		}
	}
	pipe.HDel(ctx, key, old...)
	pipe.Expire(ctx, key, keep)
}

// readMinutes queues an HMGET of the counters of minutes first to last.
func readMinutes(ctx context.Context, pipe redis.Pipeliner, key string, first, last int64, kinds string) *redis.SliceCmd {
	fields := make([]string, 0, int(last-first+1)*len(kinds))
	for m := first; m <= last; m++ {
		for i := range kinds {
			fields = append(fields, minuteField(m, kinds[i]))
		}
	}
	return pipe.HMGet(ctx, key, fields...)
}

// minuteCounts turns the answer of readMinutes into the counts of each
// minute from first, by kind (in the order of kinds); missing ones are 0.
func minuteCounts(cmd *redis.SliceCmd, kinds string) [][]int64 {
	vals := cmd.Val()
	out := make([][]int64, len(vals)/len(kinds))
	for i := range out {
		out[i] = make([]int64, len(kinds))
		for j := range kinds {
			if s, ok := vals[i*len(kinds)+j].(string); ok {
				out[i][j], _ = strconv.ParseInt(s, 10, 64)
			}
		}
	}
	return out
}

// window is the count of one kind over the n minutes up to now, from the
// counts of the minutes from first to now's minute: the current, partial
// minute, the n-1 before it and, pro rata, the part of the minute before
// those that is still within n minutes.
func window(counts [][]int64, first int64, now time.Time, n int, kind int) float64 {
	cur := now.Unix() / 60
	var sum float64
	for m := cur - int64(n) + 1; m <= cur; m++ {
		if i := m - first; i >= 0 && i < int64(len(counts)) {
			sum += float64(counts[i][kind])
		}
	}
	if i := cur - int64(n) - first; i >= 0 && i < int64(len(counts)) {
		part := 1 - float64(now.UnixMilli()-cur*60000)/60000
		sum += part * float64(counts[i][kind])
	}
	return sum
}
