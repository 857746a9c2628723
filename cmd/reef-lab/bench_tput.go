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
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes"
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
	md := rep.markdown()
	fmt.Print(md)
	if *out != "" {
		if err := lab.WriteSection(*out, md); err != nil {
			return err
		}
		tputProgress("section written to %s (%s)", *out, rep.took.Round(time.Second))
	}
	return nil
}

// build makes the lab: three reef nodes on two subnets with pods, and the
// reference namespaces; it starts every iperf3 server.
func (b *tputBench) build() ([]*tputGroup, error) {
	l := b.l
	// The production reconcile interval: the daemons stay quiet.
	// Dual-stack pools, so that every path is measured over IPv6 too; the
	// nodes' IPv6 addresses on the underlay route a1's and a2's IPv6
	// blocks directly (b1's go through vxlan.reef, over IPv4).
	nodes, err := l.AddCrossNodes(lab.NodeOptions{ReconcileInterval: 30 * time.Second, Extra: tputPools})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		a := n.Address.As4()
		a6 := tputUnderlay6.Addr().As16()
		a6[14], a6[15] = a[2], a[3]
		if err := l.IP(n.Netns, "-6", "addr", "add", netip.PrefixFrom(netip.AddrFrom16(a6), tputUnderlay6.Bits()).String(), "dev", "eth0", "nodad"); err != nil {
			return nil, err
		}
	}
	if err := lab.StartAll(nodes); err != nil {
		return nil, err
	}
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	pod := func(n *lab.Node, name string) (*lab.Pod, error) { return n.NewPod("bench", name) }
	cli, err := pod(a1, "client")
	if err != nil {
		return nil, err
	}
	same, err := pod(a1, "server-a1")
	if err != nil {
		return nil, err
	}
	direct, err := pod(a2, "server-a2")
	if err != nil {
		return nil, err
	}
	cross, err := pod(b1, "server-b1")
	if err != nil {
		return nil, err
	}
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil {
		return nil, err
	}
	if out, err := l.Run(cli.Netns, "ip", "-o", "link", "show", "eth0"); err == nil {
		if f := strings.Fields(out); len(f) > 0 {
			for i := range f {
				if f[i] == "mtu" && i+1 < len(f) {
					b.podMTU = f[i+1]
				}
			}
		}
	}
	b.nftA1 = tputNftChains(l, a1.Netns)

	// The references.
	// A: veth pairs between two fresh namespaces.
	vethPair := func(tag string, mtu int) (*tputCase, error) {
		c1, c2 := l.Prefix+"-"+tag+"c", l.Prefix+"-"+tag+"s"
		for _, ns := range []string{c1, c2} {
			if err := l.AddNetns(ns); err != nil {
				return nil, err
			}
		}
		net := map[int]string{1450: "10.98.1", 1500: "10.98.2"}[mtu]
		role := fmt.Sprintf("veth%d", mtu)
		b.alias[lab.NetnsPath(c2)] = "<" + role + "-server>"
		steps := []struct {
			who, ns string
			args    []string
		}{
			{role + "-client", c1, []string{"link", "add", "eth0", "mtu", strconv.Itoa(mtu), "type", "veth", "peer", "name", "eth0", "mtu", strconv.Itoa(mtu), "netns", lab.NetnsPath(c2)}},
			{role + "-client", c1, []string{"addr", "add", net + ".1/24", "dev", "eth0"}},
			{role + "-client", c1, []string{"link", "set", "eth0", "up"}},
			{role + "-server", c2, []string{"addr", "add", net + ".2/24", "dev", "eth0"}},
			{role + "-server", c2, []string{"link", "set", "eth0", "up"}},
		}
		for _, s := range steps {
			if err := b.ip(s.who, s.ns, s.args...); err != nil {
				return nil, err
			}
		}
		return &tputCase{key: "A" + strconv.Itoa(mtu), label: fmt.Sprintf("veth pair, MTU %d", mtu), ref: true,
			cliNS: c1, srvNS: c2, cliRole: role + "-client", srvRole: role + "-server",
			dst: netip.MustParseAddr(net + ".2"), mtu: mtu}, nil
	}
	// B and C: namespaces with eth0 on a lab bridge, like a node's.
	host := func(tag, role, bridge string, addr netip.Addr, mtu int) (string, error) {
		ns := l.Prefix + "-" + tag
		if err := l.AddNetns(ns); err != nil {
			return "", err
		}
		peer := l.Prefix + tag
		if len(peer) > 15 {
			peer = peer[len(peer)-15:]
		}
		b.alias[peer] = "<" + role + "-port>"
		b.alias[lab.NetnsPath(l.Switch)] = "<switch>"
		for _, s := range [][]string{
			{"link", "add", "eth0", "mtu", strconv.Itoa(mtu), "type", "veth", "peer", "name", peer, "netns", lab.NetnsPath(l.Switch)},
			{"addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0"},
			{"link", "set", "eth0", "up"},
		} {
			if err := b.ip(role, ns, s...); err != nil {
				return "", err
			}
		}
		if err := l.IP(l.Switch, "link", "set", peer, "master", bridge, "up"); err != nil {
			return "", err
		}
		b.setup = append(b.setup, fmt.Sprintf("switch: ip link set <%s-port> master %s up", role, bridge))
		return ns, nil
	}
	bridgePair := func(mtu int, ca, sa netip.Addr) (*tputCase, error) {
		role := fmt.Sprintf("br0-%d", mtu)
		c, err := host(fmt.Sprintf("tb%dc", mtu), role+"-client", "br0", ca, mtu)
		if err != nil {
			return nil, err
		}
		s, err := host(fmt.Sprintf("tb%ds", mtu), role+"-server", "br0", sa, mtu)
		if err != nil {
			return nil, err
		}
		return &tputCase{key: "B" + strconv.Itoa(mtu), label: fmt.Sprintf("two netns on the underlay bridge, MTU %d", mtu), ref: true,
			cliNS: c, srvNS: s, cliRole: role + "-client", srvRole: role + "-server", dst: sa, mtu: mtu}, nil
	}

	vA1450, err := vethPair("tv1450", 1450)
	if err != nil {
		return nil, err
	}
	vA1500, err := vethPair("tv1500", 1500)
	if err != nil {
		return nil, err
	}
	bB1450, err := bridgePair(1450, netip.MustParseAddr("192.168.77.201"), netip.MustParseAddr("192.168.77.202"))
	if err != nil {
		return nil, err
	}
	bB1500, err := bridgePair(1500, netip.MustParseAddr("192.168.77.203"), netip.MustParseAddr("192.168.77.204"))
	if err != nil {
		return nil, err
	}
	// C: a hand-made VXLAN pair across the router.
	vxA, vxB := netip.MustParseAddr("192.168.77.205"), netip.MustParseAddr("192.168.78.205")
	cA, err := host("txa", "vxlan-client", "br0", vxA, 1500)
	if err != nil {
		return nil, err
	}
	cB, err := host("txb", "vxlan-server", "br1", vxB, 1500)
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		role, ns      string
		local, remote netip.Addr
		via           netip.Addr
		other         netip.Prefix
		inner         string
	}{
		{"vxlan-client", cA, vxA, vxB, lab.RouterA, lab.SubnetB, "10.99.42.1/24"},
		{"vxlan-server", cB, vxB, vxA, lab.RouterB, lab.Underlay, "10.99.42.2/24"},
	} {
		for _, a := range [][]string{
			{"route", "add", s.other.String(), "via", s.via.String()},
			{"link", "add", "vx0", "type", "vxlan", "id", "42", "local", s.local.String(), "remote", s.remote.String(), "dstport", "4790", "dev", "eth0"},
			{"link", "set", "vx0", "mtu", "1450", "up"},
			{"addr", "add", s.inner, "dev", "vx0"},
		} {
			if err := b.ip(s.role, s.ns, a...); err != nil {
				return nil, err
			}
		}
	}
	cC := &tputCase{key: "C", label: "hand-made VXLAN pair (VNI 42, port 4790), MTU 1450", ref: true,
		cliNS: cA, srvNS: cB, cliRole: "vxlan-client", srvRole: "vxlan-server", dst: netip.MustParseAddr("10.99.42.2"), mtu: 1450}

	for _, p := range []*lab.Pod{cli, same, direct, cross} {
		if len(p.IPs) != 2 || !p.IPs[1].Is6() {
			return nil, fmt.Errorf("pod %s got %v, want an IPv4 and an IPv6 address", p.Name, p.IPs)
		}
	}
	podCase := func(key, label string, srv *lab.Pod, srvNode *lab.Node) *tputCase {
		return &tputCase{key: key, label: label, cliNS: cli.Netns, srvNS: srv.Netns,
			cliRole: "pod on a1", srvRole: "pod on " + srvNode.Name, dst: srv.IPs[0], mtu: 1450}
	}
	// IPv6 against IPv4 between the same two pods, alternating: a case of
	// its own for each, so that the IPv4 rows above keep their runs.
	v6Group := func(path, label string, srv *lab.Pod, srvNode *lab.Node, key string) *tputGroup {
		c6, c4 := podCase(key+"v6", label+" over IPv6", srv, srvNode), podCase(key+"v4", label+" over IPv4", srv, srvNode)
		c6.dst = srv.IPs[1]
		return &tputGroup{path: path + ", IPv6", reef: c6, refs: []*tputCase{c4},
			notes: "the same two pods over IPv6 (a /128 route per pod; the pods' gateway fe80::ecee:eeff:feee:eeee), against their IPv4 addresses"}
	}
	groups := []*tputGroup{
		{path: "same node", reef: podCase("R1", "reef: two pods on a1", same, a1), refs: []*tputCase{vA1450, vA1500},
			notes: "pod veth → routed hop in the node (a /32 route per pod; proxy ARP answers the pods' gateway) → pod veth: two veth pairs and a forward, against one veth pair"},
		{path: "across nodes, direct", reef: podCase("R2", "reef: pod on a1 → pod on a2", direct, a2), refs: []*tputCase{bB1450, bB1500},
			notes: "pod veth → a1 routes → eth0 → bridge → a2 eth0 → a2 routes → pod veth: two more veth pairs and two forwards than the reference's veth → bridge → veth"},
		{path: "across subnets, VXLAN", reef: podCase("R3", "reef: pod on a1 → pod on b1", cross, b1), refs: []*tputCase{cC},
			notes: "both cross the lab router with one VXLAN encapsulation (reef: vxlan.reef, VNI 4096, port 4789, static fdb); reef adds a pod veth and a forward on each end"},
	}
	groups = append(groups,
		v6Group("same node", "reef: two pods on a1", same, a1, "R1"),
		v6Group("across nodes, direct", "reef: pod on a1 → pod on a2", direct, a2, "R2"),
		v6Group("across subnets, VXLAN", "reef: pod on a1 → pod on b1", cross, b1, "R3"))
	groups[1].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: routes.VXLANDevice}, {role: "a1", netns: a1.Netns, dev: "eth0"}}
	groups[2].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: routes.VXLANDevice}, {role: "vxlan-client", netns: cA, dev: "vx0"}}
	groups[4].counters = groups[1].counters
	groups[5].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: routes.VXLANDevice}}

	for _, g := range groups {
		for _, c := range append([]*tputCase{g.reef}, g.refs...) {
			if !c.ref {
				if out, err := l.Run(a1.Netns, "ip", "route", "get", c.dst.String()); err == nil {
					b.routes[c.key] = strings.Join(strings.Fields(out), " ")
				}
			}
			if err := b.startServer(c); err != nil {
				return groups, err
			}
		}
	}
	return groups, nil
}
