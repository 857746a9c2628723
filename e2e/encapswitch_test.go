package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
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
