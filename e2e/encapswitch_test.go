package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes/tunnel"
)

// TestEncapModeSwitchRolling: two nodes in one subnet with dual-stack
// pods switch their pools from vxlanMode Always to Never and back the way
// README ("Drift and mode changes") says, through CrossSubnet, restarting
// one node at a time. Pods ping each other at 10 per second over both
// families across every restart, and on the first try while the two
// nodes run different modes: nothing is lost. Going straight from Always
// to Never is what the procedure avoids: between a node on Always and one
// on Never the pods do not reach each other (the Never node has no
// vxlan.reef to take the other's packets). In the slow set (about 40 s).
func TestEncapModeSwitchRolling(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	nodes, err := l.AddMesh(2, vxPools(true, "Always"))
	if err != nil {
		t.Fatal(err)
	}
	addNodeAddrs6(t, nodes...)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a, b := newVXPod(t, nodes[0], "a", true), newVXPod(t, nodes[1], "b", true)
	converge(t, nodes...)
	type dir struct {
		from vxPod
		to   netip.Addr
	}
	dirs := []dir{{a, b.v4}, {a, b.v6}, {b, a.v4}, {b, a.v6}}
	for _, mode := range []string{"CrossSubnet", "Never", "CrossSubnet", "Always"} {
		for _, n := range nodes {
			var waits []func() (int, int)
			for _, d := range dirs {
				waits = append(waits, pingFor(t, d.from.Pod, d.to.String(), 40))
			}
			time.Sleep(500 * time.Millisecond) // traffic before the restart, as part of the scenario
			opts := n.Options()
			opts.Extra = vxPools(true, mode)
			if err := n.SetOptions(opts); err != nil {
				t.Fatal(err)
			}
			if err := n.Restart(); err != nil {
				t.Fatalf("restart %s into %s: %v\n%s", n.Name, mode, err, n.LogTail(30))
			}
			for i, w := range waits {
				if recv, sent := w(); recv != sent {
					t.Errorf("%s to %s: %d of %d pings lost across %s's restart into vxlanMode %s", dirs[i].from.Name, dirs[i].to, sent-recv, sent, n.Name, mode)
				}
			}
			converge(t, nodes...)
			for _, d := range dirs {
				pings(t, l, d.from.Netns, d.from.Name+" to "+d.to.String()+" with "+n.Name+" on "+mode, d.to)
			}
		}
	}
	noWarnings(t, nodes)
}

// TestUplinkMTUChanged: the uplink's MTU is read at start (README,
// "MTU"). Two IPv6-only nodes with VXLAN over their IPv6 underlay have
// pods of MTU 1430; the uplinks go to 1400 while the daemons run:
// vxlan.reef, the pods and a new pod keep 1430, and a too-large ICMPv6
// echo is not lost in silence: the tunnel answers "packet too big" with
// the new path MTU and the next one fails at the sender. After a restart
// of each node, vxlan.reef, the existing pods and their records have
// 1330, and the largest echo that fits 1330 crosses. In the slow set
// (about 9 s).
func TestUplinkMTUChanged(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	nodes, err := l.AddMeshWith(2, lab.NodeOptions{IPv6Only: true, Extra: vxPools(false, "Always")})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	p1, p2 := newVXPod(t, nodes[0], "p1", false), newVXPod(t, nodes[1], "p2", false)
	converge(t, nodes...)
	mtuOf := func(netns, dev string) string {
		f := strings.Fields(run(t, l, netns, "ip", "-o", "link", "show", "dev", dev))
		for i := range f[:len(f)-1] {
			if f[i] == "mtu" {
				return f[i+1]
			}
		}
		return "none"
	}
	for _, n := range nodes {
		run(t, l, n.Netns, "ip", "link", "set", "eth0", "mtu", "1400")
	}
	for _, n := range nodes {
		if err := n.WaitPasses(2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	p3 := newVXPod(t, nodes[0], "p3", false)
	for what, got := range map[string]string{
		"node1's " + tunnel.VXLANDevice: mtuOf(nodes[0].Netns, tunnel.VXLANDevice),
		"pod p1's eth0":                 mtuOf(p1.Netns, "eth0"),
		"new pod p3's eth0":             mtuOf(p3.Netns, "eth0"),
	} {
		if strings.TrimSpace(got) != "1430" {
			t.Errorf("%s has MTU %s while the daemon runs, want the 1430 it read at start", what, strings.TrimSpace(got))
		}
	}
	// 1382 bytes fit the pods' 1430, not the tunnel's new path.
	out, err := p1.Run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1382", p2.v6.String())
	if err == nil || !strings.Contains(out, "mtu=1330") && !strings.Contains(out, "mtu: 1330") {
		t.Errorf("a 1382-byte echo over the smaller uplink: %v, want packet too big or message too long with mtu 1330:\n%s", err, out)
	}
	for _, n := range nodes {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, nodes...)
	for _, n := range nodes {
		if err := n.WaitPasses(2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for what, got := range map[string]string{
		"node1's " + tunnel.VXLANDevice: mtuOf(nodes[0].Netns, tunnel.VXLANDevice),
		"pod p1's eth0":                 mtuOf(p1.Netns, "eth0"),
		"pod p3's eth0":                 mtuOf(p3.Netns, "eth0"),
	} {
		if strings.TrimSpace(got) != "1330" {
			t.Errorf("%s has MTU %s after the restart, want 1330 (1400 less 70)", what, strings.TrimSpace(got))
		}
	}
	for _, p := range []vxPod{p1, p3} {
		if err := p.Check(); err != nil {
			t.Errorf("CHECK of pod %s after the restart: %v", p.Name, err)
		}
	}
	mtu6(t, p1, p2.v6, 1330)
}
