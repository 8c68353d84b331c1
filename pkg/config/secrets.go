package config

import (
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// secretsIn lists the keys of a configuration file's YAML whose values are
// credentials: a DSN with a password, redis.password, the alert receivers'
// URLs (their path or query is their key) and http handlers' headers.
func secretsIn(raw map[string]any) []string {
	var keys []string
	for _, k := range []string{"dsn", "read_dsn"} {
		if dsn, _ := lookup(raw, "mysql", k).(string); dsn != "" {
			if m, err := mysql.ParseDSN(dsn); err == nil && m.Passwd != "" {
				keys = append(keys, "mysql."+k)
			}
		}
	}
	if p := lookup(raw, "redis", "password"); p != nil && p != "" {
		keys = append(keys, "redis.password")
	}
	for _, k := range []string{"webhook_url", "slack_url", "wecom_url"} {
		if u, _ := lookup(raw, "alerts", k).(string); u != "" {
			keys = append(keys, "alerts."+k)
		}
	}
	handlers, _ := lookup(raw, "handlers").(map[string]any)
	var codes []string
	for code, h := range handlers {
		if hm, ok := h.(map[string]any); ok {
			if hdr, _ := lookup(hm, "header").(map[string]any); len(hdr) > 0 {
				codes = append(codes, code)
			}
		}
	}
	slices.Sort(codes)
	for _, code := range codes {
		keys = append(keys, "handlers."+code+".header")
	}
	return keys
}

// lookup returns the value at path in YAML's nested maps, its keys matched
// without regard to case as viper does; nil when there is none.
func lookup(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = nil
		for k, x := range mm {
			if strings.EqualFold(k, p) {
				v = x
				break
			}
		}
	}
	return v
}
