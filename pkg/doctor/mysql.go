package doctor

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Privileges taskd needs on its database: to run, and to migrate.
var (
	runPrivileges     = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
	migratePrivileges = []string{"CREATE", "ALTER", "INDEX"}
)

// checkMySQL checks the task center; it returns what the server said of
// itself (nil when it did not answer), and reports whether its schema is
// this binary's (the checks of tasks need it).
func checkMySQL(ctx context.Context, r *Report, cfg *config.Config, st *store.Store, o Options) (_ *store.ServerInfo, schemaOK bool) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sent := o.Now()
	in, err := st.Server(ctx)
	received := o.Now()
	if err != nil {
		r.add("mysql", Fail, "check the server's logs", "%v", err)
		return nil, false
	}
	r.ok("mysql", "%s answers as %s, database %s (%s)", store.DSNAddr(cfg.MySQL.DSN), in.User, in.Database, in.Version)
	schemaOK = true
	checkGrants(ctx, r, st, in.Database)

	if err := st.CheckSchema(ctx); err != nil {
		schemaOK = false
		st := Fail
		if task.ErrorCode(err) != task.CodeConfig {
			st = Warn
		}
		r.add("mysql.schema", st, "", "%v", err)
	} else if newer, err := st.NewerVersions(ctx); err != nil {
		r.add("mysql.schema", Warn, "", "%v", err)
	} else if len(newer) > 0 {
		// Not a failure: a newer taskd's ordinary steps keep this one working.
		r.add("mysql.schema", Warn, "upgrade taskd on this host before `taskd migrate` of the newer release runs its contract steps",
			"schema version %d has migrations of a newer taskd (%s); this binary runs on it until their contract steps run; upgrade it",
			newer[len(newer)-1], joinInts(newer))
	} else if pending, err := st.PendingContracts(ctx); err != nil {
		r.add("mysql.schema", Warn, "", "%v", err)
	} else if len(pending) > 0 {
		// Not a failure: this binary works before and after the step.
		r.add("mysql.schema", Warn, "run `taskd migrate` again once every node runs this release, or `taskd migrate --contract` once no older node is running",
			"contract step %s not applied yet: it waits for every node to run this release", pending[0].Name)
		r.pending = pendingContract{check: len(r.Checks) - 1, step: pending[0]}
	} else {
		r.ok("mysql.schema", "version %d, this taskd's", store.LatestVersion())
	}

	want := cfg.MySQL.LockWaitTimeout.Round(time.Second)
	switch {
	case in.LockWait > 30*time.Second:
		r.add("mysql.lock_wait_timeout", Warn, "lower mysql.lock_wait_timeout (a proxy that drops session settings needs the server's changed)",
			"a session waits %s for a row lock (server default %s): a long transaction elsewhere freezes workers that long", in.LockWait, in.GlobalLockWait)
	case in.LockWait != max(want, time.Second):
		r.add("mysql.lock_wait_timeout", Warn, "if a proxy sits in between, make it keep session variables",
			"the session's innodb_lock_wait_timeout is %s, not mysql.lock_wait_timeout %s", in.LockWait, want)
	default:
		r.ok("mysql.lock_wait_timeout", "%s per session (server default %s)", in.LockWait, in.GlobalLockWait)
	}

	// A payload, or a result (a chain's next payload), larger than one
	// statement can carry cannot be written at all; batches of them are
	// split to fit.
	need, key := cfg.Submit.MaxPayload, "submit.max_payload"
	if cfg.Worker.OutputLimit > need {
		need, key = cfg.Worker.OutputLimit, "worker.output_limit"
	}
	packet, most := st.MaxAllowedPacket(), int64(st.MaxValueBytes())
	if int64(need) > most {
		r.add("mysql.max_allowed_packet", Warn, fmt.Sprintf("raise the server's max_allowed_packet (my.cnf, SET GLOBAL) to %s, or lower %s", task.ByteSize(2*int64(need)+1<<20), key),
			"statements of %s at most carry values of %s, less than the %s %s allows: larger payloads are refused and larger outputs cannot be written",
			task.ByteSize(packet), task.ByteSize(most), task.ByteSize(int64(need)), key)
	} else {
		r.ok("mysql.max_allowed_packet", "%s: values of up to %s, over the %s of %s", task.ByteSize(packet), task.ByteSize(most), task.ByteSize(int64(need)), key)
	}

	zone := in.TimeZone
	if zone == "SYSTEM" {
		zone = "SYSTEM (" + in.SystemTimeZone + ")"
	}
	now := sent
	_, hostOff := now.Zone()
	if time.Duration(hostOff)*time.Second != in.Offset {
		r.add("mysql.time_zone", Warn, "give the database session and the hosts one zone (time_zone, or TZ)",
			"the session's time_zone %s is UTC%s, this host's UTC%s: DATETIMEs written by producers as local times (PHP date()) are read %s off",
			zone, fmtOffset(in.Offset), now.Format("-07:00"), (in.Offset - time.Duration(hostOff)*time.Second).Abs())
	} else {
		r.ok("mysql.time_zone", "session %s, UTC%s like this host", zone, fmtOffset(in.Offset))
	}

	// The database clock was read between sent and received: compare it
	// with the middle of the round trip.
	rtt := received.Sub(sent)
	skew := in.Now.Sub(sent.Add(rtt / 2))
	switch {
	case skew.Abs() >= o.FailSkew:
		r.add("mysql.clock", Fail, "run NTP (chrony, systemd-timesyncd) on this host and the database's",
			"this host's clock is %s %s the database's: heartbeats and leases are judged wrong", skew.Abs().Round(time.Millisecond), aheadBehind(skew))
	case skew.Abs() >= o.MaxSkew:
		r.add("mysql.clock", Warn, "run NTP (chrony, systemd-timesyncd) on this host and the database's",
			"this host's clock is %s %s the database's (due times use the database clock; heartbeat ages use the hosts')", skew.Abs().Round(time.Millisecond), aheadBehind(skew))
	default:
		r.ok("mysql.clock", "this host and the database agree within %s", max(skew.Abs(), rtt, time.Millisecond).Round(time.Millisecond))
	}
	return &in, schemaOK
}

// joinInts is "12, 13".
func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

func aheadBehind(skew time.Duration) string {
	// skew > 0: the database is ahead, so this host is behind.
	if skew > 0 {
		return "behind"
	}
	return "ahead of"
}

func fmtOffset(d time.Duration) string {
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", int(d.Seconds()))).Format("-07:00")
}

// grantRE splits one GRANT line: privileges, the object (*.*, `db`.*,
// `db`.`table`). Role grants (GRANT `role` TO ...) have no ON.
var grantRE = regexp.MustCompile("^GRANT (.+?) ON (\\S+) TO ")

func checkGrants(ctx context.Context, r *Report, st *store.Store, db string) {
	lines, err := st.Grants(ctx)
	if err != nil {
		r.add("mysql.grants", Warn, "", "cannot read the grants: %v", err)
		return
	}
	have, perTable, roles := grantedOn(lines, db)
	var missing, missingMigrate []string
	for _, p := range runPrivileges {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	for _, p := range migratePrivileges {
		if !have[p] {
			missingMigrate = append(missingMigrate, p)
		}
	}
	grant := func(ps []string) string {
		return fmt.Sprintf("GRANT %s ON `%s`.* TO the user of mysql.dsn", strings.Join(ps, ", "), db)
	}
	switch {
	case len(missing) > 0 && (perTable || roles):
		r.add("mysql.grants", Warn, grant(missing), "no %s on %s.* for the account itself; granted per table or through a role, which this check does not follow",
			strings.Join(missing, ", "), db)
	case len(missing) > 0:
		r.add("mysql.grants", Fail, grant(missing), "the account lacks %s on %s.*: taskd cannot run", strings.Join(missing, ", "), db)
	case len(missingMigrate) > 0:
		r.add("mysql.grants", Warn, grant(missingMigrate)+", or run taskd migrate as another user",
			"enough to run; `taskd migrate` also needs %s on %s.*", strings.Join(missingMigrate, ", "), db)
	default:
		r.ok("mysql.grants", "%s on %s.*", strings.Join(append(slices.Clone(runPrivileges), migratePrivileges...), ", "), db)
	}
}

// grantedOn reads the privileges that GRANT lines give on every table of
// database db, whether some come per table only, and whether roles are
// granted.
func grantedOn(lines []string, db string) (have map[string]bool, perTable, roles bool) {
	have = map[string]bool{}
	for _, line := range lines {
		m := grantRE.FindStringSubmatch(line)
		if m == nil {
			roles = roles || strings.HasPrefix(line, "GRANT `") || strings.HasPrefix(line, "GRANT '")
			continue
		}
		objDB, table, _ := strings.Cut(m[2], ".")
		if !matchDB(objDB, db) {
			continue
		}
		if table != "*" {
			perTable = true
			continue
		}
		for _, p := range splitPrivileges(m[1]) {
			if p == "ALL" || p == "ALL PRIVILEGES" {
				for _, q := range append(slices.Clone(runPrivileges), migratePrivileges...) {
					have[q] = true
				}
				continue
			}
			have[p] = true
		}
	}
	return have, perTable, roles
}

// splitPrivileges splits "SELECT, INSERT (a, b), UPDATE" into names.
func splitPrivileges(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s + "," {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				p := strings.TrimSpace(s[start:min(i, len(s))])
				if j := strings.Index(p, "("); j >= 0 {
					p = strings.TrimSpace(p[:j]) // column privileges: not on whole tables
					start = i + 1
					continue
				}
				out = append(out, strings.ToUpper(p))
				start = i + 1
			}
		}
	}
	return out
}

// matchDB reports whether a grant's database part (`*`, `taskd`,
// `taskd\_%`) covers db.
func matchDB(pattern, db string) bool {
	if pattern == "*" {
		return true
	}
	pattern = strings.Trim(pattern, "`'\"")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\' && i+1 < len(pattern):
			i++
			re.WriteString(regexp.QuoteMeta(string(pattern[i])))
		case c == '%':
			re.WriteString(".*")
		case c == '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	ok, _ := regexp.MatchString(re.String(), db)
	return ok
}

// pendingContract is the contract step the mysql.schema check found
// waiting, and that check's index in the report.
type pendingContract struct {
	check int
	step  store.Migration
}

// explainPending completes the mysql.schema warning of a pending contract
// step from the process registry: which live processes of an older
// release hold it back, or that none does and `taskd migrate` may run it
// now. Without it the warning said the same while the old nodes ran and
// after the last had gone.
func explainPending(ctx context.Context, r *Report, cfg *config.Config, br *broker.Broker, o Options) {
	if r.pending.step.Version == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	procs, err := br.Processes(ctx, cfg.Worker.HeartbeatTTL)
	if err != nil {
		return // the Redis checks say why
	}
	c := &r.Checks[r.pending.check]
	if why := node.MayContract(r.pending.step.Version, procs, nil, false); why != "" {
		c.Detail = fmt.Sprintf("contract step %s not applied yet: %s", r.pending.step.Name, why)
		return
	}
	c.Detail = fmt.Sprintf("contract step %s not applied yet, and every live process runs a release that knows it", r.pending.step.Name)
	c.Fix = "run `taskd migrate`"
}

// checkReadDSN opens mysql.read_dsn, which list, show, stats, audit, cron
// list and tasktop read, and reads its schema: a replica that refuses
// this node, or holds another database, fails them all while the
// primary works.
func checkReadDSN(ctx context.Context, r *Report, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	st, err := o.OpenReadStore(ctx)
	if err != nil {
		r.add("mysql.read_dsn", Fail, downFix(err, "start the replica, or fix mysql.read_dsn (or empty it: reads go to mysql.dsn)",
			"correct mysql.read_dsn (its user, password or database) or the replica's account as the error says, or empty it: reads go to mysql.dsn"), "%v", err)
		return
	}
	defer st.Close()
	if err := st.CheckSchema(ctx); err != nil {
		r.add("mysql.read_dsn", Fail, "point mysql.read_dsn at a replica of the task center (or empty it: reads go to mysql.dsn)", "%v", err)
		return
	}
	r.ok("mysql.read_dsn", "answers with the task center's schema")
}
