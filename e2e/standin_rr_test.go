package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestPlannedRestartReflectorsBird: stand-ins behind route reflectors
// (docs/bgp.md, "Stand-ins"). One reef reflector (rr1) and two client
// nodes (c1, c2) that peer with it alone, all three on one subnet,
// dual-stack, each with BFD to a BIRD 2 router (GRACEFUL_SHUTDOWN
// honoured; IPv4 sessions carrying IPv6 unicast too); the laptop behind
// the router pings a pod on c1 at both its addresses every 10 ms while
// c1's reef is stopped (SIGTERM) and started again. c1's marked paths
// reach c2 only through the reflector: c2 must stand in for both of
// c1's blocks (the IPv4 one by its export statement, the IPv6 one
// originated from the marked claim), which the test sees at the router
// while its session with c1 is still up, and stop once c1 is back. Every
// ping must be answered. c2's reef_bgp_stand_ins counts the two blocks
// meanwhile, and 0 before and after. Slow suite: the reflector lab and
// the restart take over 20 s. TestPlannedRestartReflectorsFRR is the
// same with FRR as the router.
func TestPlannedRestartReflectorsBird(t *testing.T) { testPlannedRestartReflectors(t, "bird") }

func TestPlannedRestartReflectorsFRR(t *testing.T) { testPlannedRestartReflectors(t, "frr") }

func testPlannedRestartReflectors(t *testing.T, kind string) {
	slowSuite(t)
	needNATTools(t, "ping")
	l := newLab(t)
	if _, err := l.AddCrossRouter(); err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	pools := []lab.ToRPool{torPool4, torPool6}
	extra := "pools:\n"
	for _, p := range pools {
		extra += "  - cidr: " + p.CIDR.String() + "\n    vxlanMode: Never\n"
	}
	rrAddr := lab.NodeAddress(0)
	voters := []netip.Addr{rrAddr, lab.NodeAddress(1), lab.NodeAddress(2)}
	router := fmt.Sprintf("  externalPeers:\n    - address: %s\n      asn: %d\n", lab.RouterA, lab.RouterASN) + bfdPeerExtra
	var nodes []*lab.Node
	for i, name := range []string{"rr1", "c1", "c2"} {
		bgp := lab.ClientBGP([]netip.Addr{rrAddr}, voters)
		if i == 0 {
			bgp = lab.ReflectorBGP(nil, voters)
		}
		n, err := l.AddNode(name, lab.NodeOptions{BGP: bgp + router, Extra: extra + "metrics: 0.0.0.0:9099\n"})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if err := l.AddCrossIPv6(nodes); err != nil {
		t.Fatal(err)
	}
	tor := startToRWith(t, l, kind, nodes, pools, lab.ToROptions{Hold: bfdHold, BFD: 300 * time.Millisecond, GracefulShutdown: true})
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	rr1, c1, c2 := nodes[0], nodes[1], nodes[2]
	p := newPod(t, c1, "p")
	if err := lab.WaitReflected(nodes, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// c2 hears of c1 through the reflector alone.
	for n, want := range map[*lab.Node]map[string]string{
		c2:  {rrAddr.String(): "reflector"},
		rr1: {c1.Address.String(): "client", c2.Address.String(): "client"},
	} {
		got := map[string]string{}
		for _, p := range mustStatus(t, n).GetPeers() {
			got[p.GetAddress()] = p.GetType()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s's peers: %v, want %v", n.Name, got, want)
		}
	}
	if len(p.IPs) != 2 || !p.IPs[0].Is4() || !p.IPs[1].Is6() {
		t.Fatalf("the pod's addresses %v: want an IPv4 and an IPv6 one", p.IPs)
	}
	targets := []standInTarget{
		{p.IPs[0], netip.PrefixFrom(p.IPs[0], torPool4.BlockSize).Masked(), c1.Address},
		{p.IPs[1], netip.PrefixFrom(p.IPs[1], torPool6.BlockSize).Masked(), lab.CrossAddress6(c1.Address)},
	}
	waitBFDUp(t, tor, nodes)
	// Every node's session with the router up, not only BFD: c2 can only
	// stand in over an established one.
	eventually(t, 20*time.Second, func() string {
		for _, n := range nodes {
			if s, err := tor.Session(n.PeerAddress()); err != nil || !s.Established {
				return fmt.Sprintf("the router's session with %s: %+v, %v; want established", n.Name, s, err)
			}
		}
		routes := bgpRoutes(t, l, l.Prefix+"-xr")
		for _, g := range targets {
			if via := routes[g.block.String()]; via != g.nh.String() {
				return fmt.Sprintf("the router's route to c1's block %s: via %q, want %s", g.block, via, g.nh)
			}
		}
		return ""
	})
	// reef_bgp_stand_ins on c2 while it stands in, and after; and
	// reef_bgp_blocks_marked on c1 once it is back. (c1's own count while
	// it stops is not to be had: its metrics listener closes at SIGTERM.)
	metric := func(n *lab.Node, name, family string) string {
		_, body := scrape(t, l.Prefix+"-xr", n, "/metrics")
		re := regexp.MustCompile(`(?m)^` + name + `\{family="` + family + `"\} (\S+)$`)
		if m := re.FindStringSubmatch(body); m != nil {
			return m[1]
		}
		return "none"
	}
	metrics := func(want string) string {
		got := fmt.Sprintf("c2 stands in for %s IPv4 and %s IPv6 blocks, c1 marks %s and %s", metric(c2, "reef_bgp_stand_ins", "ipv4"), metric(c2, "reef_bgp_stand_ins", "ipv6"),
			metric(c1, "reef_bgp_blocks_marked", "ipv4"), metric(c1, "reef_bgp_blocks_marked", "ipv6"))
		if got != want {
			return fmt.Sprintf("metrics: %s; want %s", got, want)
		}
		return ""
	}
	if d := metrics("c2 stands in for 0 IPv4 and 0 IPv6 blocks, c1 marks 0 and 0"); d != "" {
		t.Fatal(d)
	}
	standInsOverRestart(t, l, tor, kind, l.Prefix+"-xr", laptop, c1, c2, targets, func() {
		if got, want := metric(c2, "reef_bgp_stand_ins", "ipv4")+" "+metric(c2, "reef_bgp_stand_ins", "ipv6"), "1 1"; got != want {
			t.Errorf("c2's reef_bgp_stand_ins (ipv4 ipv6) while it stands in for c1: %s, want %s", got, want)
		}
	})
	eventually(t, 10*time.Second, func() string {
		return metrics("c2 stands in for 0 IPv4 and 0 IPv6 blocks, c1 marks 0 and 0")
	})
}
