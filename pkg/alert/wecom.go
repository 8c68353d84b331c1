package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WeCom robot limits.
const (
	// WeComPerMinute is how many messages a group robot accepts a minute.
	WeComPerMinute = 20
	// weComMaxBytes is the largest markdown content a robot accepts.
	weComMaxBytes = 4096
	// weComMaxPending bounds the alerts waiting for the rate limit; the
	// oldest are dropped past it.
	weComMaxPending = 1000
)

// WeCom posts markdown messages to a WeCom (企业微信) group robot. It groups
// the alerts of an evaluation into as few messages as fit, and sends at
// most PerMinute messages in any minute: alerts over the limit wait and go
// out together, in a later evaluation's message, once the minute allows.
type WeCom struct {
	URL    string
	Client *http.Client
	// PerMinute defaults to WeComPerMinute.
	PerMinute int
	// Now is the clock of the rate limit (default time.Now).
	Now func() time.Time

	mu      sync.Mutex
	sent    []time.Time // sends of the last minute
	pending []Alert
	dropped int
}

// Name implements Notifier.
func (w *WeCom) Name() string { return "wecom" }

// Notify implements Notifier. Alerts it defers count as delivered.
func (w *WeCom) Notify(ctx context.Context, alerts []Alert) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, alerts...)
	if over := len(w.pending) - weComMaxPending; over > 0 {
		w.pending, w.dropped = w.pending[over:], w.dropped+over
	}
	now := w.now()
	for len(w.pending) > 0 {
		for len(w.sent) > 0 && now.Sub(w.sent[0]) >= time.Minute {
			w.sent = w.sent[1:]
		}
		if len(w.sent) >= w.perMinute() {
			return nil // the rest waits for the minute to allow it
		}
		text, n := w.message()
		err := postJSON(ctx, w.Client, w.URL, map[string]any{"msgtype": "markdown", "markdown": map[string]string{"content": text}}, checkWeCom)
		w.sent = append(w.sent, now)
		if err != nil {
			// The alerter sends this call's alerts again: do not keep them.
			w.pending = w.pending[:len(w.pending)-min(len(alerts), len(w.pending))]
			return err
		}
		w.pending, w.dropped = w.pending[n:], 0
	}
	return nil
}

// message groups the first pending alerts into one markdown message of at
// most weComMaxBytes and says how many it holds.
func (w *WeCom) message() (string, int) {
	var b strings.Builder
	b.WriteString("**taskd alerts**\n")
	if w.dropped > 0 {
		fmt.Fprintf(&b, "(%d older alerts dropped by the rate limit)\n", w.dropped)
	}
	n := 0
	for _, a := range w.pending {
		l := line(&a)
		if n > 0 && b.Len()+len(l) > weComMaxBytes {
			break
		}
		if len(l) > weComMaxBytes-b.Len() { // one huge line: cut it
			l = l[:max(0, weComMaxBytes-b.Len()-4)] + "...\n"
		}
		b.WriteString(l)
		n++
	}
	return b.String(), n
}

func (w *WeCom) perMinute() int {
	if w.PerMinute > 0 {
		return w.PerMinute
	}
	return WeComPerMinute
}

func (w *WeCom) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// checkWeCom reads the robot's answer: it reports errors with HTTP 200.
func checkWeCom(body []byte) error {
	var r struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("wecom answer: %w", err)
	}
	if r.ErrCode != 0 {
		return fmt.Errorf("wecom: errcode %d: %s", r.ErrCode, r.ErrMsg)
	}
	return nil
}
