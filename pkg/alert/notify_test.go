package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/alert"
)

// receiver is a local HTTP endpoint that records the bodies posted to it
// and answers with reply.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newReceiver(t *testing.T, reply string) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.mu.Unlock()
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func sample(status, name, queue string) alert.Alert {
	a := alert.Alert{Status: status, Fingerprint: name + "{queue=" + queue + "}",
		Labels: map[string]string{"alertname": name, "severity": "warning", "queue": queue},
		Annotations: map[string]string{"summary": "queue " + queue + ": something", "description": "what it means",
			"runbook_url": "https://example.com/runbook#" + name},
		StartsAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	if status == alert.StatusResolved {
		a.EndsAt = a.StartsAt.Add(time.Minute)
	}
	return a
}

// The webhook posts Alertmanager's webhook JSON: version 4, status firing
// when any alert fires, per alert its labels, annotations, startsAt,
// endsAt (zero time while firing) and a fingerprint.
func TestWebhookPayload(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, "")
	n := &alert.Webhook{URL: r.URL}
	require.NoError(t, n.Notify(context.Background(), []alert.Alert{
		sample(alert.StatusFiring, alert.RuleBacklog, "mail"), sample(alert.StatusResolved, alert.RuleBacklog, "sms")}))
	require.NoError(t, n.Notify(context.Background(), nil), "nothing to send is not an error")
	bodies := r.received()
	require.Len(t, bodies, 1)

	var raw map[string]any
	require.NoError(t, json.Unmarshal(bodies[0], &raw))
	for _, k := range []string{"version", "groupKey", "status", "receiver", "groupLabels", "commonLabels", "commonAnnotations", "externalURL", "alerts"} {
		require.Contains(t, raw, k)
	}
	var m alert.WebhookMessage
	require.NoError(t, json.Unmarshal(bodies[0], &m))
	require.Equal(t, "4", m.Version)
	require.Equal(t, alert.StatusFiring, m.Status)
	require.Equal(t, map[string]string{"alertname": alert.RuleBacklog, "severity": "warning"}, m.CommonLabels)
	require.Len(t, m.Alerts, 2)
	require.Equal(t, alert.StatusFiring, m.Alerts[0].Status)
	require.Equal(t, "mail", m.Alerts[0].Labels["queue"])
	require.Equal(t, "queue mail: something", m.Alerts[0].Annotations["summary"])
	require.Equal(t, "2026-11-30T10:00:00Z", m.Alerts[0].StartsAt.Format(time.RFC3339))
	require.Contains(t, string(bodies[0]), `"endsAt":"0001-01-01T00:00:00Z"`)
	require.Regexp(t, `^[0-9a-f]{16}$`, m.Alerts[0].Fingerprint)
	require.NotEqual(t, m.Alerts[0].Fingerprint, m.Alerts[1].Fingerprint)
	require.Equal(t, "2026-11-30T10:01:00Z", m.Alerts[1].EndsAt.Format(time.RFC3339))
}

// Slack gets one incoming-webhook message per evaluation, a line per
// alert.
func TestSlackPayload(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, "ok")
	n := &alert.Slack{URL: r.URL}
	require.NoError(t, n.Notify(context.Background(), []alert.Alert{
		sample(alert.StatusFiring, alert.RuleNoConsumer, "mail"), sample(alert.StatusResolved, alert.RuleBacklog, "sms")}))
	bodies := r.received()
	require.Len(t, bodies, 1)
	var m map[string]string
	require.NoError(t, json.Unmarshal(bodies[0], &m))
	require.Equal(t, ":red_circle: *[FIRING] taskd_no_consumer* (warning) queue mail: something <https://example.com/runbook#taskd_no_consumer|runbook>\n"+
		":white_check_mark: *[RESOLVED] taskd_backlog* after 1m (was: queue sms: something)", m["text"])
}

// A refusing receiver is an error the alerter sees.
func TestNotifierErrors(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	err := (&alert.Slack{URL: down.URL}).Notify(context.Background(), []alert.Alert{sample(alert.StatusFiring, alert.RuleBacklog, "q")})
	require.ErrorContains(t, err, "http 503: maintenance")

	// The WeCom robot answers 200 with an error code; the alerts are not
	// kept, as the alerter sends them again.
	r := newReceiver(t, `{"errcode":45009,"errmsg":"api freq out of limit"}`)
	w := &alert.WeCom{URL: r.URL}
	err = w.Notify(context.Background(), []alert.Alert{sample(alert.StatusFiring, alert.RuleBacklog, "q")})
	require.ErrorContains(t, err, "errcode 45009")
	require.NoError(t, w.Notify(context.Background(), nil))
	require.Len(t, r.received(), 1, "nothing left to retry inside the notifier")
}

// A receiver that cannot be reached is an error that names its host, not
// its URL: the URL is the secret, and the error is logged.
func TestNotifierErrorsHideTheURL(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, n := range []alert.Notifier{
		&alert.Slack{URL: closed.URL + "/services/T0/B0/s3cret"},
		&alert.Webhook{URL: closed.URL + "/alerts?token=s3cret"},
		&alert.WeCom{URL: closed.URL + "/cgi-bin/webhook/send?key=s3cret"},
		&alert.Slack{URL: "http://hooks example/s3cret"}, // not a URL
	} {
		err := n.Notify(context.Background(), []alert.Alert{sample(alert.StatusFiring, alert.RuleBacklog, "q")})
		require.Error(t, err, n.Name())
		require.NotContains(t, err.Error(), "s3cret", n.Name())
	}
	err := (&alert.Slack{URL: closed.URL + "/services/T0/B0/s3cret"}).Notify(context.Background(), []alert.Alert{sample(alert.StatusFiring, alert.RuleBacklog, "q")})
	require.ErrorContains(t, err, `post notification: Post "`+closed.URL+`/…": dial tcp`)
}

// A receiver's redirect to another host, or one that would turn the POST
// into a GET, is not followed: the alerts are not delivered (and are sent
// again), rather than lost to whatever answered, and the other host never
// sees the receiver's secret URL. A 308 on the same host is followed.
func TestNotifierRedirects(t *testing.T) {
	t.Parallel()
	got := make(chan string, 10)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " referer " + r.Header.Get("Referer")
	}))
	defer other.Close()
	elsewhere := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	r := newReceiver(t, "ok")
	mux := http.NewServeMux()
	mux.HandleFunc("/found/", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, elsewhere+"/x", http.StatusFound)
	})
	mux.HandleFunc("/away/", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, elsewhere+"/x", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/moved/", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, r.URL+"/final", http.StatusPermanentRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	alerts := []alert.Alert{sample(alert.StatusFiring, alert.RuleBacklog, "q")}

	for _, path := range []string{"/found/s3cret", "/away/s3cret"} {
		err := (&alert.Slack{URL: srv.URL + path}).Notify(context.Background(), alerts)
		require.Error(t, err, path)
		require.ErrorContains(t, err, "redirect to "+elsewhere+"/… not followed", path)
		require.NotContains(t, err.Error(), "s3cret")
	}
	select {
	case g := <-got:
		t.Fatalf("the other host got %s", g)
	default:
	}
	require.NoError(t, (&alert.Slack{URL: srv.URL + "/moved/s3cret"}).Notify(context.Background(), alerts))
	require.Len(t, r.received(), 1)
}

// wecomMessages decodes the robot messages received, checking their shape.
func wecomMessages(t *testing.T, r *receiver) []string {
	var out []string
	for _, b := range r.received() {
		var m struct {
			MsgType  string `json:"msgtype"`
			Markdown struct {
				Content string `json:"content"`
			} `json:"markdown"`
		}
		require.NoError(t, json.Unmarshal(b, &m))
		require.Equal(t, "markdown", m.MsgType)
		require.LessOrEqual(t, len(m.Markdown.Content), 4096, "a robot refuses longer content")
		out = append(out, m.Markdown.Content)
	}
	return out
}

// WeCom groups an evaluation's alerts into as few messages as fit in
// 4096 bytes, never sends more than 20 in a minute, and sends what waited
// for the limit grouped into one message once the minute allows it:
// nothing is lost.
func TestWeComGroupsUnderRateLimit(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, `{"errcode":0,"errmsg":"ok"}`)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	w := &alert.WeCom{URL: r.URL, Now: func() time.Time { return now }}
	ctx := context.Background()

	// 25 evaluations in one minute, three alerts each: 20 messages of
	// three lines, then the last 15 alerts wait.
	queue := func(e, i int) string {
		return strings.Repeat("q", 1+e%3) + "-" + string(rune('a'+e)) + string(rune('a'+i))
	}
	for e := range 25 {
		var batch []alert.Alert
		for i := range 3 {
			batch = append(batch, sample(alert.StatusFiring, alert.RuleBacklog, queue(e, i)))
		}
		require.NoError(t, w.Notify(ctx, batch))
		now = now.Add(time.Second)
	}
	msgs := wecomMessages(t, r)
	require.Len(t, msgs, alert.WeComPerMinute)
	for e, m := range msgs {
		require.Equal(t, 3, strings.Count(m, "[FIRING]"), "one message per evaluation")
		require.Contains(t, m, "queue "+queue(e, 2)+":")
		require.Contains(t, m, "**taskd_backlog** (warning) queue ", "the severity, to route on")
		require.Contains(t, m, " [runbook](https://example.com/runbook#taskd_backlog)\n")
	}

	// The minute of the first send has passed: the 15 waiting alerts go
	// out in one message.
	now = now.Add(36 * time.Second)
	require.NoError(t, w.Notify(ctx, nil))
	msgs = wecomMessages(t, r)
	require.Len(t, msgs, alert.WeComPerMinute+1)
	last := msgs[len(msgs)-1]
	require.Equal(t, 15, strings.Count(last, "[FIRING]"))
	for e := 20; e < 25; e++ {
		for i := range 3 {
			require.Contains(t, last, "queue "+queue(e, i)+":")
		}
	}

	// 300 alerts at once do not fit in one message: split at 4096 bytes,
	// every alert in exactly one of them.
	now = now.Add(2 * time.Minute)
	var many []alert.Alert
	for i := range 300 {
		many = append(many, sample(alert.StatusResolved, alert.RuleOldestDue, "bulk-"+strings.Repeat("x", i%7)+string(rune('A'+i%26))+string(rune('a'+i/26))))
	}
	require.NoError(t, w.Notify(ctx, many))
	msgs = wecomMessages(t, r)[alert.WeComPerMinute+1:]
	require.Greater(t, len(msgs), 1)
	require.Less(t, len(msgs), 20)
	all := strings.Join(msgs, "")
	require.Equal(t, 300, strings.Count(all, "[RESOLVED]"))
	for _, a := range many {
		require.Equal(t, 1, strings.Count(all, "queue "+a.Labels["queue"]+":"), a.Labels["queue"])
	}
}
