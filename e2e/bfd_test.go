package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/internal/lab"
)

// bfdHold is the BGP hold time of the BFD tests, on both sides: long
// enough that a route the router drops was dropped by BFD, not by BGP.
const bfdHold = 90 * time.Second

// bfdPeerExtra is what each node's external peer entry gets in the BFD
// tests: the long hold time and BFD at the interval docs/bgp.md suggests.
const bfdPeerExtra = "      holdTime: 90s\n      keepaliveTime: 30s\n      bfd: {minInterval: 300ms, multiplier: 3}\n"

// BFD (docs/bgp.md, "BFD"): the ToR lab's three nodes with bfd on their
// router, which runs BIRD 2 (TestBFDBird) or FRR's bgpd and bfdd
// (TestBFDFRR) with BFD at the same 300 ms × 3 and a hold time of 90 s on
// both sides:
//
//   - a BFD session per node comes up on both sides: the router's (birdc
//     show bfd sessions, vtysh show bfd peers), the node's (reef status,
//     reef_bgp_bfd_up);
//   - a2's link cut (its eth0 down, in its namespace): the router drops
//     a2's block, and its BGP session with a2 says BFD took it down; the
//     hold timer (90 s) had nothing to do with it;
//   - a1's reef killed with SIGKILL: both routers drop a1's block, within
//     half the hold time (reef offers them no graceful restart; with it,
//     FRR kept the block for the restart time).
//
// Without bfd in the nodes' config the router's BFD session never comes
// up, and the test fails at the first step. The elapsed times are logged;
// docs/bgp.md has the figures.
func TestBFDBird(t *testing.T) { testBFD(t, "bird") }

func TestBFDFRR(t *testing.T) { slowSuite(t); testBFD(t, "frr") }

func testBFD(t *testing.T, kind string) {
	l := newLab(t)
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN, RouterExtra: bfdPeerExtra})
	if err != nil {
		t.Fatal(err)
	}
	tor := startToRWith(t, l, kind, nodes, lab.DefaultToRPools, lab.ToROptions{Hold: bfdHold, BFD: 300 * time.Millisecond})
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2 := nodes[0], nodes[1]
	newPod(t, a1, "pa1")
	newPod(t, a2, "pa2")
	converge(t, nodes...)
	router := l.Prefix + "-xr"

	waitBFDUp(t, tor, nodes)
	for _, n := range nodes {
		out, err := n.Reef("status")
		row := ""
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, lab.RouterLeg(n.Address).String()+" ") {
				row = line
			}
		}
		if err != nil || !strings.Contains(out, "  BFD  ") || !strings.Contains(row, "  up  ") {
			t.Errorf("%s: reef status shows no BFD up for its router (err %v):\n%s", n.Name, err, out)
		}
		if v := scrapeIn(t, n, "reef_bgp_bfd_up"); v != "1" {
			t.Errorf("%s: reef_bgp_bfd_up is %s, want 1", n.Name, v)
		}
	}

	// a2's link is cut: the router hears nothing more from a2, and BFD
	// notices first.
	block := blocksOf(t, a2)[0]
	took := waitDropped(t, l, router, a2, block, func() error { return l.IP(a2.Netns, "link", "set", "eth0", "down") })
	checkDownByBFD(t, tor, a2)
	t.Logf("%s, a2's link cut: the router dropped its block %s %s later (BGP hold time %s)", kind, block, took.Round(10*time.Millisecond), bfdHold)

	// a1's reef is killed. Its kernel lives on and closes the BGP
	// connection at once; reef offers a router with BFD no graceful
	// restart (docs/bgp.md, "BFD"), so both routers drop the block then,
	// not after the restart time (FRR kept it stale for 120 s when it was
	// offered: it ignores a BFD down on a session that is already down).
	block = blocksOf(t, a1)[0]
	took = waitDropped(t, l, router, a1, block, a1.Kill)
	s, err := tor.Session(a1.PeerAddress())
	if err != nil {
		t.Fatal(err)
	}
	if s.Established {
		t.Errorf("the router's session with the killed a1 is established")
	}
	t.Logf("%s, a1's reef killed: the router dropped its block %s %s later (BGP hold time %s; last error %q)", kind, block, took.Round(10*time.Millisecond), bfdHold, s.LastError)
}

// waitDropped runs fail and waits until the router in netns router has no
// route to block of n; it returns how long that took.
func waitDropped(t *testing.T, l *lab.Lab, router string, n *lab.Node, block string, fail func() error) time.Duration {
	t.Helper()
	// The router learns the block over its session, after the nodes'
	// mesh converged: wait for it before the failure.
	eventually(t, 30*time.Second, func() string {
		if got := poolRoutes(t, l, router)[block]; got != n.Address.String() {
			return fmt.Sprintf("before %s fails: the router routes %s via %q, want %s", n.Name, block, got, n.Address)
		}
		return ""
	})
	if err := fail(); err != nil {
		t.Fatal(err)
	}
	failed := time.Now()
	eventually(t, bfdHold/2, func() string {
		if via, ok := poolRoutes(t, l, router)[block]; ok {
			return fmt.Sprintf("the router still routes %s's block %s via %s", n.Name, block, via)
		}
		return ""
	})
	return time.Since(failed)
}

// checkDownByBFD checks that the router's session with n is down, and
// says BFD took it down (not the hold timer).
func checkDownByBFD(t *testing.T, tor lab.ToR, n *lab.Node) {
	t.Helper()
	s, err := tor.Session(n.PeerAddress())
	if err != nil {
		t.Fatal(err)
	}
	if s.Established || !strings.Contains(strings.ToLower(s.LastError), "bfd") {
		t.Errorf("the router's session with %s: established %v, last error %q; want down by BFD", n.Name, s.Established, s.LastError)
	} else {
		t.Logf("the router's session with %s: %s", n.Name, s.LastError)
	}
}

// waitBFDUp waits for a BFD session up with every node on both sides.
func waitBFDUp(t *testing.T, tor lab.ToR, nodes []*lab.Node) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		sessions, err := tor.BFDSessions()
		if err != nil {
			return err.Error()
		}
		for _, n := range nodes {
			if sessions[n.Address] != "up" {
				return fmt.Sprintf("the router's BFD sessions: %v; want %s up", sessions, n.Address)
			}
			ext := mustStatus(t, n).GetExternalPeers()
			if len(ext) != 1 || ext[0].GetBfd() != bgp.BFDUp {
				return n.Name + "'s external peers: " + ext2s(ext)
			}
		}
		return ""
	})
}

// startToRWith is startToR with options (hold time, BFD, graceful
// shutdown).
func startToRWith(t *testing.T, l *lab.Lab, kind string, nodes []*lab.Node, pools []lab.ToRPool, o lab.ToROptions) lab.ToR {
	t.Helper()
	var addrs []netip.Addr
	for _, n := range nodes {
		addrs = append(addrs, n.Address)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	tor, err := l.StartToRWith(kind, l.Prefix+"-xr", lab.RouterA, addrs, pools, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", kind, tor.Log())
		}
	})
	return tor
}
