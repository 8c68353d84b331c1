package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/stats"
)

// Notifier delivers notifications. Notify gets every notification of one
// evaluation (possibly none: a chance to deliver what it deferred) and
// must honour ctx's deadline. An error means nothing was delivered or
// queued for delivery, and the alerter sends them again next time.
type Notifier interface {
	Name() string
	Notify(ctx context.Context, alerts []Alert) error
}

// postJSON posts body to url and checks the status (and, for robots that
// answer 200 with an error code, the body through check).
func postJSON(ctx context.Context, client *http.Client, url string, body any, check func([]byte) error) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("notification request: %w", hideURL(err, nil))
	}
	req.Header.Set("Content-Type", "application/json")
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post notification: %w", hideURL(err, req.URL))
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		line, _, _ := strings.Cut(string(reply), "\n")
		if loc, err := resp.Location(); err == nil && resp.StatusCode/100 == 3 {
			// Its host only: a redirect to https of the same hook repeats
			// the secret path.
			line = "redirect to " + loc.Scheme + "://" + loc.Host + "/… not followed: point the URL at the final receiver"
		}
		return fmt.Errorf("post notification: http %d: %s", resp.StatusCode, line)
	}
	if check != nil {
		return check(reply)
	}
	return nil
}

// defaultClient follows only the redirects that repeat the POST with its
// body (307, 308) on the receiver's host: net/http would follow a 301, 302
// or 303 as a GET without the alerts, and count whatever answered that as
// delivered; and a redirect to another host would hand it the alerts and,
// as the Referer, the receiver's secret URL.
var defaultClient = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
	from := via[0].URL
	if req.Method != via[0].Method || !strings.EqualFold(req.URL.Hostname(), from.Hostname()) ||
		from.Scheme == "https" && req.URL.Scheme != "https" {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}}

// hideURL keeps a receiver's URL out of err, which is logged: the URL is
// the secret (a Slack hook's path, a WeCom robot's key), and net/http
// quotes it whole. Only u's scheme and host are left (nil: none).
func hideURL(err error, u *neturl.URL) error {
	var ue *neturl.Error
	if !errors.As(err, &ue) {
		return err
	}
	ue.URL = "(hidden)"
	if u != nil && u.Host != "" {
		ue.URL = u.Scheme + "://" + u.Host + "/…"
	}
	return err
}

// Webhook posts Alertmanager's webhook JSON (version 4), so receivers
// written for Alertmanager take taskd's alerts as they are.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Name implements Notifier.
func (w *Webhook) Name() string { return "webhook" }

// WebhookMessage is the body Webhook posts.
type WebhookMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert of a WebhookMessage. EndsAt is the zero time
// (0001-01-01T00:00:00Z) while firing, as Alertmanager sends it.
type WebhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Notify implements Notifier: one message per evaluation.
func (w *Webhook) Notify(ctx context.Context, alerts []Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	m := WebhookMessage{Version: "4", GroupKey: "taskd", Status: StatusResolved, Receiver: "taskd",
		GroupLabels: map[string]string{}, CommonLabels: commonLabels(alerts), CommonAnnotations: map[string]string{}}
	for _, a := range alerts {
		if a.Status == StatusFiring {
			m.Status = StatusFiring
		}
		m.Alerts = append(m.Alerts, WebhookAlert{Status: a.Status, Labels: a.Labels, Annotations: a.Annotations,
			StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(), Fingerprint: shortFingerprint(a.Fingerprint)})
	}
	return postJSON(ctx, w.Client, w.URL, m, nil)
}

// commonLabels are the labels all alerts share.
func commonLabels(alerts []Alert) map[string]string {
	out := map[string]string{}
	for k, v := range alerts[0].Labels {
		out[k] = v
	}
	for _, a := range alerts[1:] {
		for k, v := range out {
			if a.Labels[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// Slack posts to a Slack incoming webhook: one message per evaluation,
// one line per alert.
type Slack struct {
	URL    string
	Client *http.Client
}

// Name implements Notifier.
func (s *Slack) Name() string { return "slack" }

// Notify implements Notifier.
func (s *Slack) Notify(ctx context.Context, alerts []Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	var b strings.Builder
	for i, a := range alerts {
		if i > 0 {
			b.WriteByte('\n')
		}
		icon := ":red_circle:"
		if a.Status == StatusResolved {
			icon = ":white_check_mark:"
		}
		fmt.Fprintf(&b, "%s *[%s] %s*%s %s", icon, strings.ToUpper(a.Status), a.Name(), severity(&a), summary(&a))
		if u := a.Annotations["runbook_url"]; u != "" && a.Status != StatusResolved {
			fmt.Fprintf(&b, " <%s|runbook>", u)
		}
	}
	return postJSON(ctx, s.Client, s.URL, map[string]string{"text": b.String()}, nil)
}

// line is an alert as one markdown line.
func line(a *Alert) string {
	color := "warning"
	if a.Status == StatusResolved {
		color = "info"
	}
	runbook := ""
	if u := a.Annotations["runbook_url"]; u != "" && a.Status != StatusResolved {
		runbook = " [runbook](" + u + ")"
	}
	return fmt.Sprintf("<font color=\"%s\">[%s]</font> **%s**%s %s%s\n", color, strings.ToUpper(a.Status), a.Name(), severity(a),
		summary(a), runbook)
}

// summary is a chat line's text: a firing alert's summary, or, once it
// resolved, how long it fired with its summary as what was: "RESOLVED"
// beside "5,000 tasks waiting" read at 2 a.m. as the backlog still there.
func summary(a *Alert) string {
	s := a.Annotations["summary"]
	if a.Status != StatusResolved {
		return s
	}
	fired := "resolved"
	if !a.StartsAt.IsZero() && a.EndsAt.After(a.StartsAt) {
		fired = "after " + stats.Roughly(a.EndsAt.Sub(a.StartsAt))
	}
	if s == "" {
		return fired
	}
	return fired + " (was: " + s + ")"
}

// severity is " (critical)" for a firing alert's severity, for the chat
// messages a receiver routes on by eye ("" when resolved or none).
func severity(a *Alert) string {
	if s := a.Labels["severity"]; s != "" && a.Status != StatusResolved {
		return " (" + s + ")"
	}
	return ""
}
