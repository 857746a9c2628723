package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes/tunnel"
)

// VXLAN over an IPv6 underlay (issue 29): on IPv6-only nodes vxlan.reef's
// local is the node's IPv6 address, and its fdb entries point at the
// owners' IPv6 addresses (docs/design.md, "VXLAN over an IPv6 underlay").

// checkVXLANOver6 checks on node from what reaching owner's IPv6 blocks
// through vxlan.reef over the IPv6 underlay takes: the route via owner's
// VTEP link-local (its identity's), the permanent neighbour, and one fdb
// entry to owner's IPv6 address.
func checkVXLANOver6(t *testing.T, l *lab.Lab, from, owner *lab.Node) {
	t.Helper()
	ll, mac := tunnel.VTEPLinkLocal(owner.Address).String(), tunnel.VTEPMAC(owner.Address).String()
	for _, b := range blocks6Of(t, owner) {
		if r := run(t, l, from.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238"); !strings.HasPrefix(r, b+" via "+ll+" dev "+tunnel.VXLANDevice+" ") {
			t.Errorf("%s's route to %s's block %s is %q, want via %s dev %s", from.Name, owner.Name, b, strings.TrimSpace(r), ll, tunnel.VXLANDevice)
		}
	}
	if n := run(t, l, from.Netns, "ip", "-6", "neigh", "show", "dev", tunnel.VXLANDevice); !strings.Contains(n, ll+" lladdr "+mac+" PERMANENT") {
		t.Errorf("%s: no permanent neighbour %s lladdr %s on %s:\n%s", from.Name, ll, mac, tunnel.VXLANDevice, n)
	}
	if f := run(t, l, from.Netns, "bridge", "fdb", "show", "dev", tunnel.VXLANDevice); strings.Count(f, mac+" dst "+lab.NodeAddress6(owner).String()+" ") != 1 {
		t.Errorf("%s: want one fdb entry %s dst %s:\n%s", from.Name, mac, lab.NodeAddress6(owner), f)
	}
}

// TestVXLANIPv6Underlay: three IPv6-only nodes (no IPv4 address at all)
// on one subnet, the IPv6 pool vxlanMode Always. Each vxlan.reef has the
// node's IPv6 address as local and MTU 1430 (the uplink's 1500 less 70);
// the pods ping each other on the first try, a node reaches another's pod
// from its IPv6 tunnel address, what crosses the underlay is VXLAN between
// the nodes' IPv6 addresses, and the largest ICMPv6 echo that fits the
// pods' 1430 (1382 bytes) crosses while one byte more fails with "message
// too long".
func TestVXLANIPv6Underlay(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMeshWith(3, lab.NodeOptions{IPv6Only: true, Extra: vxPools(false, "Always")})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	var pods []vxPod
	for _, n := range nodes {
		pods = append(pods, newVXPod(t, n, "p-"+n.Name, false))
	}
	converge(t, nodes...)
	if st, err := nodes[0].Reef("status"); err != nil || !strings.Contains(st, "vxlan:      over IPv6, local "+lab.NodeAddress6(nodes[0]).String()+"\n") {
		t.Errorf("node1's reef status does not say its VXLAN runs over IPv6: %v\n%s", err, st)
	}
	for _, from := range nodes {
		link := run(t, l, from.Netns, "ip", "-d", "link", "show", "dev", tunnel.VXLANDevice)
		if !strings.Contains(link, "local "+lab.NodeAddress6(from).String()+" ") || !strings.Contains(link, " mtu 1430 ") ||
			!strings.Contains(link, tunnel.VTEPMAC(from.Address).String()) {
			t.Errorf("%s's %s: want local %s, mtu 1430, MAC %s:\n%s", from.Name, tunnel.VXLANDevice, lab.NodeAddress6(from), tunnel.VTEPMAC(from.Address), link)
		}
		for _, owner := range nodes {
			if owner != from {
				checkVXLANOver6(t, l, from, owner)
			}
		}
	}
	t.Logf("node1's %s:\n%s%s", tunnel.VXLANDevice, run(t, l, nodes[0].Netns, "ip", "-d", "link", "show", "dev", tunnel.VXLANDevice),
		run(t, l, nodes[0].Netns, "bridge", "fdb", "show", "dev", tunnel.VXLANDevice))
	for _, p := range pods {
		for _, q := range pods {
			if p != q {
				pings(t, l, p.Netns, p.Name+" to "+q.Name, q.v6)
			}
		}
	}
	out := capture(t, l, "br0", "udp port 4789", func() { pods[0].Run("ping", "-6", "-c", "1", "-W", "2", pods[1].v6.String()) })
	if !strings.Contains(out, lab.NodeAddress6(nodes[0]).String()) || !strings.Contains(out, lab.NodeAddress6(nodes[1]).String()+".4789") {
		t.Errorf("no VXLAN between %s and %s on the underlay:\n%s", lab.NodeAddress6(nodes[0]), lab.NodeAddress6(nodes[1]), out)
	}
	nodeToPod6(t, nodes[0], pods[1])
	if link := run(t, l, pods[0].Netns, "ip", "link", "show", "eth0"); !strings.Contains(link, "mtu 1430") {
		t.Errorf("pod eth0: %s", link)
	}
	mtu6(t, pods[0], pods[2].v6, 1430)
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed)
}

// TestVXLANIPv6UnderlayCrossSubnet: three IPv6-only nodes in two IPv6
// subnets behind a router, the IPv6 pool vxlanMode CrossSubnet. a1 and a2
// (one subnet) route each other's blocks directly, via each other's IPv6
// address onlink, with no VXLAN peer for each other; b1 (the other) is
// reached through vxlan.reef over IPv6 and reaches them the same way.
// Pods ping each other on the first try, a1 reaches b1's pod from its
// IPv6 tunnel address, the captured traffic between the subnets is VXLAN
// between the nodes' IPv6 addresses, and the MTU holds across the router.
// In the slow set (about 10 s here); TestVXLANIPv6Underlay is make test's.
func TestVXLANIPv6UnderlayCrossSubnet(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	nodes, err := l.AddCrossNodes6(lab.NodeOptions{Extra: vxPools(false, "CrossSubnet")})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	pa1, pa2, pb1 := newVXPod(t, a1, "pa1", false), newVXPod(t, a2, "pa2", false), newVXPod(t, b1, "pb1", false)
	converge(t, nodes...)
	checkVXLANOver6(t, l, a1, b1)
	checkVXLANOver6(t, l, a2, b1)
	checkVXLANOver6(t, l, b1, a1)
	checkVXLANOver6(t, l, b1, a2)
	for _, pair := range [][2]*lab.Node{{a1, a2}, {a2, a1}} {
		from, owner := pair[0], pair[1]
		for _, b := range blocks6Of(t, owner) {
			if r := run(t, l, from.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238"); !strings.HasPrefix(r, b+" via "+lab.NodeAddress6(owner).String()+" dev eth0 ") || !strings.Contains(r, "onlink") {
				t.Errorf("%s's route to %s's block %s (one subnet: direct) is %q", from.Name, owner.Name, b, strings.TrimSpace(r))
			}
		}
		if f := run(t, l, from.Netns, "bridge", "fdb", "show", "dev", tunnel.VXLANDevice); strings.Contains(f, tunnel.VTEPMAC(owner.Address).String()) {
			t.Errorf("%s has a VXLAN peer %s in its own subnet:\n%s", from.Name, owner.Name, f)
		}
	}
	t.Logf("a1's IPv6 routes:\n%s", run(t, l, a1.Netns, "ip", "-6", "route", "show", "proto", "238"))
	for _, pair := range [][2]vxPod{{pa1, pb1}, {pb1, pa1}, {pb1, pa2}, {pa1, pa2}, {pa2, pa1}} {
		pings(t, l, pair[0].Netns, pair[0].Name+" to "+pair[1].Name, pair[1].v6)
	}
	out := capture(t, l, "br0", "udp port 4789", func() { pa1.Run("ping", "-6", "-c", "1", "-W", "2", pb1.v6.String()) })
	if !strings.Contains(out, lab.NodeAddress6(a1).String()) || !strings.Contains(out, lab.NodeAddress6(b1).String()+".4789") {
		t.Errorf("no VXLAN between %s and %s on the underlay:\n%s", lab.NodeAddress6(a1), lab.NodeAddress6(b1), out)
	}
	nodeToPod6(t, a1, pb1)
	nodeToPod6(t, b1, pa2)
	mtu6(t, pa1, pb1.v6, 1430)
	mtu6(t, pb1, pa2.v6, 1430)
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed)
}

// TestVXLANMixedUnderlays: two nodes with an IPv4 address (their VXLAN
// over IPv4) and one IPv6-only node (its VXLAN over IPv6) on one subnet,
// meshed over IPv6, the IPv6 pool vxlanMode Always. VXLAN between the two
// families of underlay is not built: each side gives the other's blocks
// no route, says why in reef status, and puts nothing of it on vxlan.reef;
// the two dual-stack nodes' pods reach each other through VXLAN over IPv4.
// With CrossSubnet all three route each other directly over IPv6 (one
// subnet), and every pod reaches every other. In the slow set (about 11 s
// here); TestVXLANMixedUnderlays in daemon/ is the state test.
func TestVXLANMixedUnderlays(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	var nodes []*lab.Node
	addrs6 := []string{"fd77::b", "fd77::c", "fd77::d"}
	bgp := func(i int) string {
		var peers []string
		for j, a := range addrs6 {
			if j != i {
				peers = append(peers, a)
			}
		}
		s := "  keepaliveTime: 1s\n  holdTime: 3s\n  peers: [" + strings.Join(peers, ", ") + "]\n  voters: [" + strings.Join(addrs6, ", ") + "]\n"
		if i == 2 {
			s += "  routerID: " + lab.NodeAddress(2).String() + "\n"
		}
		return s
	}
	for i, name := range []string{"ds1", "ds2", "v6only"} {
		o := lab.NodeOptions{BGP: bgp(i), Extra: vxPools(false, "Always"), IPv6Only: i == 2}
		if i < 2 {
			o.Extra += "nodeAddressV6: " + addrs6[i] + "\n"
		}
		n, err := l.AddNode(name, o)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := l.IP(n.Netns, "-6", "addr", "add", addrs6[i]+"/64", "dev", "eth0", "nodad"); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	ds1, ds2, v6 := nodes[0], nodes[1], nodes[2]
	p1, p2, p3 := newVXPod(t, ds1, "p1", false), newVXPod(t, ds2, "p2", false), newVXPod(t, v6, "p3", false)
	const notBuilt = "VXLAN between nodes whose underlays differ in family is not built"
	for _, c := range []struct {
		n      *lab.Node
		others []string
	}{{ds1, []string{addrs6[2]}}, {ds2, []string{addrs6[2]}}, {v6, []string{addrs6[0], addrs6[1]}}} {
		eventually(t, 20*time.Second, func() string {
			e := mustStatus(t, c.n).GetLastReconcileError()
			for _, o := range c.others {
				if !strings.Contains(e, "blocks of node "+o) || !strings.Contains(e, notBuilt) {
					return fmt.Sprintf("%s's last reconcile error %q does not name %s", c.n.Name, e, o)
				}
			}
			return ""
		})
	}
	for _, c := range [][2]*lab.Node{{ds1, v6}, {v6, ds1}, {v6, ds2}} {
		from, owner := c[0], c[1]
		for _, b := range blocks6Of(t, owner) {
			if r := run(t, l, from.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238"); strings.TrimSpace(r) != "" {
				t.Errorf("%s routes %s's block %s across underlay families: %q", from.Name, owner.Name, b, r)
			}
		}
		if f := run(t, l, from.Netns, "bridge", "fdb", "show", "dev", tunnel.VXLANDevice); strings.Contains(f, tunnel.VTEPMAC(owner.Address).String()) {
			t.Errorf("%s has a VXLAN peer %s across underlay families:\n%s", from.Name, owner.Name, f)
		}
	}
	checkVXLAN6(t, l, ds1, ds2)
	pings(t, l, p1.Netns, "p1 to p2 through VXLAN over IPv4", p2.v6)
	if st, err := ds1.Reef("status"); err != nil || !strings.Contains(st, "vxlan:      over IPv4, local "+ds1.Address.String()+"\n") ||
		!strings.Contains(st, "NOT BUILT:  VXLAN to "+addrs6[2]) {
		t.Errorf("ds1's reef status does not show its VXLAN over IPv4 and v6only's blocks without a route: %v\n%s", err, st)
	} else {
		t.Logf("ds1's reef status:\n%s", st)
	}
	if nb := mustStatus(t, v6).GetVxlanNotBuilt(); len(nb) != 2 {
		t.Errorf("v6only's reef status names %q as not reached by VXLAN, want ds1 and ds2", nb)
	}

	// CrossSubnet: one IPv6 subnet, so every node routes the others
	// directly over IPv6, and nothing is refused.
	for _, n := range nodes {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(n.Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.Config, []byte(strings.Replace(string(cfg), "vxlanMode: Always", "vxlanMode: CrossSubnet", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	// Sessions are by IPv6 address here, which converge does not know:
	// wait for a pass without error on each node, then for the routes.
	eventually(t, 20*time.Second, func() string {
		for _, n := range nodes {
			if err := n.WaitPass(10 * time.Second); err != nil {
				return err.Error()
			}
			if st := mustStatus(t, n); st.GetLastReconcileError() != "" || len(st.GetVxlanNotBuilt()) != 0 {
				return fmt.Sprintf("%s with CrossSubnet: %s %q", n.Name, st.GetLastReconcileError(), st.GetVxlanNotBuilt())
			}
		}
		for _, owner := range nodes {
			for _, b := range blocks6Of(t, owner) {
				for _, n := range nodes {
					if r := run(t, l, n.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238"); n != owner && strings.TrimSpace(r) == "" {
						return fmt.Sprintf("%s has no route to %s's block %s yet", n.Name, owner.Name, b)
					}
				}
			}
		}
		return ""
	})
	checkRoutes6(t, nodes, "eth0", func(n *lab.Node) netip.Addr { return netip.MustParseAddr(addrs6[slices.Index(nodes, n)]) })
	for _, pair := range [][2]vxPod{{p1, p3}, {p3, p1}, {p3, p2}, {p2, p1}} {
		pings(t, l, pair[0].Netns, pair[0].Name+" to "+pair[1].Name, pair[1].v6)
	}
}
