package e2e

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/internal/lab"
)

// The pools of the IPv6 ToR tests, both routed directly.
var (
	torPool4 = lab.ToRPool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}
	torPool6 = lab.ToRPool{CIDR: netip.MustParsePrefix("fd00:10:246::/56"), BlockSize: 122}
)

// Routers with IPv6 blocks (docs/bgp.md, "Routers"): the lab of
// TestToRBird (a1, a2 on one subnet, b1 on another, a router between them
// with a laptop behind it) with IPv6 beside IPv4 on every leg, and an IPv6
// pool (TestToRIPv6*) or an IPv4 and an IPv6 pool (TestToRDualStack*),
// vxlanMode Never. The router runs BIRD 2 or FRR with the configuration of
// lab.ToRBirdConfig / lab.ToRFRRConfig for those pools, eBGP to each
// node's IPv4 address; the IPv6 blocks travel in IPv6 unicast on that
// session. Then:
//
//   - the router's kernel has exactly each node's confirmed blocks as
//     `reef ipam show --show-blocks` lists them, IPv6 ones next hop the
//     owner's IPv6 address (IPv4 ones its IPv4 address), and no other
//     route from BGP: no aggregate, no /128;
//   - a pod on a1 pings one on b1 over IPv6 through the router (a1 routes
//     b1's IPv6 block via the router's IPv6 address, not onlink), and one
//     on a2 directly;
//   - the laptop reaches pods over IPv6 by ping and TCP, with the pods'
//     and its own addresses on the wire and no VXLAN device; a planned
//     restart of a1 loses none of its pings to a1's pod;
//   - the router turns hostile (everything it has, and a default route,
//     the pool, a node's address, an address inside a block and a block of
//     its own, in each family): no node installs any of it, and each
//     counts it by reason;
//   - a1 killed: the router drops a1's IPv6 block once the restart time
//     (8s here) runs out.
//
// All four are make test-e2e-slow; make test's IPv6 ToR is
// TestToRIPv6OnlyBird (tor6only_test.go).
func TestToRIPv6Bird(t *testing.T) { slowSuite(t); testToR6(t, "bird", torPool6) }
func TestToRIPv6FRR(t *testing.T)  { slowSuite(t); testToR6(t, "frr", torPool6) }
func TestToRDualStackBird(t *testing.T) {
	slowSuite(t)
	testToR6(t, "bird", torPool4, torPool6)
}
func TestToRDualStackFRR(t *testing.T) { slowSuite(t); testToR6(t, "frr", torPool4, torPool6) }

func testToR6(t *testing.T, kind string, pools ...lab.ToRPool) {
	needNATTools(t, "ping", "tcpdump")
	l := newLab(t)
	extra := "pools:\n"
	for _, p := range pools {
		extra += "  - cidr: " + p.CIDR.String() + "\n    vxlanMode: Never\n"
	}
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: extra, RouterASN: lab.RouterASN,
		Binary: "reef-test", Env: []string{"REEF_TEST_BGP_RESTART_TIME=8s"}})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddCrossIPv6(nodes); err != nil {
		t.Fatal(err)
	}
	tor := startToR(t, l, kind, nodes, pools, "")
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if got := mustStatus(t, n).GetNodeAddressV6(); got != lab.CrossAddress6(n.Address).String() {
			t.Fatalf("%s: nodeAddressV6 %q, want %s", n.Name, got, lab.CrossAddress6(n.Address))
		}
	}
	pa1, pa2, pb1 := newPod(t, a1, "pa1"), newPod(t, a2, "pa2"), newPod(t, b1, "pb1")
	converge(t, nodes...)
	router := l.Prefix + "-xr"
	dual := len(pools) == 2
	v6 := func(p *lab.Pod) netip.Addr { return p.IPs[len(p.IPs)-1] }

	// The router's kernel: exactly the confirmed blocks, as each owner's
	// reef ipam show lists them, via the owner's address of the block's
	// family, and nothing else from BGP.
	want := map[string]string{}
	for _, n := range nodes {
		own := confirmedBlocksShown(t, n)
		if got := blocksOf(t, n); !slices.Equal(sorted(own), sorted(got)) {
			t.Errorf("%s: reef ipam show --show-blocks has confirmed blocks %v, reef status %v", n.Name, own, got)
		}
		for _, b := range own {
			via := n.Address
			if netip.MustParsePrefix(b).Addr().Is6() {
				via = lab.CrossAddress6(n.Address)
			}
			want[b] = via.String()
		}
	}
	if len(want) != len(nodes)*len(pools) {
		t.Fatalf("blocks confirmed: %v, want one per node and pool", sortedPairs(want))
	}
	eventually(t, 20*time.Second, func() string {
		if got := bgpRoutes(t, l, router); !maps.Equal(got, want) {
			return "router's routes from BGP: " + strings.Join(sortedPairs(got), ", ") + "; want " + strings.Join(sortedPairs(want), ", ")
		}
		return ""
	})
	t.Logf("the router's routes from BGP (%s):\n%s", kind, run(t, l, router, "ip", "-6", "route", "show", "proto", map[string]string{"bird": "bird", "frr": "bgp"}[kind]))

	// What the nodes say of the router: every block of theirs sent, none
	// withheld, nothing received.
	eventually(t, 10*time.Second, func() string {
		for _, n := range nodes {
			ext := mustStatus(t, n).GetExternalPeers()
			if len(ext) != 1 || ext[0].GetState() != "established" || ext[0].GetSent() != uint64(len(blocksOf(t, n))) || ext[0].GetReceived() != 0 {
				return n.Name + "'s external peers: " + ext2s(ext)
			}
		}
		return ""
	})

	// Pods across the router and within a subnet, over IPv6: a1 routes
	// b1's IPv6 block through the router, not onlink, without VXLAN.
	var b1block6 string
	for _, b := range blocksOf(t, b1) {
		if strings.Contains(b, ":") {
			b1block6 = b
		}
	}
	if r := run(t, l, a1.Netns, "ip", "-6", "route", "show", "exact", b1block6); !strings.Contains(r, "via "+lab.RouterA6.String()+" dev eth0 proto reef") || strings.Contains(r, "onlink") {
		t.Errorf("a1's route to b1's block %s: %q, want via the router %s, not onlink", b1block6, r, lab.RouterA6)
	}
	if out, err := l.Run(a1.Netns, "ip", "link", "show", "vxlan.reef"); err == nil {
		t.Errorf("a1 has a VXLAN device with vxlanMode Never: %s", out)
	}
	pings(t, l, pa1.Netns, "pa1 to pb1 across the router", pb1.IPs...)
	pings(t, l, pa1.Netns, "pa1 to pa2 in one subnet", pa2.IPs...)
	if ttl, err := pa1.Ping(v6(pb1)); err != nil || ttl != 61 {
		t.Errorf("pa1 -> pb1 over IPv6 across the router: hop limit %d, %v; want 61", ttl, err)
	}

	// The laptop: ping -6 and TCP to pods, its own address seen, the
	// pods' addresses on the wire.
	out := capture(t, l, "br0", "icmp6 and ip6 src "+lab.LaptopAddr6.String(), func() { pings(t, l, laptop, "laptop to pa1", v6(pa1)) })
	if !strings.Contains(out, lab.LaptopAddr6.String()+" > "+v6(pa1).String()) {
		t.Errorf("the laptop's and the pod's IPv6 addresses are not on the wire:\n%s", out)
	}
	pings(t, l, laptop, "laptop to pods", slices.Concat(pa2.IPs, pb1.IPs)...)
	srv, err := l.ListenTCP(pa1.Netns, netip.AddrPortFrom(v6(pa1), 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if seen, err := l.AskTCP(laptop, netip.AddrPortFrom(v6(pa1), 8080)); err != nil || seen != lab.LaptopAddr6 {
		t.Errorf("laptop -> [%s]:8080: the pod saw %s, %v; want the laptop's %s", v6(pa1), seen, err, lab.LaptopAddr6)
	}

	// A planned restart of a1 loses no ping from the laptop to its pod.
	ping := pingFrom(t, l, laptop, v6(pa1).String(), 80)
	time.Sleep(2 * time.Second) // two seconds of pings before the restart: the scenario, not a wait
	if err := a1.Restart(); err != nil {
		t.Fatal(err)
	}
	if recv, sent := ping(); recv != sent {
		t.Errorf("laptop -> pa1 over IPv6 across a planned restart of a1: %d of %d pings answered", recv, sent)
	} else {
		t.Logf("laptop -> pa1 over IPv6 across a planned restart of a1: %d of %d pings answered", recv, sent)
	}
	converge(t, nodes...)
	// The lab's hold time is 3s: on a machine that stalls for longer (BIRD
	// logged "I/O loop cycle took 5481 ms" at a load average of 100 on 2
	// cores) the sessions to the router expire and come back.
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed, "hold timer expired", gobgpNoRestartFlag)

	// The router turns hostile, in each family.
	before := map[string]string{}
	for _, n := range nodes {
		before[n.Name] = podRoutesOf(t, l, n)
	}
	var hostile []netip.Prefix
	for _, p := range pools {
		node := a2.Address
		if p.CIDR.Addr().Is6() {
			node = lab.CrossAddress6(a2.Address)
		}
		hostile = append(hostile, lab.HostileRoutes(p, node)...)
	}
	if err := tor.Hostile(hostile); err != nil {
		t.Fatal(err)
	}
	// Every node drops what would replace the default route, take the
	// pool or a block, or steal a pod's address; a2 knows its own IPv6
	// address as a node's, the others count it as other (IPv6 addresses
	// of other nodes are not among the node addresses ExternalDropReason
	// knows when only IPv4 peers are configured).
	eventually(t, 20*time.Second, func() string {
		for _, n := range nodes {
			ext := mustStatus(t, n).GetExternalPeers()
			if len(ext) != 1 {
				return n.Name + ": " + ext2s(ext)
			}
			d := ext[0].GetDropped()
			reasons := []string{bgp.DropDefault, bgp.DropPoolAggregate, bgp.DropInsideBlock, bgp.DropBlock}
			if n == a2 || dual {
				reasons = append(reasons, bgp.DropNodeAddress)
			}
			for _, r := range reasons {
				if d[r] == 0 {
					return n.Name + " counts no " + r + " from the router: " + ext2s(ext)
				}
			}
			if n := d[bgp.DropDefault]; n != uint64(len(pools)) {
				return "default routes dropped: " + ext2s(ext)
			}
		}
		return ""
	})
	for _, n := range nodes {
		if got := podRoutesOf(t, l, n); got != before[n.Name] {
			t.Errorf("%s's routes changed when the router turned hostile:\n%s\nwas\n%s", n.Name, got, before[n.Name])
		}
		if r := run(t, l, n.Netns, "ip", "-6", "route", "show", "default"); r != "" {
			t.Errorf("%s has an IPv6 default route: %q", n.Name, r)
		}
		if r := run(t, l, n.Netns, "ip", "-6", "route", "show", "exact", torPool6.CIDR.String()); r != "" {
			t.Errorf("%s has a route to the IPv6 pool: %q", n.Name, r)
		}
	}
	pings(t, l, pa1.Netns, "pa1 to pb1 with a hostile router", pb1.IPs...)
	if st, err := a1.Reef("status"); err == nil {
		t.Logf("reef status on a1 with a hostile router:\n%s", st[strings.Index(st, "External BGP peers"):])
	}

	// An unplanned stop: the router keeps a1's IPv6 block for the restart
	// time, and not past it.
	var a1block6 string
	for _, b := range blocksOf(t, a1) {
		if strings.Contains(b, ":") {
			a1block6 = b
		}
	}
	if err := a1.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if got := bgpRoutes(t, l, router); got[a1block6] != lab.CrossAddress6(a1.Address).String() {
		t.Errorf("right after a1 was killed, the router has no route to its block %s: %v", a1block6, sortedPairs(got))
	}
	eventually(t, 30*time.Second, func() string {
		if via, ok := bgpRoutes(t, l, router)[a1block6]; ok {
			return "the router still routes " + a1block6 + " via " + via
		}
		return ""
	})
	t.Logf("the router dropped the killed a1's block %s %s after the kill (restart time 8s)", a1block6, time.Since(killed).Round(100*time.Millisecond))
}

// confirmedBlocksShown are the blocks that `reef ipam show --show-blocks`
// on n lists as confirmed: n's own.
func confirmedBlocksShown(t *testing.T, n *lab.Node) []string {
	t.Helper()
	out, err := n.Reef("ipam", "show", "--show-blocks")
	if err != nil {
		t.Fatalf("%s: reef ipam show --show-blocks: %v\n%s", n.Name, err, out)
	}
	var blocks []string
	for _, line := range nonEmptyLines(out) {
		f := strings.Fields(line)
		if _, err := netip.ParsePrefix(f[0]); err == nil && slices.Contains(f, "confirmed") {
			blocks = append(blocks, f[0])
		}
	}
	return blocks
}

// bgpRoutes are the routes in the router's kernel of either family that
// are neither the kernel's own (its subnets) nor IPv6 link-local:
// prefix -> next hop. The ToR adds only those it learned over BGP.
func bgpRoutes(t *testing.T, l *lab.Lab, netns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fam := range []string{"-4", "-6"} {
		for _, line := range nonEmptyLines(run(t, l, netns, "ip", fam, "route", "show")) {
			f := strings.Fields(line)
			if slices.Contains(f, "kernel") || strings.HasPrefix(f[0], "fe80:") || strings.HasPrefix(f[0], "multicast") {
				continue
			}
			via := "-"
			if i := slices.Index(f, "via"); i >= 0 && i+1 < len(f) {
				via = f[i+1]
			}
			out[f[0]] = via
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
