package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestNodeAddress6Gone: two dual-stack nodes route each other's IPv6
// blocks through each node's IPv6 address, which reef reads at start.
// Taken off node2's uplink while the daemon runs, it is still what node1
// routes node2's IPv6 pods through, and node2 no longer answers for it:
// node2's whole passes fail naming it (reef status, the log,
// reef_reconcile_errors_total) instead of saying "ok". Put back, the next
// pass is ok again and node1's pod reaches node2's over IPv6.
func TestNodeAddress6Gone(t *testing.T) {
	l := newLab(t)
	nodes := startDualNodes(t, l)
	a, b := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b")
	converge(t, nodes...)
	_, b6 := dualPod(t, l, b, dualNodesPool4, dualNodesPool6)
	addr := netip.PrefixFrom(nodeAddr6(nodes[1]), underlay6Nodes.Bits()).String()
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "del", addr, "dev", "eth0")
	want := "the node's address " + nodeAddr6(nodes[1]).String() + " is gone from eth0"
	eventually(t, 10*time.Second, func() string {
		st, err := nodes[1].Status()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(st.GetLastReconcileError(), want) {
			return "node2's last pass does not say " + want + ": " + st.GetLastReconcileError()
		}
		return ""
	})
	if txt, _ := nodes[1].Reef("status"); !strings.Contains(txt, want) {
		t.Errorf("reef status on node2 does not say %q:\n%s", want, txt)
	}
	if !strings.Contains(nodes[1].Log(), want) {
		t.Errorf("node2's log does not say %q", want)
	}
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "add", addr, "dev", "eth0", "nodad")
	eventually(t, 10*time.Second, func() string {
		st, err := nodes[1].Status()
		if err != nil {
			return err.Error()
		}
		if e := st.GetLastReconcileError(); e != "" {
			return "node2's last pass after the address came back: " + e
		}
		return ""
	})
	pings(t, l, a.Netns, "a to b over IPv6", b6)
}

// TestNodeAddress6Duplicate: node2's IPv6 address taken by node1 too
// (added there without DAD) and put back on node2, where duplicate
// address detection fails: the kernel keeps it "dadfailed" and neither
// sends from it nor answers for it. node2's passes fail saying so and
// what to do, instead of "ok" (the check counted any address that was
// there). Taken off node1 and added on node2 again, the next pass is ok.
func TestNodeAddress6Duplicate(t *testing.T) {
	l := newLab(t)
	nodes := startDualNodes(t, l)
	converge(t, nodes...)
	addr := netip.PrefixFrom(nodeAddr6(nodes[1]), underlay6Nodes.Bits()).String()
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "del", addr, "dev", "eth0")
	run(t, l, nodes[0].Netns, "ip", "-6", "addr", "add", addr, "dev", "eth0", "nodad")
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "add", addr, "dev", "eth0")
	lastError := func(want string) func() string {
		return func() string {
			st, err := nodes[1].Status()
			switch {
			case err != nil:
				return err.Error()
			case want == "" && st.GetLastReconcileError() != "":
				return "node2's last pass failed: " + st.GetLastReconcileError()
			case !strings.Contains(st.GetLastReconcileError(), want):
				return "node2's last pass does not say " + want + ": " + st.GetLastReconcileError()
			}
			return ""
		}
	}
	eventually(t, 10*time.Second, lastError("the node's address "+nodeAddr6(nodes[1]).String()+" on eth0 failed duplicate address detection"))
	run(t, l, nodes[0].Netns, "ip", "-6", "addr", "del", addr, "dev", "eth0")
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "del", addr, "dev", "eth0")
	run(t, l, nodes[1].Netns, "ip", "-6", "addr", "add", addr, "dev", "eth0", "nodad")
	eventually(t, 10*time.Second, lastError(""))
}

// TestUplinkCreatedAgain: node2's eth0 deleted and created again under
// its name, with its address (a network manager rebuilding a bond or a
// VLAN), has a new index, and the kernel deleted vxlan.reef with it. The
// daemon finds the link by name: vxlan.reef is back over it, the passes
// are ok and the pods ping across again, with no restart. With the index
// read at start, vxlan.reef failed "no such device" and the address check
// "Link not found" until a restart.
func TestUplinkCreatedAgain(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMesh(2, "pools:\n  - cidr: 10.244.0.0/16\n    vxlanMode: Always\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a, b := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b")
	converge(t, nodes...)
	pings(t, l, a.Netns, "a to b over vxlan.reef", b.IP)
	if err := nodes[1].RecreateUplink(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		st, err := nodes[1].Status()
		switch {
		case err != nil:
			return err.Error()
		case st.GetLastReconcileError() != "":
			return "node2's last pass: " + st.GetLastReconcileError()
		}
		if out, err := l.Run(a.Netns, "ping", "-c", "1", "-W", "1", b.IP.String()); err != nil {
			return "a to b: " + err.Error() + "\n" + out
		}
		return ""
	})
	if out := run(t, l, nodes[1].Netns, "ip", "-d", "link", "show", "vxlan.reef"); !strings.Contains(out, "dev eth0") {
		t.Errorf("node2's vxlan.reef is not over eth0:\n%s", out)
	}
}

// startDualNodes starts two dual-stack nodes, each with its IPv6 address
// on its uplink.
func startDualNodes(t *testing.T, l *lab.Lab) []*lab.Node {
	t.Helper()
	nodes, err := l.AddMesh(2, poolsDualNodes)
	if err != nil {
		t.Fatal(err)
	}
	addNodeAddrs6(t, nodes...)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	return nodes
}
