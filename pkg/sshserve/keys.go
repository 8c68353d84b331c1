package sshserve

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// Role is what a key may do.
type Role string

const (
	// Viewer watches: every action is refused.
	Viewer Role = "viewer"
	// Operator may act (retry, kill, pause, ...).
	Operator Role = "operator"
)

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case Viewer, Operator:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (viewer or operator)", s)
}

// Key is one line of the authorized keys file.
type Key struct {
	Fingerprint string // SHA256, as ssh-keygen -l prints it
	Comment     string
	Role        Role
	// From are the line's from="..." patterns: client addresses (IPs,
	// CIDRs or * ? wildcards; ! negates) the key may log in from (none:
	// any).
	From []string
	// Expires is the line's expiry-time="..." (zero: never): the key
	// logs in no more from then on, and its sessions are closed.
	Expires time.Time
	Line    int

	key gossh.PublicKey
}

// allows reports whether the key may log in from addr.
func (k *Key) allows(addr net.Addr) bool {
	if len(k.From) == 0 {
		return true
	}
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	ok := false
	for _, p := range k.From {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		match := false
		if _, cidr, err := net.ParseCIDR(p); err == nil {
			match = ip != nil && cidr.Contains(ip)
		} else if m, err := path.Match(p, host); err == nil {
			match = m
		}
		if match && neg {
			return false // a negated match refuses, whatever else matches
		}
		ok = ok || match
	}
	return ok
}

// RoleMap is the configuration's roles: key fingerprints or comments by
// role. It wins over a key's role= option.
type RoleMap map[Role][]string

// keySet is one reading of the authorized keys file.
type keySet struct {
	byFingerprint map[string]*Key
}

func (s *keySet) find(k gossh.PublicKey) *Key {
	if s == nil {
		return nil
	}
	return s.byFingerprint[gossh.FingerprintSHA256(k)]
}

// len is the number of keys.
func (s *keySet) len() int { return len(s.byFingerprint) }

// openSSHOptions are authorized_keys options of OpenSSH that mean nothing
// here (the server runs tasktop only, forwards nothing): accepted, so a
// line copied from an sshd file works.
var openSSHOptions = map[string]bool{
	"restrict": true, "no-agent-forwarding": true, "no-port-forwarding": true, "no-pty": true,
	"no-user-rc": true, "no-x11-forwarding": true, "no-touch-required": true,
	"agent-forwarding": true, "port-forwarding": true, "pty": true, "user-rc": true, "x11-forwarding": true,
	"environment": true, "permitopen": true, "permitlisten": true, "principals": true, "tunnel": true,
}

// unhonoured are OpenSSH options that narrow what a key may do in a way
// this server cannot keep: a line with one is left out rather than let
// its key in further than sshd would.
var unhonoured = map[string]string{
	"command":         "the key may run that command only, and this server runs tasktop",
	"verify-required": "this server cannot ask a FIDO key to verify its user",
}

// expiryLayouts are the forms of expiry-time: YYYYMMDD[HHMM[SS]], in the
// host's zone, or UTC with a trailing Z.
var expiryLayouts = []string{"20060102150405", "200601021504", "20060102"}

func parseExpiry(v string) (time.Time, error) {
	loc := time.Local
	if s, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = s, time.UTC
	}
	for _, l := range expiryLayouts {
		if len(v) == len(l) {
			if t, err := time.ParseInLocation(l, v, loc); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("expiry-time %q: want YYYYMMDD[HHMM[SS]][Z]", v)
}

// expired reports whether the key's expiry-time has come at now.
func (k *Key) expired(now time.Time) bool { return !k.Expires.IsZero() && !now.Before(k.Expires) }

// parseKeys reads an authorized keys file: one OpenSSH public key a line
// with its options and comment, # comments and blank lines ignored. A line
// it cannot use is left out and reported in problems; roles come from
// roles, else the line's role= option, else Viewer.
func parseKeys(data []byte, roles RoleMap) (set *keySet, problems []string) {
	byName := map[string]Role{}
	for _, r := range []Role{Viewer, Operator} { // operator wins when both name it
		for _, name := range roles[r] {
			byName[name] = r
		}
	}
	set = &keySet{byFingerprint: map[string]*Key{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			problems = append(problems, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		k.Line = n
		if r, ok := byName[k.Fingerprint]; ok {
			k.Role = r
		} else if r, ok := byName[k.Comment]; ok && k.Comment != "" {
			k.Role = r
		}
		if prev, dup := set.byFingerprint[k.Fingerprint]; dup {
			problems = append(problems, fmt.Sprintf("line %d: the key of line %d again: the first one counts", n, prev.Line))
			continue
		}
		set.byFingerprint[k.Fingerprint] = k
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	return set, problems
}

func parseKeyLine(line []byte) (*Key, error) {
	pub, comment, options, rest, err := gossh.ParseAuthorizedKey(line)
	if err != nil {
		return nil, fmt.Errorf("not an OpenSSH public key: %w", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("one key a line")
	}
	if _, isCert := pub.(*gossh.Certificate); isCert {
		return nil, fmt.Errorf("a certificate: list the public key itself")
	}
	k := &Key{Fingerprint: gossh.FingerprintSHA256(pub), Comment: strings.TrimSpace(comment), Role: Viewer, key: pub}
	for _, opt := range options {
		name, val, hasVal := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		val = strings.Trim(val, `"`)
		switch {
		case name == "role" && hasVal:
			if k.Role, err = ParseRole(val); err != nil {
				return nil, err
			}
		case name == "from" && hasVal:
			for _, p := range strings.Split(val, ",") {
				if p = strings.TrimSpace(p); p != "" {
					k.From = append(k.From, p)
				}
			}
		case name == "cert-authority":
			return nil, fmt.Errorf("cert-authority: certificates are not supported")
		case name == "expiry-time" && hasVal:
			if k.Expires, err = parseExpiry(val); err != nil {
				return nil, err
			}
		case unhonoured[name] != "":
			return nil, fmt.Errorf("option %s: %s: list the key without it", name, unhonoured[name])
		case openSSHOptions[name]:
		default:
			return nil, fmt.Errorf("unknown option %q (role=viewer|operator, from=\"addresses\")", name)
		}
	}
	return k, nil
}

// readKeys reads the authorized keys file.
func readKeys(file string, roles RoleMap) (*keySet, []string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("authorized keys: %w", err)
	}
	set, problems := parseKeys(data, roles)
	return set, problems, nil
}

// keyFile is the authorized keys file as last read.
type keyFile struct {
	path  string
	roles RoleMap

	mu    sync.Mutex
	stamp fileStamp
	set   *keySet
	err   error // of the last read: logged once, not at every sweep
}

// fileStamp tells a changed file: a new inode (a rename over it), size or
// modification time.
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func stampOf(fi os.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// reload reads the file if it changed since the last read (always when
// first) and reports whether it did. A file that cannot be read refuses
// every key, so removing it revokes them all and nothing stale is
// trusted; the error is returned once, when reading starts to fail.
func (f *keyFile) reload(log *slog.Logger, first bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set, st, problems, err := f.read()
	if err != nil {
		was := f.err
		f.set, f.stamp, f.err = &keySet{}, fileStamp{}, err
		if first || was == nil {
			return !first, err
		}
		return false, nil
	}
	if set == nil { // unchanged
		return false, nil
	}
	f.set, f.stamp, f.err = set, st, nil
	for _, p := range problems {
		log.Warn("authorized keys: line left out", "file", f.path, "problem", p)
	}
	if set.len() == 0 {
		// Safe, but a server nobody can log in to looks like a broken
		// client from the other end.
		log.Warn("authorized keys: no key, so every login is refused until one is added (the file is read again when it changes)", "file", f.path)
	} else if !first {
		log.Info("authorized keys reloaded", "file", f.path, "keys", set.len())
	}
	return true, nil
}

// read reads the file; set is nil when it did not change since the last
// good read.
func (f *keyFile) read() (set *keySet, st fileStamp, problems []string, err error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, st, nil, fmt.Errorf("authorized keys: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		// Anyone who may write it may let themselves in.
		return nil, st, nil, fmt.Errorf("authorized keys %s may be written by others (mode %04o): chmod 644 %s", f.path, perm, f.path)
	}
	st = stampOf(fi)
	if f.set != nil && f.err == nil && st == f.stamp {
		return nil, st, nil, nil
	}
	set, problems, err = readKeys(f.path, f.roles)
	return set, st, problems, err
}

func (f *keyFile) find(k gossh.PublicKey) *Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set.find(k)
}

func (f *keyFile) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set.len()
}
