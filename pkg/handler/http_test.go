package handler

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHTTPSuccess(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(body) != `{"a":1}` ||
			r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("X-Task-Id") != "42" || r.Header.Get("X-Task-Code") != "send_email" ||
			r.Header.Get("X-Task-Attempt") != "3" || r.Header.Get("X-Task-Unique-Key") != "uk-1" ||
			r.Header.Get("X-Task-Queue") != "mail" || r.Header.Get("Authorization") != "Bearer s3cret" ||
			r.Header.Get("X-Task-Scheduled-At") != "2026-12-05T02:00:00.250Z" {
			http.Error(w, "bad request: "+r.Method+" "+string(body)+" "+r.Header.Get("X-Task-Id"), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "sent 3 mails")
	}))
	t.Cleanup(srv.Close)

	h := &HTTP{URL: srv.URL, Header: map[string]string{"Authorization": "Bearer s3cret", "X-Task-Id": "spoofed"}}
	out, err := h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, "sent 3 mails", out)
}

func TestHTTPError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "\ndb down\r\nstack trace...\n")
	}))
	t.Cleanup(srv.Close)

	out, err := (&HTTP{URL: srv.URL}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "http 500: db down")
	require.Contains(t, out, "stack trace...")
}

// A redirect that would turn the POST into a GET without its payload is
// not followed: a login page answering the GET would count as success. A
// 307 or 308 repeats the POST with its body, and is followed.
func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/behind-proxy", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusFound)
	})
	mux.HandleFunc("/login", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "please log in") })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/final", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+string(body))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusMovedPermanently)
	})

	_, err := (&HTTP{URL: srv.URL + "/behind-proxy"}).Handle(context.Background(), testRequest())
	require.ErrorContains(t, err, "http 302 to /login (not followed: the POST would arrive there as a GET without its payload")
	require.NotErrorIs(t, err, ErrPermanent, "a temporary redirect may not be there at the retry")
	// A permanent one is answered the same to every retry: dead at once.
	_, err = (&HTTP{URL: srv.URL + "/old"}).Handle(context.Background(), testRequest())
	require.ErrorIs(t, err, ErrPermanent)
	require.ErrorContains(t, err, "http 301 (not retried) to /final (not followed: the POST would arrive there as a GET without its payload; point the handler at the final URL)")
	out, err := (&HTTP{URL: srv.URL + "/moved"}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, `POST {"a":1}`, out)
}

// A 307 or 308 to another host is not followed: that host would get the
// payload and the handler's headers (net/http drops only Authorization
// and cookies).
func TestHTTPRedirectToAnotherHost(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("X-Api-Key") + " " + string(body)
	}))
	t.Cleanup(other.Close)
	elsewhere := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/steal"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)

	_, err := (&HTTP{URL: srv.URL + "/hook", Header: map[string]string{"X-Api-Key": "s3cret"}}).Handle(context.Background(), testRequest())
	require.ErrorContains(t, err, "http 307 to "+elsewhere+" (not followed: it leaves "+srv.URL+", and the payload and headers go only there")
	select {
	case g := <-got:
		t.Fatalf("the other host got %q", g)
	default:
	}
}

func TestHTTPRedirectLeaves(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to string
		leaves   bool
	}{
		{"http://app/hook", "http://app/v2/hook", false},
		{"http://app/hook", "https://app:8443/hook", false}, // an upgrade
		{"http://app/hook", "http://APP/hook", false},
		{"https://app/hook", "http://app/hook", true}, // in clear
		{"http://app/hook", "http://other/hook", true},
		{"http://app/hook", "http://app.evil.example/hook", true},
	} {
		from, _ := url.Parse(c.from)
		to, _ := url.Parse(c.to)
		require.Equal(t, c.leaves, leaves(from, to), "%s -> %s", c.from, c.to)
	}
}

func TestHTTPTruncatesOutput(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("a", 5000)+"END")
	}))
	t.Cleanup(srv.Close)

	out, err := (&HTTP{URL: srv.URL, OutputLimit: 100}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, "…(truncated 4903 bytes)\n"+strings.Repeat("a", 97)+"END", out)
}

func TestHTTPTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	h := &HTTP{URL: srv.URL}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h.Handle(ctx, testRequest())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = h.Handle(ctx, testRequest())
	require.ErrorIs(t, err, context.Canceled)
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (&HTTP{URL: url}).Handle(context.Background(), testRequest())
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	// The error becomes the task's result: an endpoint's token in the
	// query, or a password in the URL, stays out of it.
	withToken := strings.Replace(url, "http://", "http://u:pw-s3cret@", 1) + "/run?key=s3cret"
	_, err = (&HTTP{URL: withToken}).Handle(context.Background(), testRequest())
	require.ErrorContains(t, err, `Post "`+url+`/run?…": dial tcp`)
	require.NotContains(t, err.Error(), "s3cret")
}

// A 4xx other than 408, 425 and 429 is final: the same request cannot
// succeed, so the task is dead at once instead of retried. 5xx and those
// three are retried.
func TestHTTPClientErrorsAreFinal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"error":"order exists"}`)
	}))
	t.Cleanup(srv.Close)

	for _, code := range []int{400, 401, 403, 404, 409, 410, 422} {
		_, err := (&HTTP{URL: srv.URL + "/" + strconv.Itoa(code)}).Handle(context.Background(), testRequest())
		require.ErrorIs(t, err, ErrPermanent, "%d", code)
		require.EqualError(t, err, "http "+strconv.Itoa(code)+` (not retried): {"error":"order exists"}`)
	}
	for _, code := range []int{408, 425, 429, 500, 502, 503} {
		_, err := (&HTTP{URL: srv.URL + "/" + strconv.Itoa(code)}).Handle(context.Background(), testRequest())
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrPermanent, "%d", code)
		require.EqualError(t, err, "http "+strconv.Itoa(code)+`: {"error":"order exists"}`)
	}
}

// Retry-After, in seconds or as an HTTP date, is the error's RetryAfter,
// bounded by a day; an absent, invalid or past one is 0.
func TestHTTPRetryAfter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", r.URL.Query().Get("ra"))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	_, err := (&HTTP{URL: srv.URL + "/?ra=120"}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "http 429")
	require.Equal(t, 2*time.Minute, RetryAfter(err))

	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		" 30 ":                          30 * time.Second,
		"999999999999":                  24 * time.Hour,
		"Tue, 01 Dec 2026 10:05:00 GMT": 5 * time.Minute,
		"Tue, 01 Dec 2026 09:00:00 GMT": 0,
		"Sat, 01 Dec 2029 10:00:00 GMT": 24 * time.Hour,
	} {
		require.Equal(t, want, parseRetryAfter(v, now), "%q", v)
	}
	require.Zero(t, RetryAfter(errors.New("plain")))
}

// The endpoint learns what an exec or pool handler learns: which try of
// the retry budget this is (its last: report, don't just fail) and when
// the attempt times out.
func TestHTTPRetryAndDeadlineHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	// Header cannot override them.
	h := &HTTP{URL: srv.URL, Header: map[string]string{"X-Task-Retry": "0", "X-Task-Max-Retry": "0", "X-Task-Deadline": "x"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.Handle(ctx, testRequest())
	require.NoError(t, err)
	hd := <-got
	require.Equal(t, "2", hd.Get("X-Task-Retry"))
	require.Equal(t, "3", hd.Get("X-Task-Max-Retry"))
	d, err := time.Parse(time.RFC3339, hd.Get("X-Task-Deadline"))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Minute), d, 10*time.Second)
}

// A binary error body's first line is quoted without its control bytes:
// the error is what listings, logs and alerts print.
func TestHTTPErrorLineOfBinaryBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("\x89PNG\x00\x00\x1b[2J\tx\xff\nrest"))
	}))
	t.Cleanup(srv.Close)
	out, err := (&HTTP{URL: srv.URL}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, `http 502: \x89PNG`+"\uFFFD\uFFFD\uFFFD[2J\tx"+`\xff`)
	require.Equal(t, "\x89PNG\x00\x00\x1b[2J\tx\xff\nrest", out, "the output keeps the body as it came")
}
