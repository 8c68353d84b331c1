package sshserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	gossh "golang.org/x/crypto/ssh"

	"github.com/taskd/taskd/pkg/broker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hello is the program of the test sessions: it shows who it runs for.
type hello struct{ se *Session }

func (h hello) Init() tea.Cmd { return nil }
func (h hello) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok && k.String() == "q" {
		return h, tea.Quit
	}
	return h, nil
}
func (h hello) View() tea.View { return tea.NewView("hello " + h.se.Comment + " " + string(h.se.Role)) }

type serverBundle struct {
	srv      *Server
	keysFile string
	now      atomic.Int64 // the driven clock, UnixNano
	contexts chan context.Context
}

func setupServer(t *testing.T, keys ...string) *serverBundle {
	t.Helper()
	return setupServerWith(t, nil, keys...)
}

// setupServerWith is setupServer with events recorded by events.
func setupServerWith(t *testing.T, events EventRecorder, keys ...string) *serverBundle {
	t.Helper()
	dir := t.TempDir()
	b := &serverBundle{keysFile: filepath.Join(dir, "keys"), contexts: make(chan context.Context, 10)}
	b.now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	b.writeKeys(t, keys...)
	srv, err := New(Config{
		Listen: "127.0.0.1:0", HostKey: filepath.Join(dir, "host"), AuthorizedKeys: b.keysFile,
		IdleTimeout: time.Minute, SweepInterval: time.Hour, CloseGrace: time.Second, // the test sweeps
		Logger: slog.New(slog.DiscardHandler), Events: events,
		Now: func() time.Time { return time.Unix(0, b.now.Load()) },
		NewProgram: func(se *Session) tea.Model {
			b.contexts <- se.Context()
			return hello{se}
		},
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(srv.Stop)
	b.srv = srv
	return b
}

func (b *serverBundle) writeKeys(t *testing.T, lines ...string) {
	t.Helper()
	tmp := b.keysFile + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	require.NoError(t, os.Rename(tmp, b.keysFile))
}

func (b *serverBundle) advance(d time.Duration) { b.now.Add(int64(d)) }

// session is a client session with a terminal.
type session struct {
	c      *gossh.Client
	s      *gossh.Session
	stdin  io.Writer
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan error
	stderr bytes.Buffer
}

func (b *serverBundle) open(t *testing.T, k gossh.Signer) (*session, error) {
	t.Helper()
	c, err := gossh.Dial("tcp", b.srv.Addr().String(), &gossh.ClientConfig{User: "u", Auth: []gossh.AuthMethod{gossh.PublicKeys(k)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.NewSession()
	require.NoError(t, err)
	se := &session{c: c, s: s, done: make(chan error, 1)}
	se.stdin, err = s.StdinPipe()
	require.NoError(t, err)
	s.Stdout, s.Stderr = writerFunc(se.write(&se.out)), writerFunc(se.write(&se.stderr))
	require.NoError(t, s.RequestPty("xterm", 24, 80, nil))
	require.NoError(t, s.Shell())
	go func() { se.done <- s.Wait() }()
	return se, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (se *session) write(buf *bytes.Buffer) func([]byte) (int, error) {
	return func(p []byte) (int, error) {
		se.mu.Lock()
		defer se.mu.Unlock()
		return buf.Write(p)
	}
}

func (se *session) text(buf *bytes.Buffer) string {
	se.mu.Lock()
	defer se.mu.Unlock()
	return buf.String()
}

// ended waits for the session to end and returns its exit status and
// what the server told it.
func (se *session) ended(t *testing.T) (int, string) {
	t.Helper()
	select {
	case err := <-se.done:
		var ee *gossh.ExitError
		if errors.As(err, &ee) {
			return ee.ExitStatus(), se.text(&se.stderr)
		}
		require.NoError(t, err)
		return 0, se.text(&se.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
		return 0, ""
	}
}

func (se *session) shows(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(se.text(&se.out), want) }, 10*time.Second, 10*time.Millisecond,
		"the session shows %q", want)
}

// A sweep closes a session idle for IdleTimeout by the driven clock, with
// a message, and its program's context ends; input keeps a session open.
func TestSweepClosesIdle(t *testing.T) {
	t.Parallel()
	idle, idleLine := testKey(t)
	busy, busyLine := testKey(t)
	b := setupServer(t, idleLine+" idle", "role=operator "+busyLine+" busy")
	si, err := b.open(t, idle)
	require.NoError(t, err)
	si.shows(t, "hello idle viewer")
	ctx := <-b.contexts
	sb, err := b.open(t, busy)
	require.NoError(t, err)
	sb.shows(t, "hello busy operator")

	b.advance(59 * time.Second)
	require.Equal(t, SweepResult{}, b.srv.RunOnce(context.Background()))
	_, err = sb.stdin.Write([]byte("x"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return b.srv.sessionInput(busy.PublicKey()).Equal(time.Unix(0, b.now.Load()))
	}, 5*time.Second, 10*time.Millisecond, "the input is noted")
	b.advance(time.Second)
	require.Equal(t, SweepResult{Idle: 1}, b.srv.RunOnce(context.Background()))
	code, msg := si.ended(t)
	require.Equal(t, 1, code)
	require.Contains(t, msg, "tasktop serve: closed after 1m0s without input")
	<-ctx.Done()

	_, err = sb.stdin.Write([]byte("q"))
	require.NoError(t, err)
	code, msg = sb.ended(t)
	require.Zero(t, code, "q quits: exit 0, nothing said")
	require.Empty(t, msg)
}

// A changed file is read again at the next sweep: a removed key's session
// is closed and the key refused; a file that cannot be read refuses every
// key until it can.
func TestSweepReloadsKeys(t *testing.T) {
	t.Parallel()
	a, aLine := testKey(t)
	c, cLine := testKey(t)
	b := setupServer(t, aLine+" alice")
	_, err := b.open(t, c)
	require.ErrorContains(t, err, "unable to authenticate")
	sa, err := b.open(t, a)
	require.NoError(t, err)
	sa.shows(t, "hello alice viewer")

	require.Equal(t, SweepResult{}, b.srv.RunOnce(context.Background()), "unchanged: not read")
	b.writeKeys(t, cLine+" carol")
	b.requireRevoked(t, SweepResult{Reloaded: true, Revoked: 1}, sa, a, "your key was removed from the authorized keys")
	sc, err := b.open(t, c)
	require.NoError(t, err)
	sc.shows(t, "hello carol viewer")

	// A role change closes the session too: it reconnects with the new one.
	b.writeKeys(t, "role=operator "+cLine+" carol")
	require.Equal(t, SweepResult{Reloaded: true, Revoked: 1}, b.srv.RunOnce(context.Background()))
	sc.ended(t)

	require.NoError(t, os.Remove(b.keysFile))
	require.Equal(t, SweepResult{Reloaded: true}, b.srv.RunOnce(context.Background()))
	require.Equal(t, SweepResult{}, b.srv.RunOnce(context.Background()), "still missing: nothing new")
	_, err = b.open(t, c)
	require.ErrorContains(t, err, "unable to authenticate", "no file, no key")
	b.writeKeys(t, "role=operator "+cLine+" carol")
	require.NoError(t, os.Chmod(b.keysFile, 0o666))
	require.Equal(t, SweepResult{}, b.srv.RunOnce(context.Background()), "a file others may write is not trusted")
	_, err = b.open(t, c)
	require.ErrorContains(t, err, "unable to authenticate")
	require.NoError(t, os.Chmod(b.keysFile, 0o644))
	require.Equal(t, SweepResult{Reloaded: true}, b.srv.RunOnce(context.Background()))
	sc, err = b.open(t, c)
	require.NoError(t, err)
	sc.shows(t, "hello carol operator")
}

// Stop tells every session why it ends and returns once they did; a
// second Stop does nothing.
func TestStopClosesSessions(t *testing.T) {
	t.Parallel()
	a, aLine := testKey(t)
	b := setupServer(t, aLine+" alice")
	var open []*session
	for range 3 {
		s, err := b.open(t, a)
		require.NoError(t, err)
		s.shows(t, "hello alice")
		open = append(open, s)
	}
	b.srv.Stop()
	for _, s := range open {
		code, msg := s.ended(t)
		require.Equal(t, 1, code)
		require.Contains(t, msg, "tasktop serve is stopping")
	}
	b.srv.Stop()
	_, err := b.open(t, a)
	require.Error(t, err, "no longer listening")
}

// sessionInput is when the session of key k last had input.
func (s *Server) sessionInput(k gossh.PublicKey) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.sessions {
		if se.Fingerprint == gossh.FingerprintSHA256(k) {
			return se.lastInput()
		}
	}
	return time.Time{}
}

// A keys file without a key is served, every login refused, and the log
// says so, at the start and when a change empties it.
func TestNoKeyIsSaid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte("# nobody yet\n"), 0o644))
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f := &keyFile{path: path}
	_, err := f.reload(log, true)
	require.NoError(t, err)
	require.Contains(t, logs.String(), "authorized keys: no key, so every login is refused")

	_, line := testKey(t)
	require.NoError(t, os.WriteFile(path, []byte(line+" alice\n"), 0o644))
	logs.Reset()
	_, err = f.reload(log, false)
	require.NoError(t, err)
	require.NotContains(t, logs.String(), "no key")
}

// A key past its expiry-time logs in no more, as sshd refuses it, and its
// session closes at the sweep after it expired; a key whose line narrows
// it in a way this server cannot keep (command=, verify-required) is left
// out, not let in further than sshd would.
func TestExpiredKeyRefused(t *testing.T) {
	t.Parallel()
	old, oldLine := testKey(t)
	soon, soonLine := testKey(t)
	cmd, cmdLine := testKey(t)
	b := setupServer(t, // the server's clock: 2023-11-14 22:13:20 UTC
		`expiry-time="20231114Z" `+oldLine+" old",
		`expiry-time="202311142214Z" `+soonLine+" soon",
		`command="/usr/local/bin/backup" `+cmdLine+" backup")
	_, err := b.open(t, old)
	require.ErrorContains(t, err, "unable to authenticate")
	_, err = b.open(t, cmd)
	require.ErrorContains(t, err, "unable to authenticate")
	s, err := b.open(t, soon)
	require.NoError(t, err)
	s.shows(t, "hello soon viewer")

	b.advance(30 * time.Second)
	require.Equal(t, SweepResult{}, b.srv.RunOnce(context.Background()))
	b.advance(10 * time.Second)
	b.requireRevoked(t, SweepResult{Revoked: 1}, s, soon, "it expired")
}

// requireRevoked sweeps, requires the sweep to be want and se, the
// session of key, closed with why; key logs in no more.
func (b *serverBundle) requireRevoked(t *testing.T, want SweepResult, se *session, key gossh.Signer, why string) {
	t.Helper()
	require.Equal(t, want, b.srv.RunOnce(context.Background()))
	code, msg := se.ended(t)
	require.Equal(t, 1, code)
	require.Contains(t, msg, why)
	_, err := b.open(t, key)
	require.ErrorContains(t, err, "unable to authenticate")
}

// hungRedis records nothing: it answers when the caller gives up.
type hungRedis struct{}

func (hungRedis) RecordEvent(ctx context.Context, _ *broker.Event) error {
	<-ctx.Done()
	return ctx.Err()
}

// A login is recorded in Redis before the program starts; a Redis that
// hangs holds it back recordWait at most, not for as long as it hangs.
func TestLoginWithRedisHung(t *testing.T) {
	t.Parallel()
	k, line := testKey(t)
	b := setupServerWith(t, hungRedis{}, line+" alice")
	s, err := b.open(t, k)
	require.NoError(t, err)
	s.shows(t, "hello alice viewer")
}
