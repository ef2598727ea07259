package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kvs/cluster"
)

// The metrics endpoint (--metrics-addr): /metrics in Prometheus's format,
// from a registry of kvs's own (Go runtime and process collectors, and the
// collector in metrics_collector.go), and /healthz. It is bound before the
// store is recovered, so a taken port stops startup at once and /healthz
// answers 503 while the node is not ready yet.

// health is what /healthz reports: ready once the node serves clients (the
// log or raft state has been recovered by then) and, in cluster mode, knows
// a leader it can forward to; not ready again once shutdown begins.
type health struct {
	phase atomic.Int32 // phaseStarting, phaseServing or phaseStopping
	// leader, set before phaseServing in cluster mode, returns an error
	// while no leader is known.
	leader func() error
	// log, set before phaseServing in durable and cluster mode, says
	// whether the node can write its log.
	log *logState
}

const (
	phaseStarting = iota
	phaseServing
	phaseStopping
)

// check returns nil when the node can serve, or why not, in one line.
func (h *health) check() error {
	switch h.phase.Load() {
	case phaseStarting:
		return errors.New("starting: recovering state")
	case phaseStopping:
		return errors.New("shutting down")
	}
	if err := h.log.check(); err != nil {
		return err
	}
	if h.leader != nil {
		return h.leader()
	}
	return nil
}

func (h *health) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.check(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// metricsServer is the HTTP server of --metrics-addr. A nil *metricsServer
// (metrics off) accepts every call and does nothing.
type metricsServer struct {
	reg  *prometheus.Registry
	srv  *http.Server
	done chan struct{} // closed when Serve has returned

	stopOnce sync.Once
	stopErr  error
}

// startMetrics binds addr, so that a taken port is reported before anything
// else starts, and serves /metrics and /healthz (and with withPprof Go's
// /debug/pprof/) until shutdown.
func startMetrics(addr string, withPprof bool, h *health, logger *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	})))
	mux.HandleFunc("/healthz", h.serveHTTP)
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	m := &metricsServer{
		reg: reg,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "addr", addr, "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return m, nil
}

// register adds c to what /metrics reports.
func (m *metricsServer) register(c prometheus.Collector) {
	if m != nil {
		m.reg.MustRegister(c)
	}
}

// shutdown stops the server, letting a scrape in progress finish until ctx
// ends, and waits for it. It is idempotent.
func (m *metricsServer) shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	m.stopOnce.Do(func() {
		m.stopErr = m.srv.Shutdown(ctx)
		if m.stopErr != nil {
			m.srv.Close()
		}
		<-m.done
	})
	return m.stopErr
}

// close stops the server at once (error paths of runServe).
func (m *metricsServer) close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.shutdown(ctx)
}

// leaderWatch counts the leaders this node has seen elected: each time raft
// names a new leader, this node included (a loss of leader is not counted;
// the next election is). It uses a raft observer whose filter counts and
// drops every observation, so raft never blocks on it and no goroutine is
// needed.
type leaderWatch struct {
	changes atomic.Uint64
	r       *raft.Raft
	obs     *raft.Observer
}

func watchLeader(node *cluster.Node) *leaderWatch {
	w := &leaderWatch{r: node.Raft()}
	w.obs = raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
			w.changes.Add(1)
		}
		return false
	})
	w.r.RegisterObserver(w.obs)
	return w
}

// count returns the leader changes seen so far; 0 on a nil watch.
func (w *leaderWatch) count() uint64 {
	if w == nil {
		return 0
	}
	return w.changes.Load()
}

func (w *leaderWatch) stop() { w.r.DeregisterObserver(w.obs) }

// fsyncHistograms are the distributions of the append log's fsyncs, fed by
// wal.Options.OnFsync once per fsync (not per write), so they cost nothing
// on a client's path.
type fsyncHistograms struct {
	duration prometheus.Histogram
	records  prometheus.Histogram
}

func newFsyncHistograms() *fsyncHistograms {
	return &fsyncHistograms{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvs_wal_fsync_duration_seconds",
			Help:    "Duration of each append log fsync (fdatasync on Linux).",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14), // 25µs .. 205ms
		}),
		records: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvs_wal_fsync_records",
			Help:    "Records made durable by each append log fsync: the group-commit batch size.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 .. 2048
		}),
	}
}

func (h *fsyncHistograms) observe(d time.Duration, records int) {
	h.duration.Observe(d.Seconds())
	h.records.Observe(float64(records))
}

func (h *fsyncHistograms) Describe(ch chan<- *prometheus.Desc) {
	h.duration.Describe(ch)
	h.records.Describe(ch)
}

func (h *fsyncHistograms) Collect(ch chan<- prometheus.Metric) {
	h.duration.Collect(ch)
	h.records.Collect(ch)
}
