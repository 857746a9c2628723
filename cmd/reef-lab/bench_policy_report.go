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
	w("with an except). 1-minute load average %s at the start, %s at the end (2 cores; other work shows).\n", r.loadStart, r.loadEnd)
	w("The ClusterNetworkPolicy step (issue 31) runs between the throughput and the scale step, its extra\n")
	w("policies deleted after it; the CRD it installs stays for the scale step, with no cluster policy left.\n\n")

	w("### Aims\n\nFrom issue 12, \"Measured in `make bench`\".\n\n")
	r.aims(w, ms)
	r.clusterAims(w, ms)

	r.addsAndMemory(w, ms)
	r.clusterSection(w, ms)

	w("\n### Throughput (iperf3, node1 -> node2, 5 s runs)\n\n")
	if r.tputErr == "" {
		w("Not isolated: %s Gbit/s. Isolated by an egress policy on the client and an ingress policy on the server\n", floats(r.tputOff))
		w("that allow TCP 5201: %s Gbit/s.\n", floats(r.tputOn))
	} else {
		w("Not measured: %s\n", r.tputErr)
	}
	return b.String()
}

// aims writes issue 12's aims, each with its figure and whether it is met.
func (r *policyReport) aims(w func(string, ...any), ms func(time.Duration, bool) string) {
	p50 := func(ds []time.Duration) (time.Duration, bool) { return meshQuantile(ds, 0.5) }
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

}

// addsAndMemory writes the ADD figures and the memory figures.
func (r *policyReport) addsAndMemory(w func(string, ...any), ms func(time.Duration, bool) string) {
	p50 := func(ds []time.Duration) (time.Duration, bool) { return meshQuantile(ds, 0.5) }
	w("\n### CNI ADD through libcni\n\nSequential, node1 and node3 alternating; every pod's object created a second before its ADD.\n\n")
	w("| node | policies in the API | ADD p50 | p90 | n |\n|---|---|---|---|---|\n")
	row := func(node, what string, ds []time.Duration) {
		a, aok := p50(ds)
		w("| %s | %s | %s | %s | %d |\n", node, what, ms(a, aok), ms(meshQuantile(ds, 0.9)), len(ds))
	}
	row("node1, policy on", "none", r.addOn0)
	row("node1, policy on", "100, 1,000 pods", r.addOn)
	row("node3, policy off", "-", r.addOff)
	row("node1, policy on", "500 + 50 cluster, 1,000 pods", r.addFullOn)
	row("node3, policy off", "- (alternating with the row above)", r.addFullOff)

	w("\n### Memory\n\nVmRSS, its anonymous (RssAnon) and file-backed parts, and VmHWM (the peak RSS so far, during the bursts of changes).\n\n")
	w("| daemon | RSS | RssAnon | file-backed | peak RSS |\n|---|---|---|---|---|\n")
	mem := func(what string, m lab.Memory) {
		w("| %s | %s | %s | %s | %s |\n", what, meshMiB(m.RSS), meshMiB(m.Anon), meshMiB(m.File), meshMiB(m.HWM))
	}
	mem("node3, policy off, idle", r.idleOff)
	mem("node1, policy on, empty API", r.idleOn)
	mem("node1, "+r.clusterWhat, r.clusterMem)
	mem("node1, "+r.loadedWhat, r.loadedOn)
	w("\nnode1's RssAnon after the ClusterNetworkPolicy step's last change: %s.\n", strings.Join(r.clusterMemSeries, ", "))
	w("\nnode1's RssAnon after the scale step's last change: %s.\n", strings.Join(r.memSeries, ", "))

}

func floats(v []float64) string {
	var s []string
	for _, f := range v {
		s = append(s, fmt.Sprintf("%.2f", f))
	}
	return strings.Join(s, ", ")
}

// clusterAims are the aims of issue 31, "What must be shown", the bench.
func (r *policyReport) clusterAims(w func(string, ...any), ms func(time.Duration, bool) string) {
	w("\nFrom issue 31, \"What must be shown\", with %s.\n\n", r.clusterWhat)
	change := func(what string, ds []time.Duration) {
		a, aok := meshQuantile(ds, 0.5)
		z, zok := meshQuantile(ds, 0.99)
		w("- A %s change enforced (API write -> the probe's first packet decided the new way), p50 at most 100 ms and p99 at most\n  500 ms: p50 %s, p99 %s (%d changes): %s\n", what, ms(a, aok), ms(z, zok), len(ds),
			meshMet(aok && zok && a <= 100*time.Millisecond && z <= 500*time.Millisecond))
	}
	change("NetworkPolicy", r.npChange)
	change("ClusterNetworkPolicy", r.cnpChange)
	on, onok := meshQuantile(r.addFullOn, 0.5)
	off, offok := meshQuantile(r.addFullOff, 0.5)
	none, noneok := meshQuantile(r.addOn0, 0.5)
	ratio := 0.0
	if onok && offok && off > 0 {
		ratio = float64(on) / float64(off)
	}
	w("- A pod's ADD with all of it loaded, p50 at most 1.2x an ADD with no policy in the same run: %s vs %s on node3 (policy off,\n  alternating), %.2fx; node1 with an empty API earlier in the run: %s: %s\n",
		ms(on, onok), ms(off, offok), ratio, ms(none, noneok), meshMet(onok && offok && ratio <= 1.2))
	w("- node1's memory with all of it loaded (settled a minute): RssAnon %s, RSS %s; RssAnon %s over the same daemon idle with an\n  empty API (no aim in the issue)\n",
		meshMiB(r.clusterMem.Anon), meshMiB(r.clusterMem.RSS), meshMiB(r.clusterMem.Anon-r.idleOn.Anon))
}

// clusterSection says how the ClusterNetworkPolicy step measured, and its
// change figures by direction.
func (r *policyReport) clusterSection(w func(string, ...any), ms func(time.Duration, bool) string) {
	w("\n### Policy changes under the ClusterNetworkPolicy load\n\n")
	w("With %s: %s installed in the lab's API; the\n", r.clusterWhat, r.crd)
	w("background's 400 more NetworkPolicies of the same shape; %d ClusterNetworkPolicies, half Admin, half Baseline:\n", r.clusters)
	w("kube-dns allowed and the metadata address denied for every namespace, a team's databases (its app accepted,\n")
	w("its neighbour passed to NetworkPolicy, a port range denied to everyone, egress denied to two networks), a team's\n")
	w("default (its own and the monitoring namespace in, everything else denied; egress to its caches, private networks\n")
	w("denied), subjects and peers by namespace labels, pod labels and matchExpressions.\n\n")
	w("Enforced means a probe's first packet decided the new way, not the kernel's nft state: a prober pod on node1\n")
	w("opens a new TCP connection to a target pod on node2 every %s, each from a source port no attempt of the run\n", probeEvery)
	w("used before (so no conntrack entry of an earlier connection decides it); allowed when it connects, denied when\n")
	w("nothing answers in %s (reef drops, it does not reject; less than the kernel's first SYN retransmission, 1 s,\n", probeTimeout)
	w("so every outcome is the first SYN's). A change counts from just before its API write (a merge patch) to the send\n")
	w("time of the first attempt after which every attempt decided the new way, held for %s: exact to the probe's\n", probeSettle)
	w("interval. It includes the API server, the informer, the daemon's compile of everything and its nftables batch.\n")
	w("The NetworkPolicy change moves the port of the target's one ingress rule between 8080 (the target's, allowed) and\n")
	w("8081 (denied); the ClusterNetworkPolicy change switches an Admin rule on the prober's TCP 8080 between Accept and\n")
	w("Deny. The changes alternate, denying first. An attempt that decided the new way before one that decided the old\n")
	w("way again counts the change as flapped. p99 is by nearest rank")
	if n := len(r.npChange); n > 0 && n <= 100 {
		w(": of %d changes, the largest", n)
	}
	w(".\n\n")
	w("| change | to | p50 | p90 | p99 | max | n |\n|---|---|---|---|---|---|---|\n")
	row := func(what, to string, ds []time.Duration) {
		a, aok := meshQuantile(ds, 0.5)
		w("| %s | %s | %s | %s | %s | %s | %d |\n", what, to, ms(a, aok), ms(meshQuantile(ds, 0.9)), ms(meshQuantile(ds, 0.99)), ms(meshQuantile(ds, 1)), len(ds))
	}
	half := func(ds []time.Duration, odd int) []time.Duration {
		var h []time.Duration
		for i, d := range ds {
			if i%2 == odd {
				h = append(h, d)
			}
		}
		return h
	}
	for _, k := range []struct {
		what   string
		ds     []time.Duration
		flaps  int
		probes string
	}{{"NetworkPolicy", r.npChange, r.npFlaps, r.npProbes}, {"ClusterNetworkPolicy", r.cnpChange, r.cnpFlaps, r.cnpProbes}} {
		row(k.what, "deny", half(k.ds, 0))
		row(k.what, "allow", half(k.ds, 1))
		row(k.what, "both", k.ds)
	}
	w("\nProbe attempts: NetworkPolicy %s, %d changes flapped; ClusterNetworkPolicy %s, %d changes flapped.\n",
		r.npProbes, r.npFlaps, r.cnpProbes, r.cnpFlaps)
}
