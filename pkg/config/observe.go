package config

import (
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// WatchdogConfig tunes the watchdog of a worker (role watchdog).
type WatchdogConfig struct {
	// Interval between checks.
	Interval time.Duration `mapstructure:"interval"`
	// IdleWindow: a queue with a backlog and a free slot where nothing
	// started or ended for this long is idle.
	IdleWindow time.Duration `mapstructure:"idle_window"`
	// Grace: a slot held this long past its task's timeout is abandoned and
	// its task recovered; an abandoned handler that does not return, or an
	// idle queue that stays idle, this long after makes the process exit
	// with code 75 for its supervisor to restart it.
	Grace time.Duration `mapstructure:"grace"`
}

// validateObserve checks the watchdog section.
func (c *Config) validateObserve() error {
	w := c.Watchdog
	if w.Interval <= 0 || w.IdleWindow <= 0 || w.Grace <= 0 {
		return task.Invalidf("config watchdog: interval, idle_window and grace must be positive")
	}
	return nil
}
