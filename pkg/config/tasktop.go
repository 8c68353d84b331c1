package config

import (
	"time"

	"github.com/taskd/taskd/pkg/sshserve"
)

// TasktopConfig configures the terminal UI.
type TasktopConfig struct {
	// ReadOnly disables every action (`tasktop --readonly`), for screens
	// that only watch.
	ReadOnly bool `mapstructure:"readonly"`
	// Refresh is the time between refreshes (`tasktop --refresh`).
	Refresh time.Duration `mapstructure:"refresh"`
	// Serve configures `tasktop serve`, the SSH server.
	Serve TasktopServeConfig `mapstructure:"serve"`
}

// TasktopServeConfig configures `tasktop serve` (docs/tasktop-ssh.md).
type TasktopServeConfig struct {
	// Listen is the address the SSH server listens on.
	Listen string `mapstructure:"listen"`
	// HostKey is the host key file, generated on first start.
	HostKey string `mapstructure:"host_key"`
	// AuthorizedKeys is the OpenSSH authorized keys file of the keys
	// that may log in; it is reread when it changes.
	AuthorizedKeys string `mapstructure:"authorized_keys"`
	// Roles name keys by fingerprint or comment, per role; they win over
	// a key's role= option. Other keys are viewers.
	Roles TasktopRoles `mapstructure:"roles"`
	// IdleTimeout closes a session without input for that long.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxSessions bounds the sessions open at once, MaxSessionsPerKey
	// those of one key.
	MaxSessions       int `mapstructure:"max_sessions"`
	MaxSessionsPerKey int `mapstructure:"max_sessions_per_key"`
}

// TasktopRoles are the keys of each role (fingerprints or comments).
type TasktopRoles struct {
	Operator []string `mapstructure:"operator"`
	Viewer   []string `mapstructure:"viewer"`
}

// RoleMap is the roles as the SSH server takes them.
func (r TasktopRoles) RoleMap() sshserve.RoleMap {
	return sshserve.RoleMap{sshserve.Operator: r.Operator, sshserve.Viewer: r.Viewer}
}

// validateTasktop checks the tasktop section.
func (c *Config) validateTasktop() error {
	if c.Tasktop.Refresh < 100*time.Millisecond {
		return invalid("tasktop.refresh", c.Tasktop.Refresh.String(), "at least 100ms")
	}
	sv := c.Tasktop.Serve
	if sv.IdleTimeout < time.Second {
		return invalid("tasktop.serve.idle_timeout", sv.IdleTimeout.String(), "at least 1s")
	}
	if sv.MaxSessions < 1 {
		return invalid("tasktop.serve.max_sessions", sv.MaxSessions, "at least 1")
	}
	if sv.MaxSessionsPerKey < 1 {
		return invalid("tasktop.serve.max_sessions_per_key", sv.MaxSessionsPerKey, "at least 1")
	}
	for key, v := range map[string]string{"tasktop.serve.listen": sv.Listen, "tasktop.serve.host_key": sv.HostKey,
		"tasktop.serve.authorized_keys": sv.AuthorizedKeys} {
		if v == "" {
			return invalid(key, v, "not empty")
		}
	}
	return nil
}
