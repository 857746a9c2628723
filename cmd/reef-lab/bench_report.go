package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

type benchReport struct {
	began        time.Time
	took         time.Duration
	refVersion   string
	daemonConfig string
	results      map[string]*series // "plugin/mode/op"
	memIdle      lab.Memory
	mem200       lab.Memory // the highest of the rounds, field by field
	memAfter     lab.Memory
	shim         []shimResult
	daemonLog    string
	machine      machine
}

func (r *benchReport) get(plugin, mode, op string) *series {
	k := plugin + "/" + mode + "/" + op
	if r.results[k] == nil {
		r.results[k] = &series{}
	}
	return r.results[k]
}

type machine struct {
	nproc                          int
	cpu, kernel, reef, plugins, fs string
	loadStart, loadEnd             string // 1-minute load average
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func machineInfo(bin string) machine {
	m := machine{nproc: runtime.NumCPU(), cpu: cpuModel(), kernel: "unknown", reef: "unknown", plugins: "unknown", fs: "unknown"}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "unknown"
		}
		return strings.TrimSpace(string(out))
	}
	m.kernel = run("uname", "-r")
	m.reef = run(filepath.Join(bin, "reef"), "version")
	m.plugins = "containernetworking-plugins " + run("dpkg-query", "-W", "-f", "${Version}", "containernetworking-plugins")
	var st syscall.Statfs_t
	if syscall.Statfs(lab.BaseDir, &st) == nil {
		m.fs = map[int64]string{0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "xfs", 0x9123683E: "btrfs",
			0x794c7630: "overlayfs"}[int64(st.Type)]
		if m.fs == "" {
			m.fs = fmt.Sprintf("fs type %#x", st.Type)
		}
	}
	return m
}

// pct is the nearest-rank percentile of the samples.
func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func (s *series) rate() float64 {
	if s.wall == 0 {
		return 0
	}
	return float64(len(s.lat)) / s.wall.Seconds()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func mib(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }

func (r *benchReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("`sudo make bench` rewrites this file; nothing in it is edited by hand, and each section names the\n")
	w("command behind its figures. The sections down to \"reef daemon memory\" come from one run of\n\n")
	w("    bin/reef-lab bench --bin $PWD/bin --out BENCHMARKS.md    # the first step of sudo make bench\n\n")
	w("on %s, which took %s.\n\n", r.began.UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second))
	w("**What is measured.** One pod's CNI ADD and DEL as a runtime does them: the wall time of libcni's\n")
	w("`AddNetworkList` / `DelNetworkList` (the code containerd uses), which execs the plugin. reef\n")
	w("(the `reef-cni` shim forwarding to the `reef daemon`) runs next to Debian's `ptp` + `host-local`\n")
	w("reference plugins (conflist cniVersion %s, `ipMasq: false`) in the same run. Both runtime sides\n", r.refVersion)
	w("run in a lab node network namespace (`reef-lab` re-execs itself under `nsenter`), so ptp's host\n")
	w("veths and routes land there, never on the host. Pod namespaces are created before the clock starts.\n")
	w("Sequential: %d rounds of %d pods per plugin; parallel: %d rounds of %d pods per plugin, %d workers;\n", seqRounds, seqPerRound, parRounds, parPods, parWorkers)
	w("plugins alternate within a round and swap order between rounds. %d warm-up pods per plugin are\n", warmPods)
	w("not counted. pods/s = pods / wall time of the batch.\n")
	w("The reef daemon runs with its production defaults for these: %s.\n\n", r.daemonConfig)

	m := r.machine
	w("**Machine.** nproc %d (%s), kernel %s; lab state, reef's store and\n", m.nproc, m.cpu, m.kernel)
	w("host-local's data on %s (`%s`); 1-minute load average %s at the start, %s at the end (other\n", m.fs, lab.BaseDir, m.loadStart, m.loadEnd)
	w("work on the machine shows up there and in the figures).\n")
	w("Software: %s; %s; reef-lab built with %s.\n\n", m.reef, m.plugins, runtime.Version())

	// The aim.
	ra, pa := r.get("reef", "seq", "ADD"), r.get("ref", "seq", "ADD")
	seqRatio := float64(pct(ra.lat, .5)) / float64(pct(pa.lat, .5))
	rp, pp := r.get("reef", "par", "ADD"), r.get("ref", "par", "ADD")
	parRatio := float64(pct(rp.lat, .5)) / float64(pct(pp.lat, .5))
	verdict := func(x float64) string {
		if x <= 0.5 {
			return "**met**"
		}
		return "**not met**"
	}
	w("## Aim: reef ADD p50 at most half of ptp+host-local\n\n")
	w("- sequential: reef %s ms, ptp+host-local %s ms, ratio %.2f: %s\n", ms(pct(ra.lat, .5)), ms(pct(pa.lat, .5)), seqRatio, verdict(seqRatio))
	w("- %d parallel: reef %s ms, ptp+host-local %s ms, ratio %.2f: %s\n", parWorkers, ms(pct(rp.lat, .5)), ms(pct(pp.lat, .5)), parRatio, verdict(parRatio))
	w("- for scale: half of ptp+host-local's sequential p50 is %s ms; libcni and the exec of a plugin that\n", ms(pct(pa.lat, .5)/2))
	w("  does next to nothing (`loopback`) take %s ms, reef's daemon alone %s ms (below).\n\n", ms(pct(r.get("lo", "seq", "ADD").lat, .5)), ms(pct(r.get("reef", "grpc", "ADD").lat, .5)))

	r.dualStack(w)

	r.libcniTables(w)
	r.whereTimeGoes(w)
	r.shimAndMemory(w)
	return b.String()
}

// libcniTables writes the ADD and DEL figures through libcni of each plugin
// and mode, then reef's against the reference's.
func (r *benchReport) libcniTables(w func(string, ...any)) {
	modes := []struct{ key, label string }{
		{"seq", "sequential"},
		{"par", fmt.Sprintf("%d parallel", parWorkers)},
	}
	w("## ADD and DEL through libcni\n\n")
	w("| op | mode | plugin | pods | p50 ms | p99 ms | pods/s |\n|---|---|---|---:|---:|---:|---:|\n")
	for _, op := range []string{"ADD", "DEL"} {
		for _, md := range modes {
			for _, pl := range []struct{ key, label string }{{"reef", "reef"}, {"ref", "ptp+host-local"}} {
				s := r.get(pl.key, md.key, op)
				w("| %s | %s | %s | %d | %s | %s | %.0f |\n", op, md.label, pl.label, len(s.lat), ms(pct(s.lat, .5)), ms(pct(s.lat, .99)), s.rate())
			}
		}
	}
	w("\nreef / ptp+host-local (latency below 1 and pods/s above 1 favour reef):\n\n")
	w("| op | mode | p50 | p99 | pods/s |\n|---|---|---:|---:|---:|\n")
	for _, op := range []string{"ADD", "DEL"} {
		for _, md := range modes {
			a, p := r.get("reef", md.key, op), r.get("ref", md.key, op)
			w("| %s | %s | %s | %s | %s |\n", op, md.label,
				ratio(float64(pct(a.lat, .5)), float64(pct(p.lat, .5))),
				ratio(float64(pct(a.lat, .99)), float64(pct(p.lat, .99))),
				ratio(a.rate(), p.rate()))
		}
	}

}

// whereTimeGoes writes reef's path through libcni and the shim against its
// daemon alone, and the floor.
func (r *benchReport) whereTimeGoes(w func(string, ...any)) {
	ra := r.get("reef", "seq", "ADD")
	w("\n## Where reef's time goes\n\n")
	w("At the end of each sequential round, %d pods go straight to reef's daemon over its gRPC socket\n", grpcPerRound)
	w("(one kept connection: no libcni, no exec), and %d through libcni to Debian's `loopback` plugin,\n", grpcPerRound)
	w("which only sets lo up: the floor for any plugin that libcni execs. %d pods each in all; the first\n", seqRounds*grpcPerRound)
	w("row repeats the sequential reef figures above. A negative difference is noise.\n\n")
	w("| path | ADD p50 ms | ADD p99 ms | DEL p50 ms | DEL p99 ms |\n|---|---:|---:|---:|---:|\n")
	ga, gd, rd := r.get("reef", "grpc", "ADD"), r.get("reef", "grpc", "DEL"), r.get("reef", "seq", "DEL")
	la, ld := r.get("lo", "seq", "ADD"), r.get("lo", "seq", "DEL")
	w("| reef: libcni → reef-cni → daemon | %s | %s | %s | %s |\n", ms(pct(ra.lat, .5)), ms(pct(ra.lat, .99)), ms(pct(rd.lat, .5)), ms(pct(rd.lat, .99)))
	w("| reef daemon alone (gRPC) | %s | %s | %s | %s |\n", ms(pct(ga.lat, .5)), ms(pct(ga.lat, .99)), ms(pct(gd.lat, .5)), ms(pct(gd.lat, .99)))
	w("| difference at p50: libcni + exec of the shim + dial | %s | | %s | |\n",
		ms(pct(ra.lat, .5)-pct(ga.lat, .5)), ms(pct(rd.lat, .5)-pct(gd.lat, .5)))
	w("| floor: libcni → `loopback` | %s | %s | %s | %s |\n", ms(pct(la.lat, .5)), ms(pct(la.lat, .99)), ms(pct(ld.lat, .5)), ms(pct(ld.lat, .99)))

}

// shimAndMemory writes the shim's exec cost, the daemon's memory and the
// warnings and errors in its log.
func (r *benchReport) shimAndMemory(w func(string, ...any)) {
	w("\n## The shim's own cost\n\n")
	w("%d execs of each binary with `CNI_COMMAND=VERSION`, alternating (fork + exec + runtime start + answer):\n\n", shimExecs)
	w("| binary | size MiB | p50 ms | p99 ms |\n|---|---:|---:|---:|\n")
	for _, s := range r.shim {
		w("| `%s` | %.1f | %s | %s |\n", s.label, float64(s.size)/(1<<20), ms(pct(s.lat, .5)), ms(pct(s.lat, .99)))
	}

	w("\n## reef daemon memory\n\n")
	w("From `/proc/<pid>/status` of the node's daemon: VmRSS, RssAnon (its anonymous memory: heap, stacks, runtime; the rest\n")
	w("of VmRSS is pages of the binary, which the page cache holds anyway) and VmHWM.\n\n")
	w("| state | VmRSS MiB | RssAnon MiB | VmHWM (peak) MiB |\n|---|---:|---:|---:|\n")
	row := func(state string, m lab.Memory) {
		w("| %s | %s | %s | %s |\n", state, mib(m.RSS), mib(m.Anon), mib(m.HWM))
	}
	row("idle: started, 0 pods", r.memIdle)
	row(fmt.Sprintf("%d pods (after a parallel ADD; highest of %d rounds)", parPods, parRounds), r.mem200)
	row("all pods deleted again", r.memAfter)
	var bad []string
	for _, line := range strings.Split(r.daemonLog, "\n") {
		if strings.Contains(line, " level=WARN ") || strings.Contains(line, " level=ERROR ") {
			bad = append(bad, line)
		}
	}
	w("\nWarnings and errors in the daemon's log during the run: %d.\n", len(bad))
	if len(bad) > 0 {
		w("\n```\n%s\n```\n", strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
}

// dualStack writes the aim of issue 29: a dual-stack pod's ADD (an address
// of each family, two routes, both families' sets) against an IPv4-only
// one, both through reef in the sequential rounds of one run.
func (r *benchReport) dualStack(w func(string, ...any)) {
	w("## Aim: a dual-stack ADD p50 at most 1.2× an IPv4-only ADD\n\n")
	w("A second reef node with the IPv4 node's pool and an IPv6 one (`%s`) runs the sequential rounds\n", strings.TrimSpace(benchPoolsDual))
	w("as a plugin of its own, in turn with reef's IPv4-only node and the reference; each of its pods gets an\n")
	w("address of each family.\n\n")
	w("| op | IPv4-only p50 ms | dual-stack p50 ms | ratio p50 | IPv4-only p99 ms | dual-stack p99 ms |\n|---|---:|---:|---:|---:|---:|\n")
	for _, op := range []string{"ADD", "DEL"} {
		v4, ds := r.get("reef", "seq", op), r.get("dual", "seq", op)
		w("| %s | %s | %s | %s | %s | %s |\n", op, ms(pct(v4.lat, .5)), ms(pct(ds.lat, .5)),
			ratio(float64(pct(ds.lat, .5)), float64(pct(v4.lat, .5))), ms(pct(v4.lat, .99)), ms(pct(ds.lat, .99)))
	}
	x := float64(pct(r.get("dual", "seq", "ADD").lat, .5)) / float64(pct(r.get("reef", "seq", "ADD").lat, .5))
	verdict := "**not met**"
	if x <= 1.2 {
		verdict = "**met**"
	}
	w("\nADD ratio %.2f: %s.\n\n", x, verdict)
}
