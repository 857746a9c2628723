package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestPlannedRestartIPv6Bird is TestPlannedRestartBird's pings for an
// IPv6 pod (docs/bgp.md, "Stand-ins"): the ToR lab's three dual-stack
// nodes with BFD to a BIRD 2 router (IPv4 sessions carrying IPv6 unicast
// too, GRACEFUL_SHUTDOWN honoured), and the laptop behind the router
// pinging a pod's IPv6 address on a1 every 10 ms while a1's reef is
// stopped (SIGTERM) and started again. BIRD drops a1's own paths when the
// session goes down (no graceful restart toward a BFD router); a2, which
// shares a1's subnet, originates a stand-in for a1's IPv6 block, next hop
// a1's IPv6 address, which the test sees at the router while its session
// with a1 is still up, and withdraws it once a1 is back. Every ping must
// be answered. Without the IPv6 stand-ins the router has no path to a1's
// IPv6 block while a1's reef is away: the test fails (no stand-in, 307 of
// 411 pings answered in one run). TestPlannedRestartIPv6FRR is the same
// with FRR; both are in the slow suite.
func TestPlannedRestartIPv6Bird(t *testing.T) {
	slowSuite(t)
	testPlannedRestartIPv6(t, "bird")
}

func TestPlannedRestartIPv6FRR(t *testing.T) { slowSuite(t); testPlannedRestartIPv6(t, "frr") }

func testPlannedRestartIPv6(t *testing.T, kind string) {
	needNATTools(t, "ping")
	l := newLab(t)
	pools := []lab.ToRPool{torPool4, torPool6}
	extra := "pools:\n"
	for _, p := range pools {
		extra += "  - cidr: " + p.CIDR.String() + "\n    vxlanMode: Never\n"
	}
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: extra, RouterASN: lab.RouterASN, RouterExtra: bfdPeerExtra})
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
	tor := startToRWith(t, l, kind, nodes, pools, lab.ToROptions{Hold: bfdHold, BFD: 300 * time.Millisecond, GracefulShutdown: true})
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2 := nodes[0], nodes[1]
	pa1 := newPod(t, a1, "pa1")
	converge(t, nodes...)
	waitBFDUp(t, tor, nodes)
	ip6 := pa1.IPs[len(pa1.IPs)-1]
	if !ip6.Is6() {
		t.Fatalf("pa1's addresses %v: no IPv6 one", pa1.IPs)
	}
	block := netip.PrefixFrom(ip6, torPool6.BlockSize).Masked()
	a1v6 := lab.CrossAddress6(a1.Address)
	eventually(t, 20*time.Second, func() string {
		if via := bgpRoutes(t, l, l.Prefix+"-xr")[block.String()]; via != a1v6.String() {
			return fmt.Sprintf("the router's route to a1's IPv6 block %s: via %q, want %s", block, via, a1v6)
		}
		return ""
	})
	standInOverRestart(t, l, tor, kind, l.Prefix+"-xr", laptop, a1, a2, ip6, block, a1v6)
}

// TestPlannedRestartIPv6OnlyBird is the same with IPv6-only nodes
// (docs/bgp.md, "Routers at IPv6 addresses"): three nodes on one subnet
// with BFD to a BIRD router at fd77::1, IPv6 sessions everywhere, the
// outside host behind the router pinging node1's pod (slow suite: make
// test has the dual-stack one). Without the IPv6 stand-ins it fails: 186
// of 287 pings answered in one run.
func TestPlannedRestartIPv6OnlyBird(t *testing.T) {
	slowSuite(t)
	needNATTools(t, "ping")
	l := newLab(t)
	peer := fmt.Sprintf("  externalPeers:\n    - address: %s\n      asn: %d\n      maxPrefixes: %d\n", lab.RouterAddr6, lab.RouterASN, torMaxPrefixes) + bfdPeerExtra
	nodes, out, tor := startIPv6OnlyToR(t, l, "bird", peer, lab.ToROptions{Hold: bfdHold, BFD: 300 * time.Millisecond, GracefulShutdown: true})
	addrs := peerAddresses(nodes)
	a1, a2 := nodes[0], nodes[1]
	p1 := newPod(t, a1, "p1")
	converge(t, nodes...)
	block := netip.PrefixFrom(p1.IP, torPool6Only.BlockSize).Masked()
	eventually(t, 30*time.Second, func() string {
		sessions, err := tor.BFDSessions()
		if err != nil {
			return err.Error()
		}
		for _, a := range addrs {
			if sessions[a] != "up" {
				return fmt.Sprintf("the router's BFD sessions: %v; want %s up", sessions, a)
			}
		}
		if via := bgpRoutes(t, l, out.Router)[block.String()]; via != a1.PeerAddress().String() {
			return fmt.Sprintf("the router's route to node1's block %s: via %q, want %s", block, via, a1.PeerAddress())
		}
		return ""
	})
	standInOverRestart(t, l, tor, "bird", out.Router, out.Server, a1, a2, p1.IP, block, a1.PeerAddress())
}

// standInOverRestart pings ip6, a pod on a1 in block, from netns client
// every 10 ms over a planned restart of a1 (SIGTERM, then start), and
// checks that the router (tor, its kernel in netns router) has a2's
// stand-in for block, next hop a1's IPv6 address a1v6, while its session
// with a1 is still up, that the stand-in ends once a1 is back, and that
// every ping is answered.
func standInOverRestart(t *testing.T, l *lab.Lab, tor lab.ToR, kind, router, client string, a1, a2 *lab.Node, ip6 netip.Addr, block netip.Prefix, a1v6 netip.Addr) {
	t.Helper()
	standInsOverRestart(t, l, tor, kind, router, client, a1, a2, []standInTarget{{ip6, block, a1v6}}, nil)
}

// standInTarget is a pod on the restarting node, its block, and the next
// hop a stand-in for the block must have (the node's address of the
// block's family).
type standInTarget struct {
	ip    netip.Addr
	block netip.Prefix
	nh    netip.Addr
}

// standInsOverRestart is standInOverRestart for several pods of a1 at
// once (of either family), over one restart; the messages name the nodes.
// during, if set, runs once while the router has a2's stand-ins for every
// target and its session with a1 is still up.
func standInsOverRestart(t *testing.T, l *lab.Lab, tor lab.ToR, kind, router, client string, a1, a2 *lab.Node, targets []standInTarget, during func()) {
	t.Helper()
	pings := make([]func() (int, int), len(targets))
	for i, g := range targets {
		pings[i] = pingUntil(t, client, g.ip.String(), "0.01")
	}
	time.Sleep(time.Second) // a second of pings before the stop: the scenario, not a wait

	stopped := make(chan error, 1)
	sigterm := time.Now()
	go func() { stopped <- a1.Stop() }()
	var down time.Time
	stoodIn := make([]time.Time, len(targets))
	a2StandIns := make([][]string, len(targets))
	for exited := false; !exited || down.IsZero(); {
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
			exited = true
		default:
		}
		if time.Since(sigterm) > 30*time.Second {
			t.Fatalf("30s after SIGTERM: reef exited %v, the router's session with %s down at %v", exited, a1.Name, down)
		}
		s, err := tor.Session(a1.PeerAddress())
		if err != nil {
			t.Fatal(err)
		}
		if !s.Established {
			if down.IsZero() {
				down = time.Now()
			}
			continue
		}
		for i, g := range targets {
			if !stoodIn[i].IsZero() {
				continue
			}
			paths, err := tor.PathsTo(g.block)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(paths, func(p lab.ToRPath) bool { return p.From == a2.PeerAddress() && p.LocalPref == 100 && !p.GShut }) {
				if s, err := tor.Session(a1.PeerAddress()); err == nil && s.Established {
					stoodIn[i] = time.Now()
					if st, err := a2.Status(); err == nil {
						a2StandIns[i] = st.GetStandIns()
					}
					t.Logf("%s after SIGTERM, session with %s established: the router's paths to its block %s: %+v",
						time.Since(sigterm).Round(time.Millisecond), a1.Name, g.block, paths)
				}
			}
		}
		if during != nil && !slices.ContainsFunc(stoodIn, time.Time.IsZero) {
			during()
			during = nil
		}
	}
	routes := bgpRoutes(t, l, router)
	for i, g := range targets {
		if stoodIn[i].IsZero() {
			t.Errorf("the router never had a stand-in from %s for %s's block %s while its session with %[2]s was up", a2.Name, a1.Name, g.block)
		} else if !slices.ContainsFunc(a2StandIns[i], func(s string) bool { return strings.HasPrefix(s, g.block.String()+" via "+g.nh.String()+" to ") }) {
			t.Errorf("%s's status lists the stand-ins %q meanwhile, want %s via %s", a2.Name, a2StandIns[i], g.block, g.nh)
		}
		if via := routes[g.block.String()]; via != g.nh.String() {
			t.Errorf("with %s's reef stopped, the router routes its block %s via %q, want %s (a stand-in)", a1.Name, g.block, via, g.nh)
		}
	}

	if err := a1.Start(); err != nil {
		t.Fatal(err)
	}
	// The stand-ins end once a1's own path is back at the router.
	eventually(t, 30*time.Second, func() string {
		for _, g := range targets {
			paths, err := tor.PathsTo(g.block)
			if err != nil {
				return err.Error()
			}
			if len(paths) != 1 || paths[0].From != a1.PeerAddress() || paths[0].GShut || paths[0].LocalPref != 100 {
				return fmt.Sprintf("the router's paths to %s's block %s after its restart: %+v, want its own alone, unmarked", a1.Name, g.block, paths)
			}
		}
		return ""
	})
	t.Logf("%s after SIGTERM: the stand-ins for %s's blocks have ended, its own paths are back", time.Since(sigterm).Round(time.Millisecond), a1.Name)
	if slices.ContainsFunc(targets, func(g standInTarget) bool { return g.block.Addr().Is6() }) && !strings.Contains(a2.Log(), "stand-in for another node's IPv6 block withdrawn") {
		t.Errorf("%s does not log the end of its IPv6 stand-in", a2.Name)
	}
	time.Sleep(2 * time.Second) // two seconds of pings with a1 back: the scenario, not a wait
	for i, g := range targets {
		recv, sent := pings[i]()
		if recv < sent {
			t.Errorf("%s: %d of %d pings (every 10 ms) from behind the router to the pod %s on %s answered over its planned restart", kind, recv, sent, g.ip, a1.Name)
		} else {
			t.Logf("%s: %d of %d pings (every 10 ms) from behind the router to the pod %s on %s answered over its planned restart", kind, recv, sent, g.ip, a1.Name)
		}
	}
}
