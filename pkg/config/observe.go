package config

import (
	"time"
)

// WatchdogConfig tunes the watchdog of a worker (role watchdog).
type WatchdogConfig struct {
	// Interval between checks.
	Interval time.Duration `mapstructure:"interval"`
	// IdleWindow: a queue with a backlog and a free slot where no result
	// was written for this long is idle.
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
	for key, d := range map[string]time.Duration{"watchdog.interval": w.Interval, "watchdog.idle_window": w.IdleWindow, "watchdog.grace": w.Grace} {
		if d <= 0 {
			return invalid(key, d.String(), "a positive duration")
		}
	}
	return nil
}
