package handler

import (
	"context"
	"testing"
)

// BenchmarkExecTrue runs /bin/true as an exec handler from 32 goroutines,
// the bench's exec slots: the handler's own cost per attempt, without the
// task center.
func BenchmarkExecTrue(b *testing.B) {
	h := &Exec{Argv: []string{"/bin/true"}}
	r := testRequest()
	b.SetParallelism(16) // 32 on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Handle(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
