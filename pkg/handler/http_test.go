package handler

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
			r.Header.Get("X-Task-Queue") != "mail" || r.Header.Get("Authorization") != "Bearer s3cret" {
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

	_, err := (&HTTP{URL: srv.URL + "/behind-proxy"}).Handle(context.Background(), testRequest())
	require.ErrorContains(t, err, "http 302 to /login (not followed: the POST would arrive there as a GET without its payload")
	out, err := (&HTTP{URL: srv.URL + "/moved"}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, `POST {"a":1}`, out)
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
}
