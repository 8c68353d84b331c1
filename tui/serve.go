package tui

import (
	"context"
	"io"
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/sshserve"
	"github.com/taskd/taskd/pkg/task"
)

// serveCommand is `tasktop serve`: tasktop over SSH, one tasktop per
// session (docs/tasktop-ssh.md).
func serveCommand(v *viper.Viper, configPath *string, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve tasktop over SSH to the keys of an authorized keys file",
		Long: "tasktop serve is an SSH server that runs one tasktop per session, sized to the client's\n" +
			"terminal. Logins are by public key only, from an OpenSSH authorized keys file (reread when\n" +
			"it changes); a key is a viewer (read-only) or an operator. Commands, forwarding and SFTP\n" +
			"are refused. SIGTERM closes every session with a message and exits 0; a configuration to fix\n" +
			"exits 78.",
		Example: "  tasktop serve --listen :2222 --host-key /var/lib/taskd/ssh_host_ed25519 --authorized-keys /etc/taskd/tasktop_keys\n" +
			"  ssh -p 2222 ops@taskd-host",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(v, *configPath)
			if err != nil {
				return configError{err}
			}
			return serve(cmd.Context(), cfg, stderr)
		},
	}
	fl := cmd.Flags()
	fl.String("listen", sshserve.ListenDefault, "address to listen on (tasktop.serve.listen)")
	fl.String("host-key", sshserve.HostKeyDefault, "host key file, generated on first start (tasktop.serve.host_key)")
	fl.String("authorized-keys", sshserve.AuthorizedKeysDefault, "OpenSSH authorized keys file of who may log in (tasktop.serve.authorized_keys)")
	for key, flag := range map[string]string{"tasktop.serve.listen": "listen", "tasktop.serve.host_key": "host-key",
		"tasktop.serve.authorized_keys": "authorized-keys"} {
		config.BindFlag(v, key, fl.Lookup(flag))
	}
	return cmd
}

// serve runs the SSH server until ctx ends (SIGTERM). Every session reads
// through one Shared loader, and acts through the ops layer as its key.
func serve(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	log := cli.NewLogger(cfg, stderr)
	be, err := openBackend(ctx, cfg)
	if err != nil {
		return runError{err}
	}
	defer be.Close()
	shared := NewShared(be.Loader)
	be.changed = shared.Invalidate
	host := cfg.Node.ID
	if host == "" {
		host, _ = os.Hostname()
	}
	sv := cfg.Tasktop.Serve
	srv, err := sshserve.New(sshserve.Config{
		Listen: sv.Listen, HostKey: sv.HostKey, AuthorizedKeys: sv.AuthorizedKeys, Roles: sv.Roles.RoleMap(),
		IdleTimeout: sv.IdleTimeout, MaxSessions: sv.MaxSessions, MaxSessionsPerKey: sv.MaxSessionsPerKey,
		Events: be.Loader.Broker, Node: host, Version: "tasktop-" + node.Version, Logger: log,
		NewProgram: func(se *sshserve.Session) tea.Model {
			opt := Options{Source: shared, Refresh: cfg.Tasktop.Refresh, Context: se.Context(), ReadOnly: true,
				RedisNear: cfg.Alerts.RedisMemoryThreshold, ActionTimeout: ActionTimeoutFor(be.KillWait)}
			if se.Role == sshserve.Operator && !cfg.Tasktop.ReadOnly {
				opt.Actions, opt.ReadOnly = be.Ops.As(se.Actor()), false
			}
			return New(opt)
		},
	})
	if err != nil {
		if task.ErrorCode(err) == task.CodeInvalid {
			return configError{err}
		}
		return runError{err}
	}
	if err := srv.Start(ctx); err != nil {
		return runError{err}
	}
	<-ctx.Done()
	log.Info("tasktop serve stopping: closing sessions")
	srv.Stop()
	return nil
}
