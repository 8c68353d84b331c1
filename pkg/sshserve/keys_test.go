package sshserve

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"

	"github.com/taskd/taskd/pkg/task"
)

func testKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s, err := gossh.NewSignerFromKey(priv)
	require.NoError(t, err)
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey())))
}

// Roles come from the configuration (by fingerprint or comment), else the
// line's role= option, else viewer; lines the server cannot use are left
// out, each reported with its number, and the others still count.
func TestParseKeys(t *testing.T) {
	t.Parallel()
	a, aLine := testKey(t)
	b, bLine := testKey(t)
	c, cLine := testKey(t)
	d, dLine := testKey(t)
	_, eLine := testKey(t)
	fp := func(s gossh.Signer) string { return gossh.FingerprintSHA256(s.PublicKey()) }
	file := strings.Join([]string{
		"# comment",
		"",
		aLine + " alice@laptop",
		`role="operator",no-pty ` + bLine + " bob@laptop",
		`role=operator ` + cLine + " carol@desk",
		`from="10.0.0.0/8,!10.0.0.66",restrict ` + dLine + " dave",
		`role=admin ` + eLine + " eve",
		`tunnel="1",permitopen="x:1",frm="10.0.0.1" ` + eLine + " eve",
		`cert-authority ` + eLine,
		"ssh-ed25519 AAAAnotbase64",
		aLine + " alice again",
	}, "\n")
	set, problems := parseKeys([]byte(file), RoleMap{Viewer: {fp(c)}, Operator: {"dave", fp(c)}})
	require.Equal(t, 4, set.len())
	role := func(s gossh.Signer) Role { return set.find(s.PublicKey()).Role }
	require.Equal(t, Viewer, role(a), "no option, not in the configuration")
	require.Equal(t, Operator, role(b), "by its option")
	require.Equal(t, Operator, role(c), "operator wins when the configuration names a key twice")
	require.Equal(t, Operator, role(d), "by its comment in the configuration")
	require.Equal(t, "alice@laptop", set.find(a.PublicKey()).Comment)
	require.Len(t, problems, 5)
	for i, want := range []string{`line 7: unknown role "admin"`, `line 8: unknown option "frm"`, "line 9: cert-authority",
		"line 10: not an OpenSSH public key", "line 11: the key of line 3 again"} {
		require.Contains(t, problems[i], want)
	}

	k := set.find(d.PublicKey())
	for addr, ok := range map[string]bool{"10.1.2.3:5000": true, "10.0.0.66:5000": false, "192.168.1.1:22": false} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		require.Equal(t, ok, k.allows(tcp), addr)
	}
	require.True(t, set.find(a.PublicKey()).allows(&net.TCPAddr{IP: net.ParseIP("192.168.1.1")}), "no from=: any address")
	wild := &Key{From: []string{"192.168.1.*", "::1"}}
	require.True(t, wild.allows(&net.TCPAddr{IP: net.ParseIP("192.168.1.7"), Port: 1}))
	require.True(t, wild.allows(&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}))
	require.False(t, wild.allows(&net.TCPAddr{IP: net.ParseIP("192.168.2.7"), Port: 1}))
}

// The host key is generated once with mode 0600 and read back the same;
// one that others may read is refused, like sshd does.
func TestHostKey(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "new", "dir", "host_ed25519")
	s1, generated, err := loadHostKey(file)
	require.NoError(t, err)
	require.True(t, generated)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	s2, generated, err := loadHostKey(file)
	require.NoError(t, err)
	require.False(t, generated)
	require.Equal(t, s1.PublicKey().Marshal(), s2.PublicKey().Marshal())

	require.NoError(t, os.Chmod(file, 0o644))
	_, _, err = loadHostKey(file)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
	require.ErrorContains(t, err, "may be read by others (mode 0644): chmod 600")

	bad := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.WriteFile(bad, []byte("not a key"), 0o600))
	_, _, err = loadHostKey(bad)
	require.ErrorContains(t, err, "host key "+bad)
}

// Options that narrow a key where this server cannot follow leave its line
// out, each said with its number; an expiry-time is read as sshd reads it.
func TestParseKeysNarrowingOptions(t *testing.T) {
	t.Parallel()
	_, aLine := testKey(t)
	b, bLine := testKey(t)
	set, problems := parseKeys([]byte(strings.Join([]string{
		`command="backup" ` + aLine,
		`verify-required ` + aLine,
		`expiry-time="tomorrow" ` + aLine,
		`expiry-time="202501020304" ` + bLine,
	}, "\n")), nil)
	require.Equal(t, 1, set.len())
	require.Equal(t, []string{
		"line 1: option command: the key may run that command only, and this server runs tasktop: list the key without it",
		"line 2: option verify-required: this server cannot ask a FIDO key to verify its user: list the key without it",
		`line 3: expiry-time "tomorrow": want YYYYMMDD[HHMM[SS]][Z]`,
	}, problems)
	require.Equal(t, time.Date(2025, 1, 2, 3, 4, 0, 0, time.Local), set.find(b.PublicKey()).Expires, "the host's zone")
}
