package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyTimeout bounds the store check of /readyz.
const ReadyTimeout = 2 * time.Second

// metrics are the relay's Prometheus metrics, served by MetricsHandler on
// a listener of their own (never the public one). Nothing in them names a
// session, a token or content.
type metrics struct {
	once sync.Once
	reg  *prometheus.Registry

	conns      *prometheus.GaugeVec   // open websocket connections by role
	connsTotal *prometheus.CounterVec // connections opened by role
	envIn      prometheus.Counter     // envelopes stored (new)
	bytesIn    prometheus.Counter     // their bytes
	storeLat   *prometheus.HistogramVec
	commands   *prometheus.CounterVec // commands that reached a final status, by status
	pushes     *prometheus.CounterVec // notifications handed to a sender, by channel and result
}

func (s *Server) met() *metrics {
	m := &s.metrics
	m.once.Do(func() {
		m.reg = prometheus.NewRegistry()
		m.conns = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ccrelay_connections", Help: "Open websocket connections, by role (cli, app)."}, []string{"role"})
		m.connsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ccrelay_connections_total", Help: "Websocket connections opened, by role (cli, app)."}, []string{"role"})
		m.envIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "ccrelay_envelopes_in_total", Help: "Envelopes stored (new ones; resent ones not counted)."})
		m.bytesIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "ccrelay_envelope_bytes_in_total", Help: "Bytes of the envelopes stored."})
		m.storeLat = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ccrelay_store_seconds", Help: "Latency of store operations, by operation.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"op"})
		m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ccrelay_commands_total", Help: "Commands that reached a final status (done, rejected), by status."}, []string{"status"})
		m.pushes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ccrelay_push_sends_total", Help: "Notifications handed to a sender (webpush, ntfy), by result (queued, failed)."}, []string{"channel", "result"})
		m.reg.MustRegister(m.conns, m.connsTotal, m.envIn, m.bytesIn, m.storeLat, m.commands, m.pushes,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ccrelay_retention_deleted_total", Help: "Sessions deleted by retention (serve --retain)."}, func() float64 { return float64(s.dp.retained.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ccrelay_store_errors_total", Help: "Store operations that failed."}, func() float64 { return float64(s.dp.storeErrors.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ccrelay_database_bytes", Help: "Size of the database (pages in use and free)."}, func() float64 { return float64(s.store.SizeBytes(context.Background())) }),
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		for _, r := range []string{"cli", "app"} {
			m.conns.WithLabelValues(r)
			m.connsTotal.WithLabelValues(r)
		}
	})
	return m
}

// MetricsHandler serves the metrics in Prometheus' text format. Serve it
// on a listener of its own (serve --metrics-listen), never the public one.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.met().reg, promhttp.HandlerOpts{})
}

// connOpened counts and logs a websocket connection of role (its remote
// address, never its credential); call the returned function with the
// error that ended it when it ends: it logs the duration and the reason.
func (s *Server) connOpened(role string, r *http.Request) func(err *error) {
	m := s.met()
	m.connsTotal.WithLabelValues(role).Inc()
	g := m.conns.WithLabelValues(role)
	g.Inc()
	start := time.Now()
	who := credentialName(principalFrom(r.Context()))
	addr := s.clientAddr(r)
	// One line per connection at the default level, when it closes (it
	// says everything the opening would): a relay that many connections
	// pass through grows its log half as fast.
	s.log.Debug("connection opened", "role", role, "credential", who, "addr", addr)
	return func(err *error) {
		g.Dec()
		s.log.Info("connection closed", "role", role, "credential", who, "addr", addr, "duration", time.Since(start).Round(time.Millisecond), "reason", closeReason(*err))
	}
}

// credentialName names who opened a connection in the logs: the
// credential's name (never its secret), or the bootstrap token.
func credentialName(p principal) string {
	if p.cred.ID != "" {
		return p.cred.Name
	}
	return "bootstrap token"
}

// closeReason says why a connection ended, in a few words: the close code
// of the peer, the relay stopping, or the kind of failure (never content).
func closeReason(err error) string {
	var ce websocket.CloseError
	switch {
	case err == nil:
		return "ended"
	case errors.As(err, &ce):
		return fmt.Sprintf("closed by peer (%d)", int(ce.Code))
	case errors.Is(err, context.Canceled):
		return "relay stopping"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, io.EOF):
		return "connection lost"
	default:
		return "connection error"
	}
}

// commandEnded counts a command that moved to status, if it is final.
func (s *Server) commandEnded(status string) {
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		s.met().commands.WithLabelValues(status).Inc()
	}
}

// pushCounted counts a notification handed to channel's sender.
func (s *Server) pushCounted(channel string, err error) {
	result := "queued"
	if err != nil {
		result = "failed"
	}
	s.met().pushes.WithLabelValues(channel, result).Inc()
}

// observeStore records how long a store operation took.
func (s *Server) observeStore(op string, start time.Time) {
	s.met().storeLat.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// stored counts the envelopes a batch stored.
func (s *Server) stored(fresh []Stored) {
	m := s.met()
	var n int
	for _, st := range fresh {
		n += len(st.Body)
	}
	m.envIn.Add(float64(len(fresh)))
	m.bytesIn.Add(float64(n))
}

// serveHealthz answers GET /healthz (no auth): the process is alive. It
// says nothing else.
func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}

// serveReadyz answers GET /readyz (no auth): 200 when the store answers
// within ReadyTimeout, 503 otherwise. It says nothing else.
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
