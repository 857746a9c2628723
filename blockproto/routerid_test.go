package blockproto

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Two nodes given one router ID (docs/design.md, "IPv6-only nodes"): the
// identity binds to the IPv6 address, so that neither takes the other for
// an earlier incarnation of its own, and a voter written as an IPv6
// address counts only the votes of the node at that address.

var (
	here6  = netip.MustParseAddr("2001:db8:77::1")
	there6 = netip.MustParseAddr("2001:db8:77::99")
)

// TestRouterIDNamesOnlyItsOwnAddress: a node known by a router ID names
// as an earlier incarnation only one that announced its own IPv6 address,
// from a record or a Seen; another one is a conflict, and superseded by
// nobody. A node known by its IPv4 address names every other incarnation
// of it, as before.
func TestRouterIDNamesOnlyItsOwnAddress(t *testing.T) {
	self := Node{addrA, 7}
	cases := []struct {
		name     string
		routerID bool
		table    Table
		names    []uint32 // the predecessors its record names
		conflict bool
	}{
		{"record of another node", true, Table{Records: []Record{{Node: Node{addrA, 3}, Addr6: there6}}}, nil, true},
		{"record of an earlier self", true, Table{Records: []Record{{Node: Node{addrA, 3}, Addr6: here6}}}, []uint32{3}, false},
		{"record with no IPv6 address", true, Table{Records: []Record{{Node: Node{addrA, 3}}}}, nil, true},
		{"seen of another node", true, Table{Seen: []Seen{{Node: Node{addrA, 4}, Addr6: there6}}}, nil, true},
		{"seen of an earlier self", true, Table{Seen: []Seen{{Node: Node{addrA, 4}, Addr6: here6}}}, []uint32{4}, false},
		{"seen, address unknown", true, Table{Seen: []Seen{{Node: Node{addrA, 4}}}}, nil, true},
		{"seen, one copy with it and one without", true, Table{Seen: []Seen{{Node: Node{addrA, 4}}, {Node: Node{addrA, 4}, Addr6: here6}}}, []uint32{4}, false},
		{"IPv4 identity: another address changes nothing", false, Table{Records: []Record{{Node: Node{addrA, 3}, Addr6: there6}}, Seen: []Seen{{Node: Node{addrA, 4}}}}, []uint32{3, 4}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{State: NewState(self, 1), Voters: three, Pools: []Pool{pool}, Table: tc.table, Addr6: here6, IPv6Only: tc.routerID}
			d := Decide(in)
			if d.Status.Gone != "" {
				t.Fatalf("gone: %s", d.Status.Gone)
			}
			if diff := cmp.Diff(tc.names, d.Announce.Records[0].Predecessors); diff != "" {
				t.Fatalf("predecessors (-want +got):\n%s", diff)
			}
			got := slices.ContainsFunc(d.Status.Conflicts, func(s string) bool { return strings.Contains(s, "one bgp.routerID") })
			if got != tc.conflict {
				t.Fatalf("conflict reported %v, want %v: %q", got, tc.conflict, d.Status.Conflicts)
			}
		})
	}
}

// TestRouterIDNotSupersededByAnother: a record of this identity from
// another node (another IPv6 address) that names this incarnation as its
// predecessor does not supersede it; one of its own address does.
func TestRouterIDNotSupersededByAnother(t *testing.T) {
	self := Node{addrA, 7}
	other := Record{Node: Node{addrA, 9}, Addr6: there6, Predecessors: []uint32{7}}
	in := Input{State: NewState(self, 1), Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{other}}, Addr6: here6, IPv6Only: true}
	if d := Decide(in); d.Status.Gone != "" || slices.Contains(d.Supersede, self) {
		t.Fatalf("another node's record superseded this one: %q %+v", d.Status.Gone, d.Supersede)
	}
	in.Table.Records[0].Addr6 = here6
	if d := Decide(in); d.Status.Gone == "" {
		t.Fatal("a later incarnation at this node's address did not supersede it")
	}
}

// TestVoterBoundToItsAddress: a voter written as an IPv6 address counts
// only while its current incarnation's record announces that address: the
// vote of a node given the voter's router ID elsewhere confirms nothing.
func TestVoterBoundToItsAddress(t *testing.T) {
	st := NewState(nodeA, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnPending}
	st.Grants[blk0] = nodeA
	recB := record(nodeB, three...)
	vote := Grant{Block: blk0, Voter: nodeB, To: nodeA, VoterHash: VoterHash(three)}
	for _, tc := range []struct {
		name    string
		addr6   netip.Addr // what B's record announces
		confirm bool
	}{
		{"the voter's own address", there6, true},
		{"another address", here6, false},
		{"none", netip.Addr{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recB
			r.Addr6 = tc.addr6
			in := Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{r}, Grants: []Grant{vote}},
				VoterAddr6: map[netip.Addr]netip.Addr{addrB: there6}}
			d := Decide(in)
			if got := slices.Contains(d.Confirm, blk0); got != tc.confirm {
				t.Fatalf("confirmed %v, want %v: %+v", got, tc.confirm, d.Changes)
			}
			if got := slices.Contains(d.Status.Reached, addrB); got != tc.confirm {
				t.Fatalf("voter reached %v, want %v", got, tc.confirm)
			}
		})
	}
}

// TestIPv4VoterNotAnIPv6OnlyNode: a voter written as an IPv4 address
// counts only the votes of the node that has it, not those of an IPv6-only
// node given that value as its router ID.
func TestIPv4VoterNotAnIPv6OnlyNode(t *testing.T) {
	st := NewState(nodeA, 1)
	st.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnPending}
	st.Grants[blk0] = nodeA
	vote := Grant{Block: blk0, Voter: nodeB, To: nodeA, VoterHash: VoterHash(three)}
	for _, v6only := range []bool{false, true} {
		r := record(nodeB, three...)
		r.Addr6, r.IPv6Only = there6, v6only
		d := Decide(Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{r}, Grants: []Grant{vote}}})
		if got := slices.Contains(d.Confirm, blk0); got == v6only {
			t.Errorf("record IPv6-only %v: confirmed %v", v6only, got)
		}
	}
}

// TestKnownKeepsAddr6: the known incarnation keeps the IPv6 address its
// record announced (filled in for a store of an older reef), and a Seen
// of it carries the address, so that the node it names can tell whether
// it is itself.
func TestKnownKeepsAddr6(t *testing.T) {
	st := NewState(nodeB, 1)
	st.Known[addrC] = Incarnation{Inc: 1, Born: 5} // an older store: no address
	old := Record{Node: Node{addrC, 1}, Born: 5, VoterHash: VoterHash(three), Voters: three, Addr6: there6}
	d := Decide(Input{State: st, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{old}}})
	if k := d.State.Known[addrC]; k.Inc != 1 || k.Addr6 != there6 {
		t.Fatalf("known %+v, want incarnation 1 at %s", k, there6)
	}
	// The old node is gone; a new incarnation has not named it yet: B
	// announces both, the old one with the address it knew.
	fresh := Record{Node: Node{addrC, 2}, Born: 6, VoterHash: VoterHash(three), Voters: three, Addr6: here6}
	d = Decide(Input{State: d.State, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{fresh}}})
	want := []Seen{{Node: Node{addrC, 1}, Addr6: there6}, {Node: Node{addrC, 2}, Addr6: here6}}
	if diff := cmp.Diff(want, d.Announce.Seen, netipCmp); diff != "" {
		t.Fatalf("seen (-want +got):\n%s", diff)
	}
	// Both records at once, from two addresses: the operator is told.
	d = Decide(Input{State: d.State, Voters: three, Pools: []Pool{pool}, Table: Table{Records: []Record{old, fresh}}})
	if !slices.ContainsFunc(d.Status.Conflicts, func(s string) bool { return strings.Contains(s, "different IPv6 addresses") }) {
		t.Fatalf("conflicts %q", d.Status.Conflicts)
	}
}
