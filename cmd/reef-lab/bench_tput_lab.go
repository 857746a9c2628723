package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes/tunnel"
)

// bench-tput's lab: the reef nodes and pods, and the reference paths built
// by hand beside them (veth pairs, a bridge, a VXLAN pair).

// build makes the lab: three reef nodes on two subnets with pods, and the
// reference namespaces; it starts every iperf3 server.
func (b *tputBench) build() ([]*tputGroup, error) {
	nodes, err := b.startNodes()
	if err != nil {
		return nil, err
	}
	pods, err := b.startPods(nodes)
	if err != nil {
		return nil, err
	}
	refs, err := b.references()
	if err != nil {
		return nil, err
	}
	groups, err := tputGroups(nodes, pods, refs)
	if err != nil {
		return nil, err
	}
	a1 := nodes[0]
	for _, g := range groups {
		for _, c := range append([]*tputCase{g.reef}, g.refs...) {
			if !c.ref {
				if out, err := b.l.Run(a1.Netns, "ip", "route", "get", c.dst.String()); err == nil {
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

// startNodes starts a1, a2 and b1 with the production reconcile interval
// (the daemons stay quiet) and dual-stack pools, so that every path is
// measured over IPv6 too; the nodes' IPv6 addresses on the underlay route
// a1's and a2's IPv6 blocks directly (b1's go through vxlan.reef, over
// IPv4).
func (b *tputBench) startNodes() ([]*lab.Node, error) {
	l := b.l
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
	return nodes, lab.StartAll(nodes)
}

// tputPods are the bench's reef pods: the client on a1 and a server on
// each node.
type tputPods struct{ cli, same, direct, cross *lab.Pod }

// startPods makes the pods, waits for the nodes to converge and notes the
// pods' MTU and a1's nftables base chains for the report (tputGroups
// checks the pods' addresses).
func (b *tputBench) startPods(nodes []*lab.Node) (tputPods, error) {
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	var p tputPods
	var err error
	for _, x := range []struct {
		pod  **lab.Pod
		node *lab.Node
		name string
	}{{&p.cli, a1, "client"}, {&p.same, a1, "server-a1"}, {&p.direct, a2, "server-a2"}, {&p.cross, b1, "server-b1"}} {
		if *x.pod, err = x.node.NewPod("bench", x.name); err != nil {
			return p, err
		}
	}
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil {
		return p, err
	}
	if out, err := b.l.Run(p.cli.Netns, "ip", "-o", "link", "show", "eth0"); err == nil {
		if f := strings.Fields(out); len(f) > 0 {
			for i := range f {
				if f[i] == "mtu" && i+1 < len(f) {
					b.podMTU = f[i+1]
				}
			}
		}
	}
	b.nftA1 = tputNftChains(b.l, a1.Netns)
	return p, nil
}

// tputRefs are the reference paths: A, veth pairs between two fresh
// namespaces; B, two namespaces on the underlay bridge; C, a hand-made
// VXLAN pair across the router (vxlanClient: its client's namespace).
type tputRefs struct {
	a1450, a1500, b1450, b1500, c *tputCase
	vxlanClient                   string
}

func (b *tputBench) references() (tputRefs, error) {
	var r tputRefs
	var err error
	if r.a1450, err = b.vethPair("tv1450", 1450); err != nil {
		return r, err
	}
	if r.a1500, err = b.vethPair("tv1500", 1500); err != nil {
		return r, err
	}
	if r.b1450, err = b.bridgePair(1450, netip.MustParseAddr("192.168.77.201"), netip.MustParseAddr("192.168.77.202")); err != nil {
		return r, err
	}
	if r.b1500, err = b.bridgePair(1500, netip.MustParseAddr("192.168.77.203"), netip.MustParseAddr("192.168.77.204")); err != nil {
		return r, err
	}
	r.c, err = b.vxlanPair()
	if err == nil {
		r.vxlanClient = r.c.cliNS
	}
	return r, err
}

// vethPair is reference A: a veth pair of the mtu between two fresh
// namespaces.
func (b *tputBench) vethPair(tag string, mtu int) (*tputCase, error) {
	l := b.l
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

// host is a namespace of references B and C: eth0 on a lab bridge, like
// a node's.
func (b *tputBench) host(tag, role, bridge string, addr netip.Addr, mtu int) (string, error) {
	l := b.l
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

// bridgePair is reference B: two hosts of the mtu on the underlay bridge.
func (b *tputBench) bridgePair(mtu int, ca, sa netip.Addr) (*tputCase, error) {
	role := fmt.Sprintf("br0-%d", mtu)
	c, err := b.host(fmt.Sprintf("tb%dc", mtu), role+"-client", "br0", ca, mtu)
	if err != nil {
		return nil, err
	}
	s, err := b.host(fmt.Sprintf("tb%ds", mtu), role+"-server", "br0", sa, mtu)
	if err != nil {
		return nil, err
	}
	return &tputCase{key: "B" + strconv.Itoa(mtu), label: fmt.Sprintf("two netns on the underlay bridge, MTU %d", mtu), ref: true,
		cliNS: c, srvNS: s, cliRole: role + "-client", srvRole: role + "-server", dst: sa, mtu: mtu}, nil
}

// vxlanPair is reference C: a hand-made VXLAN pair across the router.
func (b *tputBench) vxlanPair() (*tputCase, error) {
	vxA, vxB := netip.MustParseAddr("192.168.77.205"), netip.MustParseAddr("192.168.78.205")
	cA, err := b.host("txa", "vxlan-client", "br0", vxA, 1500)
	if err != nil {
		return nil, err
	}
	cB, err := b.host("txb", "vxlan-server", "br1", vxB, 1500)
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
	return &tputCase{key: "C", label: "hand-made VXLAN pair (VNI 42, port 4790), MTU 1450", ref: true,
		cliNS: cA, srvNS: cB, cliRole: "vxlan-client", srvRole: "vxlan-server", dst: netip.MustParseAddr("10.99.42.2"), mtu: 1450}, nil
}

// tputGroups pairs each reef path with its references: IPv4 first, then
// each path over IPv6 against IPv4. Each pod must have an IPv4 and an
// IPv6 address.
func tputGroups(nodes []*lab.Node, p tputPods, r tputRefs) ([]*tputGroup, error) {
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	for _, pod := range []*lab.Pod{p.cli, p.same, p.direct, p.cross} {
		if len(pod.IPs) != 2 || !pod.IPs[1].Is6() {
			return nil, fmt.Errorf("pod %s got %v, want an IPv4 and an IPv6 address", pod.Name, pod.IPs)
		}
	}
	podCase := func(key, label string, srv *lab.Pod, srvNode *lab.Node) *tputCase {
		return &tputCase{key: key, label: label, cliNS: p.cli.Netns, srvNS: srv.Netns,
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
		{path: "same node", reef: podCase("R1", "reef: two pods on a1", p.same, a1), refs: []*tputCase{r.a1450, r.a1500},
			notes: "pod veth → routed hop in the node (a /32 route per pod; proxy ARP answers the pods' gateway) → pod veth: two veth pairs and a forward, against one veth pair"},
		{path: "across nodes, direct", reef: podCase("R2", "reef: pod on a1 → pod on a2", p.direct, a2), refs: []*tputCase{r.b1450, r.b1500},
			notes: "pod veth → a1 routes → eth0 → bridge → a2 eth0 → a2 routes → pod veth: two more veth pairs and two forwards than the reference's veth → bridge → veth"},
		{path: "across subnets, VXLAN", reef: podCase("R3", "reef: pod on a1 → pod on b1", p.cross, b1), refs: []*tputCase{r.c},
			notes: "both cross the lab router with one VXLAN encapsulation (reef: vxlan.reef, VNI 4096, port 4789, static fdb); reef adds a pod veth and a forward on each end"},
	}
	groups = append(groups,
		v6Group("same node", "reef: two pods on a1", p.same, a1, "R1"),
		v6Group("across nodes, direct", "reef: pod on a1 → pod on a2", p.direct, a2, "R2"),
		v6Group("across subnets, VXLAN", "reef: pod on a1 → pod on b1", p.cross, b1, "R3"))
	groups[1].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: tunnel.VXLANDevice}, {role: "a1", netns: a1.Netns, dev: "eth0"}}
	groups[2].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: tunnel.VXLANDevice}, {role: "vxlan-client", netns: r.vxlanClient, dev: "vx0"}}
	groups[4].counters = groups[1].counters
	groups[5].counters = []tputCounter{{role: "a1", netns: a1.Netns, dev: tunnel.VXLANDevice}}
	return groups, nil
}
