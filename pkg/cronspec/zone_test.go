package cronspec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostZone(t *testing.T) {
	t.Parallel()
	root := func(t *testing.T, link, timezone string) string {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "etc"), 0o755))
		if link != "" {
			require.NoError(t, os.Symlink(link, filepath.Join(dir, "etc/localtime")))
		}
		if timezone != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "etc/timezone"), []byte(timezone+"\n"), 0o644))
		}
		return dir
	}
	for _, c := range []struct {
		name, tz   string
		tzSet      bool
		link, file string
		want, err  string
	}{
		{name: "TZ name", tz: "Asia/Shanghai", tzSet: true, want: "Asia/Shanghai"},
		{name: "TZ with colon", tz: ":Europe/Paris", tzSet: true, want: "Europe/Paris"},
		{name: "TZ path", tz: "/usr/share/zoneinfo/America/New_York", tzSet: true, want: "America/New_York"},
		{name: "TZ empty", tz: "", tzSet: true, want: "UTC"},
		{name: "TZ unknown", tz: "Mars/Olympus", tzSet: true, err: `"Mars/Olympus" (TZ=Mars/Olympus) is unknown`},
		{name: "localtime link", link: "/usr/share/zoneinfo/Asia/Shanghai", want: "Asia/Shanghai"},
		{name: "relative link", link: "../usr/share/zoneinfo/Etc/UTC", want: "Etc/UTC"},
		{name: "no localtime", want: "UTC"},
		{name: "copied file, /etc/timezone", link: "/opt/zones/custom", file: "Europe/Berlin", want: "Europe/Berlin"},
		{name: "nothing says", link: "/opt/zones/custom", err: "has no IANA name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := hostZone(c.tz, c.tzSet, root(t, c.link, c.file))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}
