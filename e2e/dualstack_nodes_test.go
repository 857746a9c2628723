package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// poolsDualNodes are the pools of a dual-stack cluster beside BGP peers:
// an IPv4 pool with the default modes and an IPv6 pool routed directly.
const poolsDualNodes = "pools:\n  - cidr: 10.244.0.0/16\n  - cidr: fd00:10:246::/56\n    vxlanMode: Never\n" + "metrics: 0.0.0.0:9099\n"

var (
	dualNodesPool4 = netip.MustParsePrefix("10.244.0.0/16")
	dualNodesPool6 = netip.MustParsePrefix("fd00:10:246::/56")
)

// checkRoutesDual checks, on every node, that every other node's
// confirmed blocks of both families are routed directly through the
// owner: IPv4 ones via its IPv4 address, IPv6 ones via its IPv6 address,
// dev eth0 onlink proto 238; and that each node has a block of each.
func checkRoutesDual(t *testing.T, nodes []*lab.Node) {
	t.Helper()
	for _, owner := range nodes {
		var fams [2]int
		for _, b := range blocksOf(t, owner) {
			p := netip.MustParsePrefix(b)
			via, family := owner.Address, "-4"
			if p.Addr().Is6() {
				via, family = nodeAddr6(owner), "-6"
				fams[1]++
			} else {
				fams[0]++
			}
			for _, n := range nodes {
				if n == owner {
					continue
				}
				out := run(t, n.Lab, n.Netns, "ip", family, "route", "show", "exact", b, "proto", "238")
				want := fmt.Sprintf("%s via %s dev eth0 ", b, via)
				if !strings.HasPrefix(out, want) || !strings.Contains(out, " onlink") {
					t.Errorf("%s's route to %s's block %s with proto 238 is %q, want %q...onlink", n.Name, owner.Name, b, strings.TrimSpace(out), want)
				}
			}
		}
		if fams[0] == 0 || fams[1] == 0 {
			t.Errorf("%s has %d IPv4 and %d IPv6 confirmed blocks, want one of each at least", owner.Name, fams[0], fams[1])
		}
	}
}

// TestDualStackAcrossNodes: three nodes in a full mesh over an IPv4
// underlay, each with an IPv6 address on its uplink, with an IPv4 pool
// (default modes) and an IPv6 pool (vxlanMode Never) (issue 29). Each pod
// gets one address of each family; every node confirms a block of each
// family and routes the others' directly, IPv4 ones via the owner's IPv4
// address, IPv6 ones via its IPv6 address. Pods ping each other across
// nodes over both families on the first try, and nodes reach pods on
// other nodes; reef ipam check is clean everywhere; a pod's DEL frees both
// its addresses; a restart of node 2 (SIGTERM, start) loses no ping of
// either family; no daemon logs a warning.
func TestDualStackAcrossNodes(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMesh(3, poolsDualNodes)
	if err != nil {
		t.Fatal(err)
	}
	addNodeAddrs6(t, nodes...)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a, b, c := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")
	for _, p := range []*lab.Pod{a, b, c} {
		dualPod(t, l, p, dualNodesPool4, dualNodesPool6)
	}
	converge(t, nodes...)
	checkRoutesDual(t, nodes)
	t.Logf("node2's routes of proto 238:\n%s", podRoutesOf(t, l, nodes[1]))

	// First try, both families: pod to pod across nodes, a node to a pod
	// on another node and on its own, a pod to another node.
	pings(t, l, a.Netns, "a to b", b.IPs...)
	pings(t, l, b.Netns, "b to c", c.IPs...)
	pings(t, l, c.Netns, "c to a", a.IPs...)
	pings(t, l, nodes[0].Netns, "node1 to b", b.IPs...)
	pings(t, l, nodes[1].Netns, "node2 to b", b.IPs...)
	pings(t, l, b.Netns, "b to node3", nodes[2].Address, nodeAddr6(nodes[2]))

	// What the nodes say: blocks of both families, confirmed on every
	// node with the owner's two addresses, and no finding of reef ipam
	// check.
	for _, n := range nodes {
		owners := ownersSeenBy(t, n)
		for _, o := range nodes {
			for _, blk := range blocksOf(t, o) {
				if owners[blk] != o.Address.String() {
					t.Errorf("%s sees %s's block %s owned by %q", n.Name, o.Name, blk, owners[blk])
				}
			}
		}
		if out, err := n.Reef("ipam", "check"); err != nil {
			t.Errorf("%s: reef ipam check: %v\n%s", n.Name, err, out)
		}
	}
	if ipam, err := nodes[0].Reef("ipam", "show", "--show-blocks"); err != nil || !strings.Contains(ipam, "node2 ("+nodes[1].Address.String()+", "+nodeAddr6(nodes[1]).String()+")") {
		t.Errorf("node1's reef ipam show lacks node2's two addresses: %v\n%s", err, ipam)
	} else {
		t.Logf("node1: reef ipam show --show-blocks\n%s", ipam)
	}
	// The metrics have a row per pool of each family: node1 has pod a's
	// two addresses in use (and its VXLAN tunnel address of the IPv4
	// pool), and the three nodes' blocks of each family.
	_, body := scrape(t, nodes[1].Netns, nodes[0], "/metrics")
	for _, want := range []string{
		`reef_pool_addresses_in_use{pool="` + dualNodesPool4.String() + `"} 2`,
		`reef_pool_addresses_in_use{pool="` + dualNodesPool6.String() + `"} 1`,
		`reef_pool_addresses_capacity{pool="` + dualNodesPool6.String() + `"} 64`,
		`reef_pool_blocks_claimed{pool="` + dualNodesPool6.String() + `"} 3`,
		`reef_pool_claims_waiting{pool="` + dualNodesPool6.String() + `"} 0`,
		`reef_pool_blocks{pool="` + dualNodesPool6.String() + `"} 4.294967296e+09`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("node1's /metrics lacks %q:\n%s", want, grepLines(body, "reef_pool_"))
		}
	}
	noWarnings(t, nodes)

	// b's DEL frees both its addresses on node 2; neither answers.
	gone := b.IPs
	if err := b.Del(); err != nil {
		t.Fatal(err)
	}
	held := allocations(t, nodes[1])
	for _, ip := range gone {
		if _, ok := held[ip.String()]; ok {
			t.Errorf("node2 still holds %s after its pod's DEL: %v", ip, held)
		}
		args := []string{"ping", "-c", "1", "-W", "1", ip.String()}
		if out, err := l.Run(a.Netns, args...); err == nil {
			t.Errorf("%s after its DEL answered:\n%s", strings.Join(args, " "), out)
		}
	}

	// Node 2 restarts while pods on nodes 1 and 3 ping its new pod over
	// both families, and it pings them.
	b2 := newPod(t, nodes[1], "b2")
	dualPod(t, l, b2, dualNodesPool4, dualNodesPool6)
	before := blocksOf(t, nodes[1])
	waits := map[string]func() (int, int){}
	for fam := range 2 {
		name := []string{"IPv4", "IPv6"}[fam]
		waits[name+" node1 to node2"] = pingFor(t, a, b2.IPs[fam].String(), 60)
		waits[name+" node3 to node2"] = pingFor(t, c, b2.IPs[fam].String(), 60)
		waits[name+" node2 to node1"] = pingFor(t, b2, a.IPs[fam].String(), 60)
	}
	time.Sleep(time.Second) // traffic before the restart, as part of the scenario
	if err := nodes[1].Restart(); err != nil {
		t.Fatal(err)
	}
	for name, w := range waits {
		if recv, sent := w(); recv != sent {
			t.Errorf("%s: %d of %d pings lost across node2's restart", name, sent-recv, sent)
		} else {
			t.Logf("%s: %d of %d pings answered across node2's restart", name, recv, sent)
		}
	}
	if after := blocksOf(t, nodes[1]); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("node2's blocks changed across its restart: %v -> %v", before, after)
	}
	converge(t, nodes...)
	checkRoutesDual(t, nodes)
	// The restarted node2 found both families' routes, veths, sysctls and
	// tables as it had left them: it repaired nothing.
	if err := nodes[1].WaitPass(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := repairs(t, nodes[1]); len(got) > 0 {
		t.Errorf("node2 after its restart repaired what it had left as it should be: %v", got)
	}
	for _, n := range nodes {
		if out, err := n.Reef("ipam", "check"); err != nil {
			t.Errorf("%s after node2's restart: reef ipam check: %v\n%s", n.Name, err, out)
		}
	}
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed)
}
