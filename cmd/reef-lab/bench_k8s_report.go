package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// k8sPodTimes are the times at which the benchmark's watch received a
// pod's events, in clusterloader2's PodStartupLatency phases: its first
// event (create), the first with a node (schedule), the first with phase
// Running (run, which clusterloader2 also calls watch).
type k8sPodTimes struct {
	create, schedule, run time.Time
	node, ip              string // as the pod was first seen Running
}

// k8sObserve records a pod's event received at at, as clusterloader2's
// processEvent does: each phase keeps the first time it was seen.
func k8sObserve(t *k8sPodTimes, pod *corev1.Pod, at time.Time) {
	if t.create.IsZero() {
		t.create = at
	}
	if pod.Spec.NodeName != "" && t.schedule.IsZero() {
		t.schedule = at
	}
	if pod.Status.Phase == corev1.PodRunning && t.run.IsZero() {
		t.run = at
		t.node, t.ip = pod.Spec.NodeName, pod.Status.PodIP
	}
}

// startups are the runs' pod_startup latencies (create to watch-observed
// Running).
func (r *k8sRun) startups() []time.Duration {
	return r.phase(func(t k8sPodTimes) time.Duration { return t.run.Sub(t.create) })
}

func (r *k8sRun) phase(f func(k8sPodTimes) time.Duration) []time.Duration {
	var ds []time.Duration
	for _, t := range r.pods {
		if !t.run.IsZero() {
			ds = append(ds, f(t))
		}
	}
	return ds
}

type k8sReport struct {
	command, loadStart, loadEnd string
	began                       time.Time
	took                        time.Duration
	up                          []time.Duration // each cluster's start
	others                      []string        // other test work on the machine at the start
	nice                        int             // the nice value the clusters ran at
	rounds                      int
	plugins, scenarios          []string
	runs                        []*k8sRun
}

// k8sPhases are the latencies the report gives, clusterloader2's names.
var k8sPhases = []struct {
	name string
	f    func(k8sPodTimes) time.Duration
}{
	{"pod_startup", func(t k8sPodTimes) time.Duration { return t.run.Sub(t.create) }},
	{"create_to_schedule", func(t k8sPodTimes) time.Duration { return t.schedule.Sub(t.create) }},
	{"schedule_to_run", func(t k8sPodTimes) time.Duration { return t.run.Sub(t.schedule) }},
}

// latencies pools a phase over the rounds of one plugin and scenario.
func (r *k8sReport) latencies(plugin, scenario string, f func(k8sPodTimes) time.Duration) []time.Duration {
	var ds []time.Duration
	for _, run := range r.runs {
		if run.plugin == plugin && run.scenario == scenario {
			ds = append(ds, run.phase(f)...)
		}
	}
	return ds
}

func k8sSec(d time.Duration, ok bool) string {
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func k8sRatio(a, b []time.Duration, q float64) string {
	x, okA := meshQuantile(a, q)
	y, okB := meshQuantile(b, q)
	if !okA || !okB || y <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", float64(x)/float64(y))
}

func (r *k8sReport) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	q := func(ds []time.Duration, p float64) string { return k8sSec(meshQuantile(ds, p)) }
	w("## Pod startup latency (Kubernetes)\n\n")
	w("From `sudo make bench`, which runs `%s`, on %s (%s). 1-minute load average %s at the start,\n",
		r.command, r.began.UTC().Format("2006-01-02 15:04 UTC"), meshSec(r.took), r.loadStart)
	w("%s at the end (2 cores; other work shows)", r.loadEnd)
	if len(r.others) > 0 {
		w("; %d other `e2e.test` processes (other runs' tests) were running on the same machine as this one started", len(r.others))
	}
	if r.nice != 0 {
		w("; this run and its clusters ran at nice %d, to leave the CPUs to the other work first", r.nice)
	}
	var busy []float64
	for _, run := range r.runs {
		busy = append(busy, run.busy)
	}
	sort.Float64s(busy)
	if len(busy) > 0 {
		w(". While the pods started, the machine's CPUs were %.0f%% busy at the median run (%.0f%% to %.0f%%)",
			100*busy[len(busy)/2], 100*busy[0], 100*busy[len(busy)-1])
	}
	w(".\n\n")
	w("### Aims\n\nFrom issue 27: pod start latency measured the way Kubernetes' own scalability tests do (created → Running,\n")
	w("p50/p99 over 100 pods on one node, and 30 pods per node on three), with reef and with the reference plugins\n")
	w("(ptp + host-local, with portmap) in the same run. The issue sets no figure to reach: these are the figures. For\n")
	w("scale, Kubernetes' pod startup SLO asks p99 ≤ 5 s for stateless pods, image pulls excluded, over a cluster-day.\n\n")
	w("### How\n\n")
	w("Four clusters of the lab (docs/kubernetes-lab.md), one at a time, in the order reef, reference, reference, reef, so\n")
	w("that a drift in the machine's other work weighs on both alike; each is a control plane and three workers with\n")
	w("containerd %s, kubelet and kube-proxy (nftables) %s (up in %s). The reef clusters run its daemon on every node\n",
		k8sVersion("containerd2", 2), k8sVersion("kubelet", 1), k8sDurations(r.up))
	w("(`reconcileInterval: 30s`, `logLevel: info`, its one-line conflist); the reference clusters Debian's plugins (%s),\n", lab.RefPluginDir)
	w("ptp + host-local with a /24 of %s per node + portmap, cniVersion 1.0.0, `ipMasq: false`, as kind\n", lab.ClusterPool)
	w("configures them, and no reef daemon. The pods are the pause image (%s, imported, never pulled:\n", k8simages.Pause)
	w("`imagePullPolicy: Never`), one container, no probes, each pinned to its node by a `kubernetes.io/hostname`\n")
	w("nodeSelector, so the scheduler places them. All of a run's pods are created at once, by %d goroutines of one\n", k8sCreators)
	w("client (QPS 200, burst 400); kubelet's `maxPods` is 250.\n\n")
	w("Timing follows clusterloader2's PodStartupLatency: a watch on the run's pods, opened before the first create,\n")
	w("stamps each event as it arrives. `pod_startup` is the pod's first event (create) to the first event with phase\n")
	w("Running (kubelet has started its container and reported it); `create_to_schedule` ends at the first event with a\n")
	w("node, `schedule_to_run` is the rest. (creationTimestamp has a one-second resolution, which is why clusterloader2\n")
	w("takes the create time from the watch.) A run's pods are then deleted (grace period 30 s; pause exits on SIGTERM)\n")
	w("and the run ends when the watch has seen every pod deleted: kubelet deletes a pod's object only after it has\n")
	w("stopped the sandbox (CNI DEL) and reclaimed its resources. Each cluster first runs 5 pods per node, not counted,\n")
	w("then half of the %d rounds of its plugin; a round is one run of each scenario.\n\n", r.rounds)
	r.startupTables(w)
	w("\nEach run, in the order they ran (created in: the first create sent to the last answered; CPU busy: both\n")
	w("CPUs, from the first create to the last pod Running; load: the 1-minute load average as the run began; watch\n")
	w("reopened: how often the watch ended before every pod was Running and was reopened from the last resource version\n")
	w("seen, so that no event is lost, but those of the gap arrive late):\n\n")
	w("| round | scenario | plugin | p50 | p99 | created in | CPU busy | load | watch reopened |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.runs {
		ds := run.startups()
		w("| %d | %s | %s | %s | %s | %s | %.0f%% | %s | %d |\n", run.round+1, run.scenario, run.plugin, q(ds, 0.5), q(ds, 0.99),
			k8sSec(run.createSpan, true), 100*run.busy, run.load, run.reopened)
	}
	return b.String()
}

// startupTables writes pod_startup and its phases per scenario and plugin,
// then the first plugin's against the second's.
func (r *k8sReport) startupTables(w func(string, ...any)) {
	q := func(ds []time.Duration, p float64) string { return k8sSec(meshQuantile(ds, p)) }
	w("| scenario | plugin | pods | p50 | p90 | p99 | max | create_to_schedule p50 | schedule_to_run p50 | p50 per round |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range r.scenarios {
		for _, p := range r.plugins {
			ds := r.latencies(p, s, k8sPhases[0].f)
			var perRound []string
			for _, run := range r.runs {
				if run.plugin == p && run.scenario == s {
					perRound = append(perRound, q(run.startups(), 0.5))
				}
			}
			w("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", s, p, len(ds), q(ds, 0.5), q(ds, 0.9), q(ds, 0.99), q(ds, 1),
				q(r.latencies(p, s, k8sPhases[1].f), 0.5), q(r.latencies(p, s, k8sPhases[2].f), 0.5), strings.Join(perRound, ", "))
		}
	}
	if len(r.plugins) == 2 {
		w("\n%s / %s, pod_startup (below 1 favours reef):\n\n", r.plugins[0], r.plugins[1])
		w("| scenario | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|\n")
		for _, s := range r.scenarios {
			a, c := r.latencies(r.plugins[0], s, k8sPhases[0].f), r.latencies(r.plugins[1], s, k8sPhases[0].f)
			w("| %s | %s | %s | %s | %s |\n", s, k8sRatio(a, c, 0.5), k8sRatio(a, c, 0.9), k8sRatio(a, c, 0.99), k8sRatio(a, c, 1))
		}
	}
}

// k8sVersion is the field'th word of `bin --version`, of a binary of
// the lab's cluster.
func k8sVersion(bin string, field int) string {
	out, err := exec.Command(filepath.Join(lab.KubeBinDir(), bin), "--version").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) > field {
		return f[field]
	}
	return "unknown"
}

func k8sDurations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, meshSec(d))
	}
	return strings.Join(s, " and ")
}
