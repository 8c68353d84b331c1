package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcNow reads the collector's target (SetGCPercent returns the previous).
func gcNow() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestGCPercentUnlessGOGCSet(t *testing.T) {
	defer debug.SetGCPercent(gcNow())
	t.Setenv("GOGC", "50") // restored after the test
	debug.SetGCPercent(50)
	setGCPercent()
	if got := gcNow(); got != 50 {
		t.Errorf("GOGC=50 set: GC percent %d, want 50", got)
	}
	os.Unsetenv("GOGC")
	setGCPercent()
	if got := gcNow(); got != gcPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, gcPercent)
	}
}
