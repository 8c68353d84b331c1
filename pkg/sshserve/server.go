// Package sshserve is the SSH server of `tasktop serve`: each SSH session
// runs its own terminal program (tasktop), sized to the client's terminal
// and following its resizes. Logins are by public key only, from an
// OpenSSH authorized keys file that is reread when it changes; each key
// has a role. Nothing else an SSH server usually does is done: commands,
// port and agent forwarding, X11 and SFTP are refused with a message.
package sshserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2"
	"charm.land/wish/v2/bubbletea"
	gossh "golang.org/x/crypto/ssh"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/task"
)

// Defaults of Config.
const (
	ListenDefault            = ":2222"
	HostKeyDefault           = "/var/lib/taskd/ssh_host_ed25519"
	AuthorizedKeysDefault    = "/etc/taskd/tasktop_keys"
	IdleTimeoutDefault       = 15 * time.Minute
	MaxSessionsDefault       = 32
	MaxSessionsPerKeyDefault = 4
	// SweepIntervalDefault is how often the authorized keys file is checked
	// for changes and idle sessions are closed.
	SweepIntervalDefault = time.Second
	// CloseGraceDefault is how long Stop waits for sessions to end after
	// telling them the server stops.
	CloseGraceDefault = 5 * time.Second
	// handshakeTimeout bounds a connection's key exchange and login.
	handshakeTimeout = 30 * time.Second
)

// Event kinds recorded for sessions.
const (
	KindLogin  = "ssh-login"
	KindLogout = "ssh-logout"
)

// Config configures the server.
type Config struct {
	// Listen is the address to listen on (ListenDefault).
	Listen string
	// HostKey is the host key file, generated on first start
	// (HostKeyDefault).
	HostKey string
	// AuthorizedKeys is the OpenSSH authorized keys file of the keys that
	// may log in (AuthorizedKeysDefault).
	AuthorizedKeys string
	// Roles name keys, by fingerprint or comment, per role; they win over
	// a key's role= option. A key neither names is a Viewer.
	Roles RoleMap
	// IdleTimeout closes a session without input for that long
	// (IdleTimeoutDefault).
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions open at once (MaxSessionsDefault),
	// MaxSessionsPerKey those of one key (MaxSessionsPerKeyDefault).
	MaxSessions       int
	MaxSessionsPerKey int
	// SweepInterval is the time between sweeps (SweepIntervalDefault).
	SweepInterval time.Duration
	// CloseGrace bounds Stop's wait for sessions (CloseGraceDefault).
	CloseGrace time.Duration
	// NewProgram returns the program of a session; it ends with the
	// session's Context.
	NewProgram func(s *Session) tea.Model
	// Events records session start and end (nil: only logged).
	Events EventRecorder
	// Node names this server in events (the host name).
	Node string
	// Version is sent to clients in the SSH version string.
	Version string
	Logger  *slog.Logger
	// Now is the clock of idle times (time.Now).
	Now func() time.Time
}

// EventRecorder records events: *broker.Broker.
type EventRecorder interface {
	RecordEvent(ctx context.Context, e *broker.Event) error
}

// Server is the SSH server. Start listens; Stop closes every session,
// telling it why, and waits for them.
type Server struct {
	cfg    Config
	log    *slog.Logger
	srv    *ssh.Server
	hostFP string
	keys   keyFile
	sweep  startstop.Runner

	mu       sync.Mutex
	sessions map[ssh.Session]*Session
	perKey   map[string]int
	stopping bool
	// handlers counts the sessions' handlers still running, to their
	// last recorded event.
	handlers sync.WaitGroup

	ln        net.Listener
	serveDone chan struct{}
}

// New checks the configuration, reads (or generates) the host key and reads
// the authorized keys.
func New(cfg Config) (*Server, error) {
	cfg.Listen = cmp.Or(cfg.Listen, ListenDefault)
	cfg.HostKey = cmp.Or(cfg.HostKey, HostKeyDefault)
	cfg.AuthorizedKeys = cmp.Or(cfg.AuthorizedKeys, AuthorizedKeysDefault)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, IdleTimeoutDefault)
	cfg.MaxSessions = cmp.Or(cfg.MaxSessions, MaxSessionsDefault)
	cfg.MaxSessionsPerKey = cmp.Or(cfg.MaxSessionsPerKey, MaxSessionsPerKeyDefault)
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, SweepIntervalDefault)
	cfg.CloseGrace = cmp.Or(cfg.CloseGrace, CloseGraceDefault)
	cfg.Version = cmp.Or(cfg.Version, "tasktop")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewProgram == nil {
		return nil, errors.New("sshserve: no NewProgram")
	}
	if cfg.IdleTimeout < 0 || cfg.MaxSessions < 0 || cfg.MaxSessionsPerKey < 0 {
		return nil, task.Invalidf("sshserve: idle timeout and session limits must not be negative")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sessions: map[ssh.Session]*Session{}, perKey: map[string]int{},
		keys: keyFile{path: cfg.AuthorizedKeys, roles: cfg.Roles}}
	if _, err := s.keys.reload(s.log, true); err != nil {
		return nil, task.Invalidf("%v: create it with one OpenSSH public key a line (ssh-ed25519 AAAA... alice@laptop)", err)
	}
	signer, generated, err := loadHostKey(cfg.HostKey)
	if err != nil {
		return nil, err
	}
	s.hostFP = gossh.FingerprintSHA256(signer.PublicKey())
	s.log.Info("tasktop serve host key", "file", cfg.HostKey, "fingerprint", s.hostFP, "type", signer.PublicKey().Type(),
		"generated", generated)

	s.srv, err = wish.NewServer(
		wish.WithAddress(cfg.Listen),
		wish.WithVersion(cfg.Version),
		wish.WithPublicKeyAuth(s.authorize),
		wish.WithMiddleware(
			bubbletea.MiddlewareWithProgramHandler(s.program),
			s.limit,
			s.refuse,
		),
		func(srv *ssh.Server) error {
			srv.AddHostKey(signer)
			srv.HandshakeTimeout = handshakeTimeout
			// A backstop for connections that open no session; the
			// sweeper closes idle sessions first, with a message.
			srv.IdleTimeout = cfg.IdleTimeout + time.Minute
			srv.ChannelHandlers = map[string]ssh.ChannelHandler{"session": s.sessionChannel, "default": refuseChannel}
			srv.RequestHandlers = map[string]ssh.RequestHandler{"default": s.refuseRequest}
			srv.SubsystemHandlers = map[string]ssh.SubsystemHandler{"default": s.refuseSubsystem}
			srv.ConnectionFailedCallback = s.connFailed
			return nil
		},
	)
	if err != nil {
		return nil, fmt.Errorf("ssh server: %w", err)
	}
	return s, nil
}

// HostKeyFingerprint is the host key's SHA256 fingerprint, for clients'
// known_hosts.
func (s *Server) HostKeyFingerprint() string { return s.hostFP }

// Start listens and serves until Stop. The sweeper (key file changes,
// idle sessions) starts after the listener, and stops before it.
func (s *Server) Start(ctx context.Context) error {
	if s.ln != nil {
		return startstop.ErrStarted
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, ssh.ErrServerClosed) {
			s.log.Error("tasktop serve stopped serving", "err", err)
		}
	}()
	s.log.Info("tasktop serve listening", "addr", ln.Addr().String(), "authorized_keys", s.cfg.AuthorizedKeys,
		"keys", s.keys.len(), "idle_timeout", s.cfg.IdleTimeout.String(), "max_sessions", s.cfg.MaxSessions,
		"max_sessions_per_key", s.cfg.MaxSessionsPerKey)
	return s.sweep.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, s.cfg.SweepInterval, func(ctx context.Context) { s.RunOnce(ctx) })
	})
}

// Addr is the address the server listens on (nil before Start).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop stops taking connections, closes every session with a message (the
// terminal of each is restored), waits up to CloseGrace for the clients to
// leave, then drops the connections that remain. Safe to call twice or
// without Start.
func (s *Server) Stop() {
	s.sweep.Stop()
	s.mu.Lock()
	already := s.stopping
	s.stopping = true
	open := make([]*Session, 0, len(s.sessions))
	for _, se := range s.sessions {
		open = append(open, se)
	}
	s.mu.Unlock()
	if already || s.ln == nil {
		return
	}
	for _, se := range open {
		se.close("tasktop serve is stopping: reconnect in a moment")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Warn("tasktop serve: sessions still open after the grace period; closing them", "sessions", len(open))
	}
	_ = s.srv.Close()
	<-s.serveDone
	// A session's handler records its end after its connection closed
	// (recordWait at most): nothing of it runs past Stop.
	s.handlers.Wait()
	s.log.Info("tasktop serve stopped")
}

// SweepResult is what one sweep did.
type SweepResult struct {
	Reloaded bool // the authorized keys file changed and was read again
	Idle     int  // sessions closed for want of input
	Revoked  int  // sessions closed because their key left the file or changed role
}

// RunOnce rereads the authorized keys file if it changed, and closes the
// sessions that were idle for IdleTimeout or whose key is no longer
// authorized as it was.
func (s *Server) RunOnce(ctx context.Context) SweepResult {
	var res SweepResult
	var err error
	if res.Reloaded, err = s.keys.reload(s.log, false); err != nil {
		s.log.Error("authorized keys: cannot read the file; refusing every key until it can be read", "file", s.cfg.AuthorizedKeys, "err", err)
	}
	now := s.cfg.Now()
	s.mu.Lock()
	open := make([]*Session, 0, len(s.sessions))
	for _, se := range s.sessions {
		open = append(open, se)
	}
	s.mu.Unlock()
	for _, se := range open {
		if k := s.keys.find(se.key); k == nil || k.Role != se.Role || k.expired(now) {
			if se.close("your key was removed from the authorized keys, its role changed or it expired") {
				res.Revoked++
			}
			continue
		}
		if idle := now.Sub(se.lastInput()); idle >= s.cfg.IdleTimeout {
			if se.close(fmt.Sprintf("closed after %s without input", s.cfg.IdleTimeout)) {
				res.Idle++
			}
		}
	}
	return res
}

// recordWait bounds the recording of a session event.
const recordWait = 2 * time.Second

// record logs a session event and records it.
func (s *Server) record(kind, detail string) {
	if s.cfg.Events == nil {
		return
	}
	// A session waits for it: a Redis that hangs holds a login back
	// recordWait at most, not the client's whole read timeout.
	ctx, cancel := context.WithTimeout(context.Background(), recordWait)
	defer cancel()
	if err := s.cfg.Events.RecordEvent(ctx, &broker.Event{At: time.Now(), Kind: kind, Node: s.cfg.Node, Detail: detail}); err != nil {
		s.log.Warn("tasktop serve: cannot record the session event", "kind", kind, "err", err)
	}
}
