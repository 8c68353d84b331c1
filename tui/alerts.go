package tui

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/taskd/taskd/pkg/store"
)

// alertDoc is the part of an alert's state (pkg/alert, kept in the
// task_alert table) that tasktop shows.
type alertDoc struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Active      time.Time         `json:"active"`
	Firing      bool              `json:"firing"`
	StartsAt    time.Time         `json:"starts_at"`
}

// StoredAlerts reads the alert states the alerting node keeps in the task
// center:
// firing ones, and those whose condition holds but not yet for long enough
// (pending), or that resolved and are still remembered.
func StoredAlerts(st *store.Store) func(ctx context.Context) ([]Alert, error) {
	return func(ctx context.Context) ([]Alert, error) {
		raw, err := st.AlertStates(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]Alert, 0, len(raw))
		for fp, doc := range raw {
			var d alertDoc
			if json.Unmarshal([]byte(doc), &d) != nil {
				continue
			}
			a := Alert{Name: fp, Queue: d.Labels["queue"], Firing: d.Firing, Since: d.StartsAt, Summary: d.Annotations["summary"]}
			if !d.Firing && !d.Active.IsZero() {
				a.Pending, a.Since = true, d.Active
			}
			out = append(out, a)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
}
