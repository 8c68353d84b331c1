package e2e

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// goreleaserConfig is the part of .goreleaser.yaml the tests read.
type goreleaserConfig struct {
	Version int `yaml:"version"`
	Builds  []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Binary  string   `yaml:"binary"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Nfpms []struct {
		IDs      []string `yaml:"ids"`
		Formats  []string `yaml:"formats"`
		Bindir   string   `yaml:"bindir"`
		Contents []struct {
			Src  string `yaml:"src"`
			Dst  string `yaml:"dst"`
			Type string `yaml:"type"`
		} `yaml:"contents"`
	} `yaml:"nfpms"`
}

func readGoreleaser(t *testing.T) goreleaserConfig {
	t.Helper()
	raw, err := os.ReadFile("../.goreleaser.yaml")
	require.NoError(t, err)
	var c goreleaserConfig
	require.NoError(t, yaml.Unmarshal(raw, &c))
	return c
}

// The release configuration builds both binaries for linux and darwin,
// amd64 and arm64, and packages what a host needs; its ldflags stamp
// variables that exist (a -X naming a missing variable is silently
// ignored by the linker), so `taskd version` and `tasktop --version` print
// what the release build stamped.
func TestReleaseStamp(t *testing.T) {
	t.Parallel()
	c := readGoreleaser(t)
	require.Equal(t, 2, c.Version)
	mains := map[string]string{}
	for _, b := range c.Builds {
		mains[b.ID] = b.Main
		require.ElementsMatch(t, []string{"linux", "darwin"}, b.Goos, b.ID)
		require.ElementsMatch(t, []string{"amd64", "arm64"}, b.Goarch, b.ID)
	}
	require.Equal(t, map[string]string{"taskd": "./cmd/taskd", "tasktop": "./cmd/tasktop"}, mains)

	require.Len(t, c.Nfpms, 1)
	p := c.Nfpms[0]
	require.ElementsMatch(t, []string{"deb", "rpm"}, p.Formats)
	require.ElementsMatch(t, []string{"taskd", "tasktop"}, p.IDs)
	require.Equal(t, "/usr/bin", p.Bindir)
	installs := map[string]string{}
	for _, f := range p.Contents {
		installs[f.Dst] = f.Type
		if f.Src != "" {
			matches, err := filepath.Glob(filepath.Join("..", f.Src))
			require.NoError(t, err)
			require.NotEmpty(t, matches, "the package's source %s exists", f.Src)
		}
	}
	for dst, typ := range map[string]string{
		"/etc/taskd/taskd.yaml":                         "config|noreplace",
		"/usr/lib/systemd/system/taskd.service":         "",
		"/usr/share/taskd/supervisor/taskd.conf":        "",
		"/usr/share/taskd/supervisor/taskd-groups.conf": "",
		"/usr/share/taskd/prometheus/taskd-rules.yaml":  "",
		"/usr/share/taskd/grafana/taskd-dashboard.json": "",
		"/var/log/taskd":                                "dir",
	} {
		got, ok := installs[dst]
		require.True(t, ok, "the package installs %s", dst)
		require.Equal(t, typ, got, dst)
	}

	stamp := strings.NewReplacer("{{.Version}}", "9.8.7", "{{.Commit}}", "0123abc", "{{.Date}}", "2026-01-02T03:04:05Z")
	dir := t.TempDir()
	for _, b := range c.Builds {
		ldflags := stamp.Replace(strings.Join(b.Ldflags, " "))
		require.NotContains(t, ldflags, "{{", "a template this test does not stamp: %s", ldflags)
		require.NotEmpty(t, ldflags)
		out, err := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags,
			"-o", filepath.Join(dir, b.Binary), "github.com/taskd/taskd/"+strings.TrimPrefix(b.Main, "./")).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", b.ID, out)
	}

	// The daemon carries trusted roots for hosts that have none (scratch
	// and slim images without ca-certificates): Go uses them only there.
	// This machine's https egress is re-signed by a private CA, so no
	// handshake here could tell them apart from the host's.
	built, err := buildinfo.ReadFile(filepath.Join(dir, "taskd"))
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(built.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }),
		"taskd imports the fallback roots")

	out, err := exec.Command(filepath.Join(dir, "taskd"), "-o", "json", "version").Output()
	require.NoError(t, err)
	var info map[string]string
	require.NoError(t, json.Unmarshal(out, &info), "%s", out)
	require.Equal(t, "9.8.7", info["version"])
	require.Equal(t, "0123abc", info["commit"])
	require.Equal(t, "2026-01-02T03:04:05Z", info["date"])
	out, err = exec.Command(filepath.Join(dir, "taskd"), "version").Output()
	require.NoError(t, err)
	require.Regexp(t, `^taskd 9\.8\.7 \(commit 0123abc, built 2026-01-02T03:04:05Z, go1\.\d+`, string(out))
	out, err = exec.Command(filepath.Join(dir, "tasktop"), "--version").Output()
	require.NoError(t, err)
	require.Regexp(t, `^tasktop 9\.8\.7 \(commit 0123abc, built 2026-01-02T03:04:05Z, go1\.\d+`, string(out))
}

// goreleaser check accepts .goreleaser.yaml. goreleaser takes many minutes
// to install (scripts/package-check.sh does), so this runs where it is
// installed already and is skipped elsewhere.
func TestGoreleaserCheck(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("goreleaser")
	if err != nil {
		out, _ := exec.Command("go", "env", "GOPATH").Output()
		bin = filepath.Join(strings.TrimSpace(string(out)), "bin", "goreleaser")
		if _, err := os.Stat(bin); err != nil {
			t.Skip("goreleaser is not installed (scripts/package-check.sh installs it)")
		}
	}
	cmd := exec.Command(bin, "check")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "goreleaser check: %s", out)
	require.Contains(t, string(out), "1 configuration file(s) validated")
}

// TestReleaseBinaryCarriesZones runs a release build (CGO off, -trimpath)
// where the host's zone database is hidden, as on a debian:12, alpine or
// scratch image without tzdata: it still takes a configured
// cron.timezone and a --tz, and computes their next runs.
func TestReleaseBinaryCarriesZones(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to hide /usr/share/zoneinfo in a mount namespace of its own")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	hide := `mount -t tmpfs none /usr/share/zoneinfo && test ! -e /usr/share/zoneinfo/Asia/Shanghai && exec "$0" "$@"`
	if out, err := exec.Command(unshare, "-m", "sh", "-c", hide, "true").CombinedOutput(); err != nil {
		t.Skipf("cannot hide /usr/share/zoneinfo here: %v: %s", err, out)
	}

	b := setup(t, "cron:\n  timezone: Asia/Shanghai\n")
	bin := filepath.Join(t.TempDir(), "taskd")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/taskd/taskd/cmd/taskd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	// Go's other sources of zones: $ZONEINFO, and $GOROOT's zoneinfo.zip,
	// which a -trimpath build finds only through the environment.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOROOT" && k != "ZONEINFO" && k != "TZ" {
			env = append(env, kv)
		}
	}
	nextRun := func(args ...string) time.Time {
		t.Helper()
		cmd := exec.Command(unshare, append([]string{"-m", "sh", "-c", hide, bin, "--config", b.config, "-o", "json"}, args...)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "taskd %v: %s", args, stderr.String())
		var c struct {
			NextRun time.Time `json:"next_run"`
		}
		require.NoError(t, json.Unmarshal(out, &c), "%s", out)
		return c.NextRun
	}

	// 03:00 in Shanghai (UTC+8, no summer time) is 19:00 UTC.
	next := nextRun("cron", "add", "report", "0 3 * * *", "--name", "configured", "--any-code")
	require.Equal(t, "19:00", next.UTC().Format("15:04"), "the next run at 03:00 of cron.timezone: %s", next)
	york, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	next = nextRun("cron", "add", "report", "30 9 * * *", "--name", "flag", "--tz", "America/New_York", "--any-code")
	require.Equal(t, "09:30", next.In(york).Format("15:04"), "the next run at 09:30 of --tz: %s", next)
}
