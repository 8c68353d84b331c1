package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine of a worker outlives its Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
