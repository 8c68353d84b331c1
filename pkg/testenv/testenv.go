// Package testenv gives each test its own task center database and Redis
// key prefix on the real services (127.0.0.1 by default; override with
// TASKD_TEST_MYSQL_DSN and TASKD_TEST_REDIS_ADDR), and removes both when the
// test ends, so tests run in parallel and leave nothing behind.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/store"
)

// Env is one test's private slice of MySQL and Redis.
type Env struct {
	DSN       string // DSN of the private database
	Database  string
	RedisAddr string
	Prefix    string
	Store     *store.Store
	Broker    *broker.Broker
}

// BaseDSN is the server DSN tests create databases on:
// TASKD_TEST_MYSQL_DSN, or root on 127.0.0.1 with the sql_mode MySQL 8
// starts with (mysql8Mode).
func BaseDSN() string {
	if d := os.Getenv("TASKD_TEST_MYSQL_DSN"); d != "" {
		return d
	}
	return "root:@tcp(127.0.0.1:3306)/?sql_mode=" + url.QueryEscape("'"+mysql8Mode+"'")
}

// mysql8Mode is MySQL 8's default sql_mode. It is stricter than
// MariaDB's (ONLY_FULL_GROUP_BY, NO_ZERO_DATE, NO_ZERO_IN_DATE), so SQL
// the tests run on MariaDB under it runs on MySQL 8 as well, and on
// MariaDB as it is configured by default.
const mysql8Mode = "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

// RedisAddr is the Redis tests use: TASKD_TEST_REDIS_ADDR (several
// addresses, comma-separated, are a Cluster), or the Sentinels of
// TASKD_TEST_REDIS_SENTINEL (master@addr,addr...).
func RedisAddr() string {
	if _, addrs, ok := strings.Cut(os.Getenv("TASKD_TEST_REDIS_SENTINEL"), "@"); ok {
		return addrs
	}
	if a := os.Getenv("TASKD_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// RedisMaster is the Sentinel master name of TASKD_TEST_REDIS_SENTINEL,
// or "" for a plain server or Cluster.
func RedisMaster() string {
	name, _, _ := strings.Cut(os.Getenv("TASKD_TEST_REDIS_SENTINEL"), "@")
	return name
}

// BrokerOptions are the options of this environment's broker.
func (e *Env) BrokerOptions() broker.Options {
	return broker.Options{Addr: e.RedisAddr, MasterName: RedisMaster(), Prefix: e.Prefix}
}

// New creates a migrated database and a fresh prefix for t.
func New(t testing.TB) *Env {
	t.Helper()
	e, cleanup, err := Open(context.Background())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(cleanup)
	return e
}

// Open creates a migrated database and a fresh prefix, for code without a
// *testing.T (a TestMain serving Example functions); cleanup removes them.
func Open(ctx context.Context) (e *Env, cleanup func(), err error) {
	id := randomID()
	name := "taskd_test_" + id
	base, err := mysql.ParseDSN(BaseDSN())
	if err != nil {
		return nil, nil, fmt.Errorf("base dsn: %w", err)
	}
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	sweepOnce.Do(func() { sweep(ctx, admin) })
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, nil, fmt.Errorf("create database (is MySQL running on %s?): %w", base.Addr, err)
	}
	cfg := base.Clone()
	cfg.DBName = name
	e = &Env{DSN: cfg.FormatDSN(), Database: name, RedisAddr: RedisAddr(), Prefix: "t" + id + ":"}
	cleanup = func() {
		e.drop(base)
		if e.Broker != nil {
			e.Broker.Close()
		}
		if e.Store != nil {
			e.Store.Close()
		}
	}
	if e.Store, err = store.Open(ctx, e.DSN, store.Options{}); err != nil {
		cleanup()
		return nil, nil, err
	}
	if _, err := e.Store.Migrate(ctx, store.MigrateParams{}); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	if e.Broker, err = broker.Open(ctx, e.BrokerOptions()); err != nil {
		cleanup()
		return nil, nil, err
	}
	return e, cleanup, nil
}

// sweepOnce drops, once per test process, what earlier runs left behind.
var sweepOnce sync.Once

// sweep drops the test databases of runs that ended without their
// cleanups (a -timeout panic, a kill): those whose newest table is older
// than any test runs. Younger ones may be another run's, going on now.
func sweep(ctx context.Context, admin *sql.DB) {
	rows, err := admin.QueryContext(ctx, `SELECT TABLE_SCHEMA FROM information_schema.TABLES
		WHERE TABLE_SCHEMA LIKE 'taskd\_test\_%' GROUP BY TABLE_SCHEMA
		HAVING MAX(CREATE_TIME) < NOW() - INTERVAL 3 HOUR`)
	if err != nil {
		return // best effort: a server without information_schema rights
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) == nil {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	}
}

func (e *Env) drop(base *mysql.Config) {
	ctx := context.Background()
	if admin, err := sql.Open("mysql", base.FormatDSN()); err == nil {
		admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+e.Database)
		admin.Close()
	}
	if e.Broker != nil {
		e.Broker.DeletePrefix(ctx)
	}
}

// Exec runs SQL on the private database and fails the test on error.
func (e *Env) Exec(t testing.TB, q string, args ...any) sql.Result {
	t.Helper()
	res, err := e.Store.DB().ExecContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", strings.TrimSpace(q), err)
	}
	return res
}

// OneConnection opens another store on the private database with a pool
// of one connection: a statement that holds it holds every other, and its
// session's status counts every statement of the store. It is closed when
// the test ends.
func (e *Env) OneConnection(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), e.DSN, store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("testenv: open a store of one connection: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Count returns the result of a COUNT(*) query.
func (e *Env) Count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.Store.DB().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", q, err)
	}
	return n
}

// UnapplyLatest makes the schema older than this binary's: it forgets the
// latest ordinary migration and the contract steps after it (a pending
// contract step alone is no older schema).
func (e *Env) UnapplyLatest(t testing.TB) {
	t.Helper()
	migs, err := store.Migrations()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	last := 0
	for _, m := range migs {
		if !m.Contract {
			last = m.Version
		}
	}
	e.Exec(t, `DELETE FROM taskd_schema WHERE version >= ?`, last)
}

// ConfigYAML returns a minimal configuration pointing at this environment,
// followed by extra YAML.
func (e *Env) ConfigYAML(extra string) string {
	return fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  master_name: %q\n  prefix: %q\n%s",
		e.DSN, e.RedisAddr, RedisMaster(), e.Prefix, extra)
}

func randomID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// FillLarge gives the task center n tasks shaped like a busy installation's
// (97% finished, the rest pending in the future, failed, dead or running,
// over 20 codes) and 60,000 runs that ended within the last runs, for
// benchmarks of what reads must not pay for.
func (e *Env) FillLarge(t testing.TB, n int, runs time.Duration) {
	t.Helper()
	for from := 1; from <= n; from += 100000 {
		to := min(n, from+99999)
		e.Exec(t, fmt.Sprintf(`INSERT INTO task_center (task_code, payload, status, plan_next_run_at, attempt, worker_id, finished_at, last_result)
			SELECT CONCAT('code', seq %% 20), '{"n":1}',
				CASE WHEN seq %% 200 = 0 THEN 5 WHEN seq %% 200 = 1 THEN 4 WHEN seq %% 200 = 2 THEN 0
				     WHEN seq %% 5000 = 3 THEN 2 ELSE 3 END,
				NOW(3) + INTERVAL (seq %% 200 IN (1, 2)) HOUR, 1, IF(seq %% 5000 = 3, CONCAT('w', seq %% 200), ''),
				IF(seq %% 200 > 2, NOW(3) - INTERVAL (seq %% 3600) SECOND, NULL), 'ok'
			FROM seq_%d_to_%d`, from, to))
	}
	e.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, finished_at, outcome)
		SELECT seq, 1, CONCAT('code', seq % 20), CONCAT('code', seq % 20), CONCAT('w', seq % 200),
			NOW(3) - INTERVAL (seq % ?) SECOND, IF(seq % 50 = 0, 'failed', 'succeeded') FROM seq_1_to_60000`, int(runs.Seconds()))
}

// Account creates a MySQL account with privileges (e.g. "SELECT" or
// "ALL") on the environment's database only, dropped when the test ends,
// and returns a DSN of the environment for it. The test is skipped where
// the test account cannot create accounts.
func (e *Env) Account(t testing.TB, privileges string) string {
	t.Helper()
	user := "taskd_t_" + randomID()
	if _, err := e.Store.DB().Exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", user)); err != nil {
		t.Skipf("the test account cannot create an account: %v", err)
	}
	t.Cleanup(func() { e.Store.DB().Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	e.Exec(t, fmt.Sprintf("GRANT %s ON `%s`.* TO '%s'@'%%'", privileges, e.Database, user))
	cfg, err := mysql.ParseDSN(e.DSN)
	if err != nil {
		t.Fatalf("parse the environment's DSN: %v", err)
	}
	cfg.User, cfg.Passwd = user, "pw"
	return cfg.FormatDSN()
}
