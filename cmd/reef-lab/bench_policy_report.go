package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

func policyMedian(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2], true
}

func (r *policyReport) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p50 := func(ds []time.Duration) (time.Duration, bool) { return meshQuantile(ds, 0.5) }
	ms := func(d time.Duration, ok bool) string {
		if !ok {
			return "?"
		}
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	w("## NetworkPolicy\n\n")
	w("From `sudo make bench`, which runs `%s`, on %s (%s). A real etcd and kube-apiserver in a lab\n", r.command, r.began.UTC().Format("2006-01-02 15:04 UTC"), meshSec(r.took))
	w("namespace; node1 and node2 meshed with policy on (kubernetes.kubeconfig), node3 alone with policy off; production\n")
	w("reconcile interval (30 s). The API's pods beyond the nodes' own are objects scheduled to nodes the lab does\n")
	w("not run, with an address in status: what a node sees of the rest of a cluster. Each background policy has\n")
	w("an ingress rule (namespaceSelector AND podSelector, a port and a named port) and an egress rule (an ipBlock\n")
	w("with an except). 1-minute load average %s at the start, %s at the end (2 cores; other work shows).\n\n", r.loadStart, r.loadEnd)

	w("### Aims\n\nFrom issue 12, \"Measured in `make bench`\".\n\n")
	e, eok := p50(r.enforce)
	w("- Policy created -> enforced on every node, p50 at most 100 ms with 1,000 pods and 100 policies: %s (p90 %s, %d policies): %s\n",
		ms(e, eok), ms(meshQuantile(r.enforce, 0.9)), len(r.enforce), meshMet(eok && e <= 100*time.Millisecond))
	on, onok := p50(r.addOn)
	off, offok := p50(r.addOff)
	ratio := 0.0
	if onok && offok && off > 0 {
		ratio = float64(on) / float64(off)
	}
	w("- A pod's ADD with 100 policies in place, p50 at most 1.2x the ADD without policy: %s vs %s with policy off, %.2fx: %s\n",
		ms(on, onok), ms(off, offok), ratio, meshMet(onok && offok && ratio <= 1.2))
	over := r.loadedOn.Anon - r.idleOff.Anon
	w("- Daemon RssAnon with 5,000 pods, 500 namespaces and 500 policies in the API at most 40 MiB over idle: %s, %s over the idle\n  daemon with policy off (%s), %s over the same daemon idle with policy on (%s); RSS %s, %s over policy off: %s\n",
		meshMiB(r.loadedOn.Anon), meshMiB(over), meshMiB(r.idleOff.Anon), meshMiB(r.loadedOn.Anon-r.idleOn.Anon), meshMiB(r.idleOn.Anon),
		meshMiB(r.loadedOn.RSS), meshMiB(r.loadedOn.RSS-r.idleOff.RSS), meshMet(r.loadedOn.Anon > 0 && over <= 40*1024))
	ton, tonok := policyMedian(r.tputOn)
	toff, toffok := policyMedian(r.tputOff)
	if r.tputErr != "" {
		w("- Pod-to-pod TCP throughput with policy on at least 0.95x without: not measured: %s\n", r.tputErr)
	} else {
		tr := 0.0
		if toffok && toff > 0 {
			tr = ton / toff
		}
		w("- Pod-to-pod TCP throughput with policy on at least 0.95x without: %.2f Gbit/s vs %.2f, %.2fx (medians of %d runs): %s\n",
			ton, toff, tr, len(r.tputOn), meshMet(tonok && toffok && tr >= 0.95))
	}

	w("\n### CNI ADD through libcni\n\nSequential, node1 and node3 alternating; every pod's object created a second before its ADD.\n\n")
	w("| node | policies in the API | ADD p50 | p90 | n |\n|---|---|---|---|---|\n")
	row := func(node, what string, ds []time.Duration) {
		a, aok := p50(ds)
		w("| %s | %s | %s | %s | %d |\n", node, what, ms(a, aok), ms(meshQuantile(ds, 0.9)), len(ds))
	}
	row("node1, policy on", "none", r.addOn0)
	row("node1, policy on", "100, 1,000 pods", r.addOn)
	row("node3, policy off", "-", r.addOff)

	w("\n### Memory\n\nVmRSS, its anonymous (RssAnon) and file-backed parts, and VmHWM (the peak RSS so far, during the bursts of changes).\n\n")
	w("| daemon | RSS | RssAnon | file-backed | peak RSS |\n|---|---|---|---|---|\n")
	mem := func(what string, m lab.Memory) {
		w("| %s | %s | %s | %s | %s |\n", what, meshMiB(m.RSS), meshMiB(m.Anon), meshMiB(m.File), meshMiB(m.HWM))
	}
	mem("node3, policy off, idle", r.idleOff)
	mem("node1, policy on, empty API", r.idleOn)
	mem("node1, "+r.loadedWhat, r.loadedOn)
	w("\nnode1's RssAnon after the scale step's last change: %s.\n", strings.Join(r.memSeries, ", "))

	w("\n### Throughput (iperf3, node1 -> node2, 5 s runs)\n\n")
	if r.tputErr == "" {
		w("Not isolated: %s Gbit/s. Isolated by an egress policy on the client and an ingress policy on the server\n", floats(r.tputOff))
		w("that allow TCP 5201: %s Gbit/s.\n", floats(r.tputOn))
	} else {
		w("Not measured: %s\n", r.tputErr)
	}
	return b.String()
}

func floats(v []float64) string {
	var s []string
	for _, f := range v {
		s = append(s, fmt.Sprintf("%.2f", f))
	}
	return strings.Join(s, ", ")
}
