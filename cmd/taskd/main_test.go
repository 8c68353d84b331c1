package main

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/taskd/taskd/pkg/benchmark"
)

func TestGCPercentUnlessGOGCSet(t *testing.T) {
	defer debug.SetGCPercent(benchmark.GCPercent())
	t.Setenv("GOGC", "50") // restored after the test
	debug.SetGCPercent(50)
	setGCPercent()
	if got := benchmark.GCPercent(); got != 50 {
		t.Errorf("GOGC=50 set: GC percent %d, want 50", got)
	}
	os.Unsetenv("GOGC")
	setGCPercent()
	if got := benchmark.GCPercent(); got != gcPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, gcPercent)
	}
}
