package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Settings every node reads from the task center (task_setting).
const (
	// SettingCronTimezone is the time zone of periodic tasks whose row
	// names none (seed-style INSERTs).
	SettingCronTimezone = "cron_timezone"
	// settingRedisEpoch + prefix is the lifetime of that prefix's Redis
	// data set (see RedisEpoch).
	settingRedisEpoch = "redis_epoch:"
)

// SettingGet returns the value of a setting, and false when it has none.
func (s *Store) SettingGet(ctx context.Context, name string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, qSettingGet, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read setting %s: %w", name, err)
	}
	return v, true, nil
}

// SettingInit sets a setting that has no value yet and returns the value
// in effect: v, or the one another node set first.
func (s *Store) SettingInit(ctx context.Context, name, v string) (string, error) {
	if _, err := s.db.ExecContext(ctx, qSettingInit, name, v); err != nil {
		return "", fmt.Errorf("set %s: %w", name, err)
	}
	got, _, err := s.SettingGet(ctx, name)
	return got, err
}

// SettingSet sets a setting.
func (s *Store) SettingSet(ctx context.Context, name, v string) error {
	if _, err := s.db.ExecContext(ctx, qSettingSet, name, v); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// settingSwap sets a setting to v if it holds old, and reports whether it
// did: of nodes racing to change it from old, one wins.
func (s *Store) settingSwap(ctx context.Context, name, old, v string) (bool, error) {
	res, err := s.db.ExecContext(ctx, qSettingSwap, v, name, old)
	if err != nil {
		return false, fmt.Errorf("set %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// EpochSeen is what the task center knew of a Redis data set.
type EpochSeen int

const (
	// EpochKnown: the task center recorded this data set before; Redis
	// kept what it had.
	EpochKnown EpochSeen = iota
	// EpochFirst: the task center had no data set for the prefix: a first
	// start, with nothing in Redis to lose. Of the nodes starting at once,
	// one is told so; the others see the data set as known.
	EpochFirst
	// EpochLost: the task center recorded another data set: Redis lost
	// the data it had. Of the nodes that see the new data set, exactly
	// one is told so.
	EpochLost
)

// RedisEpoch records epoch, the marker of the Redis data set under prefix
// (broker.Epoch), and says what the task center knew of it.
func (s *Store) RedisEpoch(ctx context.Context, prefix, epoch string) (EpochSeen, error) {
	name := settingRedisEpoch + prefix
	for range 3 {
		had, ok, err := s.SettingGet(ctx, name)
		switch {
		case err != nil:
			return 0, err
		case !ok:
			res, err := s.db.ExecContext(ctx, qSettingInit, name, epoch)
			if err != nil {
				return 0, fmt.Errorf("set %s: %w", name, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				return EpochFirst, nil // of the nodes starting at once, this one
			}
		case had == epoch:
			return EpochKnown, nil
		default:
			won, err := s.settingSwap(ctx, name, had, epoch)
			if err != nil {
				return 0, err
			}
			if won {
				return EpochLost, nil
			}
		}
		// Another node changed it meanwhile: read it again.
	}
	return 0, fmt.Errorf("record redis epoch of prefix %q: it keeps changing", prefix)
}
