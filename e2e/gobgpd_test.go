package e2e

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// nodeWithGobgpd starts node a1 with Debian's gobgpd as its external peer
// (AS 65001 at 192.168.77.60; keepalive 1 s, hold 3 s, for sessions that
// go down and up in seconds) and adds that gobgpd, with feeders as its
// iBGP peers; the caller starts it (g.Start).
func nodeWithGobgpd(t *testing.T, l *lab.Lab, feeders []netip.Addr) (*lab.Node, *lab.Gobgpd) {
	t.Helper()
	gaddr := netip.MustParseAddr("192.168.77.60")
	n := startNode(t, l, "a1", lab.NodeOptions{BGP: "  keepaliveTime: 1s\n  holdTime: 3s\n  externalPeers:\n    - address: " + gaddr.String() + "\n      asn: 65001\n"})
	g, err := l.AddGobgpd("gobgpd", gaddr, 65001, []netip.Addr{n.Address}, feeders)
	if err != nil {
		t.Fatal(err)
	}
	return n, g
}
