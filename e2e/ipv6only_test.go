package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// pool6Only is the pool of the IPv6-only nodes: /122 blocks, routed
// directly (TestVXLANIPv6Underlay has them through VXLAN).
const pool6Only = "pools:\n  - cidr: fd00:10:247::/56\n    vxlanMode: Never\n"

// TestIPv6OnlyNodes: three nodes with no IPv4 address (eth0 has only its
// IPv6 address; docs/design.md, "IPv6-only nodes"), each known in the
// block protocol by its bgp.routerID, meshed over IPv6 with bgp.peers,
// peerPrefixes and voters written as IPv6 addresses.
//
// Fail closed with the default config: while node3, a voter, has never
// run, node1 and node2, two of the three voters (a majority), have their
// session up, but neither can name node3 (no record announces its
// address), so an ADD on node1 waits and no claim is made, which `reef
// status` explains. Once
// node3 starts, the same ADD gets its address. Then each node's IPv6
// blocks are routed `via <owner's IPv6 address> dev eth0 onlink` on the
// others, and pods ping each other and the nodes across nodes. node2
// restarted keeps its identity (from its store) and its block.
func TestIPv6OnlyNodes(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMeshWith(3, lab.NodeOptions{IPv6Only: true, Extra: pool6Only})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if out := run(t, l, n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); strings.TrimSpace(out) != "" {
			t.Fatalf("%s's eth0 has IPv4 addresses: %s", n.Name, out)
		}
	}
	if err := lab.StartAll([]*lab.Node{n1, n2}); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	var a *lab.Pod
	go func() {
		var err error
		a, err = n1.NewPod("default", "a")
		waiting <- err
	}()
	unresolved := n3.PeerAddress().String() + " (no record announces it yet"
	for _, n := range []*lab.Node{n1, n2} {
		eventually(t, 20*time.Second, func() string {
			st := mustStatus(t, n)
			u := st.GetVotersUnresolved()
			if len(u) != 1 || !strings.HasPrefix(u[0], unresolved) || !strings.Contains(st.GetClaimBlocked(), "does not know which node "+unresolved) {
				return fmt.Sprintf("%s: voters unresolved %q, claim blocked %q; want %q", n.Name, u, st.GetClaimBlocked(), unresolved)
			}
			other := n2
			if n == n2 {
				other = n1
			}
			for _, p := range st.GetPeers() {
				if p.GetAddress() == other.PeerAddress().String() && p.GetState() == "established" {
					return ""
				}
			}
			return fmt.Sprintf("%s has no established session to %s: %v", n.Name, other.Name, st.GetPeers())
		})
	}
	// Two whole passes (each with a block step) after node1 said so, with
	// the ADD waiting: no claim, pending or confirmed, on either node.
	waitPass(t, n1, n2)
	waitPass(t, n1, n2)
	for _, n := range []*lab.Node{n1, n2} {
		st := mustStatus(t, n)
		if len(st.GetBlocks()) != 0 || len(st.GetPendingClaims()) != 0 {
			t.Fatalf("%s claimed while a voter is unnamed: blocks %v, pending %v", n.Name, st.GetBlocks(), st.GetPendingClaims())
		}
	}
	select {
	case err := <-waiting:
		t.Fatalf("node1's ADD returned before node3 ran: %v", err)
	default:
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("node1's ADD, once node3 runs: %v", err)
	}
	b, c := newPod(t, n2, "b"), newPod(t, n3, "c")
	converge(t, nodes...)
	checkRoutes6(t, nodes, lab.NodeAddress6)

	for _, n := range nodes {
		st := mustStatus(t, n)
		if st.GetNodeAddress() != "" || st.GetIdentity() != n.Address.String() || st.GetNodeAddressV6() != lab.NodeAddress6(n).String() {
			t.Errorf("%s: reef status says address %q, identity %q, IPv6 %q; want none, %s, %s", n.Name, st.GetNodeAddress(), st.GetIdentity(), st.GetNodeAddressV6(), n.Address, lab.NodeAddress6(n))
		}
		if len(st.GetVotersUnresolved()) != 0 {
			t.Errorf("%s still cannot name voters %q", n.Name, st.GetVotersUnresolved())
		}
		if got, want := strings.Join(st.GetVoters(), " "), fmt.Sprintf("%s %s %s", n1.Address, n2.Address, n3.Address); got != want {
			t.Errorf("%s's voters by identity: %s, want %s", n.Name, got, want)
		}
	}
	for _, p := range []*lab.Pod{a, b, c} {
		if !p.IP.Is6() {
			t.Fatalf("pod %s on %s got %s, not IPv6", p.Name, p.Node.Name, p.IP)
		}
	}
	for _, c := range []struct {
		from string
		to   netip.Addr
	}{{a.Netns, b.IP}, {b.Netns, c.IP}, {c.Netns, a.IP}, {n1.Netns, b.IP}, {n3.Netns, a.IP}, {b.Netns, lab.NodeAddress6(n3)}} {
		if out, err := l.Run(c.from, "ping", "-6", "-c", "1", "-W", "2", c.to.String()); err != nil {
			t.Errorf("ping -6 %s from %s: %v\n%s", c.to, c.from, err, out)
		}
	}
	if st, err := n1.Reef("status"); err != nil || !strings.Contains(st, "node1  "+lab.NodeAddress6(n1).String()+" (identity "+n1.Address.String()+") on eth0") {
		t.Errorf("node1's reef status lacks its IPv6 address and identity: %v\n%s", err, st)
	}
	uniqueAddresses(t, []*lab.Pod{a, b, c})

	// node2 restarted (SIGTERM, start): its store keeps its identity, and
	// it keeps its block and its routes.
	before := blocksOf(t, n2)
	if err := n2.Restart(); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	if after := blocksOf(t, n2); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("node2's blocks changed across its restart: %v -> %v", before, after)
	}
	if st := mustStatus(t, n2); st.GetIdentity() != n2.Address.String() || len(st.GetVotersUnresolved()) != 0 {
		t.Errorf("node2 after its restart: identity %q, voters unresolved %q", st.GetIdentity(), st.GetVotersUnresolved())
	}
	if out, err := l.Run(a.Netns, "ping", "-6", "-c", "1", "-W", "2", b.IP.String()); err != nil {
		t.Errorf("ping -6 %s after node2's restart: %v\n%s", b.IP, err, out)
	}
	noWarnings(t, nodes, gobgpIdleRefused)
}
