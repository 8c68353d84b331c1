package handler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/taskd/taskd/pkg/tracing"
)

// HTTP POSTs the payload as a JSON body to URL with the headers
// Content-Type: application/json, X-Task-Id, X-Task-Code, X-Task-Attempt,
// X-Task-Unique-Key, X-Task-Queue and X-Task-Group, plus Header, and the W3C traceparent
// of the attempt's span when tracing is on. A 2xx status is success;
// the output is the response body, truncated as by Truncate. Otherwise the
// error is "http 503: <first line of body>"; a redirect other than 307 and
// 308 is not followed and fails, naming where it pointed. When ctx is done
// the error wraps ctx.Err().
type HTTP struct {
	URL         string
	Header      map[string]string
	Client      *http.Client // nil: defaultClient
	OutputLimit int          // 0: OutputLimitDefault
}

// defaultClient has no Timeout: each request's ctx carries the task's
// timeout. Workers post many tasks to one endpoint at once, so keep more
// idle connections per host than net/http's 2. It follows only the
// redirects that repeat the POST with its body (307, 308): net/http would
// follow a 301, 302 or 303 as a GET without the payload, and a login page
// answering that GET (an endpoint behind an authenticating proxy) would
// count as the task's success.
var defaultClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.Method != via[0].Method {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}()

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
	req.Header.Set("X-Task-Unique-Key", r.UniqueKey)
	req.Header.Set("X-Task-Queue", r.Queue)
	req.Header.Set("X-Task-Group", r.Group)
	tracing.Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent, when the attempt is traced

	resp, err := cmp.Or(h.Client, defaultClient).Do(req)
	if err != nil {
		return "", httpErr(ctx, err)
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
	msg := fmt.Sprintf("http %d", resp.StatusCode)
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
		msg += " to " + loc + " (not followed: the POST would arrive there as a GET without its payload; point the handler at the final URL)"
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(string(head)), "\n"); line != "" {
		msg += ": " + strings.ToValidUTF8(strings.TrimSpace(line), "")
	}
	return out.String(), errors.New(msg)
}

// httpErr prefers the context's error, so the caller can tell a timeout or
// a cancel from a failing endpoint whatever net/http made of it.
func httpErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("http post: %w", ctxErr(ctx))
	}
	return err
}
