package e2e

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestDynamicPeerFloodStaysCutOff: a node that accepts its peers through
// bgp.peerPrefixes cuts off one that sends more IPv4 unicast paths than
// the session's limit (16,384 with the default pool), and keeps it out
// until `reef peer reset` (or a restart), as it does a configured peer: the next
// connection from its address is closed, not taken as a new peer that
// floods again. The flooding peer is Debian's gobgpd, a route reflector
// of a1's with the 20,000 routes of a feeder (reef-lab speaker) to pass
// on. Before, GoBGP removed the dynamic peer when its session ended and
// took it back at its next connection: a cut-off every 10 to 15 s, and
// the peer gone from reef status between them. reef_bgp_peer_cut_off says
// it is cut off; reef peer reset lets it in again, as a new dynamic peer:
// with the feeder's routes it is cut off again, without them it stays.
func TestDynamicPeerFloodStaysCutOff(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	rogue, feeder := netip.MustParseAddr("192.168.77.60"), netip.MustParseAddr("192.168.77.61")
	self := lab.NodeAddress(0)
	n := startNode(t, l, "a1", lab.NodeOptions{PeerPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.77.32/27")},
		BGPExtra: "  voters: [" + self.String() + "]\n"})
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = 64512\n  router-id = %q\n", rogue)
	for _, peer := range []netip.Addr{self, feeder} {
		fmt.Fprintf(&b, "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = 64512\n"+
			"  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n", peer)
		if peer == self {
			fmt.Fprintf(&b, "  [neighbors.route-reflector.config]\n    route-reflector-client = true\n    route-reflector-cluster-id = %q\n", rogue)
		}
		fmt.Fprintf(&b, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n")
	}
	g, err := l.AddGobgpdConf("rogue", rogue, 64512, b.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	peerState := func() string {
		for _, p := range mustStatus(t, n).GetPeers() {
			if p.GetAddress() == rogue.String() {
				return p.GetState()
			}
		}
		return "not listed"
	}
	eventually(t, 30*time.Second, func() string {
		if s := peerState(); s != "established" {
			return "the rogue's session: " + s
		}
		return ""
	})

	fns, err := l.AddHost("feeder", feeder)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(l.Dir, "feeder.routes")
	if err := lab.FloodFile(file, 20000, feeder); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Spawn(fns, "feeder.log", filepath.Join(binDir, "reef-lab"), "speaker", "--asn", "64512",
		"--router-id", feeder.String(), "--peers", rogue.String(), "--announce-file", file); err != nil {
		t.Fatal(err)
	}
	cutOffs := func() int { return strings.Count(n.Log(), "BGP peer sent more routes than the session's prefix limit") }
	// gobgpd comes back after its idle hold time; the daemon closes that
	// connection (GoBGP logs it at debug level), or, as before, takes it
	// and cuts the peer off a second time.
	refused := func() bool {
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "New connection for non admin-state-up peer") && strings.Contains(line, rogue.String()) {
				return true
			}
		}
		return false
	}
	eventually(t, 60*time.Second, func() string {
		if c := cutOffs(); c == 0 || (c == 1 && !refused()) {
			return fmt.Sprintf("%d cut-offs, no connection refused yet", c)
		}
		return ""
	})
	if c := cutOffs(); c != 1 {
		t.Errorf("the rogue peer was cut off %d times, want once: it came back", c)
	}
	if s := peerState(); !strings.HasPrefix(s, "cut off") {
		t.Errorf("reef status shows the rogue's session as %q, want cut off", s)
	}
	if nb, err := g.Neighbor(self); err != nil || nb.OpensReceived != 1 || nb.State == "ESTABLISHED" {
		t.Errorf("gobgpd's session with a1: %+v, %v; want a1's one OPEN (of the session it cut off) and no session", nb, err)
	}

	// reef peer reset, as for a new node at the rogue's address.
	cutOff := func() string {
		return scrapeIn(t, n, `reef_bgp_peer_cut_off{peer="`+rogue.String()+`",type="mesh"}`)
	}
	if v := cutOff(); v != "1" {
		t.Errorf("reef_bgp_peer_cut_off of the rogue is %s, want 1", v)
	}
	reset := func() {
		t.Helper()
		if out, err := n.Reef("peer", "reset", rogue.String()); err != nil || !strings.Contains(out, "may connect again") {
			t.Fatalf("reef peer reset %s: %v: %s", rogue, err, out)
		}
	}
	reset()
	eventually(t, 60*time.Second, func() string {
		if c, s := cutOffs(), peerState(); c != 2 || !strings.HasPrefix(s, "cut off") {
			return fmt.Sprintf("after the reset with the feeder's routes: %d cut-offs, want 2; the rogue's session %s", c, s)
		}
		return ""
	})
	if out, err := g.CLI("neighbor", feeder.String(), "disable"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		if sum, _ := g.CLI("global", "rib", "summary"); !strings.Contains(sum, "Destination: 0,") {
			return "gobgpd's table: " + sum
		}
		return ""
	})
	reset()
	eventually(t, 30*time.Second, func() string {
		if s := peerState(); s != "established" {
			return "after the reset without the feeder's routes, the rogue's session: " + s
		}
		if v := cutOff(); v != "0" {
			return "reef_bgp_peer_cut_off of the rogue is " + v + " with its session up"
		}
		return ""
	})
	if c := cutOffs(); c != 2 {
		t.Errorf("cut off %d times, want 2", c)
	}
}
