package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestWipedVoterRestricted: issue 26's point 4 with the real binaries. A
// voter whose state dir is wiped has lost its votes, so it must not vote
// for a pending claim: a block confirmed with its old vote could be
// confirmed again for another node.
//
// Three voters (the lab runs `reef store init` on each before its first
// start) and a pool of four blocks. node1 is down while node3 confirms
// block 2 with its own vote and node2's. node3 goes down; node2 is wiped
// and restarted; node1 returns, knowing nothing of block 2. A new node,
// "joiner", whose search starts at block 2 as node3's did, claims it:
// node1 votes for it, and without the restriction the wiped node2's vote
// would confirm block 2 a second time. Restricted, node2 does not vote,
// the claim waits, and when node3 returns the joiner gives it up and gets
// another block. Then the documented lift: node2 taken out of bgp.voters
// on every node that runs (node3 and the joiner stay down), then added
// back: with node3 down, node1's claim now gets node2's vote.
func TestWipedVoterRestricted(t *testing.T) {
	timerBound(t)
	l := newLab(t)
	nodes := startMesh(t, l, 3, smallPool)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	converge(t, nodes...)
	for _, n := range nodes {
		if r := mustStatus(t, n).GetVoterRestricted(); r != "" {
			t.Fatalf("%s, a founder after reef store init, is restricted: %s", n.Name, r)
		}
	}

	// node3 confirms its block with node2's vote while node1 is down.
	if err := n1.Stop(); err != nil {
		t.Fatal(err)
	}
	p3 := newPod(t, n3, "c")
	b3 := blocksOf(t, n3)
	if len(b3) != 1 {
		t.Fatalf("node3's blocks %v, want one", b3)
	}
	block := netip.MustParsePrefix(b3[0])
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}

	// node2 wiped: a new store, restricted, and says so.
	if err := n2.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n2.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	if r := mustStatus(t, n2).GetVoterRestricted(); !strings.Contains(r, "its store is new") {
		t.Fatalf("node2's status after the wipe: voter_restricted %q", r)
	}
	if out, err := n2.Reef("status"); err != nil || !strings.Contains(out, "VOTES ONLY FOR CONFIRMED OWNERS") {
		t.Errorf("reef status on node2 does not say it is restricted: %v\n%s", err, out)
	}
	if got := scrapeIn(t, n2, "reef_block_voter_restricted"); got != "1" {
		t.Errorf("node2's reef_block_voter_restricted = %q after the wipe, want 1", got)
	}

	if !strings.Contains(n2.Log(), "it votes only for confirmed owners, never for a pending claim") {
		t.Error("node2's log does not warn that it is restricted")
	}
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}

	joiner, err := l.AddNode("joiner", lab.NodeOptions{Peers: []netip.Addr{n1.Address, n2.Address, n3.Address},
		PeerPrefixes: []netip.Prefix{lab.Underlay}, Extra: smallPool})
	if err != nil {
		t.Fatal(err)
	}
	if err := joiner.Start(); err != nil {
		t.Fatal(err)
	}
	pj, err := joiner.NewPodNetns("default", "j")
	if err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() { added <- pj.Add() }()
	// The joiner claims node3's block; node1 votes for it, node2 not.
	eventually(t, 10*time.Second, func() string {
		pc := mustStatus(t, joiner).GetPendingClaims()
		if len(pc) != 1 || pc[0].GetBlock() != block.String() || !slices.Equal(pc[0].GetGrantedBy(), []string{n1.Address.String()}) {
			return fmt.Sprintf("the joiner's pending claims %v, want %s with node1's vote", pc, block)
		}
		return ""
	})
	// node2 has the claim before it for two of its passes, each with a
	// step of the block protocol, where it would vote; the joiner gets a
	// pass more to count a vote. Neither a confirmation nor a second vote
	// is undone, so a look at the end sees either.
	if err := n2.WaitPasses(2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitPass(t, joiner)
	for _, b := range blocksOf(t, joiner) {
		if b == block.String() {
			t.Fatalf("the joiner confirmed %s, which node3 holds confirmed: the wiped voter voted twice", block)
		}
	}
	if pc := mustStatus(t, joiner).GetPendingClaims(); len(pc) == 1 && len(pc[0].GetGrantedBy()) > 1 {
		t.Fatalf("the joiner's claim of %s has the votes of %v", block, pc[0].GetGrantedBy())
	}

	// node3 returns: the joiner gives block 2 up and gets another.
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("the joiner's ADD after node3 returned: %v", err)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("the joiner's ADD did not end")
	}
	if block.Contains(pj.IP) {
		t.Fatalf("the joiner's pod got %s, in node3's block %s", pj.IP, block)
	}
	if got := blocksOf(t, n3); !slices.Equal(got, b3) {
		t.Errorf("node3's blocks %v, want %v", got, b3)
	}
	all := []*lab.Node{n1, n2, n3, joiner}
	converge(t, all...)
	uniqueOwners(t, all...)
	uniqueAddresses(t, []*lab.Pod{p3, pj})

	// The lift, with node3 and the joiner down: node2 out of bgp.voters on
	// node1 and node2, then back in.
	for _, n := range []*lab.Node{n3, joiner} {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	step := func(voters ...netip.Addr) {
		t.Helper()
		var list []string
		for _, v := range voters {
			list = append(list, v.String())
		}
		for _, n := range []*lab.Node{n1, n2} {
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			opts := n.Options()
			opts.BGPExtra = "  voters: [" + strings.Join(list, ", ") + "]\n"
			if err := n.SetOptions(opts); err != nil {
				t.Fatal(err)
			}
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []*lab.Node{n1, n2} {
			eventually(t, 15*time.Second, func() string {
				st := mustStatus(t, n)
				if !slices.Equal(st.GetVoters(), list) || len(st.GetVotersDisagree()) > 0 || len(st.GetPendingClaims()) > 0 {
					return fmt.Sprintf("%s: voters %v (other lists %v, pending %v), want %v alone", n.Name, st.GetVoters(), st.GetVotersDisagree(), st.GetPendingClaims(), list)
				}
				return ""
			})
		}
	}
	step(n1.Address, n3.Address)
	if r := mustStatus(t, n2).GetVoterRestricted(); r != "" {
		t.Errorf("node2 out of the voters shows a restriction: %s", r)
	}
	step(n1.Address, n2.Address, n3.Address)
	if r := mustStatus(t, n2).GetVoterRestricted(); r != "" {
		t.Fatalf("node2, added back to the voters, is still restricted: %s", r)
	}
	if got := scrapeIn(t, n2, "reef_block_voter_restricted"); got != "0" {
		t.Errorf("node2's reef_block_voter_restricted = %q after the lift, want 0", got)
	}
	if !strings.Contains(n2.Log(), "back in bgp.voters after a start without it") {
		t.Error("node2's log does not say the restriction ended")
	}
	// node1 has no block: its claim needs node2's vote, node3 being down.
	p1 := newPod(t, n1, "a")
	if got := blocksOf(t, n1); len(got) != 1 || !netip.MustParsePrefix(got[0]).Contains(p1.IP) {
		t.Fatalf("node1's blocks %v, its pod %s", got, p1.IP)
	}
	uniqueOwners(t, n1, n2)
	uniqueAddresses(t, []*lab.Pod{p3, pj, p1})
}
