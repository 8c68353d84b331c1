package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskd/taskd/pkg/suggest"
)

// Limits applied to every submission, whichever front end it comes from.
const (
	MaxPriority       = 9
	DefaultPriority   = 5
	DefaultTimeout    = 300 // seconds, as in the seed design
	DefaultMaxRetry   = 3
	MaxMaxRetry       = 100
	MaxCodeLen        = 64
	MaxUniqueKeyLen   = 191
	DefaultMaxPayload = 1 << 20
)

// ValidateName checks a task code or queue name: it becomes part of Redis
// keys, so it is restricted to a safe alphabet.
func ValidateName(kind, s string) error {
	if s == "" {
		return Invalidf("%s must not be empty", kind)
	}
	// The alphabet first: 25 Chinese characters were refused as longer
	// than 64 characters (75 bytes), and "letters" read as any letter.
	if !nameChars(s) {
		return Invalidf("%s %q may only contain ASCII letters, digits and _ . : - (Chinese and other text can go in the payload, a group or a unique key)", kind, s)
	}
	if len(s) > MaxCodeLen {
		return Invalidf("%s %q is longer than %d characters", kind, s, MaxCodeLen)
	}
	return nil
}

// NameOK reports whether s is a name ValidateName accepts. The scheduler
// asks it of every task it pushes (a row INSERTed from outside is checked
// by nothing else), so it is a loop, not a regular expression.
func NameOK(s string) bool {
	return s != "" && len(s) <= MaxCodeLen && nameChars(s)
}

// nameChars reports whether every byte of s is in the names' alphabet:
// A-Z a-z 0-9 _ . : -
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidatePayload checks that p is one JSON value no larger than max bytes
// (max <= 0 means DefaultMaxPayload).
func ValidatePayload(p []byte, max int) error {
	if max <= 0 {
		max = DefaultMaxPayload
	}
	if len(p) > max {
		return Invalidf("payload is %d bytes, over the limit of %d (submit.max_payload)", len(p), max)
	}
	if !json.Valid(p) {
		return Invalidf("payload is not valid JSON: %s", jsonError(p))
	}
	// json.Valid takes any bytes inside a string; the task center's
	// utf8mb4 column does not, and a GBK file came back as the server's
	// "Incorrect string value" instead of a refused submit.
	if !utf8.Valid(p) {
		return Invalidf("payload is not valid UTF-8 (convert it first, e.g. from GBK with iconv -f GBK -t UTF-8)")
	}
	return nil
}

// jsonError says where and why p, which is not valid JSON, fails: the
// decoder's reason and the byte it stopped at.
func jsonError(p []byte) string {
	err := json.Unmarshal(p, new(json.RawMessage))
	var syn *json.SyntaxError
	switch {
	case len(bytes.TrimSpace(p)) == 0:
		return "it is empty (give {} for no payload)"
	case errors.As(err, &syn):
		return fmt.Sprintf("%s at byte %d", syn.Error(), syn.Offset)
	case err != nil:
		return err.Error()
	}
	return "unknown reason"
}

// ValidatePriority checks 0 (highest) to 9 (lowest).
func ValidatePriority(p int) error {
	if p < 0 || p > MaxPriority {
		return Invalidf("priority %d is out of range 0-9 (0 is the highest)", p)
	}
	return nil
}

// MaxTimeout is the longest timeout of a task.
const MaxTimeout = 7 * 24 * time.Hour

// ValidateTimeout checks a task timeout.
func ValidateTimeout(d time.Duration) error {
	if d < time.Second || d > MaxTimeout {
		return Invalidf("timeout %s is out of range 1s-168h", d)
	}
	return nil
}

// EffectiveTimeout is the timeout of an attempt of a task whose timeout
// column holds seconds. Submits keep it within 1s-168h; a row INSERTed
// with 0 or less (a PHP habit for "none") gets DefaultTimeout, as nothing
// may run unbounded, and one above MaxTimeout gets MaxTimeout. Recovery's
// overdue check reads the column the same way (TimeoutSQL): reading it
// otherwise took a live attempt of such a task from its worker.
func EffectiveTimeout(seconds int) time.Duration {
	if seconds <= 0 {
		return DefaultTimeout * time.Second
	}
	return min(time.Duration(seconds)*time.Second, MaxTimeout)
}

// TimeoutSQL is EffectiveTimeout in SQL, in seconds, of the timeout column
// of table alias (or the bare column when alias is empty).
func TimeoutSQL(alias string) string {
	col := "timeout"
	if alias != "" {
		col = alias + ".timeout"
	}
	return fmt.Sprintf("LEAST(IF(%s > 0, %s, %d), %d)", col, col, DefaultTimeout, int(MaxTimeout/time.Second))
}

// ValidateMaxRetry checks a retry limit.
func ValidateMaxRetry(n int) error {
	if n < 0 || n > MaxMaxRetry {
		return Invalidf("max-retry %d is out of range 0-%d", n, MaxMaxRetry)
	}
	return nil
}

// ValidateTimezone loads an IANA time zone name ("" is the default zone).
func ValidateTimezone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.Local, nil
	}
	if strings.EqualFold(tz, "Local") {
		// time.LoadLocation takes it, as each host's own zone: a task's
		// runs would move with the node that ran it last.
		return nil, Invalidf("time zone %q is each host's own: name a zone, such as Europe/Berlin or UTC", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		switch near := ZoneNear(tz); {
		case near == "":
			return nil, Invalidf("unknown time zone %q", tz)
		case strings.EqualFold(near, tz):
			return nil, Invalidf("unknown time zone %q (did you mean %q? zone names are case-sensitive)", tz, near)
		default:
			return nil, Invalidf("unknown time zone %q (did you mean %q?)", tz, near)
		}
	}
	return loc, nil
}

// ZoneNear is the zone an unknown zone name was likely meant as: the same
// name in another case, or the nearest of the host's zone database (a
// typo, Asia/Shangai); "" when none is near.
func ZoneNear(tz string) string {
	if near := zoneCased(tz); near != "" {
		return near
	}
	return suggest.Nearest(tz, zoneNames(zoneDir))
}

// zoneDir holds the host's zone database, whose names zoneNames lists
// (the one in the binary, time/tzdata, lists none).
const zoneDir = "/usr/share/zoneinfo"

// zoneNames lists the zones of the database in dir ("Asia/Shanghai"),
// for a typo's suggestion: none where the host has no database.
func zoneNames(dir string) []string {
	var names []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		// Zones are capitalised: not posix/ and right/ (copies), nor
		// zone.tab, tzdata.zi and the other files beside them.
		if c := d.Name()[0]; c < 'A' || c > 'Z' {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			names = append(names, filepath.ToSlash(strings.TrimPrefix(path, dir+string(filepath.Separator))))
		}
		return nil
	})
	return names
}

// zoneCased is the zone tz names in another case (asia/shanghai,
// america/new_york, etc/utc, utc), or "" when no such zone loads.
func zoneCased(tz string) string {
	parts := strings.Split(tz, "/")
	for i, p := range parts {
		words := strings.Split(strings.ToLower(p), "_")
		for j, w := range words {
			if w != "" {
				words[j] = strings.ToUpper(w[:1]) + w[1:]
			}
		}
		parts[i] = strings.Join(words, "_")
	}
	titled := strings.Join(parts, "/")
	last := strings.LastIndexByte(titled, '/') + 1
	// Etc/UTC and UTC: names in upper case.
	for _, c := range []string{titled, titled[:last] + strings.ToUpper(titled[last:])} {
		if _, err := time.LoadLocation(c); err == nil && c != tz {
			return c
		}
	}
	return ""
}
