package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// underlay6Second is the IPv6 subnet of the nodes' second link (eth1) in
// TestIPv6SecondLink, and mtuSecond its MTU, below eth0's 1500.
var underlay6Second = netip.MustParsePrefix("fd79:6e::/64")

const mtuSecond = 1400

// secondAddr6 is node n's IPv6 address on eth1: the last byte of its IPv4
// address in underlay6Second.
func secondAddr6(n *lab.Node) netip.Addr {
	b := underlay6Second.Addr().As16()
	b[15] = n.Address.As4()[3]
	return netip.AddrFrom16(b)
}

// addSecondLink gives each node a second link, eth1 (MTU mtuSecond), on a
// bridge of its own in the lab's switch namespace, with its IPv6 address
// there (without DAD) and the IPv6 default route on it; eth0 keeps the
// IPv4 address and default route and has no global IPv6 address. The
// lab's `interface: eth0` goes from each config: with it, eth0 would be
// the uplink of both families.
func addSecondLink(t *testing.T, l *lab.Lab, nodes []*lab.Node) {
	t.Helper()
	run(t, l, l.Switch, "ip", "link", "add", "br6", "type", "bridge")
	run(t, l, l.Switch, "ip", "link", "set", "br6", "up")
	for _, n := range nodes {
		peer := "u6-" + n.Name
		for _, s := range [][]string{
			{"link", "add", "eth1", "mtu", fmt.Sprint(mtuSecond), "type", "veth", "peer", "name", peer, "mtu", fmt.Sprint(mtuSecond), "netns", lab.NetnsPath(l.Switch)},
			{"-6", "addr", "add", netip.PrefixFrom(secondAddr6(n), underlay6Second.Bits()).String(), "dev", "eth1", "nodad"},
			{"link", "set", "eth1", "up"},
			// No router answers there: the route only says which link is
			// the node's IPv6 one.
			{"-6", "route", "add", "default", "via", "fd79:6e::1", "dev", "eth1"},
		} {
			if err := l.IP(n.Netns, s...); err != nil {
				t.Fatal(err)
			}
		}
		run(t, l, l.Switch, "ip", "link", "set", peer, "master", "br6", "up")
		cfg, err := os.ReadFile(n.Config)
		if err != nil {
			t.Fatal(err)
		}
		without := strings.Replace(string(cfg), "\ninterface: eth0\n", "\n", 1)
		if without == string(cfg) {
			t.Fatalf("%s's config has no interface: eth0 to take out:\n%s", n.Name, cfg)
		}
		if err := os.WriteFile(n.Config, []byte(without), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIPv6SecondLink: two nodes whose IPv4 runs on eth0 and whose IPv6
// runs on a second link, eth1, where their IPv6 default route is (issue
// 29: nodeAddressV6 is detected on the interface of the IPv6 default
// route, like nodeAddress on the IPv4 one's). Each node's IPv6 address is
// its eth1 address; each routes the other's IPv6 block `via <its eth1
// address> dev eth1 onlink proto 238`; the pods' MTU is eth1's (1400, not
// eth0's 1500: an IPv6 pool routed directly goes out there); reef status
// shows both interfaces; pods ping each other over IPv6 on the first try,
// the largest echo that fits eth1 included; no daemon logs a warning.
// With the IPv6 address detected on the IPv4 uplink (before issue 29's
// rule) the daemons do not start: eth0 has no usable IPv6 address.
func TestIPv6SecondLink(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMesh(2, pool6Nodes)
	if err != nil {
		t.Fatal(err)
	}
	addSecondLink(t, l, nodes)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		st := mustStatus(t, n)
		if st.GetNodeAddressV6() != secondAddr6(n).String() || st.GetInterface() != "eth0" || st.GetInterface6() != "eth1" || st.GetMtu() != mtuSecond {
			t.Errorf("%s: reef status says IPv6 address %q, interface %q, interface6 %q, pod MTU %d; want %s, eth0, eth1, %d",
				n.Name, st.GetNodeAddressV6(), st.GetInterface(), st.GetInterface6(), st.GetMtu(), secondAddr6(n), mtuSecond)
		}
	}
	if st, err := nodes[0].Reef("status"); err != nil || !strings.Contains(st, "node1  "+nodes[0].Address.String()+", "+secondAddr6(nodes[0]).String()+" on eth0, IPv6 eth1 (pod MTU 1400)") {
		t.Errorf("node1's reef status lacks its IPv6 uplink: %v\n%s", err, st)
	}
	a, b := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b")
	converge(t, nodes...)
	checkRoutes6(t, nodes, "eth1", secondAddr6)
	// The largest echo the pods' MTU lets through: 1400 - 40 - 8.
	size := fmt.Sprint(mtuSecond - 48)
	for _, c := range []struct {
		from *lab.Pod
		to   netip.Addr
	}{{a, b.IP}, {b, a.IP}} {
		if !c.to.Is6() {
			t.Fatalf("pod got %s, not IPv6", c.to)
		}
		if out, err := l.Run(c.from.Netns, "ping", "-6", "-c", "1", "-W", "2", c.to.String()); err != nil {
			t.Errorf("ping -6 %s from %s: %v\n%s", c.to, c.from.Name, err, out)
		}
		if out, err := l.Run(c.from.Netns, "ping", "-6", "-c", "1", "-W", "2", "-M", "do", "-s", size, c.to.String()); err != nil {
			t.Errorf("ping -6 -s %s %s from %s: %v\n%s", size, c.to, c.from.Name, err, out)
		}
	}
	// Each node warns that its IPv6 uplink is not its IPv4 one (the other
	// nodes route its IPv6 blocks there), once, and nothing else.
	const moved = "node IPv6 address chosen on another interface than the IPv4 uplink's: other nodes route this node's IPv6 blocks there"
	for _, n := range nodes {
		if c := strings.Count(n.Log(), `msg="`+moved+`"`); c != 1 {
			t.Errorf("%s logged %q %d times, want once", n.Name, moved, c)
		}
	}
	noWarnings(t, nodes, moved)
}
