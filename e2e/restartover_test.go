package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestRestartOverNewSessionNotRestarting: a restarted node (SIGTERM,
// its pod's routes kept) restarts gracefully toward a peer it takes in
// through bgp.peerPrefixes (as a route reflector takes its clients): its
// OPEN has the Restart State bit (RFC 4724 3), and its updates wait for
// its own paths. Once the restart's updates have gone out, a session
// that starts later is no restart's: the bit is clear and the updates
// go at once. The peer is Debian's gobgpd (IPv4 unicast only: the
// deferral timer's release sends the End-of-RIBs of the session's
// families, not of all those configured), and a configured mesh peer is
// down (a node powered off), so the restart ends by the deferral timer,
// not on every End-of-RIB waited for. Before, GoBGP gave a dynamic peer
// its peer group's configuration but not its restarting state: the
// restarted node's OPEN had the bit clear and its table and End-of-RIB
// went out at once, whatever it held (a client drops the stale paths an
// End-of-RIB does not bring again); and a peer added after the restart
// (reef peer reset, a passive peer dialled instead) had the bit set and
// its updates held for the deferral timer again, as long as the dead
// peer stayed down.
func TestRestartOverNewSessionNotRestarting(t *testing.T) {
	slowSuite(t)
	timerBound(t)
	l := newLab(t)
	peer, dead := netip.MustParseAddr("192.168.77.40"), netip.MustParseAddr("192.168.77.50")
	self := lab.NodeAddress(0)
	n := startNode(t, l, "a1", lab.NodeOptions{Peers: []netip.Addr{dead}, PeerPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.77.32/28")},
		BGPExtra: "  voters: [" + self.String() + "]\n"})
	conf := fmt.Sprintf("[global.config]\n  as = 64512\n  router-id = %q\n\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = 64512\n"+
		"  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n"+
		"  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = 120\n"+
		"  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n"+
		"    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n", peer, self)
	g, err := l.AddGobgpdConf("peer", peer, 64512, conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, n, "p1")
	block := netip.MustParsePrefix(p.IP.String() + "/26").Masked()
	waitBlackholes(t, n, block)
	opens := 0
	// session waits for a new session of gobgpd's with a1 and for a1's
	// block in gobgpd's table, and checks the R bit of a1's OPEN.
	session := func(what string, wantR bool) {
		t.Helper()
		eventually(t, 60*time.Second, func() string {
			nb, err := g.Neighbor(self)
			if err != nil {
				return err.Error()
			}
			if nb.State != "ESTABLISHED" || nb.OpensReceived <= opens {
				return fmt.Sprintf("%s: gobgpd's session with a1: %+v, want established on a new OPEN (it had %d)", what, nb, opens)
			}
			if rib, _ := g.CLI("global", "rib"); !strings.Contains(rib, block.String()) {
				return fmt.Sprintf("%s: gobgpd's table has no %s:\n%s", what, block, rib)
			}
			if nb.RestartFlag != wantR {
				t.Errorf("%s: a1's OPEN (gobgpd's %d.) has the Restart State bit %v, want %v", what, nb.OpensReceived, nb.RestartFlag, wantR)
			}
			opens = nb.OpensReceived
			return ""
		})
	}
	session("the first start", false)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	// The restart: its updates come once the deferral timer ends the
	// wait for the dead peer's End-of-RIB.
	session("a restart", true)
	// The deferral timer releases gobgpd (the dead peer's End-of-RIB
	// never comes): a1 sends its updates and End-of-RIB of each family
	// the session has. gobgpd took IPv4 unicast only; an End-of-RIB of a
	// VPN family, which a1 has configured, had gobgpd end the session
	// (NOTIFICATION code 0), checked at the end: by then the session
	// after this one has come and gone.
	eventually(t, 60*time.Second, func() string {
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "deferral timer expired") && strings.Contains(line, "Key="+peer.String()) {
				return ""
			}
		}
		return "a1 has not logged the deferral timer's release of gobgpd"
	})
	// A new session, long after the restart's updates went out.
	if out, err := g.CLI("neighbor", self.String(), "reset"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	session("gobgpd's reset after the restart", false)
	for _, line := range strings.Split(n.Log(), "\n") {
		if strings.Contains(line, "received notification") && strings.Contains(line, "Key="+peer.String()) && !strings.Contains(line, "Code=6 ") {
			t.Errorf("gobgpd ended a session with a1 other than by its reset: %s", line)
		}
	}
}
