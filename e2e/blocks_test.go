package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
)

// The sequences of the block protocol v2 (docs/ipam.md), each through the
// real daemons: the ones that broke the old protocol first.

// smallPool: 4 blocks of 8 addresses, no VXLAN (no tunnel address to count).
const smallPool = "pools:\n  - cidr: 10.249.0.0/27\n    blockSize: 29\n    vxlanMode: Never\n"

// fill ADDs pods on n until an ADD fails; it returns the pods and the error.
func fill(t *testing.T, n *lab.Node, prefix string, max int) ([]*lab.Pod, error) {
	t.Helper()
	var pods []*lab.Pod
	for i := 0; i < max; i++ {
		p, err := n.NewPodNetns("default", fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(); err != nil {
			return pods, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// uniqueAddresses fails the test if two pods hold one address (of either
// family: a dual-stack pod's both are checked).
func uniqueAddresses(t *testing.T, pods []*lab.Pod) {
	t.Helper()
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		for _, ip := range p.IPs {
			who := p.Node.Name + "/" + p.Name
			if o, dup := seen[ip]; dup {
				t.Errorf("address %s on two pods: %s and %s", ip, o, who)
			}
			seen[ip] = who
		}
	}
}

// uniqueOwners fails the test if two running nodes hand out addresses from
// one block (confirmed), and returns block -> owner name.
func uniqueOwners(t *testing.T, nodes ...*lab.Node) map[string]string {
	t.Helper()
	owner := map[string]string{}
	for _, n := range nodes {
		if !n.Running() {
			continue
		}
		for _, b := range blocksOf(t, n) {
			if o, dup := owner[b]; dup {
				t.Errorf("block %s confirmed by both %s and %s", b, o, n.Name)
			}
			owner[b] = n.Name
		}
	}
	return owner
}

// TestBlocksPartitionDuringHoldTime is the sequence that duplicated
// addresses with the old protocol: three nodes on a pool of four blocks,
// one block each; node3's frames are dropped at the switch (its sessions
// stay established for the 30 s hold time); then node1 and node3 each need
// one more block. node1 gets the last free block, node3 none, and no
// address is ever on two pods. When the cut heals, node3's stale pending
// claim of that block is given up, and node1 keeps it.
func TestBlocksPartitionDuringHoldTime(t *testing.T) {
	timerBound(t)
	l := newLab(t)
	nodes, err := l.AddMeshWith(3, lab.NodeOptions{Extra: smallPool, HoldTime: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	var all []*lab.Pod
	for _, n := range nodes {
		all = append(all, newPod(t, n, "first"))
	}
	converge(t, nodes...)
	n1, n3 := nodes[0], nodes[2]
	n3blocks := blocksOf(t, n3)

	if err := l.DropNode(n3, true); err != nil {
		t.Fatal(err)
	}
	// Both fill their block and go on: node1 (with a majority) claims the
	// last free block; node3 claims too, but no vote reaches it.
	p1, err1 := fill(t, n1, "n1", 15)
	p3, err3 := fill(t, n3, "n3", 15)
	all = append(append(all, p1...), p3...)
	if err1 != nil {
		t.Fatalf("node1 could not fill the last free block: %v", err1)
	}
	if len(p3) != 7 || cniCode(err3) != uint(types.ErrTryAgainLater) {
		t.Fatalf("cut-off node3 got %d more addresses (want the 7 left in its block), then %v (want code 11)", len(p3), err3)
	}
	if msg := err3.Error(); !strings.Contains(msg, "no vote yet from") || !strings.Contains(msg, n1.Address.String()) {
		t.Errorf("node3's error does not name the voters it cannot reach: %s", msg)
	}
	for _, p := range p3 {
		if !netip.MustParsePrefix(n3blocks[0]).Contains(p.IP) {
			t.Errorf("cut-off node3 gave %s, outside its block %s", p.IP, n3blocks[0])
		}
	}
	if got := blocksOf(t, n1); len(got) != 2 {
		t.Errorf("node1 has blocks %v, want 2", got)
	}
	uniqueAddresses(t, all)

	if err := l.DropNode(n3, false); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	owners := uniqueOwners(t, nodes...)
	if got := blocksOf(t, n3); strings.Join(got, " ") != strings.Join(n3blocks, " ") {
		t.Errorf("node3's blocks after the cut: %v, want %v", got, n3blocks)
	}
	eventually(t, 10*time.Second, func() string {
		st, err := n3.Status()
		if err != nil {
			return err.Error()
		}
		if len(st.GetPendingClaims()) > 0 {
			return fmt.Sprintf("node3 still has pending claims %v", st.GetPendingClaims())
		}
		return ""
	})
	if !strings.Contains(n3.Log(), "gave up a pending claim") {
		t.Error("node3 never gave up its stale pending claim")
	}
	for _, n := range nodes {
		if strings.Contains(n.Log(), "block conflict") {
			t.Errorf("%s logged a block conflict", n.Name)
		}
	}
	if len(owners) != 4 {
		t.Errorf("owners after the cut: %v, want all 4 blocks owned", owners)
	}
	if _, err := all[0].Ping(all[2].IP); err != nil {
		t.Errorf("node1's pod -> node3's pod after the cut: %v", err)
	}
}

// TestBlocksWipedStateDir: a node restarted with an empty state dir is a
// new incarnation. Its old pods' veths are removed before it announces
// anything, the other nodes free its old block, and nothing is ever on two
// pods. node2 is a voter: with a new store it is restricted (it votes for
// no pending claim), so node1's claims and its own are confirmed by the
// two other voters.
func TestBlocksWipedStateDir(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 3, smallPool)
	pods := []*lab.Pod{newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")}
	converge(t, nodes...)
	n2 := nodes[1]
	oldBlocks := blocksOf(t, n2)
	oldInc := mustStatus(t, n2).GetIncarnation()

	if err := n2.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n2.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	if inc := mustStatus(t, n2).GetIncarnation(); inc == oldInc {
		t.Fatalf("incarnation %s unchanged after the wipe", inc)
	}
	if mustStatus(t, n2).GetVoterRestricted() == "" {
		t.Error("node2, a voter with a wiped state dir, is not restricted")
	}
	if v := reefVeths(t, n2); len(v) != 0 {
		t.Errorf("the wiped node kept the old pods' veths %v", v)
	}
	for _, n := range []*lab.Node{nodes[0], nodes[2]} {
		eventually(t, 10*time.Second, func() string {
			if o, ok := ownersSeenBy(t, n)[oldBlocks[0]]; ok && o == n2.Address.String() && !strings.Contains(n.Log(), "empty state dir") {
				return fmt.Sprintf("%s still holds %s for the old incarnation of node2", n.Name, oldBlocks[0])
			}
			return ""
		})
	}
	// The pool has room for everyone again, the old block included.
	more, err := fill(t, nodes[0], "n1", 8)
	if err != nil {
		t.Fatalf("node1 after node2's wipe: %v", err)
	}
	pods = append(pods, more...)
	p2 := newPod(t, n2, "b2")
	pods = append(pods, p2)
	converge(t, nodes...)
	uniqueOwners(t, nodes...)
	uniqueAddresses(t, append(pods[:1:1], pods[2:]...)) // node2's old pod is gone with its veth
	if _, err := pods[0].Ping(p2.IP); err != nil {
		t.Errorf("node1's pod -> node2's new pod: %v", err)
	}
}

func mustStatus(t *testing.T, n *lab.Node) *reefv1.StatusReply {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestBlocksForgottenNodeStopsAllocating: an operator forgets node3 while
// it is only cut off; node1 takes node3's block; when node3 returns with
// its old state it hears the forget, hands out no more addresses (code
// 102 naming what to do), and announces nothing the others would route.
func TestBlocksForgottenNodeStopsAllocating(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 3, smallPool)
	pods := []*lab.Pod{newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")}
	converge(t, nodes...)
	n1, n3 := nodes[0], nodes[2]
	n3blocks := blocksOf(t, n3)
	if err := l.DropNode(n3, true); err != nil {
		t.Fatal(err)
	}
	waitCutOff(t, n3, n1, nodes[1])
	if out, err := n1.Reef("node", "forget", n3.Address.String()); err != nil {
		t.Fatalf("reef node forget: %v\n%s", err, out)
	}
	more, err := fill(t, n1, "n1", 30)
	pods = append(pods, more...)
	if cniCode(err) != cniPoolExhausted {
		t.Fatalf("node1 filling the pool: %v, want pool exhausted after taking node3's block", err)
	}
	took := false
	for _, p := range more {
		took = took || netip.MustParsePrefix(n3blocks[0]).Contains(p.IP)
	}
	if !took {
		t.Fatalf("node1 never got an address of forgotten node3's block %s", n3blocks[0])
	}

	if err := l.DropNode(n3, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		if g := mustStatus(t, n3).GetGone(); !strings.Contains(g, "forgotten") {
			return "node3 does not know it was forgotten: " + g
		}
		return ""
	})
	p, err := n3.NewPodNetns("default", "after")
	if err != nil {
		t.Fatal(err)
	}
	err = p.Add()
	if cniCode(err) != 102 || !strings.Contains(err.Error(), "state dir") {
		t.Errorf("ADD on the forgotten node3: %v, want code 102 saying what to do", err)
	}
	// No ADD can succeed there: STATUS says so, for the runtime.
	if err := n3.CNIStatus(); cniCode(err) != types.ErrPluginNotAvailable || !strings.Contains(err.Error(), "forgotten") {
		t.Errorf("STATUS on the forgotten node3: %v, want code 50 saying it was forgotten", err)
	}
	for _, n := range nodes[:2] {
		if o := ownersSeenBy(t, n)[n3blocks[0]]; o != n1.Address.String() {
			t.Errorf("%s thinks node3's old block %s is %q's", n.Name, n3blocks[0], o)
		}
	}
	if strings.Contains(mustStatus(t, n1).GetClaimBlocked(), n3.Address.String()) {
		t.Error("node1's claims are blocked by the forgotten node3")
	}
	uniqueAddresses(t, append(pods[:2:2], more...))
}

const cniPoolExhausted = 100

// TestBlocksForgetHeardWhileDown: node4 is down while node3 is forgotten;
// when it comes back it hears the forget from the others and frees node3's
// block; a node that joins afterwards never takes node3 for an owner.
func TestBlocksForgetHeardWhileDown(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 4, smallPool)
	for _, n := range nodes {
		newPod(t, n, "p")
	}
	converge(t, nodes...)
	n3, n4 := nodes[2], nodes[3]
	n3blocks := blocksOf(t, n3)
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n4.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := nodes[0].Reef("node", "forget", "node3"); err != nil || !strings.Contains(out, n3blocks[0]) {
		t.Fatalf("reef node forget node3: %v\n%s", err, out)
	}
	// node1, the one that ran the forget, goes down too: node4 must hear it
	// from node2.
	if err := nodes[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		if o, ok := ownersSeenBy(t, n4)[n3blocks[0]]; ok {
			return fmt.Sprintf("node4 still holds %s for %s", n3blocks[0], o)
		}
		return ""
	})
	if !strings.Contains(n4.Log(), "learned that a node was forgotten") {
		t.Error("node4's log does not say it learned the forget")
	}
	n5, err := l.AddNode("node5", lab.NodeOptions{Peers: []netip.Addr{nodes[1].Address, n4.Address},
		PeerPrefixes: []netip.Prefix{lab.Underlay}, Extra: smallPool,
		BGPExtra: fmt.Sprintf("  voters: [%s, %s, %s, %s]\n", nodes[0].Address, nodes[1].Address, n3.Address, n4.Address)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n5.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() string {
		st, err := n5.Status()
		if err != nil {
			return err.Error()
		}
		if st.GetQuorumUp() < 2 {
			return fmt.Sprintf("node5 reaches %d voters", st.GetQuorumUp())
		}
		return ""
	})
	if o, ok := ownersSeenBy(t, n5)[n3blocks[0]]; ok {
		t.Errorf("node5, which joined after the forget, holds %s for %s", n3blocks[0], o)
	}
}

// TestBlocksVoterListsMustAgree: node3 is restarted with another voter
// list (one voter fewer, which its store accepts as a step). Every node,
// those that agree among themselves included, stops claiming and says so:
// status names both lists and the nodes behind each, the log says it, and
// reef_block_voter_lists reads 2. An ADD on node2 that needs a block waits;
// once node3 has the cluster's list again, it gets its block.
func TestBlocksVoterListsMustAgree(t *testing.T) {
	timerBound(t)
	l := newLab(t)
	nodes := startMesh(t, l, 3, smallPool)
	p1 := newPod(t, nodes[0], "a")
	converge(t, nodes...)
	n2, n3 := nodes[1], nodes[2]
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	good := n3.Options()
	odd := good
	odd.BGPExtra = fmt.Sprintf("  voters: [%s, %s]\n", nodes[0].Address, n3.Address)
	if err := n3.SetOptions(odd); err != nil {
		t.Fatal(err)
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf("[%s %s %s]", nodes[0].Address, n2.Address, n3.Address)
	other := fmt.Sprintf("[%s %s] from [%s]", nodes[0].Address, n3.Address, n3.Address)
	for _, n := range nodes {
		eventually(t, 15*time.Second, func() string {
			st := mustStatus(t, n)
			msg := st.GetClaimBlocked()
			if !strings.Contains(msg, "bgp.voters must be the same on every node") || !strings.Contains(msg, "the cluster shows 2 voter lists") {
				return fmt.Sprintf("%s does not say the voter lists differ: %q (disagree %v)", n.Name, msg, st.GetVotersDisagree())
			}
			if n != n3 && (!strings.Contains(msg, "this node's "+cluster) || len(st.GetVotersDisagree()) != 1 || st.GetVotersDisagree()[0] != other) {
				return fmt.Sprintf("%s: %q, other lists %q; want its own list %s and %s", n.Name, msg, st.GetVotersDisagree(), cluster, other)
			}
			return ""
		})
	}
	if got := scrapeIn(t, nodes[0], "reef_block_voter_lists"); got != "2" {
		t.Errorf("node1's reef_block_voter_lists = %q, want 2", got)
	}
	for _, n := range nodes {
		if got := scrapeIn(t, n, "reef_block_voter_list_settled"); got != "0" {
			t.Errorf("%s's reef_block_voter_list_settled = %q while the lists disagree, want 0", n.Name, got)
		}
	}
	if !strings.Contains(nodes[0].Log(), "voter lists disagree") {
		t.Error("node1's log does not say the voter lists disagree")
	}

	// node2 has no block: its first pod needs a claim, which it may not
	// make. The ADD fails after its wait with "try again later", naming
	// both lists, and node2 claimed nothing.
	_, err := fill(t, n2, "waits", 1)
	if cniCode(err) != uint(types.ErrTryAgainLater) || !strings.Contains(err.Error(), other) {
		t.Fatalf("node2's ADD while the voter lists disagree: %v; want code 11 naming %s", err, other)
	}
	if got := scrapeIn(t, n2, "reef_pool_claims_waiting"); got != "0" {
		t.Errorf("node2 made a claim while the lists disagree: reef_pool_claims_waiting %s", got)
	}
	if got := blocksOf(t, n2); len(got) != 0 {
		t.Fatalf("node2 got blocks %v while the voter lists disagree", got)
	}

	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n3.SetOptions(good); err != nil {
		t.Fatal(err)
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	p2 := newPod(t, n2, "b")
	if got := blocksOf(t, n2); len(got) != 1 || !netip.MustParsePrefix(got[0]).Contains(p2.IP) {
		t.Errorf("node2's blocks %v, its pod %s", got, p2.IP)
	}
	eventually(t, 10*time.Second, func() string {
		if got := scrapeIn(t, nodes[0], "reef_block_voter_lists"); got != "1" {
			return "node1's reef_block_voter_lists = " + got
		}
		return ""
	})
	if !strings.Contains(nodes[0].Log(), "voter lists agree again") {
		t.Error("node1's log does not say the voter lists agree again")
	}
	settledViews(t, nodes, 2)
	uniqueAddresses(t, []*lab.Pod{p1, p2})
}

// scrapeIn reads one unlabelled series of a node's /metrics, from inside
// the node (the lab's daemons listen on 127.0.0.1:9099).
func scrapeIn(t *testing.T, n *lab.Node, name string) string {
	t.Helper()
	resp, err := lab.HTTPClientIn(n.Netns).Get("http://127.0.0.1:9099/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
		if v, ok := strings.CutPrefix(line, name+"{"); ok {
			return v[strings.Index(v, "} ")+2:]
		}
	}
	return "missing"
}
