package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// meshReport is everything bench-mesh measured, rendered as the
// "## Multi-node" section of BENCHMARKS.md.
type meshReport struct {
	began              time.Time
	took               time.Duration
	loadStart, loadEnd string
	loadMesh           string // before the 50-node part
	loadRR             string // before the route-reflector part
	othersStart        int    // reef daemons of other labs running at the start
	othersMesh         int    // and before the 50-node part
	othersRR           int    // and before the route-reflector part
	quietMesh, quietRR quiet  // the wait for a quiet machine before those parts
	command            string
	reef               string
	logLevel           string
	bin                string
	parts              map[string]bool

	idle   meshIdleResult
	routes meshRoutesResult
	conv   []meshConvResult
	tor    meshToRResult
	mesh   meshStartResult
	rr     meshRRResult
}

func meshLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

func meshRun(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// meshCommand is the command line as a reader would type it, with the
// working directory's bin as $PWD/bin.
func meshCommand(args []string) string { return benchCommand("bin/reef-lab bench-mesh", args) }

// printSection prints a bench's section of BENCHMARKS.md and, with out
// set, writes it into that file (lab.WriteSection: in place of the
// section with its heading, or at the end).
func printSection(md, out string) error {
	fmt.Print(md)
	if out != "" {
		return lab.WriteSection(out, md)
	}
	return nil
}

// benchCommand is the command line a section names, with paths under the
// working directory written $PWD/...: the section says how to run it in
// any clone, not where this one was.
func benchCommand(cmd string, args []string) string {
	wd, _ := os.Getwd()
	var parts []string
	for _, a := range args {
		if wd != "" && strings.HasPrefix(a, wd+"/") {
			a = "$PWD/" + strings.TrimPrefix(a, wd+"/")
		} else if flag, path, ok := strings.Cut(a, "="); ok && wd != "" && strings.HasPrefix(path, wd+"/") {
			a = flag + "=$PWD/" + strings.TrimPrefix(path, wd+"/")
		}
		parts = append(parts, a)
	}
	return strings.TrimSpace(cmd + " " + strings.Join(parts, " "))
}

// meshP50 and meshMax of durations; negative values (unknown) are skipped.
func meshQuantile(ds []time.Duration, q float64) (time.Duration, bool) {
	var v []time.Duration
	for _, d := range ds {
		if d >= 0 {
			v = append(v, d)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	k := int(float64(len(v))*q+0.999999) - 1 // nearest rank
	return v[max(0, min(k, len(v)-1))], true
}

func meshMs(d time.Duration, ok bool) string {
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
}

func meshSec(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func meshMiB(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

func meshMet(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// convergence figures of one result, per sample.
type meshConvFigures struct {
	total, add, claimed, confirmed, toConfirm, propagate, first []time.Duration
}

func (c meshConvResult) figures() meshConvFigures {
	var f meshConvFigures
	for _, s := range c.samples {
		f.total = append(f.total, s.total)
		f.add = append(f.add, s.add)
		f.first = append(f.first, s.firstRoute)
		f.claimed = append(f.claimed, s.claimed)
		f.confirmed = append(f.confirmed, s.confirmed)
		if s.claimed >= 0 && s.confirmed >= 0 {
			f.toConfirm = append(f.toConfirm, s.confirmed-s.claimed)
		}
		if s.confirmed >= 0 {
			f.propagate = append(f.propagate, s.total-s.confirmed)
		}
	}
	return f
}

func (r *meshReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Multi-node\n\n")
	w("Every figure in this section comes from one run of\n\n    %s\n\n", r.command)
	w("(a step of `sudo make bench`) on %s, which took %s. One part alone: add\n", r.began.UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second))
	w("`--only idle`, `routes`, `convergence`, `tor`, `mesh` or `rr`. Nothing here is edited by hand.\n\n")
	w("**Setup.** Every node is a network namespace on this one machine (nproc %d, kernel %s) running the real\n", runtime.NumCPU(), meshRun("uname", "-r"))
	w("`reef daemon` (%s), its eth0 on a lab bridge (192.168.77.0/24). The daemons run with the production\n", r.reef)
	w("`reconcileInterval: 30s` and `logLevel: %s`; the BGP timers are the lab's (`keepaliveTime: 1s`, `holdTime: 3s`) but in the\n", r.logLevel)
	w("50-node mesh, which has the production ones (keepalive 10 s, hold 30 s) as the route-reflector part does;\n")
	w("meshed nodes list every other node in `bgp.peers` and accept the underlay in `bgp.peerPrefixes`, and leave\n")
	w("`bgp.voters` the first 5 nodes (all of a smaller cluster), the same on every node. The\n")
	w("pool is the default 10.244.0.0/16 with /26 blocks unless said otherwise. Kernel routes are watched through netlink\n")
	w("sockets opened in each node's namespace (an rtnetlink subscription per node for convergence, route dumps\n")
	w("for the rest). Memory is read from the daemon's `/proc/<pid>/status`: RssAnon, its anonymous memory (heap, stacks,\n")
	w("runtime), on which the aims are set, and RSS (VmRSS), which also counts pages of the reef binary that the page cache\n")
	w("holds anyway; the lab's daemons share the bench's cgroup, so there is no `memory.current` of their own to report.\n")
	w("1-minute load average %s at the start", r.loadStart)
	if r.loadMesh != "" {
		w(", %s before\nthe 50-node part, %s at the end (mostly the 50 nodes themselves)", r.loadMesh, r.loadEnd)
	} else {
		w(", %s at the end", r.loadEnd)
	}
	if r.loadRR != "" {
		w(" (%s before the route-reflector part)", r.loadRR)
	}
	if r.loadMesh != "" || r.loadRR != "" {
		w(". Before each of those two parts the bench waits, at most %s, for a second in which the CPUs are at most %.0f%% busy\n(the kernel tears the namespaces of the part before down in the background):", quietMax, 100*quietBusy)
		var parts []string
		if r.loadMesh != "" {
			parts = append(parts, "50-node part "+r.quietMesh.String())
		}
		if r.loadRR != "" {
			parts = append(parts, "route-reflector part "+r.quietRR.String())
		}
		w(" %s", strings.Join(parts, ", "))
	}
	w("; reef daemons of other labs running: %d at the start", r.othersStart)
	if r.loadMesh != "" {
		w(", %d before the 50-node part", r.othersMesh)
	}
	if r.loadRR != "" {
		w(", %d before the route-reflector part", r.othersRR)
	}
	w(". Other work on this\n2-core machine shows in the figures.\n\n")

	r.aims(w)
	if r.parts["convergence"] {
		r.convergenceSection(w)
	}
	if r.parts["tor"] {
		r.torSection(w)
	}
	if r.parts["mesh"] {
		r.meshSection(w)
	}
	if r.parts["rr"] {
		r.rrSection(w)
	}
	if r.parts["routes"] {
		r.routesSection(w)
	}
	if r.parts["idle"] {
		r.idleSection(w)
	}
	return b.String()
}

func (r *meshReport) convFor(n int) (meshConvResult, bool) {
	for _, c := range r.conv {
		if c.n == n {
			return c, true
		}
	}
	return meshConvResult{}, false
}

func (r *meshReport) aims(w func(string, ...any)) {
	w("### Aims\n\n")
	if r.parts["convergence"] || r.parts["mesh"] || r.parts["rr"] || r.parts["routes"] || r.parts["idle"] {
		w("From issue 10 (block ownership v2), \"Measured in `make bench`\". The memory figures, which the issues set on RSS,\n")
		w("are aims for RssAnon since issue 28: the rest of RSS is pages of the reef binary that the page cache holds anyway.\n\n")
	}
	r.convAim(w)
	r.meshAims(w)
	r.rrAims(w)
	if r.parts["routes"] {
		rt := r.routes
		if rt.err != "" {
			w("- A test speaker announcing %d blocks: RssAnon at most 45 MiB: not measured (%s).\n", rt.blocks, meshFirstLine(rt.err))
		} else {
			w("- A test speaker announcing %d blocks: RssAnon at most 45 MiB: %s 5 s after the last route (RSS %s, peak RSS %s): %s.\n", rt.blocks,
				meshMiB(rt.steady.Anon), meshMiB(rt.steady.RSS), meshMiB(rt.steady.HWM), meshMet(rt.steady.Anon <= 45*1024))
		}
	}
	if r.parts["idle"] {
		if r.idle.err != "" {
			w("- Daemon RssAnon at most 20 MiB idle: not measured (%s).\n", meshFirstLine(r.idle.err))
		} else {
			w("- Daemon RssAnon at most 20 MiB idle: %s (RSS %s, of which %s file-backed pages of the reef binary; kube-router,\n",
				meshMiB(r.idle.Anon), meshMiB(r.idle.RSS), meshMiB(r.idle.File))
			w("  which also embeds GoBGP, runs at 9-18 MiB RSS): %s.\n", meshMet(r.idle.Anon <= 20*1024))
		}
	}
	if r.parts["tor"] {
		w("\nFrom issue 11 (BGP to the routers), \"Measured in `make bench`\".\n\n")
		r.torAim(w)
	}
	w("\n")
}

// convAim writes the convergence aim, when that part ran.
func (r *meshReport) convAim(w func(string, ...any)) {
	if r.parts["convergence"] {
		var parts []string
		met := true
		any := false
		for _, n := range []int{3, 10} {
			c, ok := r.convFor(n)
			if !ok || len(c.samples) == 0 {
				met = false
				parts = append(parts, fmt.Sprintf("%d nodes: not measured", n))
				continue
			}
			f := c.figures()
			p50, _ := meshQuantile(f.total, 0.5)
			hi, _ := meshQuantile(f.total, 1)
			any = true
			met = met && p50 <= 250*time.Millisecond
			parts = append(parts, fmt.Sprintf("%d nodes p50 %s ms (max %s)", n, meshMs(p50, true), meshMs(hi, true)))
		}
		w("- A new block routed on every node within 250 ms p50, with the default config: %s: %s.\n", strings.Join(parts, ", "), meshMet(met && any))
	}
}

// meshAims writes the full mesh's aims, when that part ran.
func (r *meshReport) meshAims(w func(string, ...any)) {
	if r.parts["mesh"] {
		m := r.mesh
		switch {
		case m.err != "" && m.routes == 0:
			w("- %d-node full mesh from cold to every route within 15 s: not completed (%s): **not met**.\n", m.nodes, meshFirstLine(m.err))
		case m.sessionsErr != "":
			last, at := meshPlateau(m)
			w("- %d-node full mesh from cold to every route within 15 s: the full mesh of sessions is never reached (%d of %d\n", m.nodes, last/2, m.nodes*(m.nodes-1)/2)
			w("  sessions up by %s after the start, none after); from one ADD per node to every route: %s: **not met**.\n", meshSec(at), meshSec(max(m.routes, m.adds)))
		default:
			total := m.sessions + m.routes
			w("- %d-node full mesh from cold to every route within 15 s: %s (full mesh of sessions %s, then one ADD per node\n", m.nodes, meshSec(total), meshSec(m.sessions))
			w("  to every route %s): %s.\n", meshSec(m.routes), meshMet(total <= 15*time.Second && m.nodes >= 50))
		}
		if len(m.mem) > 0 {
			sp := spreadOf(m.mem)
			w("- RssAnon per daemon at most 40 MiB in the %d-node mesh: avg %s, max %s (RSS avg %s, max %s): %s.\n", m.nodes,
				meshMiB(sp.avg().Anon), meshMiB(sp.max.Anon), meshMiB(sp.avg().RSS), meshMiB(sp.max.RSS), meshMet(sp.max.Anon <= 40*1024))
		}
		if len(m.pathsPer) > 0 {
			avg, lo, hi := meshPaths(m.pathsPer)
			worst, blocks := meshPerRemoteBlock(m.pathsPer, m.failed)
			w("- At most 3 paths per block in every node's BGP tables (%d-node mesh, %d blocks): %.0f paths per node on\n", m.nodes, blocks, avg)
			w("  average (min %d, max %d); per block of another node, at the most %s: %s.\n", lo, hi, meshRatio(worst), meshMet(worst > 0 && worst <= 3))
		}
	}
}

// rrAims writes the route reflectors' aims, when that part ran.
func (r *meshReport) rrAims(w func(string, ...any)) {
	if r.parts["rr"] {
		rr := r.rr
		switch {
		case rr.notRun != "":
			w("- %d nodes through 2 reef route reflectors, cold to every route within 30 s, RssAnon per client at most 35 MiB,\n", rr.clients)
			w("  paths per node: %s.\n", rrNotBuilt)
		case rr.err != "":
			w("- %d nodes through 2 reef route reflectors, cold to every route within 30 s: not completed (%s): **not met**.\n", rr.clients, meshFirstLine(rr.err))
		default:
			total := rr.sessions + rr.routes
			w("- %d nodes through 2 reef route reflectors, cold to every route within 30 s: %s (sessions %s, then one ADD\n", rr.clients, meshSec(total), meshSec(rr.sessions))
			w("  per client to every route %s): %s.\n", meshSec(rr.routes), meshMet(total <= 30*time.Second && rr.addErrs == 0))
		}
		if len(rr.memClients) > 0 {
			sp := spreadOf(rr.memClients)
			w("- RssAnon per route-reflector client at most 35 MiB: avg %s, max %s (RSS avg %s, max %s, of which %s file-backed pages of\n",
				meshMiB(sp.avg().Anon), meshMiB(sp.max.Anon), meshMiB(sp.avg().RSS), meshMiB(sp.max.RSS), meshMiB(sp.avg().File))
			w("  the reef binary on average): %s.\n", meshMet(sp.max.Anon <= 35*1024))
		}
		if len(rr.pathsClient) > 0 {
			avg, lo, hi := meshPaths(rr.pathsClient)
			worst, blocks := meshPerRemoteBlock(rr.pathsClient, rr.failed)
			w("- Paths per client (reported, no aim): %.0f on average (min %d, max %d) for %d blocks; per block of another\n", avg, lo, hi, blocks)
			w("  node, at the most %s.\n", meshRatio(worst))
		}
	}
}

// meshPaths is the mean, least and most of per-node path counts.
func meshPaths(v []uint64) (avg float64, lo, hi uint64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	lo = v[0]
	var sum uint64
	for _, x := range v {
		sum += x
		lo, hi = min(lo, x), max(hi, x)
	}
	return float64(sum) / float64(len(v)), lo, hi
}

// meshPerRemoteBlock is the most, over the nodes, of a node's received
// paths per block of another node (each node owns the one block of its
// ADD, if it succeeded), and the blocks in the cluster; 0 when unknown.
func meshPerRemoteBlock(paths []uint64, failed []bool) (worst float64, blocks int) {
	if len(failed) != len(paths) {
		return 0, 0
	}
	for _, f := range failed {
		if !f {
			blocks++
		}
	}
	for i, k := range paths {
		remote := blocks
		if !failed[i] {
			remote--
		}
		if remote > 0 {
			worst = max(worst, float64(k)/float64(remote))
		}
	}
	return worst, blocks
}

func meshRatio(x float64) string {
	if x <= 0 {
		return "? paths"
	}
	return fmt.Sprintf("%.2f paths", x)
}

func meshFirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func (r *meshReport) convergenceSection(w func(string, ...any)) {
	w("### Convergence of a new block\n\n")
	w("N meshed nodes are started together and wait for every session; then on each node in turn (a fresh node:\n")
	w("no block yet) one pod is ADDed through libcni, and the clock runs from the start of that ADD until every\n")
	w("other node has the kernel route to the block it claimed, via the owner's address. Every node of a cluster\n")
	w("gives one sample; clusters of 3 are repeated. The split comes from the owner's log (millisecond times):\n")
	w("*claimed* = ADD start to \"%s\", *votes* = claimed to \"%s\"\n", meshLogClaimed, meshLogConfirmed)
	w("(one round trip to the voters: the claim out in IPv4 VPN, their grants back), *spread* = confirmed to the route\n")
	w("on the last other node (the confirmed claim and the IPv4 unicast path out, the peer's decision, netlink). The\n")
	w("voters are the first 5 nodes (`bgp.voters`; all 3 of a 3-node cluster), and a claim\n")
	w("needs a strict majority of them (2 of 3, 3 of 5).\n\n")
	w("| nodes | samples | p50 ms | max ms | ADD p50 ms | claimed p50 | votes p50 | votes max | spread p50 | spread max | first node p50 |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var errs []string
	for _, c := range r.conv {
		f := c.figures()
		q := func(v []time.Duration, p float64) string { d, ok := meshQuantile(v, p); return meshMs(d, ok) }
		w("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.n, len(c.samples),
			q(f.total, 0.5), q(f.total, 1), q(f.add, 0.5), q(f.claimed, 0.5), q(f.toConfirm, 0.5), q(f.toConfirm, 1), q(f.propagate, 0.5), q(f.propagate, 1), q(f.first, 0.5))
		if c.err != "" {
			errs = append(errs, fmt.Sprintf("%d nodes: stopped early: %s", c.n, meshFirstLine(c.err)))
		}
		for _, st := range c.stalled {
			errs = append(errs, fmt.Sprintf("a cluster of %d nodes never reached the full mesh and was replaced by a new one: %s",
				c.n, meshFirstLine(st)))
		}
	}
	w("\n")
	for _, e := range errs {
		w("- %s\n", e)
	}
	if len(errs) > 0 {
		w("\n")
	}
	var restarts []string
	for _, c := range r.conv {
		restarts = append(restarts, c.restarts...)
	}
	meshRestartsNote(w, restarts)
	var ups []string
	var mem []lab.Memory
	for _, c := range r.conv {
		for _, d := range c.sessionsUp {
			ups = append(ups, fmt.Sprintf("%.1f", d.Seconds()))
		}
		if c.n == 10 {
			mem = append(mem, c.mem...)
		}
	}
	if len(ups) > 0 {
		w("Start to full mesh of these clusters, s: %s. ", strings.Join(ups, ", "))
	}
	if len(mem) > 0 {
		w("Daemons of the 10-node clusters after their samples (one pod, 10 sessions' worth of routes): %s.", spreadOf(mem))
	}
	w("\n\n")
}
