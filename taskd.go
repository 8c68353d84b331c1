// Package taskd embeds taskd in a Go program: a Client submits tasks with
// typed payloads, a Server runs a `taskd run` node in the process with Go
// handlers, beside the exec, pool and http handlers of the configuration.
//
// A payload type names its task code with a Kind method; the client
// encodes it as JSON, the handler gets it decoded:
//
//	type SendEmail struct{ To string `json:"to"` }
//
//	func (SendEmail) Kind() string { return "send_email" }
//
//	mux := taskd.NewMux()
//	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[SendEmail]) error {
//		return mailer.Send(ctx, job.Args.To)
//	})
//	srv := taskd.NewServer(cfg, mux)
//	err := srv.Run(ctx) // until ctx is done, then drains
//
//	client, err := taskd.NewClient(ctx, cfg)
//	res, err := client.Submit(ctx, SendEmail{To: "a@example.com"}, taskd.Delay(time.Minute))
//
// Then makes a chain (a child submitted when its parent succeeds, with the
// parent's result as its payload); Client.Batch submits tasks and a
// callback created once when all have ended, with the counts
// (docs/steps.md).
//
// The configuration is taskd's own (Config, LoadConfig): one file and
// TASKD_* variables, as for the daemon. The guarantees are the daemon's:
// at-least-once, every write fenced by attempt; a handler gets the task's
// id, attempt and unique key to be idempotent. This package only wraps
// pkg/producer, pkg/node and pkg/handler, which stay the implementation.
package taskd

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/task"
)

// Config is taskd's configuration (docs/configuration.md).
type Config = config.Config

// LoadConfig reads the configuration as `taskd run` does: path, else
// ./taskd.yaml, else /etc/taskd/taskd.yaml (none at all: the defaults),
// then TASKD_* variables.
func LoadConfig(path string) (*Config, error) {
	return config.Load(config.NewViper(), path)
}

// DefaultConfig returns a configuration of defaults, as LoadConfig gives
// with no file and no TASKD_* variable: set MySQL.DSN, Redis.Addr and what
// else differs on it. A Config built from nothing misses the defaults, and
// Start and NewClient refuse it, naming the first missing value.
func DefaultConfig() *Config { return config.Default() }

// Migrate applies the task center's schema migrations (idempotent), as
// `taskd migrate` does, and returns the versions it applied. A contract
// step is left for a later run while processes of an older release may
// be running (docs/upgrading.md); `taskd migrate` says which and why.
func Migrate(ctx context.Context, cfg *Config) ([]int, error) {
	s, err := node.OpenMigrationStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res, err := node.Migrate(ctx, cfg, s, nil, false, nil)
	return res.Applied, err
}

// checked validates cfg (a copy: Validate fills derived defaults) as
// LoadConfig does: a Config built by hand with a value missing is refused
// here, not found by a goroutine that panics on it later.
func checked(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("taskd: %w (start from taskd.DefaultConfig() or taskd.LoadConfig)", err)
	}
	return nil
}

// Code classifies an error of this package: ErrorCode(err) tells bad input
// (nothing was written) from what an operator must fix and from a
// dependency that failed, for a caller to answer 400, 404, or retry.
type Code = task.Code

// The error codes.
const (
	CodeInvalid  = task.CodeInvalid  // bad input: nothing was written; do not retry
	CodeNotFound = task.CodeNotFound // the task, queue or periodic task does not exist
	CodeConfig   = task.CodeConfig   // the configuration, credentials or schema: an operator fixes it
	CodeInternal = task.CodeInternal // anything else: MySQL or Redis failed; retry later
)

// ErrorCode returns err's code: CodeInternal for an error that carries
// none, "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	return task.ErrorCode(err)
}
