package node

import (
	"context"
	"log/slog"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/store"
)

// InitCronZone records the cluster's default zone of periodic tasks that
// name none (rows INSERTed the seed's way) when the task center has none
// yet: cron.timezone, else this host's zone. It returns the zone in effect.
// Every node computes such tasks' runs in that zone, never its own.
func InitCronZone(ctx context.Context, st *store.Store, cfg *config.Config, log *slog.Logger) (string, error) {
	zone, err := cronspec.EffectiveZone("", cfg.Cron.Timezone)
	if err != nil {
		got, _, gerr := st.SettingGet(ctx, store.SettingCronTimezone)
		if gerr == nil && got != "" {
			return got, nil // set already: this host's zone does not matter
		}
		return "", err
	}
	got, err := st.SettingInit(ctx, store.SettingCronTimezone, zone)
	if err != nil {
		return "", err
	}
	if got != zone && log != nil {
		log.Info("periodic tasks that name no time zone run in the task center's default, not this node's", "default", got, "node_zone", zone)
	}
	return got, nil
}
