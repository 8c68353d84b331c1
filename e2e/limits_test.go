package e2e

// Flow control across real `taskd run` processes: a cluster-wide rate, a
// cluster-wide max_running surviving a kill -9, per-group limits and
// serial groups. Sized for CI (a rate of 5/s, backlogs of hundreds); the
// full-size figures come from `taskd bench --only rate_limit`.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
)

// limitSetup is faultSetup with more configuration (queues, limits).
func limitSetup(t *testing.T, script, extra string) *faultBundle {
	t.Helper()
	b := faultSetup(t, "", script)
	body, err := os.ReadFile(b.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.config, append(body, []byte(extra)...), 0o644))
	return b
}

// event is a line the handler wrote: what (s start, e end), the task, its
// attempt, when (unix ns, the host's clock) and its group.
type event struct {
	what    string
	id      int64
	attempt int
	at      time.Time
	group   string
}

// readEvents reads the handler's "what id attempt ns" lines, by time.
func readEvents(t *testing.T, path string) []event {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			continue // a line being written
		}
		group := ""
		if len(fs) > 4 {
			group = fs[4]
		}
		id, _ := strconv.ParseInt(fs[1], 10, 64)
		att, _ := strconv.Atoi(fs[2])
		ns, err := strconv.ParseInt(fs[3], 10, 64)
		require.NoError(t, err, "line %q", sc.Text())
		out = append(out, event{what: fs[0], id: id, attempt: att, at: time.Unix(0, ns), group: group})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// recordScript is a handler that writes its start and end (with its
// group), sleeping between them; a payload with "fail":true fails its
// first attempt.
func recordScript(sleep string) string {
	return `p=$(cat); echo "s $TASK_ID $TASK_ATTEMPT $(date +%s%N) $TASK_GROUP" >> %OUT%; sleep ` + sleep +
		`; echo "e $TASK_ID $TASK_ATTEMPT $(date +%s%N) $TASK_GROUP" >> %OUT%; ` +
		`case "$p" in *'"fail":true'*) [ "$TASK_ATTEMPT" = 1 ] && exit 1;; esac; exit 0`
}

// endKilled ends, at killed, the attempts in evs that started and never
// wrote their end (their node was killed, and they with it), and returns
// the events by time and how many it ended.
func endKilled(evs []event, killed time.Time) ([]event, int) {
	ended := map[[2]int64]bool{}
	for _, e := range evs {
		if e.what == "e" {
			ended[[2]int64{e.id, int64(e.attempt)}] = true
		}
	}
	cut := 0
	for _, e := range evs {
		if e.what == "s" && !ended[[2]int64{e.id, int64(e.attempt)}] {
			evs = append(evs, event{what: "e", id: e.id, attempt: e.attempt, at: killed, group: e.group})
			cut++
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	return evs, cut
}

// maxOverlap is the most attempts running at once in events.
func maxOverlap(events []event) int {
	n, most := 0, 0
	for _, e := range events {
		if e.what == "s" {
			n++
		} else {
			n--
		}
		most = max(most, n)
	}
	return most
}

// A rate holds over three nodes: in any 10 s window, at most rate x 10 +
// burst tasks start; and the limit, not the nodes, sets the pace.
func TestLimitRateThreeNodes(t *testing.T) {
	t.Parallel()
	// A token every 200 ms: the handlers' start times, taken on the host,
	// lag the limiter's by a few milliseconds, never by a whole interval.
	const rate, burst, n = 5, 5, 100
	b := limitSetup(t, `echo "s $TASK_ID $TASK_ATTEMPT $(date +%s%N)" >> %OUT%`,
		fmt.Sprintf("queues:\n  work: { rate: %d/s, burst: %d }\n", rate, burst))
	nodes := []*faultNode{b.startNode(t, "a"), b.startNode(t, "b"), b.startNode(t, "c")}
	ids := b.submit(t, n)

	// While the backlog lasts, stats says the queue is limited, and how long.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := runTaskd(t, 10*time.Second, nil, "--config", b.config, "-o", "json", "stats")
		require.Zero(t, out.code, out.stderr)
		var st struct {
			Queues []struct {
				Name    string `json:"queue"`
				Limited *struct {
					By    string  `json:"by"`
					ForMS float64 `json:"for_ms"`
				} `json:"limited"`
				Limit struct {
					Rate string `json:"rate"`
				} `json:"limit"`
			} `json:"queues"`
		}
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &st), out.stdout)
		found := false
		for _, q := range st.Queues {
			if q.Name == "work" && q.Limited != nil {
				require.Equal(t, "rate", q.Limited.By)
				require.Equal(t, "5/s", q.Limit.Rate)
				found = true
			}
		}
		if found {
			break
		}
		require.True(t, time.Now().Before(deadline), "stats never showed the queue limited: %s", out.stdout)
		time.Sleep(200 * time.Millisecond) // polls taskd stats, a real process reading real servers
	}

	b.eventually(t, 90*time.Second, equal(n), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	for _, nd := range nodes {
		require.Equal(t, 0, nd.terminate(t, 20*time.Second))
	}
	var starts []time.Time
	for _, e := range readEvents(t, b.out) {
		starts = append(starts, e.at)
	}
	require.Len(t, starts, n, "every task ran once")
	worst := 0
	for i := range starts {
		k := 0
		for j := i; j < len(starts) && starts[j].Sub(starts[i]) < 10*time.Second; j++ {
			k++
		}
		worst = max(worst, k)
	}
	require.LessOrEqual(t, worst, rate*10+burst, "tasks started in a 10 s window")
	took := starts[len(starts)-1].Sub(starts[0])
	ideal := time.Duration(float64(n-burst) / rate * float64(time.Second))
	// The limiter can only slow work down: finishing well before the ideal
	// time would mean it let tasks through.
	require.Greater(t, took, ideal*9/10, "the rate was not held")
	t.Logf("%d tasks at %d/s (burst %d) over 3 nodes: the busiest 10 s window started %d (bound %d); %s from first to last start, ideal %s (%+.1f%%)",
		n, rate, burst, worst, rate*10+burst, took.Round(time.Millisecond), ideal, 100*(took.Seconds()/ideal.Seconds()-1))
	b.checkRecords(t, ids)
}

// max_running holds over three nodes, and the capacity a kill -9 takes
// with it comes back within the heartbeat TTL: never more than three
// attempts at once, three again soon after the kill.
func TestLimitMaxRunningKill(t *testing.T) {
	t.Parallel()
	const capacity, n = 3, 24
	b := limitSetup(t, recordScript("1.2"), fmt.Sprintf("queues:\n  work: { max_running: %d }\n", capacity))
	ids := b.submit(t, n)
	nodes := map[string]*faultNode{"a": b.startNode(t, "a"), "b": b.startNode(t, "b"), "c": b.startNode(t, "c")}

	// Kill a node running a task once three run.
	b.eventuallyTrue(t, 30*time.Second, "three never ran at once", func() bool { return maxOverlap(readEvents(t, b.out)) >= capacity })
	var list []*faultNode
	for _, nd := range nodes {
		list = append(list, nd)
	}
	victim := b.busyNode(t, list)
	victim.signal(t, syscall.SIGKILL)
	<-victim.done
	killed := time.Now()

	b.eventually(t, 120*time.Second, equal(n), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	evs, _ := endKilled(readEvents(t, b.out), killed)
	require.LessOrEqual(t, maxOverlap(evs), capacity, "attempts running at once")

	// After the kill: the first moment three attempts run again.
	running, back := 0, time.Time{}
	for _, e := range evs {
		if e.what == "s" {
			running++
		} else {
			running--
		}
		if e.at.After(killed) && running == capacity && back.IsZero() {
			back = e.at
		}
	}
	require.False(t, back.IsZero(), "three never ran again after the kill")
	// The heartbeat TTL (3s), a heartbeat interval for the last renewal
	// before the kill, and slack for a loaded machine.
	require.Less(t, back.Sub(killed), 3*time.Second+time.Second+3*time.Second, "capacity back after the kill")
	t.Logf("capacity back %s after the kill -9 (heartbeat TTL 3s)", back.Sub(killed).Round(time.Millisecond))
	for name, nd := range nodes {
		if nd != victim {
			require.Equal(t, 0, nd.terminate(t, 20*time.Second), name)
		}
	}
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM task_run WHERE outcome = 'failed'`), "a limited task is never failed")
	b.checkRecords(t, ids)
}

// submitGroups submits a task of code "work" for each of groups, in
// order, with "fail":true in the payloads of the indexes fail says.
func (b *faultBundle) submitGroups(t *testing.T, groups []string, fail func(i int) bool) []int64 {
	t.Helper()
	subs := make([]producer.Submission, len(groups))
	for i, g := range groups {
		subs[i] = producer.Submission{Code: "work", Group: g,
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"fail":%t}`, i, fail != nil && fail(i)))}
	}
	return b.submitAll(t, subs)
}

// Serial groups over three nodes, with failed tasks and a kill -9: within
// each group tasks start in the order they were submitted (a retry or a
// re-run of the same task may repeat it) and never overlap.
func TestSerialOrderKill(t *testing.T) {
	t.Parallel()
	const n, groups = 1000, 10
	b := limitSetup(t, recordScript("0.01"), "queues:\n  work: { serial: true }\nretry:\n  base: 100ms\n  max: 400ms\n")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("g%d", i%groups)
	}
	ids := b.submitGroups(t, names, func(i int) bool { return i%37 == 5 })
	nodes := []*faultNode{b.startNode(t, "a"), b.startNode(t, "b"), b.startNode(t, "c")}

	// Kill a node running a task, a third of the way.
	b.eventually(t, 60*time.Second, atLeast(n/3), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	victim := b.busyNode(t, nodes)
	victim.signal(t, syscall.SIGKILL)
	<-victim.done
	killed := time.Now()

	b.eventually(t, 120*time.Second, equal(n), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	require.Positive(t, b.count(t, `SELECT COUNT(*) FROM task_run WHERE outcome = 'failed'`), "some tasks failed once")
	byGroup := map[string][]event{}
	evs, _ := endKilled(readEvents(t, b.out), killed)
	for _, e := range evs {
		byGroup[e.group] = append(byGroup[e.group], e)
	}
	require.Len(t, byGroup, groups)
	for g, evs := range byGroup {
		var last int64
		running := 0
		for _, e := range evs {
			if e.what == "s" {
				require.GreaterOrEqual(t, e.id, last, "group %s: task %d started after task %d", g, e.id, last)
				last = e.id
				running++
				require.LessOrEqual(t, running, 1, "group %s: task %d started while another ran", g, e.id)
			} else {
				running--
			}
		}
	}
	for _, nd := range nodes {
		if nd != victim {
			require.Equal(t, 0, nd.terminate(t, 20*time.Second))
		}
	}
	b.checkRecords(t, ids)
}

// Per-group limits: a group with few tasks finishes long before one with
// many that was submitted first; with the same limit on the whole queue
// it would wait behind it.
func TestLimitPerGroupFairness(t *testing.T) {
	t.Parallel()
	// finishedWhen runs big tasks of group A, then small of group B, under
	// queue config qc, and returns the share of A done when B was done.
	finishedWhen := func(t *testing.T, qc string, big, small, perGroup, whole int) float64 {
		b := limitSetup(t, recordScript("0.02"), "queues:\n  work: "+qc+"\n")
		groups := make([]string, 0, big+small)
		for range big {
			groups = append(groups, "A")
		}
		for range small {
			groups = append(groups, "B")
		}
		ids := b.submitGroups(t, groups, nil)
		nodes := []*faultNode{b.startNode(t, "a"), b.startNode(t, "b")}
		b.eventually(t, 120*time.Second, equal(small), `SELECT COUNT(*) FROM task_center WHERE status = 3 AND group_key = 'B'`)
		doneA := b.count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3 AND group_key = 'A'`)
		b.eventually(t, 120*time.Second, equal(big+small), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
		evs := readEvents(t, b.out)
		require.LessOrEqual(t, maxOverlap(evs), whole, "attempts running at once")
		for _, g := range []string{"A", "B"} {
			var own []event
			for _, e := range evs {
				if e.group == g {
					own = append(own, e)
				}
			}
			require.LessOrEqual(t, maxOverlap(own), perGroup, "attempts of group %s running at once", g)
		}
		for _, nd := range nodes {
			require.Equal(t, 0, nd.terminate(t, 20*time.Second))
		}
		b.checkRecords(t, ids)
		return float64(doneA) / float64(big)
	}
	perGroup := finishedWhen(t, "{ max_running: 2, per: group }", 300, 20, 2, 4)
	t.Logf("per group: B (20 tasks) done when A (300, submitted first) was %.0f%% done", 100*perGroup)
	require.Less(t, perGroup, 0.5, "B waited behind A")
	whole := finishedWhen(t, "{ max_running: 4 }", 100, 10, 4, 4)
	t.Logf("whole queue: B done when A was %.0f%% done", 100*whole)
	require.Greater(t, whole, 0.9, "without per-group limits B waits behind A")
}

// eventuallyTrue polls cond for at most within.
func (b *faultBundle) eventuallyTrue(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		require.True(t, time.Now().Before(deadline), what)
		time.Sleep(20 * time.Millisecond) // polls a real daemon's effects
	}
}

// busyNode waits for one of nodes to hold a message of queue work in its
// processing list (a task it runs, marked running or not yet) and
// returns it.
func (b *faultBundle) busyNode(t *testing.T, nodes []*faultNode) *faultNode {
	t.Helper()
	var busy *faultNode
	b.eventuallyTrue(t, 30*time.Second, "no node runs a task", func() bool {
		for _, nd := range nodes {
			if id := workerID(t, nd); id != "" && b.env.Broker.Client().LLen(b.ctx, b.env.Broker.Keys.Processing("work", id)).Val() > 0 {
				busy = nd
				return true
			}
		}
		return false
	})
	return busy
}

// workerID is the worker id a node logged as it started.
func workerID(t *testing.T, n *faultNode) string {
	t.Helper()
	for _, line := range strings.Split(string(n.read()), "\n") {
		var l struct {
			Msg      string `json:"msg"`
			WorkerID string `json:"worker_id"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "worker started" {
			return l.WorkerID
		}
	}
	return ""
}

// A handler outlives no kill -9 of its node: the capacity the kill gives
// back (a lease, a serial group's turn) is not shared with an orphaned
// handler still running. One task at a time over two nodes, a handler of
// 8 s, its node killed a second in: no two attempts ever overlap.
func TestLimitKillStopsHandler(t *testing.T) {
	t.Parallel()
	b := limitSetup(t, recordScript("8"), "queues:\n  work: { max_running: 1 }\n")
	ids := b.submit(t, 2)
	nodes := []*faultNode{b.startNode(t, "a"), b.startNode(t, "b")}
	victim := b.busyNode(t, nodes)
	b.eventuallyTrue(t, 30*time.Second, "no task started", func() bool { return len(readEvents(t, b.out)) > 0 })
	time.Sleep(time.Second) // the victim's real child is a second into its 8 s of work
	victim.signal(t, syscall.SIGKILL)
	<-victim.done
	killed := time.Now()

	b.eventually(t, 120*time.Second, equal(2), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	// Wait out the orphan's sleep, had it survived.
	time.Sleep(time.Until(killed.Add(8 * time.Second)))
	evs, cut := endKilled(readEvents(t, b.out), killed)
	require.Equal(t, 1, cut, "the killed attempt was cut short, the others ran to their end")
	require.Equal(t, 1, maxOverlap(evs), "attempts running at once")
	for _, nd := range nodes {
		if nd != victim {
			require.Equal(t, 0, nd.terminate(t, 20*time.Second))
		}
	}
	b.checkRecords(t, ids)
}
