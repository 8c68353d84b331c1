package recovery_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
