package doctor

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
)

// checkHandlers checks every configured handler from this host: an exec or
// pool handler's program exists and is executable (and its dir exists), an
// http handler's host resolves, its port accepts connections and, for
// https, its certificate is trusted. Pools
// also report what live nodes say of them (crash-looping).
func checkHandlers(ctx context.Context, r *Report, cfg *config.Config, br *broker.Broker, o Options) {
	codes := make([]string, 0, len(cfg.Handlers))
	for code := range cfg.Handlers {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		h := cfg.Handlers[code]
		name := "handlers." + code
		switch {
		case len(h.Exec) > 0 || len(h.Pool) > 0:
			argv, kind := h.Exec, "exec"
			if len(h.Pool) > 0 {
				argv, kind = h.Pool, "pool"
			}
			var script *handler.ScriptError
			if err := handler.CheckProgram(argv, h.Dir); errors.As(err, &script) && script.Relative() {
				// Looked for where doctor runs, which need not be where the
				// daemon was started.
				r.add(name, Warn, "give the handler a dir, so that every daemon finds it wherever it was started",
					"%s %s: %v", kind, argv[0], err)
			} else if err != nil {
				r.add(name, Fail, "install it, or fix the handler's argv or dir", "%s %q cannot start: %v", kind, argv[0], err)
			} else {
				r.ok(name, "%s %s is executable", kind, argv[0])
			}
		case h.HTTP != "":
			checkEndpoint(ctx, r, name, h.HTTP, handler.ShownURL(h.HTTP), "the handler's", o)
		}
	}
	if br == nil {
		return
	}
	// Pools as the live nodes report them; the programs were checked above.
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	problems, err := node.CheckPools(pctx, cfg, br)
	if err != nil {
		r.add("handlers.pools", Warn, "", "cannot read the nodes' pools: %v", err)
		return
	}
	for _, p := range problems {
		if !strings.HasPrefix(p, "handlers.") {
			r.add("handlers.pools", Fail, "look at that node's log; taskd doctor on it checks the program", "%s", p)
		}
	}
}

// checkNotifiers checks that the alerts' receivers accept connections: an
// alert that cannot be delivered is found at 2 a.m., not here. Their URLs
// are secrets (a Slack hook's path is its key): only scheme and host are
// shown.
func checkNotifiers(ctx context.Context, r *Report, cfg *config.Config, o Options) {
	if !cfg.Alerts.Enabled {
		return
	}
	for _, n := range [][2]string{{"webhook_url", cfg.Alerts.WebhookURL}, {"slack_url", cfg.Alerts.SlackURL},
		{"wecom_url", cfg.Alerts.WeComURL}} {
		key, raw := n[0], n[1]
		if raw == "" {
			continue
		}
		shown := "(hidden)"
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			shown = u.Scheme + "://" + u.Host + "/…"
		}
		checkEndpoint(ctx, r, "alerts."+key, raw, shown, "alerts."+key+"'s", o)
	}
}

// checkEndpoint resolves an http endpoint's host and connects to its port;
// shown is how its URL is written in the report, whose is whose URL it is.
func checkEndpoint(ctx context.Context, r *Report, name, raw, shown, whose string, o Options) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		r.add(name, Fail, "fix "+whose+" URL", "http %q is not a URL", shown)
		return
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, u.Hostname())
	if err != nil {
		r.add(name, Fail, "fix the host name, or this host's DNS", "http %s: host %s does not resolve: %v", shown, u.Hostname(), err)
		return
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		r.add(name, Fail, "start the service, or open the port to this host", "http %s: %s resolves (%s) but port %s refuses: %v",
			shown, u.Hostname(), strings.Join(addrs, ", "), port, err)
		return
	}
	defer conn.Close()
	if u.Scheme == "https" {
		// A certificate this host does not trust (self-signed, an internal
		// CA, a missing intermediate) fails every request as the port
		// opens fine. The handler verifies against the system's roots, as
		// this does.
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			r.add(name, Fail, "serve a certificate for that name from a CA this host trusts, or add the CA to the system's (update-ca-certificates), or point SSL_CERT_FILE at it in taskd's environment",
				"http %s accepts connections but TLS fails: %v", shown, err)
			return
		}
		r.ok(name, "http %s accepts connections, its certificate is trusted", shown)
		return
	}
	r.ok(name, "http %s accepts connections", shown)
}

// checkWork looks for work nothing will do: waiting or dispatched tasks
// of a code no node has a handler for, and queues with such tasks or
// configured here that no live worker consumes. A dispatched task of a
// code nothing handles (a seed-style INSERT) stays dispatched for good,
// its message waiting in a queue without consumers.
func checkWork(ctx context.Context, r *Report, cfg *config.Config, d Deps, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	waiting, err := d.Store.WaitingCodes(ctx)
	if err != nil {
		r.add("tasks.handlers", Warn, "", "%v", err)
		return
	}
	routes, err := d.Store.RouteList(ctx)
	if err != nil {
		r.add("tasks.handlers", Warn, "", "%v", err)
		return
	}
	checkRoutes(r, cfg, routes)
	handled := map[string]bool{}
	for code := range cfg.Handlers {
		handled[code] = true
	}
	for _, rt := range routes {
		handled[rt.Code] = true
	}
	perCode, perQueue := map[string]int64{}, map[string]int64{}
	for _, w := range waiting {
		perQueue[w.Queue] += w.Tasks
		if !handled[w.Code] {
			perCode[w.Code] += w.Tasks
		}
	}
	if len(perCode) == 0 {
		r.ok("tasks.handlers", "every waiting or dispatched task's code has a handler on some node")
	} else {
		var parts []string
		for _, code := range sortedKeys(perCode) {
			parts = append(parts, fmt.Sprintf("%s (%s)", code, ops.Plural(int(perCode[code]), "task")))
		}
		// kill, not delete: delete takes pending tasks only, and these
		// are often dispatched.
		r.add("tasks.handlers", Warn, fmt.Sprintf("configure a handler for them on some node, or cancel them (taskd kill --code %s --yes)", sortedKeys(perCode)[0]),
			"no node has a handler for task codes %s", strings.Join(parts, ", "))
	}

	live, err := d.Broker.LiveWorkers(ctx)
	if err != nil {
		r.add("queues.consumers", Warn, "", "%v", err)
		return
	}
	checkResults(r, live)
	consumed := map[string]bool{}
	for _, w := range live {
		for _, q := range w.Queues {
			consumed[q] = true
		}
	}
	for q := range cfg.WorkerQueues() {
		if _, ok := perQueue[q]; !ok {
			perQueue[q] = 0
		}
	}
	var orphans []string
	for _, q := range sortedKeys(perQueue) {
		switch {
		case consumed[q]:
		case perQueue[q] > 0:
			orphans = append(orphans, fmt.Sprintf("%s (%s waiting)", q, ops.Plural(int(perQueue[q]), "task")))
		default:
			orphans = append(orphans, q)
		}
	}
	switch {
	case len(orphans) == 0:
		r.ok("queues.consumers", "%s, every one consumed by a live worker", ops.Plural(len(perQueue), "queue"))
	case len(live) == 0:
		r.add("queues.consumers", Warn, "start taskd run (the worker role) on the hosts that run handlers",
			"no live worker: nothing consumes %s", strings.Join(orphans, ", "))
	default:
		r.add("queues.consumers", Warn, "start a worker whose configuration has these queues (a handler's queue or a queues: entry)",
			"no live worker consumes %s", strings.Join(orphans, ", "))
	}
}

// checkResults warns of the live workers whose results wait to be
// written: they take no new work, and nothing else says why their queues
// stand still.
func checkResults(r *Report, live []broker.LiveWorker) {
	var stuck []string
	for _, w := range live {
		if d := w.ResultsStuck(); d > 0 {
			stuck = append(stuck, stats.ResultsStuckText(w.ID, d))
		}
	}
	if len(stuck) == 0 {
		r.ok("workers.results", "%s, none with results waiting to be written", ops.Plural(len(live), "live worker"))
		return
	}
	r.add("workers.results", Warn, "read the node's log: free the disk under MySQL's data directory or tmpdir, or make the server writable again",
		"%s", strings.Join(stuck, "; "))
}

// checkNodes checks what the live taskd processes say of themselves:
// their node ids and time zones.
func checkNodes(ctx context.Context, r *Report, cfg *config.Config, br *broker.Broker, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	procs, err := br.Processes(ctx, cfg.Worker.HeartbeatTTL)
	if err != nil {
		r.add("nodes.ids", Warn, "", "%v", err)
		return
	}
	checkNodeIDs(r, cfg, procs)
	checkZones(r, cfg, procs, o)
}

// checkNodeIDs warns of a node.id taken by processes on more than one
// host, this one included (node.SharedNodeIDs).
func checkNodeIDs(r *Report, cfg *config.Config, procs []broker.Process) {
	host, _ := os.Hostname()
	shared := node.SharedNodeIDs(procs, cfg.Node.ID, host)
	if len(shared) > 0 {
		var said []string
		for _, id := range slices.Sorted(maps.Keys(shared)) {
			said = append(said, fmt.Sprintf("%q on %s", id, strings.Join(shared[id], ", ")))
		}
		r.add("nodes.ids", Warn, "give each host its own node.id, or leave it empty (the hostname)",
			"hosts share a node.id, so tasktop, stats, the run history and the metrics cannot tell them apart: %s", strings.Join(said, "; "))
		return
	}
	r.ok("nodes.ids", "%s, each host its own node.id", ops.Plural(len(procs), "live process"))
}

// checkZones lists the host time zones of the live taskd processes and
// compares their cron.timezone with this host's. Hosts in different zones
// are fine: every periodic task carries its own zone, and due times are
// the database's clock. Nodes whose cron.timezone differs record different
// zones for a `taskd cron add` without --tz.
func checkZones(r *Report, cfg *config.Config, procs []broker.Process, o Options) {
	here := node.HostZone(o.Now())
	zones := map[string][]string{here: {"this host"}}
	crons := map[string][]string{cronZone(cfg.Cron.Timezone, here): {"this host"}}
	for _, p := range procs {
		if p.Zone == "" {
			continue // an older taskd: it does not say
		}
		who := p.Node
		if !slices.Contains(zones[p.Zone], who) {
			zones[p.Zone] = append(zones[p.Zone], who)
		}
		cz := cronZone(p.CronTimezone, p.Zone)
		if !slices.Contains(crons[cz], who) {
			crons[cz] = append(crons[cz], who)
		}
	}
	if len(zones) > 1 {
		r.ok("nodes.time_zones", "hosts in %d zones (%s); each periodic task runs in its own zone", len(zones), describe(zones))
	} else {
		r.ok("nodes.time_zones", "%s on this host and %s", here, ops.Plural(len(procs), "live process"))
	}
	if len(crons) > 1 {
		r.add("nodes.cron_timezone", Warn, "set the same cron.timezone on every node, or give cron add --tz",
			"taskd cron add without --tz records a different zone on different nodes: %s", describe(crons))
	} else {
		r.ok("nodes.cron_timezone", "taskd cron add without --tz records %s everywhere", cronZone(cfg.Cron.Timezone, here))
	}
}

// checkConnections adds up the MySQL connections taskd's live processes
// may open (each its mysql.max_open_conns) against the server's
// max_connections: five hosts of the example configuration could take
// all of a default server's 151, and the applications sharing the server
// would then be refused theirs. With no live process, it counts one node
// of this configuration. in is what checkMySQL read of the server.
func checkConnections(ctx context.Context, r *Report, cfg *config.Config, d Deps, in store.ServerInfo, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	procs, err := d.Broker.Processes(ctx, cfg.Worker.HeartbeatTTL)
	if err != nil {
		r.add("mysql.connections", Warn, "", "%v", err)
		return
	}
	mine := store.PoolSize(cfg.MySQL.MaxOpenConns)
	most, who := mine, "one node of this configuration"
	if len(procs) > 0 {
		most, who = 0, ops.Plural(len(procs), "live taskd process")
		for _, p := range procs {
			most += cmp.Or(p.MySQLConns, mine) // an older taskd does not say: assume this one's
		}
	}
	use := ""
	peak := 0
	if u, err := d.Store.Connections(ctx); err == nil {
		use, peak = fmt.Sprintf("; %d open now, at most %d since the server started", u.Now, u.Peak), u.Peak
	}
	// The account's own limit binds first when lower (shared hosting sets
	// one); the nodes are taken to share the account of this DSN.
	limit, of, refusal := in.MaxConnections, "the server's max_connections", "Error 1040: Too many connections"
	if in.MaxUserConnections > 0 && in.MaxUserConnections < limit {
		limit, of, refusal = in.MaxUserConnections, "the account's max_user_connections", "Error 1226: User has exceeded the 'max_user_connections' resource"
	}
	switch {
	case most > limit:
		r.add("mysql.connections", Warn, fmt.Sprintf("raise %s above %d plus what the other clients need, or lower mysql.max_open_conns", of, most),
			"%s may open up to %d connections (mysql.max_open_conns each), more than %s %d%s: under load, taskd and the other clients would be refused new ones (%s)",
			who, most, of, limit, use, refusal)
	case peak >= in.MaxConnections:
		r.add("mysql.connections", Warn, "raise the server's max_connections, or find the client that holds most (SHOW PROCESSLIST); FLUSH STATUS starts the count again",
			"the server reached its max_connections %d since it started%s: new connections were refused then", in.MaxConnections, use)
	default:
		r.ok("mysql.connections", "%s may open up to %d of %s %d%s", who, most, of, limit, use)
	}
}

// cronZone is the zone periodic tasks without one follow: cron.timezone,
// else the host's (its name, as HostZone gives it first).
func cronZone(tz, hostZone string) string {
	if tz != "" {
		return tz
	}
	name, _, _ := strings.Cut(hostZone, " ")
	return name
}

func describe(groups map[string][]string) string {
	var parts []string
	for _, z := range sortedKeys(groups) {
		parts = append(parts, z+": "+strings.Join(groups[z], ", "))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkLimits compares the limits in force (task_queue) with this host's
// configuration: an operator's `taskd limit` holds until reset, and of
// nodes configured differently the last to start wins, so a limit that
// differs is worth knowing about.
func checkLimits(ctx context.Context, r *Report, cfg *config.Config, d Deps, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rows, err := d.Store.QueueList(ctx)
	if err != nil {
		r.add("queues.limits", Warn, "", "%v", err)
		return
	}
	configured := cfg.QueueLimits()
	inForce := map[string]store.Queue{}
	for _, q := range rows {
		if q.LimitSource != "" {
			inForce[q.Name] = q
		}
	}
	names := map[string]bool{}
	for q := range configured {
		names[q] = true
	}
	for q := range inForce {
		names[q] = true
	}
	limited, warned := 0, false
	for _, q := range sortedKeys(names) {
		want, row := configured[q], inForce[q]
		if row.Limit == want {
			if !want.IsZero() {
				limited++
			}
			continue
		}
		warned = true
		switch row.LimitSource {
		case store.LimitFromOperator:
			r.add("queues.limits", Warn, fmt.Sprintf("taskd limit %s --reset returns to the configuration", q),
				"queue %s runs under %s, set by an operator (taskd limit), not this configuration's %s", q, row.Limit, want)
		case "":
			r.add("queues.limits", Warn, "start a node with this configuration (nodes record their limits as they start)",
				"queue %s: this configuration's limit %s is not recorded yet", q, want)
		default:
			r.add("queues.limits", Warn, "give every node the same queues: entries; the last node to start sets the limit",
				"queue %s runs under %s, recorded by another node's configuration, not this one's %s", q, row.Limit, want)
		}
	}
	if !warned {
		r.ok("queues.limits", "%s limited as configured", ops.Plural(limited, "queue"))
	}
}

// checkPaused warns of paused queues with due tasks: a pause forgotten
// after an incident holds them for good, and no alert fires for a queue
// paused on purpose. Who paused it, and when, is the audit log's.
func checkPaused(ctx context.Context, r *Report, d Deps, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rows, err := d.Store.QueueList(ctx)
	if err != nil {
		r.add("queues.paused", Warn, "", "%v", err)
		return
	}
	var paused []string
	for _, q := range rows {
		if q.Paused {
			paused = append(paused, q.Name)
		}
	}
	if len(paused) == 0 {
		r.ok("queues.paused", "no queue is paused")
		return
	}
	depths, _, err := d.Store.QueueDepths(ctx)
	if err != nil {
		r.add("queues.paused", Warn, "", "%v", err)
		return
	}
	held := 0
	for _, q := range paused {
		due := int64(0)
		if dq := depths[q]; dq != nil {
			due = dq.Due
		}
		if due == 0 {
			continue
		}
		held++
		since := ""
		if e, err := d.Store.AuditLast(ctx, "pause", "queue "+q); err == nil && e != nil {
			since = fmt.Sprintf(" since %s by %s", e.CreatedAt.Local().Format(time.DateTime), e.Actor)
		}
		r.add("queues.paused", Warn, fmt.Sprintf("taskd resume %s --yes, if what it was paused for is over", q),
			"queue %s is paused%s with %s due: they wait until it is resumed", q, since, ops.Plural(int(due), "task"))
	}
	if held == 0 {
		r.ok("queues.paused", "%s paused, with nothing due: %s", ops.Plural(len(paused), "queue"), strings.Join(paused, ", "))
	}
}

// checkRoutes compares the queue this configuration takes each of its task
// codes from with the routes in the task center, which send tasks INSERTed
// with no queue: of nodes configured differently the last to start wins,
// and the others' workers wait on a queue those tasks no longer reach.
func checkRoutes(r *Report, cfg *config.Config, routes []store.Route) {
	recorded := map[string]store.Route{}
	for _, rt := range routes {
		recorded[rt.Code] = rt
	}
	mine := node.RoutesOf(cfg, slices.Collect(maps.Keys(cfg.Handlers)))
	same, differ := 0, 0
	for _, code := range sortedKeys(mine) {
		rt, ok := recorded[code]
		switch {
		case !ok:
		case rt.Queue == mine[code]:
			same++
		default:
			differ++
			r.add("tasks.routes", Warn, "give every node the same queue for "+code+" (handlers."+code+".queue); the last node to start sets the route",
				"task code %s: this configuration takes it from queue %s, but tasks INSERTed with no queue go to %s (recorded by node %s, %s)",
				code, mine[code], rt.Queue, rt.Node, rt.SeenAt.Format(time.RFC3339))
		}
	}
	if differ == 0 {
		r.ok("tasks.routes", "%s routed as configured", ops.Plural(same, "task code"))
	}
}
