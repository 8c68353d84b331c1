package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// packaged is what the deb and rpm packages install, and the repository
// file each one is a copy of.
var packaged = map[string]string{
	"/usr/bin/taskd":                                    "",
	"/usr/bin/tasktop":                                  "",
	"/etc/taskd/taskd.yaml":                             "config/taskd.yaml",
	"/usr/lib/systemd/system/taskd.service":             "scripts/systemd/taskd.service",
	"/usr/share/taskd/supervisor/taskd.conf":            "scripts/supervisor/taskd.conf",
	"/usr/share/taskd/supervisor/taskd-groups.conf":     "scripts/supervisor/taskd-groups.conf",
	"/usr/lib/systemd/system/tasktop-serve.service":     "scripts/systemd/tasktop-serve.service",
	"/usr/share/taskd/supervisor/tasktop-serve.conf":    "scripts/supervisor/tasktop-serve.conf",
	"/usr/share/taskd/prometheus/taskd-rules.yaml":      "deploy/prometheus/taskd-rules.yaml",
	"/usr/share/taskd/prometheus/taskd-rules.test.yaml": "deploy/prometheus/taskd-rules.test.yaml",
	"/usr/share/taskd/grafana/taskd-dashboard.json":     "deploy/grafana/taskd-dashboard.json",
	"/usr/share/doc/taskd/README.md":                    "README.md",
	"/usr/share/doc/taskd/quickstart.md":                "docs/quickstart.md",
	"/usr/share/doc/taskd/deploy.md":                    "docs/deploy.md",
}

// TestPackageContents checks a snapshot release build: the linux amd64 deb
// and rpm install the binaries, the configuration as a config file that an
// upgrade does not replace, the systemd unit, the Supervisor programs, the
// log directory and the docs; the packaged binary prints the stamped
// version; the archives hold both binaries; checksums.txt matches.
//
// The build takes minutes (eight cross-compiled binaries), so this runs
// only on a dist/ that scripts/package-check.sh has just built, which sets
// TASKD_TEST_DIST; elsewhere it is skipped.
func TestPackageContents(t *testing.T) {
	t.Parallel()
	dist := os.Getenv("TASKD_TEST_DIST")
	if dist == "" {
		t.Skip("needs a snapshot build: run scripts/package-check.sh")
	}
	one := func(pattern string) string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dist, pattern))
		require.NoError(t, err)
		require.Len(t, m, 1, "one %s in %s", pattern, dist)
		return m[0]
	}
	deb, rpm := one("taskd_*_amd64.deb"), one("taskd-*.x86_64.rpm")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return string(out)
	}

	// deb: the file list, the conffiles, and the files themselves.
	var debFiles []string
	for _, line := range strings.Split(run("dpkg-deb", "-c", deb), "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			debFiles = append(debFiles, strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/"))
		}
	}
	for dst := range packaged {
		require.Contains(t, debFiles, dst, "the deb installs %s", dst)
	}
	require.Contains(t, debFiles, "/var/log/taskd", "the deb creates the log directory")
	require.Contains(t, run("dpkg-deb", "-f", deb, "Package"), "taskd")
	ctrl := t.TempDir()
	run("dpkg-deb", "-e", deb, ctrl)
	conffiles, err := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	require.NoError(t, err)
	require.Equal(t, "/etc/taskd/taskd.yaml\n", string(conffiles), "dpkg keeps a changed configuration on upgrade")
	// The units and programs are installed, not enabled or started: no
	// maintainer script does it.
	for _, script := range []string{"preinst", "postinst"} {
		raw, err := os.ReadFile(filepath.Join(ctrl, script))
		require.True(t, os.IsNotExist(err) || !strings.Contains(string(raw), "systemctl"), "%s: %s", script, raw)
	}
	root := t.TempDir()
	run("dpkg-deb", "-x", deb, root)
	for dst, src := range packaged {
		if src == "" {
			continue
		}
		want, err := os.ReadFile(filepath.Join("..", src))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(root, dst))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is a copy of %s", dst, src)
	}
	// The binaries print what goreleaser says it stamped (its commit is
	// "none" in a clone without a remote).
	var meta struct{ Version, Commit, Date string }
	raw, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &meta))
	require.NotEmpty(t, meta.Version)
	require.NotEmpty(t, meta.Commit)
	date, err := time.Parse(time.RFC3339Nano, meta.Date)
	require.NoError(t, err)
	stamp := fmt.Sprintf(" %s (commit %s, built %s, go", meta.Version, meta.Commit, date.UTC().Format(time.RFC3339))
	for bin, out := range map[string]string{
		"taskd":   run(filepath.Join(root, "usr/bin/taskd"), "version"),
		"tasktop": run(filepath.Join(root, "usr/bin/tasktop"), "--version"),
	} {
		require.True(t, strings.HasPrefix(out, bin+stamp), "%s prints %q, want %q...", bin, out, bin+stamp)
	}

	// rpm: the file list and the config flags.
	if _, err := exec.LookPath("rpm"); err != nil {
		needTool(t, "rpm")
	}
	rpmFiles := strings.Split(strings.TrimSpace(run("rpm", "-qlp", rpm)), "\n")
	for dst := range packaged {
		require.Contains(t, rpmFiles, dst, "the rpm installs %s", dst)
	}
	require.Contains(t, rpmFiles, "/var/log/taskd")
	flags := run("rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm)
	require.Regexp(t, `(?m)^/etc/taskd/taskd\.yaml cn$`, flags, "config(noreplace) in the rpm")
	require.NotContains(t, run("rpm", "-qp", "--scripts", rpm), "systemctl", "the rpm enables and starts nothing")

	// Archives and checksums.
	for _, target := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		archive := one("taskd_*_" + target + ".tar.gz")
		list := run("tar", "-tzf", archive)
		for _, f := range []string{"taskd", "tasktop", "README.md", "config/taskd.yaml", "docs/deploy.md",
			"scripts/systemd/taskd.service", "scripts/supervisor/taskd.conf",
			"scripts/systemd/tasktop-serve.service", "scripts/supervisor/tasktop-serve.conf",
			"deploy/prometheus/taskd-rules.yaml", "deploy/prometheus/taskd-rules.test.yaml", "deploy/grafana/taskd-dashboard.json"} {
			require.Regexp(t, "(?m)^"+regexp.QuoteMeta(f)+"$", list, "%s holds %s", filepath.Base(archive), f)
		}
	}
	sums, err := os.Open(filepath.Join(dist, "checksums.txt"))
	require.NoError(t, err)
	defer sums.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "checksums.txt line %q", sc.Text())
		f, err := os.Open(filepath.Join(dist, name))
		require.NoError(t, err)
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		require.NoError(t, err)
		require.Equal(t, sum, hex.EncodeToString(h.Sum(nil)), name)
		listed[name] = true
	}
	require.NoError(t, sc.Err())
	require.True(t, listed[filepath.Base(deb)] && listed[filepath.Base(rpm)], "checksums.txt lists the packages: %v", listed)
}
