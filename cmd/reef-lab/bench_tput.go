package main

// bench-tput: TCP throughput between pods (BENCHMARKS.md, "## Throughput
// (iperf3)"), each reef path next to the raw kernel path it is built on,
// measured in the same lab in the same run:
//
//   - same node: two pods on one node, next to a plain veth pair between
//     two namespaces (MTU 1450 like the pods, and 1500);
//   - across nodes, direct: a pod on a1 to a pod on a2 (same subnet), next
//     to two namespaces on the lab's underlay bridge (MTU 1450 and 1500);
//   - across subnets via VXLAN: a pod on a1 to a pod on b1 (vxlanMode
//     CrossSubnet: vxlan.reef), next to a hand-made VXLAN pair between two
//     namespaces on the two subnets, through the same lab router.
//
// Every run is `iperf3 -c <ip> -t <secs> -J` in the client namespace
// against a long-lived `iperf3 -s -B <ip>` in the server namespace; the
// figure is end.sum_received.bits_per_second. Within a group (a reef path
// and its references) the cases alternate run by run, so a change in the
// machine's load hits reef and its reference alike. Nothing touches the
// host's network: every namespace belongs to the lab.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

const tputPort = "5201"

// tputPools are the lab's pools: the default IPv4 pool and an IPv6 one,
// both vxlanMode CrossSubnet (the default).
const tputPools = "pools: [{cidr: 10.244.0.0/16}, {cidr: fd00:10:244::/56}]\n"

// tputUnderlay6 holds the nodes' IPv6 addresses on the underlay (the last
// two bytes of each are its IPv4 address's).
var tputUnderlay6 = netip.MustParsePrefix("fd77:7e::/64")

// tputRun is one iperf3 client run.
type tputRun struct {
	gbps             float64 // end.sum_received.bits_per_second / 1e9
	retransmits      int     // end.sum_sent.retransmits
	cpuHost, cpuPeer float64 // end.cpu_utilization_percent host_total, remote_total
	wall             time.Duration
	senderGbps       float64
	rawErr           string
}

// tputCase is one path measured: a server namespace, a client namespace,
// the server's address.
type tputCase struct {
	key, label   string
	ref          bool
	cliNS, srvNS string // netns names
	cliRole      string // what the namespaces are, for the report
	srvRole      string
	dst          netip.Addr
	mtu          int
	runs         []tputRun
	err          error
	stopServer   func()
	// TCP counters of the client namespace over the case's runs:
	// segments retransmitted, and how many of those the receiver reported
	// as duplicates (DSACK: spurious, the original had arrived).
	retransSegs, dsackSegs int64
	statErr                error
}

func (c *tputCase) median() (float64, bool) {
	var v []float64
	for _, r := range c.runs {
		if r.rawErr == "" {
			v = append(v, r.gbps)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// tputGroup is a reef path and its references; their runs alternate.
type tputGroup struct {
	path  string
	reef  *tputCase
	refs  []*tputCase
	notes string
	// counters: device tx bytes before/after the group's runs, as a check
	// of which path the packets took.
	counters []tputCounter
	// 1-minute load average when the group's runs began and ended.
	loadStart, loadEnd string
}

type tputCounter struct {
	role, netns, dev string
	before, after    int64
	err              error
}

type tputBench struct {
	ctx    context.Context
	l      *lab.Lab
	secs   int
	runs   int
	setup  []string // the reference paths' ip commands, for the report
	nftA1  string   // nftables base chains in node a1
	podMTU string
	routes map[string]string // "ip route get" of each reef case in node a1
	alias  map[string]string // how ip arguments (netns paths, port names) show in the report
}

func tputProgress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-tput: "+format+"\n", args...)
}

func benchTput(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-tput", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## Throughput (iperf3)" section (replacing only that section)`)
	secs := fs.Int("time", 5, "seconds per iperf3 run (-t)")
	runs := fs.Int("runs", 3, "runs per path; the report gives the median")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-tput: unexpected arguments %q", fs.Args())
	}
	if *secs < 1 || *runs < 1 {
		return errors.New("bench-tput: --time and --runs must be at least 1")
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return errors.New("bench-tput: iperf3 not found (apt-get install iperf3, or make bench)")
	}
	rep := &tputReport{began: time.Now(), loadStart: tputLoad(), command: tputCommand(args), secs: *secs, runs: *runs}
	rep.machineInfo(*bin)

	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer l.Close()
	b := &tputBench{ctx: ctx, l: l, secs: *secs, runs: *runs, routes: map[string]string{}, alias: map[string]string{}}
	tputProgress("building the lab: a1, a2 on %s, b1 on %s behind a router", lab.Underlay, lab.SubnetB)
	groups, err := b.build()
	if err != nil {
		return fmt.Errorf("bench-tput: %w", err)
	}
	defer func() {
		for _, g := range groups {
			for _, c := range append([]*tputCase{g.reef}, g.refs...) {
				if c.stopServer != nil {
					c.stopServer()
				}
			}
		}
	}()
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("bench-tput: interrupted: %w", err)
		}
		tputProgress("%s: %d runs of %d s each, alternating with its reference", g.path, b.runs, b.secs)
		b.measure(g)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench-tput: interrupted: %w", err)
	}
	rep.groups = groups
	rep.setup = b.setup
	rep.nftA1 = b.nftA1
	rep.podMTU = b.podMTU
	rep.routes = b.routes
	rep.took = time.Since(rep.began)
	rep.loadEnd = tputLoad()
	if err := printSection(rep.markdown(), *out); err != nil || *out == "" {
		return err
	}
	tputProgress("section written to %s (%s)", *out, rep.took.Round(time.Second))
	return nil
}
