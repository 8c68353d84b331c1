package handler

import (
	"context"
	"testing"

	"github.com/taskd/taskd/pkg/testenv"
)

// BenchmarkExecTrue runs /bin/true as an exec handler from 32 goroutines,
// the bench's exec slots: the handler's own cost per attempt, without the
// task center. cpu-µs/op is this process's CPU (user and system) per
// attempt, the children's excluded: the figure that varies least with the
// machine's other load.
func BenchmarkExecTrue(b *testing.B) {
	h := &Exec{Argv: []string{"/bin/true"}}
	r := testRequest()
	b.SetParallelism(16) // 32 on 2 CPUs
	before := testenv.SelfCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Handle(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((testenv.SelfCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}
