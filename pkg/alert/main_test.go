package alert_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives Stop, and no lease outlives its alerter.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
