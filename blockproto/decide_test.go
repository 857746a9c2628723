package blockproto

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	pool  = Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	addrA = netip.MustParseAddr("192.168.10.1")
	addrB = netip.MustParseAddr("192.168.10.2")
	addrC = netip.MustParseAddr("192.168.10.3")
	addrD = netip.MustParseAddr("192.168.10.4")
	nodeA = Node{addrA, 0xa}
	nodeB = Node{addrB, 0xb}
	nodeC = Node{addrC, 0xc}
	nodeD = Node{addrD, 0xd}
	three = []netip.Addr{addrA, addrB, addrC}
	blk0  = netip.MustParsePrefix("10.244.0.0/26")
	blk1  = netip.MustParsePrefix("10.244.0.64/26")
)

var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func record(n Node, voters ...netip.Addr) Record {
	v := Voters(voters)
	return Record{Node: n, Born: 1, VoterHash: VoterHash(v), Voters: v}
}

func input(self Node, voters []netip.Addr, t Table) Input {
	return Input{State: NewState(self, 1), Table: t, Voters: voters, Pools: []Pool{pool}, Name: "x"}
}

func need(in Input) Input {
	in.Need = map[netip.Prefix]bool{pool.CIDR: true}
	return in
}

func TestLoneVoterConfirmsAtOnce(t *testing.T) {
	d := Decide(need(input(nodeA, []netip.Addr{addrA}, Table{})))
	if len(d.Claim) != 1 || len(d.Confirm) != 1 || len(d.Grant) != 1 {
		t.Fatalf("want one claim, its vote and its confirmation in one decision, got %+v", d.Changes)
	}
	if got := d.State.Own[d.Claim[0].Block].State; got != OwnConfirmed {
		t.Fatalf("own block is %s, want confirmed", got)
	}
	// Steady state: the record and the confirmed claim, no vote on the wire.
	if len(d.Announce.Records) != 1 || len(d.Announce.Claims) != 1 || len(d.Announce.Grants) != 0 {
		t.Fatalf("announce %+v", d.Announce)
	}
}

func TestClaimWaitsForMajority(t *testing.T) {
	tbl := Table{Records: []Record{record(nodeB, three...), record(nodeC, three...)}}
	d := Decide(need(input(nodeA, three, tbl)))
	if len(d.Claim) != 1 || len(d.Confirm) != 0 {
		t.Fatalf("want a pending claim only, got %+v", d.Changes)
	}
	b := d.Claim[0].Block
	if diff := cmp.Diff([]PendingClaim{{Block: b, Grants: []netip.Addr{addrA}}}, d.Status.Pending, netipCmp); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	// B's vote arrives: A's own and B's make two of three.
	in := input(nodeA, three, tbl)
	in.State = d.State
	in.Table.Grants = []Grant{{Block: b, Voter: nodeB, To: nodeA, VoterHash: VoterHash(three)}}
	d2 := Decide(in)
	if diff := cmp.Diff([]netip.Prefix{b}, d2.Confirm, netipCmp); diff != "" {
		t.Fatalf("confirm (-want +got):\n%s", diff)
	}
	// A vote under another voter list does not count.
	in.Table.Grants[0].VoterHash++
	if d3 := Decide(in); len(d3.Confirm) != 0 {
		t.Fatalf("confirmed on a vote made under another voter list: %+v", d3.Changes)
	}
}

func TestVoterGrantsOnce(t *testing.T) {
	h := VoterHash(three)
	st := NewState(nodeB, 1)
	st.Grants[blk0] = nodeC
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Records: []Record{record(nodeA, three...), record(nodeC, three...)},
		Claims: []Claim{
			{Block: blk0, Owner: nodeA, State: Pending, VoterHash: h},
			{Block: blk0, Owner: nodeC, State: Pending, VoterHash: h},
		},
	}}
	d := Decide(in)
	if len(d.Grant) != 0 || len(d.Revoke) != 0 {
		t.Fatalf("voter changed its vote without a release: %+v", d.Changes)
	}
	want := []Grant{{Block: blk0, Voter: nodeB, To: nodeC, VoterHash: h}}
	if diff := cmp.Diff(want, d.Announce.Grants, netipCmp); diff != "" {
		t.Fatalf("the vote must stay visible while another claims the block (-want +got):\n%s", diff)
	}
	// C releases: the vote goes to A.
	in.Table.Claims[1].State = Released
	d = Decide(in)
	if diff := cmp.Diff([]netip.Prefix{blk0}, d.Revoke, netipCmp); diff != "" {
		t.Fatalf("revoke (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Grant{{Block: blk0, Voter: nodeB, To: nodeA, VoterHash: h}}, d.Grant, netipCmp); diff != "" {
		t.Fatalf("grant (-want +got):\n%s", diff)
	}
}

func TestVoterNeverGrantsPendingOverConfirmed(t *testing.T) {
	h := VoterHash(three)
	st := NewState(nodeB, 1)
	st.Remote[blk0] = RemoteBlock{Block: blk0, Pool: pool.CIDR, Owner: nodeC}
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Claims: []Claim{{Block: blk0, Owner: nodeA, State: Pending, VoterHash: h}},
	}}
	d := Decide(in)
	// A voter that knows blk0 as C's (and has no vote, say it restarted
	// empty) votes for C, not for A's pending claim.
	if diff := cmp.Diff([]Grant{{Block: blk0, Voter: nodeB, To: nodeC, VoterHash: h}}, d.Grant, netipCmp); diff != "" {
		t.Fatalf("grant (-want +got):\n%s", diff)
	}
}

func TestSplitVoteLowerAddressWins(t *testing.T) {
	h := VoterHash(three)
	st := NewState(nodeC, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnPending}
	st.Grants[blk0] = nodeC
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Records: []Record{record(nodeA, three...), record(nodeB, three...)},
		Claims:  []Claim{{Block: blk0, Owner: nodeA, State: Pending, VoterHash: h}},
		Grants:  []Grant{{Block: blk0, Voter: nodeA, To: nodeA, VoterHash: h}},
	}}
	d := Decide(in)
	if diff := cmp.Diff([]netip.Prefix{blk0}, d.Release, netipCmp); diff != "" {
		t.Fatalf("C must give blk0 up to the lower A (-want +got):\n%s", diff)
	}
	// Its own vote moves to A, and the released claim stays announced
	// while a vote for it is still visible (its own, until revoked here).
	if diff := cmp.Diff([]Grant{{Block: blk0, Voter: nodeC, To: nodeA, VoterHash: h}}, d.Grant, netipCmp); diff != "" {
		t.Fatalf("grant (-want +got):\n%s", diff)
	}
	if !d.State.Released[blk0] {
		t.Fatal("released block not remembered: C could claim it again")
	}
	// C never claims blk0 again, even when it needs a block and blk0 looks free.
	in.State = d.State
	in.Table = Table{Records: in.Table.Records}
	in.Need = map[netip.Prefix]bool{pool.CIDR: true}
	for _, c := range Decide(in).Claim {
		if c.Block == blk0 {
			t.Fatal("claimed a released block again")
		}
	}
}

func TestCutOffNodeCannotClaim(t *testing.T) {
	d := Decide(need(input(nodeC, three, Table{})))
	if len(d.Claim) != 0 {
		t.Fatalf("claimed without a majority: %+v", d.Changes)
	}
	msg := d.Status.Blocked[pool.CIDR]
	if !strings.Contains(msg, "reaches 1 of the 3 voters") || !strings.Contains(msg, addrA.String()) || !strings.Contains(msg, addrB.String()) {
		t.Fatalf("blocked message %q must name the voters it cannot reach", msg)
	}
}

func TestVoterListsMustAgree(t *testing.T) {
	// B and C announce other lists: A has no majority that agrees with it.
	tbl := Table{Records: []Record{record(nodeB, addrA, addrB, addrD), record(nodeC, addrA, addrC)}}
	d := Decide(need(input(nodeA, three, tbl)))
	if len(d.Claim) != 0 {
		t.Fatalf("claimed while voter lists differ: %+v", d.Changes)
	}
	if msg := d.Status.Blocked[pool.CIDR]; !strings.Contains(msg, "bgp.voters must be the same") || !strings.Contains(msg, addrB.String()) {
		t.Fatalf("blocked message %q", msg)
	}
	// Only C differs: A and B are a majority that agrees, yet the cluster
	// shows another list, and A claims nothing until it is gone (a
	// majority of a list says nothing of the voters of another). The
	// status names both lists and the nodes behind each.
	tbl.Records[0] = record(nodeB, three...)
	d = Decide(need(input(nodeA, three, tbl)))
	if len(d.Claim) != 0 {
		t.Fatalf("claimed while C announces another list: %+v", d.Changes)
	}
	want := "the cluster shows 2 voter lists: this node's [192.168.10.1 192.168.10.2 192.168.10.3] from [192.168.10.1 192.168.10.2], " +
		"and [192.168.10.1 192.168.10.3] from [192.168.10.3]"
	if msg := d.Status.Blocked[pool.CIDR]; !strings.HasPrefix(msg, want) {
		t.Fatalf("blocked message %q, want it to start %q", msg, want)
	}
	if err := d.Status.CanClaim(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("CanClaim %v", err)
	}
	// Every node agrees: A claims.
	tbl.Records[1] = record(nodeC, three...)
	if d := Decide(need(input(nodeA, three, tbl))); len(d.Claim) != 1 || len(d.Status.OtherLists) != 0 {
		t.Fatalf("all agree, yet no claim: %+v", d.Status)
	}
	// A claim or a vote made under another list is evidence too, even
	// with no record of it in the table (a record arrives last, or a
	// reflector lost it).
	other := VoterHash([]netip.Addr{addrC, addrD})
	for name, tb := range map[string]Table{
		"claim": {Records: tbl.Records, Claims: []Claim{{Block: blk1, Owner: nodeD, State: Confirmed, VoterHash: other}}},
		"vote":  {Records: tbl.Records, Grants: []Grant{{Block: blk1, Voter: nodeD, To: nodeD, VoterHash: other}}},
	} {
		d := Decide(need(input(nodeA, three, tb)))
		if len(d.Claim) != 0 {
			t.Errorf("%s under another list: claimed anyway: %+v", name, d.Changes)
		}
		wantOther := []OtherList{{Hash: other, Nodes: []netip.Addr{addrD}}}
		if diff := cmp.Diff(wantOther, d.Status.OtherLists, netipCmp); diff != "" {
			t.Errorf("%s under another list: other lists (-want +got):\n%s", name, diff)
		}
		if msg := d.Status.ListsDisagree(); !strings.Contains(msg, fmt.Sprintf("an unknown list (hash %08x) from [192.168.10.4]", other)) {
			t.Errorf("%s under another list: %q", name, msg)
		}
	}
	// A forgotten node's announcements are no evidence.
	st := NewState(nodeA, 1)
	st.Forgotten[nodeD] = true
	in := need(input(nodeA, three, Table{Records: append(slices.Clone(tbl.Records), record(nodeD, addrD))}))
	in.State = st
	if d := Decide(in); len(d.Claim) != 1 {
		t.Fatalf("a forgotten node's list stopped the claim: %+v", d.Status)
	}
}

func TestForgetFreesBlocksAndVotes(t *testing.T) {
	st := NewState(nodeB, 1)
	st.Remote[blk0] = RemoteBlock{Block: blk0, Pool: pool.CIDR, Owner: nodeC}
	st.Grants[blk0] = nodeC
	d := Decide(Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{Forgets: []Forget{{nodeC}}}})
	if diff := cmp.Diff([]Node{nodeC}, d.Forget, netipCmp); diff != "" {
		t.Fatalf("forget (-want +got):\n%s", diff)
	}
	if _, ok := d.State.Remote[blk0]; ok {
		t.Fatal("forgotten node's block still remembered")
	}
	if _, ok := d.State.Grants[blk0]; ok {
		t.Fatal("vote for a forgotten node not revoked")
	}
	if diff := cmp.Diff([]Forget{{nodeC}}, d.Announce.Forgets, netipCmp); diff != "" {
		t.Fatalf("the forget must be announced on (-want +got):\n%s", diff)
	}
}

func TestForgottenNodeStopsAllocating(t *testing.T) {
	st := NewState(nodeC, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnConfirmed, Used: 3}
	d := Decide(need(Input{State: st, Voters: three, Pools: []Pool{pool}, Name: "c", Table: Table{
		Records: []Record{record(nodeA, three...), record(nodeB, three...)},
		Forgets: []Forget{{nodeC}},
	}}))
	if diff := cmp.Diff([]netip.Prefix{blk0}, d.Lose, netipCmp); diff != "" {
		t.Fatalf("lose (-want +got):\n%s", diff)
	}
	if len(d.Claim) != 0 || len(d.Announce.Claims) != 0 || len(d.Announce.Records) != 0 {
		t.Fatalf("a forgotten node must claim and announce nothing but forgets: %+v %+v", d.Changes, d.Announce)
	}
	if !strings.Contains(d.Status.Gone, "forgotten") {
		t.Fatalf("status.Gone = %q", d.Status.Gone)
	}
}

// TestNewIncarnationSupersedesOld: incarnations are ordered by what they
// say of each other, never by their birth time (the node's clock).
func TestNewIncarnationSupersedesOld(t *testing.T) {
	old := Node{addrC, 1}
	fresh := Node{addrC, 2}
	st := NewState(nodeB, 1)
	st.Known[addrC] = Incarnation{Inc: 1, Born: 5}
	st.Remote[blk0] = RemoteBlock{Block: blk0, Pool: pool.CIDR, Owner: old}
	st.Grants[blk0] = old
	// The new incarnation's clock is behind: born before the old one. It
	// has not named the old one yet: the two are not ordered, the old one
	// stays current, and B announces both so that the new one learns.
	rec := Record{Node: fresh, Born: 3, VoterHash: VoterHash(three), Voters: three}
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{rec}}}
	d := Decide(in)
	if len(d.Supersede) != 0 || len(d.Unremember) != 0 || len(d.Revoke) != 0 {
		t.Fatalf("unordered incarnations: %+v", d.Changes)
	}
	if diff := cmp.Diff([]Seen{{Node: old}, {Node: fresh}}, d.Announce.Seen, netipCmp); diff != "" {
		t.Fatalf("seen (-want +got):\n%s", diff)
	}
	// Once it names the old one, the old one is superseded, whatever the
	// birth times: its block and the vote for it are free.
	in.Table.Records[0].Predecessors = []uint32{1}
	d = Decide(in)
	if diff := cmp.Diff([]Node{old}, d.Supersede, netipCmp); diff != "" {
		t.Fatalf("supersede (-want +got):\n%s", diff)
	}
	if k := d.State.Known[addrC]; k.Inc != 2 {
		t.Fatalf("known %+v, want the new incarnation", k)
	}
	if _, ok := d.State.Remote[blk0]; ok {
		t.Fatal("old incarnation's block still remembered")
	}
	if _, ok := d.State.Grants[blk0]; ok {
		t.Fatal("vote for the old incarnation not revoked")
	}
	if len(d.Announce.Seen) != 0 {
		t.Fatalf("still announces %+v once ordered", d.Announce.Seen)
	}
	// A stale copy of the old record, born later (the old clock was
	// ahead), changes nothing.
	in.State = d.State
	in.Table.Records = append(in.Table.Records, Record{Node: old, Born: 99, VoterHash: VoterHash(three), Voters: three})
	if d := Decide(in); len(d.Supersede) != 0 || d.State.Known[addrC].Inc != 2 {
		t.Fatalf("a stale record moved the order: %+v, known %+v", d.Changes, d.State.Known[addrC])
	}
}

// TestOwnEarlierIncarnations: a node that sees another incarnation of its
// own address, in a record or a Seen, whatever its birth time, names it
// as a predecessor and goes on; only a record that names this incarnation
// as a predecessor supersedes it.
func TestOwnEarlierIncarnations(t *testing.T) {
	self := Node{addrA, 7}
	st := NewState(self, 1) // born at 1: a clock far behind
	stale := Record{Node: Node{addrA, 3}, Born: 1000, VoterHash: VoterHash(three), Voters: three}
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Records: []Record{stale},
		Seen:    []Seen{{Node: Node{addrA, 4}}},
	}}
	d := Decide(in)
	if d.Status.Gone != "" {
		t.Fatalf("superseded itself: %s", d.Status.Gone)
	}
	if diff := cmp.Diff([]uint32{3, 4}, d.Announce.Records[0].Predecessors); diff != "" {
		t.Fatalf("predecessors (-want +got):\n%s", diff)
	}
	in.State = d.State
	in.Table.Records = append(in.Table.Records, Record{Node: Node{addrA, 9}, Born: 0, VoterHash: VoterHash(three), Voters: three, Predecessors: []uint32{3, 7}})
	if d := Decide(in); d.Status.Gone == "" {
		t.Fatal("a record naming this incarnation as a predecessor did not supersede it")
	}
}

func TestConfirmedTwiceStopsAllocating(t *testing.T) {
	st := NewState(nodeA, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnConfirmed, Used: 2}
	d := Decide(Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Claims: []Claim{{Block: blk0, Owner: nodeB, State: Confirmed, VoterHash: VoterHash(three)}},
	}})
	if diff := cmp.Diff([]netip.Prefix{blk0}, d.Lose, netipCmp); diff != "" {
		t.Fatalf("lose (-want +got):\n%s", diff)
	}
	if len(d.Status.Conflicts) != 1 || !strings.Contains(d.Status.Conflicts[0], "2 pods") {
		t.Fatalf("conflicts %q", d.Status.Conflicts)
	}
}

func TestReleasedClaimAnnouncedWhileVoted(t *testing.T) {
	st := NewState(nodeC, 1)
	st.Released[blk1] = true
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Grants: []Grant{{Block: blk1, Voter: nodeA, To: nodeC, VoterHash: VoterHash(three)}},
	}}
	d := Decide(in)
	want := []Claim{{Block: blk1, Owner: nodeC, State: Released, VoterHash: VoterHash(three)}}
	if diff := cmp.Diff(want, d.Announce.Claims, netipCmp); diff != "" {
		t.Fatalf("claims (-want +got):\n%s", diff)
	}
	in.Table.Grants = nil
	if d := Decide(in); len(d.Announce.Claims) != 0 {
		t.Fatalf("released claim announced with no vote left: %+v", d.Announce.Claims)
	}
}

func TestRemoteConfirmedBlockRemembered(t *testing.T) {
	h := VoterHash(three)
	in := Input{State: NewState(nodeD, 1), Voters: three, Pools: []Pool{pool}, Table: Table{
		Claims: []Claim{{Block: blk1, Owner: nodeB, State: Confirmed, VoterHash: h}, {Block: blk0, Owner: nodeC, State: Pending, VoterHash: h}},
	}}
	d := Decide(in)
	if diff := cmp.Diff([]RemoteBlock{{Block: blk1, Pool: pool.CIDR, Owner: nodeB}}, d.Remember, netipCmp); diff != "" {
		t.Fatalf("remember (-want +got):\n%s", diff)
	}
	// Gone from the table (its owner is down): still remembered.
	in.State = d.State
	in.Table = Table{}
	if d := Decide(in); len(d.Unremember) != 0 {
		t.Fatalf("forgot a block because its owner went quiet: %+v", d.Changes)
	}
}

// TestJoinerGivesUpADownOwnersBlock: node A (the lowest address) joins
// while C is down and claims C's block, which it never heard of. The
// voters vote for C, whose claim A cannot see: A gives up and looks
// elsewhere, instead of waiting for C forever.
func TestJoinerGivesUpADownOwnersBlock(t *testing.T) {
	h := VoterHash(three)
	st := NewState(nodeA, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnPending}
	in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{
		Records: []Record{record(nodeB, three...)},
		Grants:  []Grant{{Block: blk0, Voter: nodeB, To: nodeC, VoterHash: h}},
	}}
	d := Decide(in)
	if diff := cmp.Diff([]netip.Prefix{blk0}, d.Release, netipCmp); diff != "" {
		t.Fatalf("release (-want +got):\n%s", diff)
	}
	// A higher claimant that is pending and visible does not make A give up.
	in.Table.Claims = []Claim{{Block: blk0, Owner: nodeC, State: Pending, VoterHash: h}}
	if d := Decide(in); len(d.Release) != 0 {
		t.Fatalf("gave up for a higher pending claimant: %+v", d.Changes)
	}
}

func TestCheckListChange(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	abc := []netip.Addr{a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.3")}
	abcd := append(slices.Clone(abc), a("10.0.0.4"))
	abd := []netip.Addr{a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.4")}
	for _, tc := range []struct {
		name     string
		from, to VoterList
		holds    bool
		want     string // "" passes, else a part of the error
	}{
		{"a store that kept no list", VoterList{}, VoterList{Voters: abc}, true, ""},
		{"the same list, any order", VoterList{Voters: abc}, VoterList{Voters: []netip.Addr{abc[2], abc[0], abc[1]}}, true, ""},
		{"one voter added", VoterList{Voters: abc}, VoterList{Voters: abcd}, true, ""},
		{"one voter removed", VoterList{Voters: abcd}, VoterList{Voters: abc}, true, ""},
		{"a voter replaced at once", VoterList{Voters: abc}, VoterList{Voters: abd}, true, "2 voters at once"},
		{"a voter replaced, nothing held", VoterList{Voters: abc}, VoterList{Voters: abd}, false, ""},
		{"a lone node joins with blocks", VoterList{Voters: abc[:1], Alone: true}, VoterList{Voters: abc[:2]}, true, "ran alone"},
		{"a lone node joins with nothing", VoterList{Voters: abc[:1], Alone: true}, VoterList{Voters: abc}, false, ""},
		{"a lone node keeps its list", VoterList{Voters: abc[:1], Alone: true}, VoterList{Voters: abc[:1]}, true, ""},
		{"a lone voter of a cluster grows by one", VoterList{Voters: abc[:1]}, VoterList{Voters: abc[:2]}, true, ""},
	} {
		err := CheckListChange(tc.from, tc.to, tc.holds)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	err := CheckListChange(VoterList{Voters: abc}, VoterList{Voters: abd}, true)
	if want := "set bgp.voters back to [10.0.0.1 10.0.0.2 10.0.0.3], or to the first step [10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4]"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("replacing a voter: %v, want it to say %q", err, want)
	}
}

// TestUnresolvedVoterFailsClosed: a node that cannot name one of its
// voters (an IPv6 voter address with no record yet) claims nothing, votes
// for nothing new and confirms nothing, even with its own vote and a
// majority of the voters it can name; once it names all, it claims.
func TestUnresolvedVoterFailsClosed(t *testing.T) {
	self := Node{Addr: netip.MustParseAddr("10.0.0.1"), Inc: 1}
	other := Node{Addr: netip.MustParseAddr("10.0.0.2"), Inc: 2}
	pool6 := Pool{CIDR: netip.MustParsePrefix("fd00:10::/120"), BlockSize: 122}
	named := []netip.Addr{self.Addr, other.Addr}
	st := NewState(self, 1)
	rec := Record{Node: other, Born: 1, VoterHash: VoterHash(named), Voters: named}
	in := Input{State: st, Table: Table{Records: []Record{rec}}, Voters: named, Pools: []Pool{pool6},
		Need: map[netip.Prefix]bool{pool6.CIDR: true}, Name: "n1", Unresolved: []string{"fd77::3 (no record announces it)"}}
	d := Decide(in)
	if len(d.Claim) != 0 || len(d.Grant) != 0 || len(d.Confirm) != 0 {
		t.Fatalf("with a voter unresolved, Decide made changes %+v", d.Changes)
	}
	if err := d.Status.CanClaim(); err == nil || !strings.Contains(err.Error(), "fd77::3") {
		t.Errorf("CanClaim = %v, want it to name the unresolved voter", err)
	}
	// Its record says its list is unknown, which another node does not
	// take for a list of its own (no "voter lists disagree").
	mine := d.Announce.Records[0]
	if mine.VoterHash != UnknownList || mine.Voters != nil {
		t.Errorf("record while a voter is unresolved: hash %08x, voters %v; want UnknownList, none", mine.VoterHash, mine.Voters)
	}
	seen := Decide(Input{State: NewState(other, 1), Table: Table{Records: []Record{mine}}, Voters: named, Pools: []Pool{pool6}, Name: "n2"})
	if len(seen.Status.OtherLists) != 0 {
		t.Errorf("a record of an unknown list shows as another list: %+v", seen.Status.OtherLists)
	}
	// A pending claim of its own, its own vote and the other voter's:
	// a majority of the named two, but not of the three configured.
	b := pool6.Block(0)
	in.State = Apply(st, Changes{Claim: []OwnBlock{{Block: b, Pool: pool6.CIDR, State: OwnPending}},
		Grant: []Grant{{Block: b, Voter: self, To: self, VoterHash: VoterHash(named)}}})
	in.Table.Claims = []Claim{}
	in.Table.Grants = []Grant{{Block: b, Voter: other, To: self, VoterHash: VoterHash(named)}}
	if d := Decide(in); len(d.Confirm) != 0 {
		t.Fatalf("with a voter unresolved, Decide confirmed %v", d.Confirm)
	}
	in.Unresolved = nil
	if d := Decide(in); len(d.Confirm) != 1 {
		t.Fatalf("with every voter named, Decide confirmed %v, want %v", d.Confirm, b)
	}
}
