package config

import (
	"time"
)

// TasktopConfig configures the terminal UI.
type TasktopConfig struct {
	// ReadOnly disables every action (`tasktop --readonly`), for screens
	// that only watch.
	ReadOnly bool `mapstructure:"readonly"`
	// Refresh is the time between refreshes (`tasktop --refresh`).
	Refresh time.Duration `mapstructure:"refresh"`
}

// validateTasktop checks the tasktop section.
func (c *Config) validateTasktop() error {
	if c.Tasktop.Refresh < 100*time.Millisecond {
		return invalid("tasktop.refresh", c.Tasktop.Refresh.String(), "at least 100ms")
	}
	return nil
}
