package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// tputReport is what bench-tput measured, rendered as the
// "## Throughput (iperf3)" section of BENCHMARKS.md.
type tputReport struct {
	began              time.Time
	took               time.Duration
	loadStart, loadEnd string // 1, 5 and 15-minute load averages
	command            string
	secs, runs         int
	nproc              int
	cpu, kernel, reef  string
	iperf              string

	groups []*tputGroup
	setup  []string
	nftA1  string
	podMTU string
	routes map[string]string
}

func (r *tputReport) machineInfo(bin string) {
	r.nproc = runtime.NumCPU()
	r.cpu = cpuModel()
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "unknown"
		}
		return tputFirstLine(string(out))
	}
	r.kernel = run("uname", "-r")
	r.reef = run(filepath.Join(bin, "reef"), "version")
	r.iperf = run("iperf3", "--version")
}

// tputCommand is the command line as a reader would type it, with the
// working directory as $PWD.
func tputCommand(args []string) string {
	wd, _ := os.Getwd()
	parts := []string{"bin/reef-lab", "bench-tput"}
	for _, a := range args {
		if wd != "" {
			a = strings.ReplaceAll(a, wd+"/", "$PWD/")
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func tputGbps(v float64, ok bool) string {
	if !ok {
		return "failed"
	}
	return fmt.Sprintf("%.2f", v)
}

func (r *tputReport) markdown() string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("## Throughput (iperf3)\n\n")
	w("Every figure in this section comes from one run of\n\n")
	w("    %s    # sudo make bench runs it\n\n", r.command)
	w("on %s, which took %s. Rerun it to refresh them; nothing here is edited by hand.\n\n",
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	w("**What is measured.** TCP throughput of one stream between two network namespaces of one lab: `iperf3 -c <server> -p 5201 -t %d -J`\n", r.secs)
	w("in the client namespace against a long-lived `iperf3 -s -B <server> -p 5201` in the server namespace; the figure is\n")
	w("`end.sum_received.bits_per_second`, the median of %d runs of %d s. Each reef path is measured next to the raw kernel path\n", r.runs, r.secs)
	w("it is built on, in the same lab: within a row group the cases alternate run by run (a 1 s check of each first), so a change in\n")
	w("the machine's load hits reef and its reference alike. The lab: nodes a1 and a2 on 192.168.77.0/24, b1 on 192.168.78.0/24 behind a\n")
	w("router namespace that knows no pod routes, meshed over BGP; an IPv4 and an IPv6 pool (`%s`, vxlanMode CrossSubnet), every pod\n", strings.TrimSpace(tputPools))
	w("with an address of each, the nodes with IPv6 addresses on the underlay. Pod MTU %s (uplink 1500 − 50). The rows \"…, IPv6\"\n", r.podMTU)
	w("measure a reef path over IPv6 against the same two pods over IPv4, alternating (issue 29: IPv6 within noise of IPv4).\n")
	w("Everything runs between lab namespaces; the host's network is not used.\n\n")
	w("**Machine.** nproc %d (%s), kernel %s, %s; `reef version`: %s.\n", r.nproc, r.cpu, r.kernel, r.iperf, r.reef)
	w("Load average (1, 5, 15 min) %s at the start, %s at the end: other work on the machine shows up in the figures.\n", r.loadStart, r.loadEnd)
	w("On %d cores iperf3 is CPU-bound: the client, the server and the kernel's softirq work for every hop share them, so these figures\n", r.nproc)
	w("measure what each path costs the CPU per byte, not a link speed (the CPU columns below are iperf3's own, per side, as %% of one core).\n\n")

	r.medians(w)
	w("\nnftables base chains (the ones packets pass) in node a1 during the run: %s. The reference namespaces have none.\n", r.nftA1)
	w("A nat-type chain makes the kernel track connections (conntrack) in the node's namespace, so reef's forwarded packets also pass\n")
	w("conntrack, which the references do not. A ratio below 1 is what the reef path costs over the bare kernel path on this CPU-bound\n")
	w("machine.\n\n")
	w("**Retransmits.** The references retransmit as well as reef's paths. The client namespace's TCP counters (`/proc/net/snmp`,\n")
	w("`/proc/net/netstat`) over each case's runs say how many retransmitted segments the receiver reported as duplicates (DSACK), that\n")
	w("is, sent again although the original had arrived: where that share (last column) is high, the retransmits come from reordering or\n")
	w("delay inside the busy machine, not from loss on the path.\n\n")

	r.everyRun(w)
	r.pathsTaken(w)
	w("\n**The references**, built by bench-tput in the same lab (`<x>` is the namespace of role x; namespaces on a bridge have their\n")
	w("veth's other end in the lab's switch namespace, on br0 = 192.168.77.0/24 or br1 = 192.168.78.0/24):\n\n")
	for _, s := range r.setup {
		w("    %s\n", s)
	}
	return sb.String()
}

// medians writes the table of each path's median against its references'.
func (r *tputReport) medians(w func(string, ...any)) {
	w("| path | reef Gbit/s | reference | reference Gbit/s | reef / reference | notes |\n")
	w("|---|---:|---|---:|---:|---|\n")
	for _, g := range r.groups {
		rv, rok := g.reef.median()
		for i, ref := range g.refs {
			fv, fok := ref.median()
			ratio := "–"
			if rok && fok && fv > 0 {
				ratio = fmt.Sprintf("%.2f", rv/fv)
			}
			path, reefCell, notes := g.path, tputGbps(rv, rok), g.notes
			if i > 0 {
				path, reefCell, notes = "″", "″", ""
			}
			w("| %s | %s | %s | %s | %s | %s |\n", path, reefCell, ref.label, tputGbps(fv, fok), ratio, notes)
		}
	}
}

// everyRun writes every run of every case, with the client namespace's TCP
// counters over the runs.
func (r *tputReport) everyRun(w func(string, ...any)) {
	w("Every run (Gbit/s received; retransmits as iperf3 counts them; CPU %% client / server), and the client namespace's TCP counters over the runs:\n\n")
	w("| case | client netns → server | runs | retransmits | CPU client / server %% | retransmitted segments, of them DSACKed |\n")
	w("|---|---|---|---|---|---|\n")
	for _, g := range r.groups {
		for _, c := range append([]*tputCase{g.reef}, g.refs...) {
			var gb, rt, cpu []string
			for _, run := range c.runs {
				if run.rawErr != "" {
					gb = append(gb, "error: "+run.rawErr)
					continue
				}
				gb = append(gb, fmt.Sprintf("%.2f", run.gbps))
				rt = append(rt, fmt.Sprint(run.retransmits))
				cpu = append(cpu, fmt.Sprintf("%.0f/%.0f", run.cpuHost, run.cpuPeer))
			}
			if c.err != nil {
				gb = append(gb, "not run: "+c.err.Error())
			}
			segs := "unknown"
			if c.statErr == nil {
				segs = fmt.Sprintf("%d, %d (%.0f%%)", c.retransSegs, c.dsackSegs, 100*float64(c.dsackSegs)/float64(max(c.retransSegs, 1)))
			}
			w("| %s | %s → %s (%s) | %s | %s | %s | %s |\n", c.label, c.cliRole, c.srvRole, c.dst,
				strings.Join(gb, ", "), strings.Join(rt, ", "), strings.Join(cpu, ", "), segs)
		}
	}

}

// pathsTaken writes each row group's load, the route each reef case took
// and the bytes the devices sent.
func (r *tputReport) pathsTaken(w func(string, ...any)) {
	w("\n1-minute load average at the start and end of each row group:")
	for i, g := range r.groups {
		sep := ";"
		if i == len(r.groups)-1 {
			sep = "."
		}
		w(" %s %s → %s%s", g.path, g.loadStart, g.loadEnd, sep)
	}
	w("\n")
	w("\n**Which way the packets went.** `ip route get <server>` in node a1 (the client pod's own route is its default via 169.254.1.1):\n\n")
	for _, g := range r.groups {
		if rt, ok := r.routes[g.reef.key]; ok {
			w("- %s: `%s`\n", g.path, rt)
		}
	}
	w("\nBytes sent by a device during a group's runs (from `ip -s -j link`):\n\n")
	for _, g := range r.groups {
		for _, c := range g.counters {
			if c.err != nil {
				w("- %s, %s on %s: unknown (%v)\n", g.path, c.dev, c.role, c.err)
				continue
			}
			w("- %s: %s on %s sent %.2f GB\n", g.path, c.dev, c.role, float64(c.after-c.before)/1e9)
		}
	}

}
