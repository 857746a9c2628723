// Package metrics is reef's Prometheus exposition: the counters and
// histograms the daemon's parts update as they work (CNI operations,
// reconcile passes and repairs), and a collector that reads the node's
// state when it is scraped (BGP sessions, blocks, pools, queued DELs). It
// serves /metrics, /healthz and /readyz on the `metrics:` listener.
//
// Names are under reef_ and follow Prometheus' conventions (base units,
// _total for counters, _seconds for durations). No label carries a pod,
// container or address of a pod: their number is bounded by the node's
// peers, pools and a fixed set of kinds.
package metrics

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Repair kinds: what a reconcile pass put back (reef_reconcile_repairs_total).
const (
	RepairRoute     = "route"
	RepairLink      = "link"
	RepairNeighbour = "neighbour"
	RepairNFTables  = "nftables"
	RepairSysctl    = "sysctl"
	RepairTC        = "tc"
)

// Metrics holds what the daemon updates. A nil *Metrics takes every call
// and does nothing (metrics off, tests).
type Metrics struct {
	reg *prometheus.Registry

	cniOps      *prometheus.CounterVec
	cniDuration *prometheus.HistogramVec
	tryAgain    prometheus.Counter

	passes       *prometheus.CounterVec
	passDuration prometheus.Histogram
	repairs      *prometheus.CounterVec
	passErrors   *prometheus.CounterVec
	lastSuccess  prometheus.Gauge

	claims *prometheus.CounterVec
}

// New registers reef's metrics and the Go and process collectors. The
// state collector comes with the Handler, which is given what a scrape
// reads: the parts that count into Metrics are made before the daemon
// whose state the scrape reads.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.cniOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reef_cni_operations_total",
		Help: "CNI operations served, by command (ADD, DEL, CHECK, GC, STATUS) and result (ok, or the CNI error code).",
	}, []string{"command", "result"})
	m.cniDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "reef_cni_operation_duration_seconds",
		Help:    "Time the daemon took to serve a CNI operation, by command.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"command"})
	m.tryAgain = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "reef_cni_add_try_again_total",
		Help: "ADDs refused with CNI code 11 (try again later): the daemon starting, no block confirmed in time, NetworkPolicy not yet synced.",
	})
	m.passes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reef_reconcile_passes_total",
		Help: "Reconcile passes, by result (ok, error).",
	}, []string{"result"})
	m.passDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "reef_reconcile_pass_duration_seconds",
		Help:    "Time a reconcile pass took: the kernel read, compared with the desired state and repaired.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.repairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reef_reconcile_repairs_total",
		Help: "Kernel objects a reconcile pass repaired because they differed from reef's desired state, by kind (route, link, neighbour, nftables, sysctl, tc).",
	}, []string{"kind"})
	m.passErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reef_reconcile_errors_total",
		Help: "Reconcile passes that failed, by the part that failed (kernel, blocks).",
	}, []string{"kind"})
	m.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "reef_reconcile_last_success_timestamp_seconds",
		Help: "Unix time of the last reconcile pass that ended without an error.",
	})
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reef_block_claims_total",
		Help: "This node's block claims by pool and outcome: made, won (confirmed by a majority of the voters), given-up (another node had the block or a better claim), lost (a confirmed block another node holds: a conflict).",
	}, []string{"pool", "outcome"})
	for _, kind := range []string{RepairRoute, RepairLink, RepairNeighbour, RepairNFTables, RepairSysctl, RepairTC} {
		m.repairs.WithLabelValues(kind) // present at 0: rate() needs a first sample
	}
	for _, r := range []string{"ok", "error"} {
		m.passes.WithLabelValues(r)
	}
	for _, k := range []string{"kernel", "blocks"} { // the parts Pass is told failed
		m.passErrors.WithLabelValues(k)
	}
	anon := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "reef_process_anon_memory_bytes",
		Help: "The daemon's anonymous memory (RssAnon of /proc/self/status: heap, stacks, the Go runtime), without the pages of its binary that process_resident_memory_bytes counts too.",
	}, func() float64 { return float64(rssAnon("/proc/self/status")) })
	m.reg.MustRegister(m.cniOps, m.cniDuration, m.tryAgain, m.passes, m.passDuration, m.repairs, m.passErrors, m.lastSuccess, m.claims, anon,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CNI records one CNI operation: its command, its result ("ok" or the
// CNI error code) and how long it took.
func (m *Metrics) CNI(command, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.cniOps.WithLabelValues(command, result).Inc()
	m.cniDuration.WithLabelValues(command).Observe(took.Seconds())
	if command == "ADD" && result == "11" {
		m.tryAgain.Inc()
	}
}

// Pass records one reconcile pass; failed names the parts that failed.
func (m *Metrics) Pass(took time.Duration, failed []string) {
	if m == nil {
		return
	}
	m.passDuration.Observe(took.Seconds())
	if len(failed) == 0 {
		m.passes.WithLabelValues("ok").Inc()
		m.lastSuccess.SetToCurrentTime()
		return
	}
	m.passes.WithLabelValues("error").Inc()
	for _, k := range failed {
		m.passErrors.WithLabelValues(k).Inc()
	}
}

// Repaired counts n repairs of one kind.
func (m *Metrics) Repaired(kind string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.repairs.WithLabelValues(kind).Add(float64(n))
}

// Claim counts one block claim of pool: outcome made, won, given-up or lost.
func (m *Metrics) Claim(pool, outcome string) {
	if m == nil {
		return
	}
	m.claims.WithLabelValues(pool, outcome).Inc()
}

// Handler serves /metrics (m's metrics, and what state reads at each
// scrape; state may be nil), /healthz (the process serves HTTP) and
// /readyz (ready is true: the daemon serves ADD; ready says why not).
func (m *Metrics) Handler(state func() State, ready func() (bool, string)) http.Handler {
	g := m.gatherer(state)
	mux := http.NewServeMux()
	// Uncompressed: a node's exposition is some 30 kB, and a gzip writer
	// per scrape costs the daemon more memory than the bytes it saves.
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, DisableCompression: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: " + why + "\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}

// gatherer is m's registry, and the state collector of state (nil: none).
func (m *Metrics) gatherer(state func() State) prometheus.Gatherer {
	if state == nil {
		return m.reg
	}
	sr := prometheus.NewRegistry()
	sr.MustRegister(&stateCollector{state: state})
	return prometheus.Gatherers{m.reg, sr}
}

// rssAnon is RssAnon of a /proc/<pid>/status file, in bytes; 0 when it
// cannot be read.
func rssAnon(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kB, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kB << 10
		}
	}
	return 0
}
