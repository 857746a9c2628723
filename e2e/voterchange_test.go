package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// eightBlockPool is a pool of eight /29 blocks.
const eightBlockPool = "pools:\n  - cidr: 10.249.0.0/26\n    blockSize: 29\n    vxlanMode: Never\n"

// TestVoterListGrowsAndShrinks: issue 26's point 5 with the real binaries,
// the README's procedure step by step. Five nodes, three of them voters,
// each with a block; the list grows to four, then five, then loses its
// first voter, one voter per step: every node restarted with the new
// bgp.voters, then the wait until every node says the list settled with
// one view. Claims go on under every list (a node fills a second block
// after each step), no address is on two pods and no block has two
// owners. A change of two voters at once is refused at start, naming the
// first step.
func TestVoterListGrowsAndShrinks(t *testing.T) {
	l := newLab(t)
	l.Voters = []netip.Addr{lab.NodeAddress(0), lab.NodeAddress(1), lab.NodeAddress(2)}
	nodes := startMesh(t, l, 5, eightBlockPool)
	var pods []*lab.Pod
	for _, n := range nodes {
		pods = append(pods, newPod(t, n, "first"))
	}
	converge(t, nodes...)
	settledViews(t, nodes, 5)

	confirmed := 5
	step := func(voters []netip.Addr, filler *lab.Node) {
		t.Helper()
		var list []string
		for _, v := range voters {
			list = append(list, v.String())
		}
		for _, n := range nodes {
			setVoters(t, n, list)
			if err := n.Start(); err != nil {
				t.Fatalf("%s with voters %v: %v", n.Name, list, err)
			}
		}
		for _, n := range nodes {
			if got := mustStatus(t, n).GetVoters(); !slices.Equal(got, list) {
				t.Fatalf("%s runs voters %v, want %v", n.Name, got, list)
			}
		}
		settledViews(t, nodes, confirmed)
		// A claim under the new list: the filler's first block (eight
		// addresses) is full after seven more pods, and its eighth needs
		// a second block.
		more, err := fill(t, filler, fmt.Sprintf("v%d", len(voters)), 8)
		if err != nil {
			t.Fatalf("%s's ADDs under voters %v: %v (after %d)", filler.Name, list, err, len(more))
		}
		pods = append(pods, more...)
		confirmed++
		if got := blocksOf(t, filler); len(got) != 2 {
			t.Fatalf("%s's blocks %v after filling, want 2", filler.Name, got)
		}
		settledViews(t, nodes, confirmed)
	}
	a := func(i int) netip.Addr { return lab.NodeAddress(i) }
	step([]netip.Addr{a(0), a(1), a(2), a(3)}, nodes[4])
	step([]netip.Addr{a(0), a(1), a(2), a(3), a(4)}, nodes[3])
	step([]netip.Addr{a(1), a(2), a(3), a(4)}, nodes[0])

	// Two voters out at once: node2 holds votes, and its daemon refuses.
	n2 := nodes[1]
	setVoters(t, n2, []string{a(3).String(), a(4).String()})
	err := n2.Start()
	if err == nil || !strings.Contains(n2.Log(), "2 voters at once") || !strings.Contains(n2.Log(), "bgp.voters") {
		t.Fatalf("node2 started with two voters removed at once: %v", err)
	}
	n2.Stop()
	setVoters(t, n2, []string{a(1).String(), a(2).String(), a(3).String(), a(4).String()})
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}

	uniqueOwners(t, nodes...)
	uniqueAddresses(t, pods)
	if _, err := pods[0].Ping(pods[len(pods)-1].IP); err != nil {
		t.Errorf("%s's pod %s -> %s's pod %s after the changes: %v", pods[0].Node.Name, pods[0].IP,
			pods[len(pods)-1].Node.Name, pods[len(pods)-1].IP, err)
	}
}

// setVoters stops n and writes voters as its bgp.voters.
func setVoters(t *testing.T, n *lab.Node, voters []string) {
	t.Helper()
	if n.Running() {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	opts := n.Options()
	opts.BGPExtra = "  voters: [" + strings.Join(voters, ", ") + "]\n"
	if err := n.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
}
