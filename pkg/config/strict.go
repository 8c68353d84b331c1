package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd/pkg/suggest"
	"github.com/taskd/taskd/pkg/task"
)

// A misspelt key must not be ignored: `mysql: { dns: ... }` would leave
// the default DSN in force, and taskd would read and write another task
// center without a word. So every key of the file and every TASKD_*
// variable must name a known key, and every value must decode into its
// key's type, before anything connects anywhere.

// reservedEnvPrefix starts variables of the test suite, which are not
// configuration keys.
const reservedEnvPrefix = "TASKD_TEST_"

// Variables taskd sets for the command `taskd lock` runs; they are not
// keys, and a command that runs taskd in turn passes them on.
const (
	EnvLockName  = "TASKD_LOCK_NAME"
	EnvLockToken = "TASKD_LOCK_TOKEN"
)

// EnvConfig names the configuration file when --config does not: a
// service's environment (a systemd unit, a container) says it once for
// every command.
const EnvConfig = "TASKD_CONFIG"

// leafTypes maps every scalar key (mysql.dsn) to the Go type it decodes
// into, from the mapstructure tags of Config.
var leafTypes = func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("mapstructure")
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(key+".", f.Type)
				continue
			}
			out[key] = f.Type
		}
	}
	walk("", reflect.TypeFor[Config]())
	return out
}()

// entryFields are the keys of one entry of a map section (handlers.CODE,
// queues.NAME) with their types.
var entryFields = map[string]map[string]reflect.Type{
	"handlers": fieldTypes(reflect.TypeFor[HandlerSpec]()),
	"queues":   fieldTypes(reflect.TypeFor[QueueConfig]()),
}

func fieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("mapstructure"); tag != "" && tag != "-" {
			out[tag] = t.Field(i).Type
		}
	}
	return out
}

// EnvVar is the environment variable that overrides key.
func EnvVar(key string) string {
	return "TASKD_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// checkFile rejects keys of the file that taskd does not know, and values
// that do not decode into their key's type.
func checkFile(file string, raw map[string]any) error {
	for _, k := range sortedKeys(raw) {
		if err := checkNode(file, strings.ToLower(k), raw[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkNode checks the file's value at key (lower case, dotted).
func checkNode(file, key string, val any) error {
	if t, ok := leafTypes[key]; ok {
		if fields, isMap := entryFields[key]; isMap {
			return checkEntries(file, key, val, fields)
		}
		return checkValue(key, val, t, file)
	}
	if !isSection(key) {
		return unknownKey(key, file)
	}
	// A section whose keys are all commented out is YAML null: the same
	// as the section left out, its defaults in force.
	if val == nil {
		return nil
	}
	m, isMap := val.(map[string]any)
	if !isMap {
		if err := noSpace(key, val, file); err != nil {
			return err
		}
		return badValue(key, val, "a map of the section's keys", file)
	}
	for _, k := range sortedKeys(m) {
		if err := checkNode(file, key+"."+strings.ToLower(k), m[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkEntries checks handlers or queues: any name, known fields.
func checkEntries(file, section string, val any, fields map[string]reflect.Type) error {
	if val == nil {
		return nil
	}
	m, ok := val.(map[string]any)
	if !ok {
		return badValue(section, val, "a map of names to settings", file)
	}
	// The configuration's keys are read without case: two names that
	// differ only in it would be one entry, the settings of one in force
	// under the other's name, and the other's tasks without a handler.
	seen := map[string]string{}
	for _, name := range sortedKeys(m) {
		if other, ok := seen[strings.ToLower(name)]; ok {
			return task.Invalidf("%s.%s and %s.%s in %s differ only in case, which the configuration cannot tell apart: rename one",
				section, other, section, name, file)
		}
		seen[strings.ToLower(name)] = name
	}
	// A setting indented one level short (handlers:\n  hello:\n  exec:
	// [...]) is said first: its entry, left empty, sorts anywhere.
	for _, name := range sortedKeys(m) {
		if _, isMap := m[name].(map[string]any); !isMap && fields[strings.ToLower(name)] != nil {
			return badValue(section+"."+name, m[name], fmt.Sprintf("a map of settings (%s is a setting: indent it under the name it belongs to)", name), file)
		}
	}
	for _, name := range sortedKeys(m) {
		entry, ok := m[name].(map[string]any)
		if !ok {
			if err := noSpace(section+"."+name, m[name], file); err != nil {
				return err
			}
			return badValue(section+"."+name, m[name], "a map of settings", file)
		}
		for _, f := range sortedKeys(entry) {
			key := section + "." + name + "." + f
			t, known := fields[strings.ToLower(f)]
			if !known {
				if hint := elsewhere(section, name, strings.ToLower(f), entry); hint != "" {
					return task.Invalidf("unknown key %q in %s (%s)", key, file, hint)
				}
				var cands []string
				for k := range fields {
					cands = append(cands, section+"."+name+"."+k)
				}
				return unknownKeyAmong(key, file, cands)
			}
			if err := checkArgv(section, strings.ToLower(f), key, entry[f], file); err != nil {
				return err
			}
			if err := checkZero(section, strings.ToLower(f), key, entry[f], file); err != nil {
				return err
			}
			if err := checkValue(key, entry[f], t, file); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyElsewhere are keys of other tools' files and of other drivers'
// settings (a host, a port, a user of their own), which no edit distance
// reaches, with where taskd takes what they hold (a hint, see hintText).
var keyElsewhere = func() map[string]string {
	const (
		dsn    = `mysql.dsn holds it: "user:password@tcp(host:3306)/taskd"`
		addr   = `redis.addr holds it: "host:6379"`
		stderr = "taskd logs to stderr: Supervisor's stderr_logfile or the journal keeps it"
	)
	m := map[string]string{
		"redis.host": addr, "redis.port": addr, "redis.url": addr + ", with redis.password and redis.db",
		"log.file": stderr, "log.path": stderr,
		"worker.workers": "=worker.concurrency", "worker.slots": "=worker.concurrency",
		"database": "=mysql", "db": "=mysql", "mariadb": "=mysql",
	}
	for _, k := range []string{"host", "port", "user", "username", "password", "database", "dbname", "db", "url"} {
		m["mysql."+k] = dsn
	}
	return m
}()

// entryElsewhere are fields that other tools (Supervisor, crontab, other
// queues) put in a handler or a queue, which no edit distance reaches,
// with a hint (see hintText) in which QUEUE stands for the handler's
// queue, NAME for the entry's name.
var entryElsewhere = func() map[string]map[string]string {
	const (
		rate    = "rate limits are a queue's: queues.QUEUE.rate"
		retries = "retries are a task's: --max-retry of taskd submit and cron add, 3 by default"
		cron    = "periodic tasks are added with taskd cron add NAME 'EXPR'"
		exec    = "handlers are set per task code: handlers.NAME.exec"
	)
	return map[string]map[string]string{
		"handlers": {
			"command": "=handlers.NAME.exec", "cmd": "=handlers.NAME.exec", "run": "=handlers.NAME.exec",
			"script": "=handlers.NAME.exec", "args": "=handlers.NAME.exec",
			"url": "=handlers.NAME.http", "endpoint": "=handlers.NAME.http", "headers": "=handlers.NAME.header",
			"cwd": "=handlers.NAME.dir", "workdir": "=handlers.NAME.dir", "working_dir": "=handlers.NAME.dir",
			"directory": "=handlers.NAME.dir", "environment": "=handlers.NAME.env",
			"processes": "=handlers.NAME.size", "procs": "=handlers.NAME.size", "numprocs": "=handlers.NAME.size",
			"pool_size":   "=handlers.NAME.size",
			"concurrency": "slots are a queue's: queues.QUEUE.concurrency",
			"rate":        rate, "rate_limit": rate,
			"max_running": "queues.QUEUE.max_running", "shards": "queues.QUEUE.shards",
			"retries": retries, "max_retry": retries,
			"cron": cron, "schedule": cron,
		},
		"queues": {
			"slots": "=queues.NAME.concurrency", "workers": "=queues.NAME.concurrency",
			"rate_limit": "=queues.NAME.rate", "max_concurrency": "=queues.NAME.max_running",
			"exec": exec, "command": exec,
			"timeout": "timeouts are a handler's: handlers.NAME.timeout",
		},
	}
}()

// hintText words a hint of keyElsewhere or entryElsewhere: "=K" is the
// key K meant (did you mean "K"?), any other text says where the setting
// is.
func hintText(hint string) string {
	if k, same := strings.CutPrefix(hint, "="); same {
		return fmt.Sprintf("did you mean %q?", k)
	}
	return hint
}

// elsewhere is the hint of entryElsewhere for field of the entry name of
// section, worded, "" when it has none.
func elsewhere(section, name, field string, entry map[string]any) string {
	hint, ok := entryElsewhere[section][field]
	if !ok {
		return ""
	}
	queue := name
	if q, ok := entry["queue"].(string); ok && q != "" {
		queue = q
	}
	return hintText(strings.NewReplacer("QUEUE", queue, "NAME", name).Replace(hint))
}

// zeroMeans are the fields whose 0 reads as "the default" where a reader
// takes it for "none": a queue written with concurrency 0 to stop it on
// a node ran 10 slots. Left out, they take the default; written, they
// take 1 or more.
var zeroMeans = map[string]map[string]string{
	"queues":   {"concurrency": "1 or more slots: leave the key out for the default (worker.concurrency, or 4 per process of its pool handlers); `taskd pause QUEUE` stops a queue on every node"},
	"handlers": {"size": "1 or more processes: leave the key out for the default (4)"},
}

// checkZero refuses an explicit 0 of a zeroMeans field.
func checkZero(section, field, key string, val any, file string) error {
	want, ok := zeroMeans[section][field]
	if !ok {
		return nil
	}
	if n, isInt := val.(int); isInt && n == 0 {
		return badValue(key, val, want, file)
	}
	return nil
}

// listFields are the handler fields that hold a list that one string must
// not stand for, with what the list looks like.
var listFields = map[string]string{
	"exec":                 `a list of argv strings, e.g. ["sh", "-c", "echo hi"]`,
	"pool":                 `a list of argv strings, e.g. ["sh", "-c", "echo hi"]`,
	"env":                  `a list of NAME=value strings, e.g. ["APP_ENV=production", "LANG=C"]`,
	"permanent_exit_codes": `a list of exit statuses, e.g. [65, 78]`,
}

// checkArgv rejects a list written as one string: decoding would take
// `exec: "echo hi"` as the program "echo hi", which no shell splits, and
// `env: "A=1,B=x,y"` as three entries split at every comma; only doctor or
// the first task would find out.
func checkArgv(section, field, key string, val any, file string) error {
	want, ok := listFields[field]
	if section != "handlers" || !ok {
		return nil
	}
	if _, isList := val.([]any); isList || val == nil {
		return nil
	}
	return badValue(key, val, want, file)
}

// isSection reports whether key is a prefix of known keys (mysql, redis).
func isSection(key string) bool {
	for k := range leafTypes {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

func unknownKey(key, source string) error {
	if hint, ok := keyElsewhere[key]; ok {
		return task.Invalidf("unknown key %q in %s (%s)", key, source, hintText(hint))
	}
	// Suggest among keys at the same depth: "workr" is nearest "worker",
	// "mysql.dns" nearest "mysql.dsn".
	depth := strings.Count(key, ".")
	var cands []string
	seen := map[string]bool{}
	for k := range leafTypes {
		parts := strings.Split(k, ".")
		if len(parts) <= depth {
			continue
		}
		c := strings.Join(parts[:depth+1], ".")
		if !seen[c] {
			seen[c] = true
			cands = append(cands, c)
		}
	}
	return unknownKeyAmong(key, source, cands)
}

func unknownKeyAmong(key, source string, cands []string) error {
	return task.Invalidf("unknown key %q in %s%s", key, source, suggest.DidYouMean(key, cands))
}

// envKeys are the keys a TASKD_* variable can set, sorted: every scalar
// key (handlers and queues entries are maps, set in the file only).
func envKeys() []string {
	var keys []string
	for _, k := range sortedKeys(leafTypes) {
		if _, isMap := entryFields[k]; !isMap {
			keys = append(keys, k)
		}
	}
	return keys
}

// checkEnv rejects TASKD_* variables that name no key.
func checkEnv(environ []string) error {
	known := map[string]bool{}
	var names []string
	for _, k := range envKeys() {
		known[EnvVar(k)] = true
		names = append(names, EnvVar(k))
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "TASKD_") || strings.HasPrefix(name, reservedEnvPrefix) || known[name] ||
			name == EnvLockName || name == EnvLockToken || name == EnvConfig {
			continue
		}
		for k, hint := range keyElsewhere {
			if strings.Contains(k, ".") && EnvVar(k) == name { // sections have no variable
				// The hint's keys as the variables that set them.
				hint = keyName.ReplaceAllStringFunc(hintText(hint), func(key string) string {
					if _, ok := leafTypes[key]; ok {
						return EnvVar(key)
					}
					return key
				})
				return task.Invalidf("unknown variable %s in the environment (%s)", name, hint)
			}
		}
		return task.Invalidf("unknown variable %s in the environment%s", name, suggest.DidYouMean(name, names))
	}
	return nil
}

// keyName matches a dotted key in a hint of keyElsewhere.
var keyName = regexp.MustCompile(`[a-z]+\.[a-z_]+`)

// envValue is the value of key's TASKD_* variable, if it sets one. An
// empty variable sets nothing, as viper reads it: a compose file's
// TASKD_REDIS_PASSWORD=${REDIS_PASSWORD}, with REDIS_PASSWORD unset,
// leaves the file's value in force.
func envValue(key string) (string, bool) {
	v := os.Getenv(EnvVar(key))
	return v, v != ""
}

// EnvSetsAny reports whether a TASKD_* variable sets a configuration key:
// a deployment configured by its environment alone needs no file.
func EnvSetsAny() bool {
	for _, k := range envKeys() {
		if _, ok := envValue(k); ok {
			return true
		}
	}
	return false
}

// checkEnvValues checks the value of every TASKD_* variable that is set.
func checkEnvValues() error {
	for _, key := range envKeys() {
		if val, ok := envValue(key); ok {
			if err := checkValue(key, val, leafTypes[key], "environment variable "+EnvVar(key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkValue decodes val into a value of type t the way viper does.
func checkValue(key string, val any, t reflect.Type, source string) error {
	out := reflect.New(t)
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		WeaklyTypedInput: true,
		Result:           out.Interface(),
		DecodeHook:       decodeHook(),
	})
	if err != nil {
		return fmt.Errorf("config %s: %w", key, err)
	}
	if t == reflect.TypeFor[time.Duration]() && bareNumber(val) {
		return badValue(key, val, "a duration with its unit, such as 100ms, 30s or 5m (a bare number is nanoseconds)", source)
	}
	if err := dec.Decode(val); err != nil {
		if f, ok := val.(float64); ok {
			val = decimal(f)
		}
		return badValue(key, val, wantFor(t, val), source)
	}
	return nil
}

// days matches a duration written in days, which Go's durations lack.
var days = regexp.MustCompile(`^\s*([0-9]+)\s*d\s*$`)

// wantFor is Want, with the hours of a duration given in days ("7d").
func wantFor(t reflect.Type, val any) string {
	want := Want(t)
	if m := days.FindStringSubmatch(fmt.Sprint(val)); m != nil && t == reflect.TypeFor[time.Duration]() {
		if n, err := strconv.Atoi(m[1]); err == nil {
			want += fmt.Sprintf("; there is no d: %s is %dh", strings.TrimSpace(fmt.Sprint(val)), 24*n)
		}
	}
	return want
}

// decimal prints a number the file gave with a point as written, 10.0,
// where %v prints 10: "bad value 10 ...: want a whole number" would puzzle.
type decimal float64

func (d decimal) String() string {
	s := strconv.FormatFloat(float64(d), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eIN") { // not 1.5, 1e+21, Inf or NaN
		s += ".0"
	}
	return s
}

// bareNumber reports a duration written as a number other than 0: "100"
// decodes as 100 ns, and a poll or probe interval of 100 ns is a loop that
// never rests, not what anyone meant.
func bareNumber(val any) bool {
	switch v := val.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err == nil && f != 0
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprint(v) != "0"
	}
	return false
}

// Want says what a value of type t looks like: "a whole number".
func Want(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration such as 500ms, 30s or 5m"
	case t == reflect.TypeFor[Bytes]():
		return "a size such as 1048576, 64KiB or 32MiB"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t == reflect.TypeFor[map[string]string]():
		return "a map of names to strings" // a map of lists is also "a map"
	case t.Kind() == reflect.Map:
		return "a map"
	}
	return "a " + t.String()
}

// badValue is the error for a value that key cannot take.
func badValue(key string, val any, want, source string) error {
	return task.Invalidf("bad value %s for %s in %s: want %s", quoteValue(key, val), key, source, want)
}

// noSpace is the error of a section or entry at key that YAML read as one
// string for want of a space after a colon (`dsn:"root:pw@tcp(db)/t"`),
// with the value hidden as the key it was meant for hides it: printed
// whole, the string showed the password. Nil when val is not such.
func noSpace(key string, val any, file string) error {
	s, ok := val.(string)
	if !ok {
		return nil
	}
	k, rest, found := strings.Cut(s, ":")
	if !found || k == "" || strings.ContainsAny(k, " \t\"'") {
		return nil
	}
	rest = strings.Trim(rest, `"'`)
	return task.Invalidf("bad value for %s in %s: %q has no space after its colon, so YAML reads the line as one string: write %s: %s",
		key, file, k+":", k, quoteValue(key+"."+strings.ToLower(k), rest))
}

// quoteValue prints val for an error message about key, credentials
// hidden.
func quoteValue(key string, val any) string {
	if secret(key) && val != nil && val != "" {
		return "(hidden)"
	}
	switch v := val.(type) {
	case string:
		if strings.HasSuffix(key, "dsn") {
			v = hideDSNPassword(v)
		}
		return fmt.Sprintf("%q", v)
	case nil:
		return "(empty)"
	}
	return fmt.Sprintf("%v", val)
}

// BindFlag makes flag override key in v, as viper's BindPFlag does, and
// remembers it, so that an error about the key's value names the flag
// when it was given, not the file.
func BindFlag(v *viper.Viper, key string, flag *pflag.Flag) {
	_ = v.BindPFlag(key, flag)
	m, _ := boundFlags.LoadOrStore(v, &sync.Map{})
	m.(*sync.Map).Store(key, flag)
}

// boundFlags holds, per viper instance, the flag BindFlag bound to each key.
var boundFlags sync.Map

// source names where key's value came from: its flag, its variable, the
// file, or the default (viper's order of precedence).
func source(v *viper.Viper, key, file string) string {
	if m, ok := boundFlags.Load(v); ok {
		if f, ok := m.(*sync.Map).Load(key); ok && f.(*pflag.Flag).Changed {
			return "flag --" + f.(*pflag.Flag).Name
		}
	}
	if _, ok := envValue(key); ok {
		return "environment variable " + EnvVar(key)
	}
	if file != "" && v.InConfig(key) {
		return file
	}
	return "the defaults"
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// keyError is a value Validate rejects; Load adds where it came from.
type keyError struct {
	key  string
	val  any
	want string
}

func (e *keyError) Error() string {
	return fmt.Sprintf("bad value %s for %s: want %s", quoteValue(e.key, e.val), e.key, e.want)
}

func (e *keyError) Unwrap() error { return task.Invalidf("%s", e.Error()) }

// invalid reports that key cannot take val.
func invalid(key string, val any, want string, args ...any) error {
	return &keyError{key: key, val: val, want: fmt.Sprintf(want, args...)}
}

// withSource names the source of the key a keyError is about.
func withSource(err error, v *viper.Viper, file string) error {
	var ke *keyError
	if !errors.As(err, &ke) {
		return err
	}
	return badValue(ke.key, ke.val, ke.want, source(v, ke.key, file))
}

// hideDSNPassword replaces the password of a go-sql-driver DSN with ***.
// The driver reads it from the first ':' to the last '@' before the
// database; hiding up to the DSN's last '@' hides more when a parameter
// holds one, never less (a password may hold an '@'). A DSN that lost its
// '@' (user:password/db, user:passwordtcp(host)/db) is hidden from the ':'
// up to the address or the database.
func hideDSNPassword(dsn string) string {
	end := strings.LastIndexByte(dsn, '@')
	if end < 0 {
		if end = strings.IndexAny(dsn, "(/"); end < 0 {
			end = len(dsn)
		}
	}
	i := strings.IndexByte(dsn[:end], ':')
	if i < 0 {
		return dsn
	}
	return dsn[:i+1] + "***" + dsn[end:]
}

// secret reports whether key holds a credential that errors must not print:
// an http handler's header carries its Authorization or API key.
func secret(key string) bool {
	return strings.HasSuffix(key, "password") || strings.HasSuffix(key, "_url") ||
		strings.HasPrefix(key, "handlers.") && (strings.HasSuffix(key, ".header") || strings.Contains(key, ".header."))
}

// negativeNumber matches what follows the dash of a negative number.
var negativeNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// flagTypes are the Go types of pflag's value types, for Want.
var flagTypes = map[string]reflect.Type{
	"duration": reflect.TypeFor[time.Duration](), "bool": reflect.TypeFor[bool](),
	"int": reflect.TypeFor[int](), "int8": reflect.TypeFor[int8](), "int16": reflect.TypeFor[int16](),
	"int32": reflect.TypeFor[int32](), "int64": reflect.TypeFor[int64](), "uint": reflect.TypeFor[uint](),
	"uint8": reflect.TypeFor[uint8](), "uint16": reflect.TypeFor[uint16](), "uint32": reflect.TypeFor[uint32](),
	"uint64": reflect.TypeFor[uint64](), "float32": reflect.TypeFor[float32](), "float64": reflect.TypeFor[float64](),
}

// FlagError words a command-line flag's bad value like a bad configuration
// value (`bad value "5" for --delay: want a duration such as 500ms, 30s or
// 5m`), not in the parser's words (`strconv.ParseInt: parsing "5": invalid
// syntax`). A negative number given as an argument (`reshard q -1`), which
// the parser reads as flags, is named as such, as is one with a space
// ("-1 * * * *"). A mistyped --name gets the flag of flags it was likely
// meant as (`unknown flag: --node (did you mean --node-id?)`). Other
// errors are returned as they are.
func FlagError(flags *pflag.FlagSet, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		short := ne.GetSpecifiedShortnames()
		switch {
		case short == "" && ne.GetSpecifiedName() != "":
			if near := nearFlag(flags, ne.GetSpecifiedName()); near != "" {
				return fmt.Errorf("%w (did you mean %s?)", err, near)
			}
		case negativeNumber.MatchString(short):
			return task.Invalidf("bad argument \"-%s\": no argument takes a negative number", short)
		case strings.Contains(short, " "):
			// No flag holds a space: "-1 * * * *" is an argument the
			// parser took for the flags -1, - and *.
			return task.Invalidf("bad argument \"-%s\": it starts with -, so it reads as flags; to give it as an argument, put -- before it", short)
		case short != "":
			// "-n 5" and "-n5" alike: the parser stops at the first letter.
			if near := flagSynonym(flags, shortSynonyms[short[:1]]); near != "" {
				return fmt.Errorf("%w (did you mean %s?)", err, near)
			}
		}
	}
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	t, ok := flagTypes[iv.GetFlag().Value.Type()]
	if !ok {
		return err
	}
	return task.Invalidf("bad value %q for --%s: want %s", iv.GetValue(), iv.GetFlag().Name, wantFor(t, iv.GetValue()))
}

// flagSynonyms are the names other tools give taskd's flags (--json,
// --timezone, --retries, --data, --force), which no edit distance
// reaches: each maps to its suggestions, the first of flags' used.
var flagSynonyms = map[string][]string{
	"json":   {"output=-o json"},
	"format": {"output"},

	"timezone": {"tz"}, "time-zone": {"tz"}, "zone": {"tz"},

	"retries": {"max-retry"}, "retry": {"max-retry"}, "max-retries": {"max-retry"},
	"max-attempts": {"max-retry"}, "attempts": {"max-retry"},

	"data": {"payload"}, "args": {"payload"}, "arguments": {"payload"},
	"body": {"payload"}, "params": {"payload"}, "input": {"payload"},

	"task-code": {"code"}, "task": {"code"}, "job": {"code"}, "name": {"code"},

	"run-at": {"at"}, "eta": {"at"}, "when": {"at"}, "process-at": {"at"},
	"in": {"delay"}, "after": {"delay"}, "countdown": {"delay"}, "process-in": {"delay"},

	"unique": {"unique-key"}, "key": {"unique-key"}, "dedupe": {"unique-key"}, "idempotency-key": {"unique-key"},

	"force": {"yes"}, "assume-yes": {"yes"}, "no-confirm": {"yes"},
	"count": {"limit"}, "max": {"limit"},
	"state": {"status"},
}

// shortSynonyms are the one-letter flags other tools give the same
// meaning: -n for a count (head, git log).
var shortSynonyms = map[string][]string{"n": {"limit"}, "f": {"yes"}}

// flagSynonym is the first of candidates that flags has, as a suggestion:
// "--tz", or the text after "=" in "output=-o json".
func flagSynonym(flags *pflag.FlagSet, candidates []string) string {
	for _, c := range candidates {
		name, say, ok := strings.Cut(c, "=")
		if !ok {
			say = "--" + name
		}
		if flags.Lookup(name) != nil {
			return say
		}
	}
	return ""
}

// nearFlag is the flag of flags a mistyped --name was likely meant as,
// dashes included: the flag other tools' name stands for (--tz for
// --timezone), the one flag it begins (--node-id for --node), else the
// nearest by edits.
func nearFlag(flags *pflag.FlagSet, name string) string {
	if near := flagSynonym(flags, flagSynonyms[name]); near != "" {
		return near
	}
	var names, longer []string
	flags.VisitAll(func(f *pflag.Flag) {
		names = append(names, f.Name)
		if strings.HasPrefix(f.Name, name) {
			longer = append(longer, f.Name)
		}
	})
	if len(longer) == 1 {
		return "--" + longer[0]
	}
	if near := suggest.Nearest(name, names); near != "" {
		return "--" + near
	}
	return ""
}

// yamlLine finds the line a YAML parser's message names ("line 4: ...").
var yamlLine = regexp.MustCompile(`line (\d+):`)

// parseError is the error of a config file that is not valid YAML: the
// parser's message without viper's prefix, and what most often causes it
// where the file shows it (a tab in the named line's indentation, a quote
// left open), since "found character that cannot start any token" says
// neither.
func parseError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "While parsing config: ")
	if n := errorLine(msg); n > 0 {
		if b, rerr := os.ReadFile(file); rerr == nil {
			if lines := strings.Split(string(b), "\n"); n <= len(lines) {
				line := lines[n-1]
				indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
				if strings.Contains(indent, "\t") {
					msg += fmt.Sprintf(" (line %d is indented with a tab: YAML indents with spaces)", n)
				} else if q := quoteLeftOpen(lines, n); q > 0 {
					msg += fmt.Sprintf(" (line %d opens a quote it does not close)", q)
				} else if strings.Contains(msg, "did not find expected key") || strings.Contains(msg, "mapping values are not allowed") {
					if k, w := oddIndent(lines, n); k > 0 {
						spaces := "spaces"
						if w == 1 {
							spaces = "space"
						}
						msg += fmt.Sprintf(" (line %d is indented %d %s, as no line before it is: align it with its neighbours)", k, w, spaces)
					}
				}
			}
		}
	}
	return task.Invalidf("config file %s: %s", file, msg)
}

// oddIndent is the line at or right after line n (the parser names the
// mapping the line broke, which may be the line before) indented as no
// line before it is, where it does not open a deeper level: a key out of
// line with its section (" redis:" under "  dsn: ..."), and its
// indentation; 0 if none.
func oddIndent(lines []string, n int) (int, int) {
	levels := map[int]bool{}
	prev, opens := 0, false
	for i, line := range lines {
		k := i + 1
		if k > n+1 {
			break
		}
		text := strings.TrimLeft(line, " ")
		if text == "" || text[0] == '#' {
			continue
		}
		w := len(line) - len(text)
		deeper := opens && w > prev
		if k >= n && len(levels) > 0 && !levels[w] && !deeper && !strings.HasPrefix(text, "- ") {
			return k, w
		}
		levels[w] = true
		prev, opens = w, strings.HasSuffix(strings.TrimSpace(text), ":")
	}
	return 0, 0
}

// errorLine is the line a YAML parser's message names, 0 if none.
func errorLine(msg string) int {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// quoteLeftOpen is the line that opens a quote it does not close and
// caused the parse error at line n, 0 if none did. It need not be line n:
// a quoted value runs on over the next lines up to the next quote, and
// the parser then names the mapping it was in ("line 16: did not find
// expected key" for a quote opened on line 23). A line is the cause when
// closing its quote leaves no error up to n and up to itself, so a value
// rightly quoted over several lines is not blamed.
func quoteLeftOpen(lines []string, n int) int {
	for i, line := range lines {
		q := openQuote(line)
		if q == "" {
			continue
		}
		fixed := slices.Clone(lines)
		fixed[i] = strings.TrimRight(line, " \t\r") + q
		var v any
		err := yaml.Unmarshal([]byte(strings.Join(fixed, "\n")), &v)
		if err == nil || errorLine(err.Error()) > max(n, i+1) {
			return i + 1
		}
	}
	return 0
}

// openQuote is the quote that a line's value starts with and the line
// does not close, "" if none.
func openQuote(line string) string {
	_, v, ok := strings.Cut(line, ": ")
	if v = strings.TrimSpace(v); !ok || v == "" {
		return ""
	}
	switch {
	case v[0] == '"' && strings.Count(strings.ReplaceAll(v, `\"`, ""), `"`) == 1,
		v[0] == '\'' && strings.Count(v, "'")%2 == 1:
		return v[:1]
	}
	return ""
}
