package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// AlertStates returns the alert states, one JSON document per alert
// fingerprint, from the {prefix}alerts hash the alerting node keeps.
func (b *Broker) AlertStates(ctx context.Context) (map[string]string, error) {
	m, err := b.rdb.HGetAll(ctx, b.Keys.Alerts()).Result()
	if err != nil {
		return nil, fmt.Errorf("read alert states: %w", err)
	}
	return m, nil
}

// SaveAlertStates writes set and deletes del in the alert states, at once
// so a reader never sees half an evaluation, and even at maxmemory so the
// alert about it still goes out (MULTI is refused there: one script).
func (b *Broker) SaveAlertStates(ctx context.Context, set map[string]string, del []string) error {
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*len(set)+len(del))
	args = append(args, len(set))
	for k, v := range set {
		args = append(args, k, v)
	}
	for _, k := range del {
		args = append(args, k)
	}
	if err := b.run(ctx, b.rdb, saveAlertsScript, []string{b.Keys.Alerts()}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("save alert states: %w", err)
	}
	return nil
}

// saveAlertsScript sets and deletes fields of the alert states hash.
//
//	KEYS[1] the hash
//	ARGV[1] n, then n field/value pairs to set, then fields to delete
var saveAlertsScript = newScript(`
local n = tonumber(ARGV[1])
for i = 2, 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
for i = 2 * n + 2, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 0
`)
