package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/require"
)

// TestGolden runs the whole program on fixed data and a fixed clock,
// opens each view at 80×24 and 120×40, and compares the screen with
// testdata/TestGolden/<view>_<size>.golden (go test -update rewrites
// them).
func TestGolden(t *testing.T) {
	t.Parallel()
	// Each step's keys are sent once the previous step's text is on the
	// screen, so no key arrives before the data it acts on.
	type step struct {
		keys  []string
		ready string
	}
	first := step{ready: "2/3 workers"}
	views := []struct {
		name  string
		steps []step
	}{
		{"queues", []step{{nil, "reports_low"}}}, // one load brings header and rows
		{"workers", []step{first, {[]string{"2"}, "node-c-w1"}}},
		{"tasks", []step{first, {[]string{"3"}, "1010"}}},
		{"detail", []step{first, {[]string{"3"}, "1010"}, {[]string{"down", "down", "enter"}, "Payload"}}},
		{"events", []step{first, {[]string{"4"}, "abandoned"}}},
		{"audit", []step{first, {[]string{"5"}, "alice"}}},
		{"tail", []step{first, {[]string{"3"}, "1010"}, {[]string{"down", "l"}, "Output of task 1009"}}},
		{"help", []step{first, {[]string{"?"}, "Everywhere"}}},
		{"worker", []step{first, {[]string{"2"}, "node-c-w1"}, {[]string{"enter"}, "Worker node-a-w1"}}},
	}
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		for _, v := range views {
			t.Run(fmt.Sprintf("%s_%dx%d", v.name, size[0], size[1]), func(t *testing.T) {
				t.Parallel()
				src := fixture()
				// Results that wait to be written: a worker row and detail
				// in trouble, and why.
				src.ov.Workers[0].Heartbeat.ResultsWaitingMS = 45_000
				m := New(Options{Source: src, Actions: &fakeActions{}, Now: func() time.Time { return now }})
				m.noTick = true
				tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
				for _, st := range v.steps {
					for _, k := range st.keys {
						tm.Send(keyMsg(k))
					}
					teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return strings.Contains(ansi.Strip(string(b)), st.ready) },
						teatest.WithDuration(5*time.Second))
				}
				tm.Send(keyMsg("ctrl+c"))
				final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
				out := plain(final.render())
				require.Len(t, strings.Split(out, "\n"), size[1])
				golden.RequireEqual(t, out)
			})
		}
	}
}
