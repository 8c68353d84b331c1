package handler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/taskd/taskd/pkg/tracing"
)

// HTTP POSTs the payload as a JSON body to URL with the headers
// Content-Type: application/json, X-Task-Id, X-Task-Code, X-Task-Attempt,
// X-Task-Retry, X-Task-Max-Retry, X-Task-Deadline (when ctx has one),
// X-Task-Scheduled-At (Request.ScheduledAt), X-Task-Unique-Key, X-Task-Queue and X-Task-Group, plus Header, and the W3C traceparent
// of the attempt's span when tracing is on. A 2xx status is success;
// the output is the response body, truncated as by Truncate. Otherwise the
// error is "http 503: <first line of body>"; a redirect other than 307 and
// 308, or one that leaves URL's host or goes from https to http, is not
// followed and fails, naming where it pointed. A 4xx other than 408, 425
// and 429, and a permanent redirect not followed (301, 308), is
// ErrPermanent; the error's RetryAfter is the answer's
// Retry-After (see RetryAfter). When ctx is done the error wraps ctx.Err().
type HTTP struct {
	URL         string
	Header      map[string]string
	Client      *http.Client // nil: defaultClient
	OutputLimit int          // 0: OutputLimitDefault
	// Timeout caps each request (0: the task's timeout alone).
	Timeout time.Duration
}

// AttemptTimeout implements Capped.
func (h *HTTP) AttemptTimeout() time.Duration { return h.Timeout }

// defaultClient has no Timeout: each request's ctx carries the task's
// timeout. Workers post many tasks to one endpoint at once, so keep more
// idle connections per host than net/http's 2. It follows only the
// redirects that repeat the POST with its body (307, 308): net/http would
// follow a 301, 302 or 303 as a GET without the payload, and a login page
// answering that GET (an endpoint behind an authenticating proxy) would
// count as the task's success. Nor does it follow one to another host, or
// from https to http: net/http would hand that host the payload and the
// handler's Header but Authorization (an X-Api-Key, say), or send them in
// clear.
var defaultClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.Method != via[0].Method || leaves(via[0].URL, req.URL) {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}()

// leaves reports whether a redirect from the handler's URL to "to" takes
// the payload to another host, or from https to http. Another port of the
// same host is followed: that is how http is upgraded to https.
func leaves(from, to *url.URL) bool {
	return !strings.EqualFold(from.Hostname(), to.Hostname()) || (from.Scheme == "https" && to.Scheme != "https")
}

// errorLineLimit bounds the body line quoted in an error.
const errorLineLimit = 512

// Handle runs one attempt.
func (h *HTTP) Handle(ctx context.Context, r *Request) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(r.Payload))
	if err != nil {
		return "", fmt.Errorf("http: %w", err)
	}
	for k, v := range h.Header {
		req.Header.Set(k, v)
	}
	// Set after Header: these are the contract with the endpoint.
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Task-Id", strconv.FormatInt(r.ID, 10))
	req.Header.Set("X-Task-Code", r.Code)
	req.Header.Set("X-Task-Attempt", strconv.Itoa(r.Attempt))
	req.Header.Set("X-Task-Retry", strconv.Itoa(r.Retry))
	req.Header.Set("X-Task-Max-Retry", strconv.Itoa(r.MaxRetry))
	if d, ok := ctx.Deadline(); ok {
		// The endpoint can bound its own work (PHP's set_time_limit) by it.
		req.Header.Set("X-Task-Deadline", formatTime(d))
	}
	if !r.ScheduledAt.IsZero() {
		req.Header.Set("X-Task-Scheduled-At", formatTime(r.ScheduledAt))
	}
	req.Header.Set("X-Task-Unique-Key", r.UniqueKey)
	req.Header.Set("X-Task-Queue", r.Queue)
	req.Header.Set("X-Task-Group", r.Group)
	tracing.Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent, when the attempt is traced

	resp, err := cmp.Or(h.Client, defaultClient).Do(req)
	if err != nil {
		return "", httpErr(ctx, withoutQuery(err))
	}
	defer resp.Body.Close()
	// Read the head separately for the error line; the output keeps the tail.
	out := &tailBuffer{limit: cmp.Or(h.OutputLimit, OutputLimitDefault)}
	head := make([]byte, errorLineLimit)
	n, err := io.ReadFull(resp.Body, head)
	head = head[:n]
	body := r.withTail(out) // a streamed body shows while it comes
	_, _ = body.Write(head)
	if err == nil {
		_, err = io.Copy(body, resp.Body)
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	if err != nil {
		return out.String(), httpErr(ctx, fmt.Errorf("http read body: %w", err))
	}
	if resp.StatusCode/100 == 2 {
		return out.String(), nil
	}
	se := &statusError{permanent: final(resp.StatusCode), retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	msg := fmt.Sprintf("http %d", resp.StatusCode)
	if se.permanent {
		msg += " (not retried)"
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
		why := "the POST would arrive there as a GET without its payload"
		if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
			why = "it leaves " + req.URL.Scheme + "://" + req.URL.Host + ", and the payload and headers go only there"
		}
		msg += " to " + loc + " (not followed: " + why + "; point the handler at the final URL)"
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(string(head)), "\n"); line != "" {
		msg += ": " + errorLine(line)
	}
	se.msg = msg
	return out.String(), se
}

// errorLine is a body's line as an error quotes it: valid UTF-8 without
// control characters, since the error is the line that listings, logs and
// alerts print, and a binary body's NULs and escapes would garble them.
func errorLine(line string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, ValidText(strings.TrimSpace(line)))
}

// statusError is an answer other than 2xx.
type statusError struct {
	msg string
	// permanent: a 4xx that the same request cannot turn into a success.
	permanent  bool
	retryAfter time.Duration
}

func (e *statusError) Error() string { return e.msg }

// Is makes a final status ErrPermanent: the task is dead at once.
func (e *statusError) Is(target error) bool { return e.permanent && target == ErrPermanent }

// RetryAfter is the endpoint's Retry-After (0: none).
func (e *statusError) RetryAfter() time.Duration { return e.retryAfter }

// final reports whether status is an answer that repeating the same
// request cannot mend (a 400, 401, 404, 409, 422...): retrying would only
// hammer the endpoint and delay the dead task an operator must look at.
// 408 Request Timeout, 425 Too Early and 429 Too Many Requests say to try
// again later, and are retried. A permanent redirect (301, 308) is seen
// only when it is not followed, and every retry would get it again; a
// temporary one (302, 303, 307) may be gone by then.
func final(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	case http.StatusMovedPermanently, http.StatusPermanentRedirect:
		return true
	}
	return status/100 == 4
}

// retryAfterMax bounds a Retry-After: a wrong date must not park a task
// for years.
const retryAfterMax = 24 * time.Hour

// parseRetryAfter reads a Retry-After header, delay-seconds or an HTTP
// date, as a delay from now; 0 when absent, invalid or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = retryAfterMax
		if n < int64(retryAfterMax/time.Second) {
			d = time.Duration(n) * time.Second
		}
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), retryAfterMax)
}

// withoutQuery drops the query of the URL net/http quotes in err: an
// endpoint's token is often there (?key=...), and the error becomes the
// task's result, which listings and tasktop's viewers read.
func withoutQuery(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = ShownURL(ue.URL)
	}
	return err
}

// ShownURL is an http handler's URL as errors and taskd doctor show it:
// without a password or query, which often hold the endpoint's
// credentials.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.RawQuery == "" && u.User == nil) {
		return raw
	}
	u.RawQuery, u.User = "", nil
	return u.String() + "?…"
}

// httpErr prefers the context's error, so the caller can tell a timeout or
// a cancel from a failing endpoint whatever net/http made of it.
func httpErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("http post: %w", ctxErr(ctx))
	}
	return err
}
