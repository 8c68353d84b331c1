package broker

import (
	"context"
	"fmt"
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

// SaveAlertStates writes set and deletes del in the alert states, in one
// transaction so a reader never sees half an evaluation.
func (b *Broker) SaveAlertStates(ctx context.Context, set map[string]string, del []string) error {
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	pipe := b.rdb.TxPipeline()
	if len(set) > 0 {
		pipe.HSet(ctx, b.Keys.Alerts(), set)
	}
	if len(del) > 0 {
		pipe.HDel(ctx, b.Keys.Alerts(), del...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("save alert states: %w", err)
	}
	return nil
}
