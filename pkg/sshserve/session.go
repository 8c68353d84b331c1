package sshserve

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/ssh"
	"charm.land/wish/v2/bubbletea"
	gossh "golang.org/x/crypto/ssh"

	"github.com/taskd/taskd/pkg/store"
)

// Identity is who a session is: the key it logged in with and where from.
type Identity struct {
	Fingerprint string
	Comment     string // the key's comment in the authorized keys file
	Role        Role
	User        string // the SSH login name (any: the key decides)
	Addr        string // the client's address (host:port)
}

// Actor is the identity as the audit log records it: the key's comment
// (else the login name), the client's address and the key's fingerprint.
func (id Identity) Actor() store.Actor {
	user := id.Comment
	if user == "" {
		user = id.User
	}
	return store.Actor{User: user, Origin: "ssh " + id.Addr, Key: id.Fingerprint}
}

// String names the identity in logs and events.
func (id Identity) String() string {
	name := id.Comment
	if name == "" {
		name = "login " + id.User
	}
	return fmt.Sprintf("%s (%s, %s) from %s", name, id.Role, id.Fingerprint, id.Addr)
}

// Session is one SSH session running its program.
type Session struct {
	Identity
	key     gossh.PublicKey
	ssh     ssh.Session
	started time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	input   atomic.Int64 // UnixNano of the last input

	mu      sync.Mutex
	program *tea.Program
	reason  string // why the server closed the session ("": it did not)
}

// Context ends with the session: the program's queries stop.
func (se *Session) Context() context.Context { return se.ctx }

func (se *Session) lastInput() time.Time { return time.Unix(0, se.input.Load()) }

// close quits the session's program, saying why; it reports whether this
// call closed it.
func (se *Session) close(reason string) bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.reason != "" {
		return false
	}
	se.reason = reason
	if p := se.program; p != nil {
		go p.Quit() // Quit waits for the program to read it
	}
	se.cancel()
	return true
}

func (se *Session) closedBecause() string {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.reason
}

// authorize is the public key login: the key must be in the file, and
// the client at an address its from= option allows.
func (s *Server) authorize(ctx ssh.Context, key ssh.PublicKey) bool {
	fp := gossh.FingerprintSHA256(key)
	k := s.keys.find(key)
	switch {
	case k == nil:
		s.log.Info("ssh key refused: not in the authorized keys", "fingerprint", fp, "addr", ctx.RemoteAddr().String(), "user", ctx.User())
		return false
	case !k.allows(ctx.RemoteAddr()):
		s.log.Warn("ssh key refused: its from= option does not allow this address", "fingerprint", fp, "comment", k.Comment,
			"addr", ctx.RemoteAddr().String(), "line", k.Line)
		return false
	case k.expired(s.cfg.Now()):
		s.log.Warn("ssh key refused: its expiry-time has passed", "fingerprint", fp, "comment", k.Comment,
			"addr", ctx.RemoteAddr().String(), "line", k.Line, "expired", k.Expires)
		return false
	}
	return true
}

// connFailed logs connections that ended before a session, the refused
// logins among them.
func (s *Server) connFailed(conn net.Conn, err error) {
	s.log.Info("ssh connection closed before login", "addr", conn.RemoteAddr().String(), "err", err)
}

// say writes a line to the client's terminal (stderr: it is shown even
// when the program's screen is gone).
func say(sess ssh.Session, format string, args ...any) {
	_, _ = fmt.Fprintf(sess.Stderr(), "tasktop serve: "+format+"\r\n", args...)
}

// refuse is the outermost middleware: a command or a session without a
// terminal gets a message and exit status 2 instead of the program.
func (s *Server) refuse(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		if cmd := sess.RawCommand(); cmd != "" {
			s.log.Info("ssh command refused", "command", cmd, "fingerprint", gossh.FingerprintSHA256(sess.PublicKey()),
				"addr", sess.RemoteAddr().String())
			say(sess, "commands are refused (%q): this server runs tasktop only; connect with `ssh -t HOST` and no command", cmd)
			_ = sess.Exit(2)
			return
		}
		if _, _, ok := sess.Pty(); !ok {
			say(sess, "tasktop needs a terminal: connect with `ssh -t HOST` (not -T, and not from a pipe)")
			_ = sess.Exit(2)
			return
		}
		if notes := refusedNotes(sess.Context()); len(notes) > 0 {
			say(sess, "refused: %s (this server runs tasktop only)", strings.Join(notes, ", "))
		}
		next(sess)
	}
}

// limit registers the session within the limits, logs and records its
// start and end, and runs next (the program) in between.
func (s *Server) limit(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		se, err := s.open(sess)
		if err != nil {
			s.log.Info("ssh session refused", "reason", err.Error(), "fingerprint", gossh.FingerprintSHA256(sess.PublicKey()),
				"addr", sess.RemoteAddr().String())
			say(sess, "%v", err)
			_ = sess.Exit(1)
			return
		}
		defer s.handlers.Done()
		s.log.Info("ssh session started", "comment", se.Comment, "role", se.Role, "fingerprint", se.Fingerprint,
			"addr", se.Addr, "user", se.User)
		s.record(KindLogin, se.String())
		next(sess)
		why := s.end(se)
		if r := se.closedBecause(); r != "" {
			say(sess, "%s", r)
			_ = sess.Exit(1)
		}
		s.log.Info("ssh session ended", "comment", se.Comment, "fingerprint", se.Fingerprint, "addr", se.Addr,
			"after", time.Since(se.started).Round(time.Second).String(), "why", why)
		s.record(KindLogout, fmt.Sprintf("%s after %s: %s", se.String(), time.Since(se.started).Round(time.Second), why))
	}
}

// open checks the key again (the file may have changed since the login)
// and the limits, and registers the session.
func (s *Server) open(sess ssh.Session) (*Session, error) {
	k := s.keys.find(sess.PublicKey())
	if k == nil {
		return nil, fmt.Errorf("your key is no longer authorized")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping:
		return nil, fmt.Errorf("the server is stopping: reconnect in a moment")
	case len(s.sessions) >= s.cfg.MaxSessions:
		return nil, fmt.Errorf("%d sessions are open, the most this server allows (tasktop.serve.max_sessions): try again later",
			len(s.sessions))
	case s.perKey[k.Fingerprint] >= s.cfg.MaxSessionsPerKey:
		return nil, fmt.Errorf("your key has %d sessions open, the most one key may have (tasktop.serve.max_sessions_per_key)",
			s.perKey[k.Fingerprint])
	}
	se := &Session{
		Identity: Identity{Fingerprint: k.Fingerprint, Comment: k.Comment, Role: k.Role, User: sess.User(),
			Addr: sess.RemoteAddr().String()},
		key: k.key, ssh: sess, started: time.Now(),
	}
	se.ctx, se.cancel = context.WithCancel(sess.Context())
	se.input.Store(s.cfg.Now().UnixNano())
	s.sessions[sess] = se
	s.perKey[k.Fingerprint]++
	s.handlers.Add(1) // under mu, before stopping: Stop's Wait follows it
	return se, nil
}

// end unregisters a session and says why it ended.
func (s *Server) end(se *Session) string {
	s.mu.Lock()
	delete(s.sessions, se.ssh)
	if s.perKey[se.Fingerprint]--; s.perKey[se.Fingerprint] <= 0 {
		delete(s.perKey, se.Fingerprint)
	}
	s.mu.Unlock()
	why := se.closedBecause()
	if why == "" {
		why = "quit"
		if se.ssh.Context().Err() != nil {
			why = "connection closed"
		}
	}
	se.cancel()
	return why
}

// program builds the session's program: the configured one, reading the
// client's input through a reader that notes its time.
func (s *Server) program(sess ssh.Session) *tea.Program {
	s.mu.Lock()
	se := s.sessions[sess]
	s.mu.Unlock()
	if se == nil {
		return nil
	}
	m := s.cfg.NewProgram(se)
	opts := append(bubbletea.MakeOptions(sess), tea.WithInput(&inputReader{r: sess, se: se, now: s.cfg.Now}),
		// The process's signals are the server's: SIGTERM reaches every
		// session through Stop, with a message, not as a quit.
		tea.WithoutSignalHandler())
	p := tea.NewProgram(m, opts...)
	se.mu.Lock()
	se.program = p
	closed := se.reason != ""
	se.mu.Unlock()
	if closed {
		go p.Quit()
	}
	return p
}

// inputReader notes when the client last typed.
type inputReader struct {
	r   io.Reader
	se  *Session
	now func() time.Time
}

func (r *inputReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.se.input.Store(r.now().UnixNano())
	}
	return n, err
}
