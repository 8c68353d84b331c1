package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger is a dependency /readyz checks (the task center, Redis).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Server serves /metrics, /livez and /readyz.
type Server struct {
	srv  *http.Server
	done chan struct{}
	log  *slog.Logger
	addr net.Addr
}

// readyTimeout bounds each dependency check of /readyz: a round trip or
// two, on a link that may be slow.
const readyTimeout = 5 * time.Second

// Serve listens on addr and serves the endpoints until Close. /readyz
// answers 200 only when every dependency answers a ping.
func Serve(addr string, m *Metrics, deps map[string]Pinger, log *slog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		for name, d := range deps {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			err := d.Ping(ctx)
			cancel()
			if err != nil {
				http.Error(w, name+": "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return serve(addr, mux, log)
}

// ServeStarting listens on addr while the process waits for MySQL and
// Redis at its start, before Serve can: /livez answers (the process runs),
// /readyz is 503 with why, and /metrics says taskd_monitor_up 0, so that
// a node that cannot start is seen, not a target that refuses. Close it
// before Serve takes the address.
func ServeStarting(addr, waitingFor string, log *slog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting: "+waitingFor, http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP taskd_monitor_up %s\n# TYPE taskd_monitor_up gauge\ntaskd_monitor_up 0\n", upHelp)
	})
	return serve(addr, mux, log)
}

func serve(addr string, mux *http.ServeMux, log *slog.Logger) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second},
		done: make(chan struct{}), log: log, addr: l.Addr(),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr.String() }

// Close stops the server, letting scrapes in progress finish for a moment.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
}
