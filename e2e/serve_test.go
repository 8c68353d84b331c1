package e2e

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/taskd/taskd/pkg/testenv"
)

// sshKey is a client's key: its signer and its line in the authorized
// keys file.
type sshKey struct {
	priv    ed25519.PrivateKey
	signer  gossh.Signer
	line    string
	fp      string
	comment string
}

// newKey makes an Ed25519 key; options (role=operator, from="...") start
// its line.
func newKey(t *testing.T, options, comment string) sshKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := gossh.NewSignerFromKey(priv)
	require.NoError(t, err)
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + comment
	if options != "" {
		line = options + " " + line
	}
	return sshKey{priv: priv, signer: signer, line: line, fp: gossh.FingerprintSHA256(signer.PublicKey()), comment: comment}
}

// serveBundle is a running `tasktop serve` with its task center.
type serveBundle struct {
	*testBundle
	addr     string
	keysFile string
	hostKey  string // the host key's fingerprint, as logged
	serve    *daemon
}

// setupServe starts `tasktop serve` on a free port with keys in its
// authorized keys file; serveYAML is added to tasktop.serve.
func setupServe(t *testing.T, serveYAML string, keys ...sshKey) *serveBundle {
	t.Helper()
	bin := buildTasktop(t)
	port := testenv.FreePort(t)
	var extra strings.Builder
	fmt.Fprintf(&extra, "tasktop:\n  refresh: 500ms\n  serve:\n    listen: \"127.0.0.1:%d\"\n"+
		"    host_key: %%DIR%%/ssh/host_ed25519\n    authorized_keys: %%DIR%%/tasktop_keys\n", port)
	for _, l := range strings.Split(strings.TrimSpace(serveYAML), "\n") {
		if l != "" {
			extra.WriteString("    " + l + "\n")
		}
	}
	b := setup(t, extra.String())
	sb := &serveBundle{testBundle: b, addr: "127.0.0.1:" + strconv.Itoa(port), keysFile: filepath.Join(b.dir, "tasktop_keys")}
	sb.writeKeys(t, keys...)
	sb.serve = b.startBinary(t, "serve", bin, "serve")
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(sb.serve.log)
		return strings.Contains(string(out), "tasktop serve listening")
	}, 20*time.Second, 50*time.Millisecond, "tasktop serve listens")
	for _, line := range sb.logLines(t) {
		if line["msg"] == "tasktop serve host key" {
			sb.hostKey, _ = line["fingerprint"].(string)
		}
	}
	require.NotEmpty(t, sb.hostKey, "the host key's fingerprint is logged")
	return sb
}

// writeKeys replaces the authorized keys file, atomically as deploy tools
// do.
func (sb *serveBundle) writeKeys(t *testing.T, keys ...sshKey) {
	t.Helper()
	var lines []string
	for _, k := range keys {
		lines = append(lines, k.line)
	}
	tmp := sb.keysFile + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte("# tasktop serve keys\n"+strings.Join(lines, "\n")+"\n"), 0o644))
	require.NoError(t, os.Rename(tmp, sb.keysFile))
}

// logLines are the JSON lines the server logged so far.
func (sb *serveBundle) logLines(t *testing.T) []map[string]any {
	t.Helper()
	f, err := os.Open(sb.serve.log)
	require.NoError(t, err)
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// dial logs in with auth, checking the host key against the logged
// fingerprint.
func (sb *serveBundle) dial(auth ...gossh.AuthMethod) (*gossh.Client, error) {
	return gossh.Dial("tcp", sb.addr, &gossh.ClientConfig{
		User: "ops", Auth: auth, Timeout: 10 * time.Second,
		HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
			if fp := gossh.FingerprintSHA256(key); fp != sb.hostKey {
				return fmt.Errorf("host key %s, the server logged %s", fp, sb.hostKey)
			}
			return nil
		},
	})
}

func (sb *serveBundle) login(t *testing.T, k sshKey) *gossh.Client {
	t.Helper()
	c, err := sb.dial(gossh.PublicKeys(k.signer))
	require.NoError(t, err, "login with %s", k.comment)
	t.Cleanup(func() { c.Close() })
	return c
}

// sshTerm is a terminal on an SSH session: what the server writes goes
// through a terminal emulator, whose screen the test reads.
type sshTerm struct {
	t      *testing.T
	sess   *gossh.Session
	stdin  io.WriteCloser
	mu     sync.Mutex
	emu    *vt.Emulator
	stderr bytes.Buffer
	done   chan struct{}
	exit   error // set when done is closed
}

func openTerm(t *testing.T, c *gossh.Client, w, h int) *sshTerm {
	t.Helper()
	sess, err := c.NewSession()
	require.NoError(t, err)
	st := &sshTerm{t: t, sess: sess, emu: vt.NewEmulator(w, h), done: make(chan struct{})}
	st.stdin, err = sess.StdinPipe()
	require.NoError(t, err)
	stdout, err := sess.StdoutPipe()
	require.NoError(t, err)
	sess.Stderr = lockedWriter{&st.mu, &st.stderr}
	require.NoError(t, sess.RequestPty("xterm-256color", h, w, gossh.TerminalModes{}))
	require.NoError(t, sess.Shell())
	go func() {
		buf := make([]byte, 32*1024)
		for {
			n, err := stdout.Read(buf)
			st.mu.Lock()
			_, _ = st.emu.Write(buf[:n])
			st.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { _, _ = io.Copy(st.stdin, st.emu) }() // the terminal's answers to queries
	go func() {
		st.exit = sess.Wait()
		close(st.done)
	}()
	t.Cleanup(func() {
		sess.Close()
		// Ends the copy of answers (Emulator.Close races with its Read).
		if c, ok := st.emu.InputPipe().(io.Closer); ok {
			c.Close()
		}
	})
	return st
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (st *sshTerm) screen() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.emu.String()
}

func (st *sshTerm) errText() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stderr.String()
}

// waitFor polls the screen until it shows every one of want.
func (st *sshTerm) waitFor(want ...string) string {
	st.t.Helper()
	var last string
	// Polls a real process over SSH.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = st.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(last, w)
		}
		if ok {
			return last
		}
	}
	st.t.Fatalf("the screen does not show %q:\n%s", want, last)
	return ""
}

// keys types each key one frame apart.
func (st *sshTerm) keys(keys ...string) {
	st.t.Helper()
	for _, k := range keys {
		_, err := st.stdin.Write([]byte(k))
		require.NoError(st.t, err)
		time.Sleep(50 * time.Millisecond) // a person's typing over SSH: the real program reads keys one by one
	}
}

// closed waits for the server to end the session and returns its exit
// status.
func (st *sshTerm) closed(within time.Duration) int {
	st.t.Helper()
	select {
	case <-st.done:
	case <-time.After(within):
		st.t.Fatalf("the session is still open after %s:\n%s", within, st.screen())
	}
	var ee *gossh.ExitError
	if errors.As(st.exit, &ee) {
		return ee.ExitStatus()
	}
	require.NoError(st.t, st.exit)
	return 0
}

// A viewer sees the queues and its actions are refused; an operator
// retries a dead task, audited with its key's fingerprint and comment and
// its address; roles come from the key's option or the configuration,
// which wins; sessions start and end in the log and the events; the host
// key was generated with mode 0600; SIGTERM closes the sessions with a
// message and exits 0.
func TestServeRoles(t *testing.T) {
	t.Parallel()
	viewer := newKey(t, "", "vera@laptop")
	operator := newKey(t, "role=operator", "otto@laptop")
	byConfig := newKey(t, "", "carol@desk")
	demoted := newKey(t, `role="operator"`, "dave@tablet")
	sb := setupServe(t, fmt.Sprintf("roles:\n  operator: [carol@desk]\n  viewer: [%q]", demoted.fp),
		viewer, operator, byConfig, demoted)
	fi, err := os.Stat(filepath.Join(sb.dir, "ssh/host_ed25519"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the generated host key is private")

	id := strings.TrimPrefix(strings.TrimSpace(sb.taskd(t, "submit", "mail", "--payload", `{}`, "--max-retry", "0")), "submitted task ")
	_, err = sb.env.Store.DB().Exec(`UPDATE task_center SET status = 5, last_result = 'boom' WHERE id = ?`, id)
	require.NoError(t, err)

	// The viewer sees the queue and the task; pause and retry are refused.
	vt := openTerm(t, sb.login(t, viewer), 100, 30)
	vt.waitFor("READ-ONLY", "mail")
	vt.keys("p")
	vt.waitFor("read-only: actions are disabled")
	vt.keys("3")
	vt.waitFor("[3 Tasks]", " "+id+" dead ") // its row: the Queues view says "1 dead" too
	vt.keys("r")
	require.Equal(t, 0, sb.env.Count(t, `SELECT COUNT(*) FROM task_audit`), "the viewer changed nothing")
	require.Equal(t, 1, sb.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 5`, id))

	// The operator retries it.
	ot := openTerm(t, sb.login(t, operator), 100, 30)
	ot.waitFor("mail")
	require.NotContains(t, ot.screen(), "READ-ONLY")
	ot.keys("3")
	ot.waitFor("[3 Tasks]", " "+id+" dead ") // its row: the Queues view says "1 dead" too
	ot.keys("r")
	ot.waitFor("Retry task " + id + "?")
	ot.keys("y")
	ot.waitFor("retry: 1 of 1 task retried (" + id + ")")
	var actor, origin, fp string
	require.NoError(t, sb.env.Store.DB().QueryRow(`SELECT actor, origin, key_fingerprint FROM task_audit WHERE action = 'retry'`).
		Scan(&actor, &origin, &fp))
	require.Equal(t, operator.fp, fp)
	require.Equal(t, "otto@laptop", actor)
	require.Regexp(t, `^ssh 127\.0\.0\.1:\d+$`, origin)
	require.Equal(t, 1, sb.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, id))

	// The configuration's roles win over the keys' options.
	ct := openTerm(t, sb.login(t, byConfig), 100, 30)
	ct.waitFor("mail")
	require.NotContains(t, ct.screen(), "READ-ONLY", "carol is an operator by the configuration")
	dt := openTerm(t, sb.login(t, demoted), 100, 30)
	dt.waitFor("READ-ONLY", "mail")

	// Sessions are in the Events view and the log.
	ot.keys("4")
	ot.waitFor("ssh-login", "otto@laptop (operator")
	vt.keys("q")
	vt.waitFor("Quit tasktop?")
	vt.keys("y")
	require.Equal(t, 0, vt.closed(10*time.Second), "quitting ends the session")
	require.Eventually(t, func() bool {
		es, err := sb.env.Broker.Events(sb.ctx, 100)
		require.NoError(t, err)
		for _, e := range es {
			if e.Kind == "ssh-logout" && strings.Contains(e.Detail, "vera@laptop (viewer, "+viewer.fp+") from 127.0.0.1:") &&
				strings.HasSuffix(e.Detail, ": quit") {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the session's end is an event")
	var started int
	for _, l := range sb.logLines(t) {
		if l["msg"] == "ssh session started" {
			started++
		}
	}
	require.Equal(t, 4, started)

	// SIGTERM: every session is told, and the server exits 0.
	code, _ := sb.serve.stop(t, 15*time.Second)
	require.Zero(t, code)
	for _, term := range []*sshTerm{ot, ct, dt} {
		require.Equal(t, 1, term.closed(5*time.Second), "stderr: %q", term.errText())
		require.Contains(t, term.errText(), "tasktop serve: tasktop serve is stopping: reconnect in a moment")
	}
}

// An unknown key, a password and keyboard-interactive are refused; so are
// a command, a session without a terminal, SFTP, port forwarding and
// agent forwarding, each with a message.
func TestServeRefusals(t *testing.T) {
	t.Parallel()
	known := newKey(t, "", "vera@laptop")
	sb := setupServe(t, "", known)

	_, err := sb.dial(gossh.PublicKeys(newKey(t, "", "mallory").signer))
	require.ErrorContains(t, err, "unable to authenticate", "an unknown key")
	_, err = sb.dial(gossh.Password("secret"))
	require.ErrorContains(t, err, "unable to authenticate", "a password")
	_, err = sb.dial(gossh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) {
		return []string{"secret"}, nil
	}))
	require.ErrorContains(t, err, "unable to authenticate", "keyboard-interactive")

	c := sb.login(t, known)
	run := func(setup func(*gossh.Session) error) (int, string) {
		t.Helper()
		s, err := c.NewSession()
		require.NoError(t, err)
		defer s.Close()
		var stderr bytes.Buffer
		s.Stderr = &stderr
		err = setup(s)
		var ee *gossh.ExitError
		require.ErrorAs(t, err, &ee)
		return ee.ExitStatus(), stderr.String()
	}
	code, msg := run(func(s *gossh.Session) error { return s.Run("ls /") })
	require.Equal(t, 2, code)
	require.Contains(t, msg, `commands are refused ("ls /")`)
	code, msg = run(func(s *gossh.Session) error { return s.Run("") }) // a shell without a pty
	require.Equal(t, 2, code)
	require.Contains(t, msg, "tasktop needs a terminal")
	s, err := c.NewSession()
	require.NoError(t, err)
	stderr, err := s.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.RequestSubsystem("sftp"))
	out, err := io.ReadAll(stderr)
	require.NoError(t, err)
	require.Contains(t, string(out), "the sftp subsystem is refused")
	s.Close()

	_, err = c.Dial("tcp", sb.addr)
	require.ErrorContains(t, err, "administratively prohibited")
	require.ErrorContains(t, err, "tasktop serve refuses port forwarding")
	_, err = c.Listen("tcp", "127.0.0.1:0")
	require.Error(t, err, "remote port forwarding")

	s, err = c.NewSession()
	require.NoError(t, err)
	require.Error(t, agent.RequestAgentForwarding(s), "agent forwarding")
	s.Close()
	// The next session is told what the connection was refused.
	term := openTerm(t, c, 80, 24)
	term.waitFor("[1 Queues]")
	require.Contains(t, term.errText(), "refused: agent forwarding, port forwarding, remote port forwarding")
}

// The idle timeout closes a session without input, with a message; the
// limits refuse one session too many, in all and per key; a key removed
// from the file cannot log in again and its open session is closed.
func TestServeLimitsAndReload(t *testing.T) {
	t.Parallel()
	alice, bob, carol := newKey(t, "", "alice"), newKey(t, "", "bob"), newKey(t, "", "carol")
	sb := setupServe(t, "idle_timeout: 2s\nmax_sessions: 2\nmax_sessions_per_key: 1", alice, bob, carol)

	a := openTerm(t, sb.login(t, alice), 80, 24)
	a.waitFor("[1 Queues]")
	code, msg := refusedSession(t, sb.login(t, alice))
	require.Equal(t, 1, code)
	require.Contains(t, msg, "your key has 1 sessions open, the most one key may have")
	b := openTerm(t, sb.login(t, bob), 80, 24)
	b.waitFor("[1 Queues]")
	code, msg = refusedSession(t, sb.login(t, carol))
	require.Equal(t, 1, code)
	require.Contains(t, msg, "2 sessions are open, the most this server allows")

	// bob types, alice does not: alice's session closes.
	go func() {
		for {
			select {
			case <-b.done:
				return
			case <-time.After(200 * time.Millisecond):
				_, _ = b.stdin.Write([]byte("2"))
			}
		}
	}()
	require.Equal(t, 1, a.closed(10*time.Second))
	require.Contains(t, a.errText(), "closed after 2s without input")
	select {
	case <-b.done:
		t.Fatal("bob's session, typed in, was closed")
	default:
	}

	// bob's key leaves the file: his session closes, he cannot log in.
	sb.writeKeys(t, alice, carol)
	require.Equal(t, 1, b.closed(10*time.Second))
	require.Contains(t, b.errText(), "your key was removed from the authorized keys")
	_, err := sb.dial(gossh.PublicKeys(bob.signer))
	require.ErrorContains(t, err, "unable to authenticate")
	openTerm(t, sb.login(t, carol), 80, 24).waitFor("[1 Queues]")
	var reloaded bool
	for _, l := range sb.logLines(t) {
		reloaded = reloaded || l["msg"] == "authorized keys reloaded"
	}
	require.True(t, reloaded)
}

// refusedSession opens a terminal session the server refuses, and
// returns its exit status and message.
func refusedSession(t *testing.T, c *gossh.Client) (int, string) {
	t.Helper()
	term := openTerm(t, c, 80, 24)
	return term.closed(10 * time.Second), term.errText()
}

// TestServeOpenSSH drives tasktop serve with OpenSSH's ssh in a real
// terminal (tmux): the host key checked against known_hosts, the queues
// at 120 columns, a resize to 70 that drops columns and back, a retry of
// a dead task, q to leave; then the task center holds the retry, audited
// with the key's fingerprint.
func TestServeOpenSSH(t *testing.T) {
	t.Parallel()
	needTool(t, "tmux")
	needTool(t, "ssh")
	op := newKey(t, "role=operator", "otto@laptop")
	sb := setupServe(t, "", op)
	id := strings.TrimPrefix(strings.TrimSpace(sb.taskd(t, "submit", "mail", "--payload", `{}`, "--max-retry", "0")), "submitted task ")
	_, err := sb.env.Store.DB().Exec(`UPDATE task_center SET status = 5 WHERE id = ?`, id)
	require.NoError(t, err)

	// The client's private key, and the host key in known_hosts.
	block, err := gossh.MarshalPrivateKey(op.priv, "")
	require.NoError(t, err)
	keyFile := filepath.Join(sb.dir, "id_ed25519")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600))
	hostPEM, err := os.ReadFile(filepath.Join(sb.dir, "ssh/host_ed25519"))
	require.NoError(t, err)
	host, err := gossh.ParsePrivateKey(hostPEM)
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(sb.addr)
	knownHosts := filepath.Join(sb.dir, "known_hosts")
	require.NoError(t, os.WriteFile(knownHosts, []byte("[127.0.0.1]:"+port+" "+string(gossh.MarshalAuthorizedKey(host.PublicKey()))), 0o644))

	s := newScreen(t, "ssh", "-F", "/dev/null", "-p", port, "-i", keyFile, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile="+knownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "ops@127.0.0.1")
	s.waitFor("[1 Queues]", "mail", "OLDEST")

	s.tmux("resize-window", "-t", "t", "-x", "70", "-y", "20")
	scr := s.waitFor("[1 Queues]", "STATE")
	require.NotContains(t, scr, "30 MIN", "a narrow terminal drops columns")
	for _, line := range strings.Split(scr, "\n") {
		require.LessOrEqual(t, len([]rune(line)), 70, "tasktop follows the new width: %q", line)
	}
	s.tmux("resize-window", "-t", "t", "-x", "120", "-y", "40")
	s.waitFor("30 MIN")

	s.keys("3")
	s.waitFor("[3 Tasks]", " "+id+" dead ") // its row: the Queues view says "1 dead" too
	s.keys("r")
	s.waitFor("Retry task " + id + "?")
	s.keys("y")
	s.waitFor("retry: 1 of 1 task retried (" + id + ")")
	s.keys("q")
	s.waitFor("Quit tasktop?")
	s.keys("y")
	var status []byte
	require.Eventually(t, func() bool {
		status, _ = os.ReadFile(s.exitFile)
		return len(status) > 0
	}, 10*time.Second, 50*time.Millisecond, "ssh exits once tasktop quits:\n%s", s.capture())
	require.Equal(t, "0", strings.TrimSpace(string(status)))

	require.Equal(t, 1, sb.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND retry_count = 0`, id))
	require.Equal(t, 1, sb.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'retry' AND affected = 1
		AND actor = 'otto@laptop' AND key_fingerprint = ? AND origin LIKE 'ssh 127.0.0.1:%'`, op.fp))
}
