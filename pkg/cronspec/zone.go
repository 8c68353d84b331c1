package cronspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// HostZone returns the IANA name of this host's time zone: from TZ, else
// the zoneinfo file /etc/localtime links to, else /etc/timezone; UTC when
// none is set. A periodic task records the zone it was added in, so that
// every node computes its runs alike, and "Local" names no zone.
func HostZone() (string, error) {
	tz, set := os.LookupEnv("TZ")
	return hostZone(tz, set, "/")
}

// hostZone is HostZone with the TZ variable and the file system root given.
func hostZone(tz string, tzSet bool, root string) (string, error) {
	if tzSet {
		name := strings.TrimPrefix(tz, ":")
		if name == "" {
			return "UTC", nil // POSIX: TZ set and empty is UTC
		}
		if _, after, ok := strings.Cut(name, "zoneinfo/"); ok && filepath.IsAbs(name) {
			name = after
		}
		return known(name, "TZ="+tz)
	}
	link, err := os.Readlink(filepath.Join(root, "etc/localtime"))
	if err == nil {
		if _, after, ok := strings.Cut(link, "zoneinfo/"); ok {
			return known(after, "/etc/localtime -> "+link)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		return "UTC", nil // no zone configured: the C library's UTC
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/timezone")); err == nil {
		if name := strings.TrimSpace(string(b)); name != "" {
			return known(name, "/etc/timezone")
		}
	}
	return "", task.Invalidf("this host's time zone has no IANA name (TZ unset, /etc/localtime not a link into zoneinfo, no /etc/timezone): pass --tz or set cron.timezone")
}

// known checks that name is a time zone this process can load.
func known(name, from string) (string, error) {
	if _, err := time.LoadLocation(name); err != nil {
		return "", task.Invalidf("this host's time zone %q (%s) is unknown: pass --tz or set cron.timezone", name, from)
	}
	return name, nil
}

// EffectiveZone is the zone a periodic task added with zone tz records:
// tz, else def (cron.timezone), else the host's zone.
func EffectiveZone(tz, def string) (string, error) {
	if tz != "" {
		return tz, nil
	}
	if def != "" {
		return def, nil
	}
	return HostZone()
}

// ExprZone is the zone a CRON_TZ= or TZ= prefix of expr names, or "".
func ExprZone(expr string) string {
	expr = strings.TrimSpace(expr)
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(expr, p); ok {
			name, _, _ := strings.Cut(rest, " ")
			return name
		}
	}
	return ""
}
