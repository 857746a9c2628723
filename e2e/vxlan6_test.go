package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes/tunnel"
)

// IPv6 pools through vxlan.reef over the IPv4 underlay (issue 29): an IPv6
// block of a node reached through VXLAN is routed via the link-local of
// the owner's VTEP, with a permanent neighbour for it on vxlan.reef.

const (
	vxPool4 = "10.244.0.0/16"
	vxPool6 = "fd00:10:244::/56"
)

// vxPools is the pools' config: an IPv6 pool, with an IPv4 one before it
// for dual-stack pods, both with vxlanMode mode.
func vxPools(dual bool, mode string) string {
	s := "pools:\n"
	if dual {
		s += "  - cidr: " + vxPool4 + "\n    vxlanMode: " + mode + "\n"
	}
	return s + "  - cidr: " + vxPool6 + "\n    vxlanMode: " + mode + "\n"
}

// vxPod is a pod and its addresses: IPv6 only, or one of each family.
type vxPod struct {
	*lab.Pod
	v4, v6 netip.Addr
}

func newVXPod(t *testing.T, n *lab.Node, name string, dual bool) vxPod {
	t.Helper()
	p := newPod(t, n, name)
	if dual {
		v4, v6 := dualPod(t, n.Lab, p, netip.MustParsePrefix(vxPool4), netip.MustParsePrefix(vxPool6))
		return vxPod{p, v4, v6}
	}
	if len(p.IPs) != 1 || !netip.MustParsePrefix(vxPool6).Contains(p.IP) {
		t.Fatalf("pod %s got %v, want one address of %s", name, p.IPs, vxPool6)
	}
	return vxPod{Pod: p, v6: p.IP}
}

// blocks6Of are n's confirmed IPv6 blocks.
func blocks6Of(t *testing.T, n *lab.Node) []string {
	t.Helper()
	var out []string
	for _, b := range blocksOf(t, n) {
		if strings.Contains(b, ":") {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no confirmed IPv6 block", n.Name)
	}
	return out
}

// checkVXLAN6 checks, on node from, what reaching owner's IPv6 blocks
// through vxlan.reef takes: the route via owner's VTEP link-local (not
// onlink), a permanent neighbour for it, and an fdb entry to owner; and on
// owner that its vxlan.reef has that link-local.
func checkVXLAN6(t *testing.T, l *lab.Lab, from, owner *lab.Node) {
	t.Helper()
	ll, mac := tunnel.VTEPLinkLocal(owner.Address).String(), tunnel.VTEPMAC(owner.Address).String()
	for _, b := range blocks6Of(t, owner) {
		r := run(t, l, from.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238")
		if !strings.HasPrefix(r, b+" via "+ll+" dev "+tunnel.VXLANDevice+" ") || strings.Contains(r, "onlink") {
			t.Errorf("%s's route to %s's IPv6 block %s is %q, want via %s dev %s, not onlink", from.Name, owner.Name, b, strings.TrimSpace(r), ll, tunnel.VXLANDevice)
		}
	}
	if n := run(t, l, from.Netns, "ip", "-6", "neigh", "show", "dev", tunnel.VXLANDevice); !strings.Contains(n, ll+" lladdr "+mac+" PERMANENT") {
		t.Errorf("%s: no permanent neighbour %s lladdr %s on %s:\n%s", from.Name, ll, mac, tunnel.VXLANDevice, n)
	}
	if f := run(t, l, from.Netns, "bridge", "fdb", "show", "dev", tunnel.VXLANDevice); strings.Count(f, mac+" dst "+owner.Address.String()) != 1 {
		t.Errorf("%s: want one fdb entry %s dst %s:\n%s", from.Name, mac, owner.Address, f)
	}
	if a := run(t, l, owner.Netns, "ip", "-6", "addr", "show", "dev", tunnel.VXLANDevice); !strings.Contains(a, "inet6 "+ll+"/64 scope link") {
		t.Errorf("%s's %s lacks the link-local %s the others route through:\n%s", owner.Name, tunnel.VXLANDevice, ll, a)
	}
}

// tunnelAddr6 is n's IPv6 tunnel address: the one /128 of the pool on its
// vxlan.reef.
func tunnelAddr6(t *testing.T, n *lab.Node) netip.Addr {
	t.Helper()
	out := run(t, n.Lab, n.Netns, "ip", "-6", "-o", "addr", "show", "dev", tunnel.VXLANDevice, "scope", "global")
	var found []netip.Addr
	for _, f := range strings.Fields(out) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Bits() == 128 && netip.MustParsePrefix(vxPool6).Contains(p.Addr()) {
			found = append(found, p.Addr())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s's %s: want one /128 of %s, got:\n%s", n.Name, tunnel.VXLANDevice, vxPool6, out)
	}
	return found[0]
}

// nodeToPod6 checks that node n reaches pod p on another node over IPv6
// on the first try, from its IPv6 tunnel address.
func nodeToPod6(t *testing.T, n *lab.Node, p vxPod) {
	t.Helper()
	tun := tunnelAddr6(t, n)
	if r := run(t, n.Lab, n.Netns, "ip", "-6", "route", "get", p.v6.String()); !strings.Contains(r, " src "+tun.String()+" ") || !strings.Contains(r, tunnel.VXLANDevice) {
		t.Errorf("%s's route to pod %s: %q, want dev %s src %s (its IPv6 tunnel address)", n.Name, p.v6, strings.TrimSpace(r), tunnel.VXLANDevice, tun)
	}
	pings(t, n.Lab, n.Netns, n.Name+" to pod "+p.Name, p.v6)
}

// mtu6 checks that the largest ICMPv6 echo that fits the pod's MTU (pmtu
// less 40 bytes of IPv6 header and 8 of ICMPv6) crosses the tunnel from p
// to dst, and one byte more fails at the sender with "message too long".
func mtu6(t *testing.T, p vxPod, dst netip.Addr, pmtu int) {
	t.Helper()
	fit := strconv.Itoa(pmtu - 48)
	if out, err := p.Run("ping", "-6", "-c", "1", "-W", "2", "-M", "do", "-s", fit, dst.String()); err != nil {
		t.Errorf("%s-byte ICMPv6 echo with DF from %s to %s: %v\n%s", fit, p.Name, dst, err, out)
	}
	over := strconv.Itoa(pmtu - 47)
	if out, err := p.Run("ping", "-6", "-c", "1", "-W", "2", "-M", "do", "-s", over, dst.String()); err == nil || !strings.Contains(out, "message too long") {
		t.Errorf("%s-byte ICMPv6 echo from %s to %s: %v %q; want a local 'message too long'", over, p.Name, dst, err, out)
	}
}

// TestVXLAN6CrossSubnet: IPv6-only and dual-stack pods on three nodes in
// two IPv4 subnets, every pool vxlanMode CrossSubnet. a1's pods reach
// b1's (the other subnet) through vxlan.reef, IPv6 via b1's VTEP
// link-local with a permanent neighbour, and a2's directly (via a2's IPv6
// address onlink); the first ping of every pair and family works, a1
// reaches b1's pod from its IPv6 tunnel address, the largest ICMPv6 echo
// that fits crosses the tunnel and one byte more fails with "message too
// long", and the neighbour deleted by hand comes back.
func TestVXLAN6CrossSubnet(t *testing.T) {
	for _, dual := range []bool{false, true} {
		name := map[bool]string{false: "IPv6", true: "dual-stack"}[dual]
		t.Run(name, func(t *testing.T) {
			l := newLab(t)
			nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: vxPools(dual, "CrossSubnet")})
			if err != nil {
				t.Fatal(err)
			}
			// a1 and a2 route each other's IPv6 blocks directly, through
			// their IPv6 addresses (b1's is only its record's).
			addNodeAddrs6(t, nodes...)
			if err := lab.StartAll(nodes); err != nil {
				t.Fatal(err)
			}
			a1, a2, b1 := nodes[0], nodes[1], nodes[2]
			pa1, pa2, pb1 := newVXPod(t, a1, "pa1", dual), newVXPod(t, a2, "pa2", dual), newVXPod(t, b1, "pb1", dual)
			converge(t, nodes...)
			checkVXLAN6(t, l, a1, b1)
			checkVXLAN6(t, l, b1, a1)
			checkVXLAN6(t, l, b1, a2)
			for _, b := range blocks6Of(t, a2) {
				if r := run(t, l, a1.Netns, "ip", "-6", "route", "show", "exact", b, "proto", "238"); !strings.HasPrefix(r, b+" via "+nodeAddr6(a2).String()+" dev eth0 ") || !strings.Contains(r, "onlink") {
					t.Errorf("a1's route to a2's IPv6 block %s (same subnet: direct) is %q", b, strings.TrimSpace(r))
				}
			}
			t.Logf("a1's IPv6 routes:\n%s", run(t, l, a1.Netns, "ip", "-6", "route", "show", "proto", "238"))
			if dual {
				if r := run(t, l, a1.Netns, "ip", "-4", "route", "show", "exact", blocksOf(t, b1)[0]); !strings.Contains(r, "via "+b1.Address.String()+" dev "+tunnel.VXLANDevice+" ") {
					t.Errorf("a1's route to b1's IPv4 block: %q", r)
				}
			}
			for _, pair := range [][2]vxPod{{pa1, pb1}, {pb1, pa1}, {pb1, pa2}, {pa1, pa2}} {
				to := []netip.Addr{pair[1].v6}
				if dual {
					to = append(to, pair[1].v4)
				}
				pings(t, l, pair[0].Netns, pair[0].Name+" to "+pair[1].Name, to...)
			}
			// The captured traffic between subnets is VXLAN between the
			// nodes' IPv4 addresses.
			out := capture(t, l, "br0", "udp port 4789", func() { pa1.Run("ping", "-6", "-c", "1", "-W", "2", pb1.v6.String()) })
			if !strings.Contains(out, a1.Address.String()) || !strings.Contains(out, b1.Address.String()+".4789") {
				t.Errorf("no VXLAN between %s and %s on the underlay:\n%s", a1.Address, b1.Address, out)
			}
			nodeToPod6(t, a1, pb1)
			nodeToPod6(t, b1, pa2)
			if link := run(t, l, pa1.Netns, "ip", "link", "show", "eth0"); !strings.Contains(link, "mtu 1450") {
				t.Errorf("pod eth0: %s", link)
			}
			mtu6(t, pa1, pb1.v6, 1450)

			// Drift: b1's neighbour on a1 deleted by hand comes back.
			ll := tunnel.VTEPLinkLocal(b1.Address).String()
			run(t, l, a1.Netns, "ip", "-6", "neigh", "del", ll, "dev", tunnel.VXLANDevice)
			eventually(t, 10*time.Second, func() string {
				if n := run(t, l, a1.Netns, "ip", "-6", "neigh", "show", "dev", tunnel.VXLANDevice); !strings.Contains(n, ll+" lladdr "+tunnel.VTEPMAC(b1.Address).String()+" PERMANENT") {
					return "b1's IPv6 neighbour not restored on a1:\n" + n
				}
				return ""
			})
			pings(t, l, pa1.Netns, "pa1 to pb1 after the repair", pb1.v6)
			noWarnings(t, nodes)
		})
	}
}

// TestVXLAN6Always: IPv6-only and dual-stack pods on three nodes of one
// subnet with vxlanMode Always, and no IPv6 address on any node: every
// IPv6 block goes through vxlan.reef via its owner's VTEP link-local,
// which needs none. Pods ping each other on the first try, a node reaches
// another's pod from its IPv6 tunnel address, the MTU holds.
func TestVXLAN6Always(t *testing.T) {
	for _, dual := range []bool{false, true} {
		name := map[bool]string{false: "IPv6", true: "dual-stack"}[dual]
		t.Run(name, func(t *testing.T) {
			l := newLab(t)
			nodes, err := l.AddMesh(3, vxPools(dual, "Always"))
			if err != nil {
				t.Fatal(err)
			}
			if err := lab.StartAll(nodes); err != nil {
				t.Fatal(err)
			}
			var pods []vxPod
			for _, n := range nodes {
				pods = append(pods, newVXPod(t, n, "p-"+n.Name, dual))
			}
			converge(t, nodes...)
			for _, from := range nodes {
				if a6 := mustStatus(t, from).GetNodeAddressV6(); a6 != "" {
					t.Errorf("%s has IPv6 address %q; this test wants none", from.Name, a6)
				}
				for _, owner := range nodes {
					if owner != from {
						checkVXLAN6(t, l, from, owner)
					}
				}
			}
			for _, p := range pods {
				for _, q := range pods {
					if p != q {
						to := []netip.Addr{q.v6}
						if dual {
							to = append(to, q.v4)
						}
						pings(t, l, p.Netns, p.Name+" to "+q.Name, to...)
					}
				}
			}
			nodeToPod6(t, nodes[0], pods[1])
			mtu6(t, pods[0], pods[2].v6, 1450)
			noWarnings(t, nodes)
		})
	}
}

// reservedOf are n's reserved addresses (its tunnel addresses) by handle.
func reservedOf(t *testing.T, n *lab.Node) map[string]string {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, a := range rep.GetAllocations() {
		if a.GetState() == "reserved" {
			m[a.GetHandle()] = a.GetIp()
		}
	}
	return m
}

// TestVXLAN6StoreRecover: `reef store recover` keeps both tunnel
// addresses of a dual-stack node's vxlan.reef, read from the device,
// under their handles; the recovered daemon keeps them on the device.
func TestVXLAN6StoreRecover(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: vxPools(true, "Always")})
	p := newVXPod(t, n, "a", true)
	h4, h6 := "vxlan-tunnel-addr-node1", "vxlan-v6-tunnel-addr-node1"
	var before map[string]string
	eventually(t, 20*time.Second, func() string {
		before = reservedOf(t, n)
		a := run(t, l, n.Netns, "ip", "addr", "show", "dev", tunnel.VXLANDevice)
		if before[h4] == "" || before[h6] == "" || !strings.Contains(a, before[h6]+"/128") || !strings.Contains(a, before[h4]+"/32") {
			return "no tunnel addresses of both families yet: " + strings.Join(keys(before), " ") + "\n" + a
		}
		return ""
	})
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(n.StateDir, "reef.db"), 0); err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n.Config)
	if err != nil {
		t.Fatalf("reef store recover: %v\n%s", err, out)
	}
	t.Logf("reef store recover:\n%s", out)
	// What recover read from the device, not what the restarted daemon
	// reserves again (the first free address: the same one).
	for _, h := range []string{h4, h6} {
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
			return strings.Contains(line, before[h]+" ") && strings.Contains(line, h+" (reserved)")
		}) {
			t.Errorf("reef store recover does not keep %s under %s", before[h], h)
		}
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if after := reservedOf(t, n); after[h4] != before[h4] || after[h6] != before[h6] {
		t.Errorf("tunnel addresses after the recovery: %v, want %v", after, before)
	}
	if err := n.WaitPass(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if a := run(t, l, n.Netns, "ip", "-6", "addr", "show", "dev", tunnel.VXLANDevice, "scope", "global"); strings.Count(a, "inet6 ") != 1 || !strings.Contains(a, before[h6]+"/128") {
		t.Errorf("vxlan.reef after the recovery:\n%s", a)
	}
	pings(t, l, n.Netns, "node1 to its pod", p.v6, p.v4)
	noWarnings(t, []*lab.Node{n})
}
