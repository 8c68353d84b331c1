package broker

import "strconv"

// Keys builds every Redis key taskd uses. All keys start with the
// configured prefix; every key that belongs to one queue carries the queue's
// name as a hash tag ({queue}) so that list moves and scripts touching a
// queue and its processing lists stay in one Redis Cluster slot.
//
//	{prefix}queue:{Q}              pending messages of queue Q (LPUSH in, RPOP side out)
//	{prefix}queue:{Q}:N            shard N > 0 of queue Q
//	{prefix}processing:{Q}:W       messages of Q taken by worker W, not yet finished
//	{prefix}poison:{Q}             messages of Q that could not be decoded
//	{prefix}wake                   pub/sub channel: a task became due
//	{prefix}kill                   pub/sub channel: cancel a running attempt
//	{prefix}worker:W               heartbeat of worker W (JSON, with a TTL)
//	{prefix}workers                sorted set of worker ids by last heartbeat
//	{prefix}worker-queues:W        set of the queues worker W consumes (no TTL:
//	                               recovery reads it after W died)
//	{prefix}epoch                  set once per Redis lifetime: its absence means
//	                               Redis lost its data and in-flight work is rebuilt
//	{prefix}throughput:W           hash of worker W's attempts per minute: fields
//	                               <unix minute>:p (processed) and :f (failed)
//	{prefix}qstats:{Q}             hash of queue Q's attempts whose results were
//	                               written, per minute: fields <unix minute>:s
//	                               (succeeded), :f (failed), :o (other), :i
//	                               (interrupted)
//	{prefix}process:P              heartbeat of `taskd run` process P (JSON, TTL)
//	{prefix}processes              sorted set of process ids by last heartbeat;
//	                               a clean exit removes its entry
//	{prefix}events                 list of watchdog events (JSON), newest first
type Keys struct {
	Prefix string
	// NotifyTag, set on a Cluster, is one hash tag for every queue's wake
	// tokens, so that a worker waits on all its queues with one BLPOP:
	// {prefix}notify:{NotifyTag}:q:Q instead of {prefix}notify:{Q}.
	NotifyTag string
}

// Queue is the list of queue q's shard (0 is the unsharded list).
func (k Keys) Queue(q string, shard int) string {
	if shard == 0 {
		return k.Prefix + "queue:{" + q + "}"
	}
	return k.Prefix + "queue:{" + q + "}:" + strconv.Itoa(shard)
}

// Processing is worker w's in-flight list for queue q.
func (k Keys) Processing(q, w string) string {
	return k.Prefix + "processing:{" + q + "}:" + w
}

// Poison holds undecodable messages of queue q.
func (k Keys) Poison(q string) string { return k.Prefix + "poison:{" + q + "}" }

// Wake is the channel producers publish to when a task is due soon.
func (k Keys) Wake() string { return k.Prefix + "wake" }

// WorkerWake is worker w's own wake list, beside the queues' wake tokens
// in its BLPOP: a push to it makes the worker wait again on a new set of
// queues.
func (k Keys) WorkerWake(w string) string {
	if k.NotifyTag != "" {
		return k.Prefix + "notify:{" + k.NotifyTag + "}:w:" + w
	}
	return k.Prefix + "worker-wake:" + w
}

// Worker is worker w's heartbeat.
func (k Keys) Worker(w string) string { return k.Prefix + "worker:" + w }

// Workers is the registry of worker ids, scored by last heartbeat (ms).
func (k Keys) Workers() string { return k.Prefix + "workers" }

// WorkerNode is the node id of worker w, kept ThroughputKeep after its
// last heartbeat so a dead worker can still be told by its node.
func (k Keys) WorkerNode(w string) string { return k.Prefix + "worker-node:" + w }

// WorkersGone is the set of dead workers recovery drained, scored by their
// last heartbeat (ms).
func (k Keys) WorkersGone() string { return k.Prefix + "workers-gone" }

// Tail is the latest output of task id's running attempt (TaskTail).
func (k Keys) Tail(id int64) string { return k.Prefix + "tail:" + strconv.FormatInt(id, 10) }

// WorkerQueues is the set of queues worker w consumes.
func (k Keys) WorkerQueues(w string) string { return k.Prefix + "worker-queues:" + w }

// Epoch marks the lifetime of the Redis data set.
func (k Keys) Epoch() string { return k.Prefix + "epoch" }

// Kill is the channel operators publish kill requests to.
func (k Keys) Kill() string { return k.Prefix + "kill" }

// Killed keeps the kill requests of the last KillKeep ("id:attempt",
// scored by when, ms) for workers that did not hear them.
func (k Keys) Killed() string { return k.Prefix + "killed" }

// Throughput is worker w's per-minute counters.
func (k Keys) Throughput(w string) string { return k.Prefix + "throughput:" + w }

// QueueStats is queue q's per-minute counters of ended attempts.
func (k Keys) QueueStats(q string) string { return k.Prefix + "qstats:{" + q + "}" }

// Process is the heartbeat of `taskd run` process p.
func (k Keys) Process(p string) string { return k.Prefix + "process:" + p }

// Processes is the registry of process ids, scored by last heartbeat (ms).
func (k Keys) Processes() string { return k.Prefix + "processes" }

// Events is the list of recorded watchdog events.
func (k Keys) Events() string { return k.Prefix + "events" }
