package blockproto

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
)

// Node is one incarnation of a node: its address and a random number drawn
// when its store was created. A node whose state dir is wiped comes back
// as a new Node with the same address.
type Node struct {
	Addr netip.Addr
	Inc  uint32
}

func (n Node) String() string { return fmt.Sprintf("%s#%08x", n.Addr, n.Inc) }

// IsValid reports whether n names a node at all.
func (n Node) IsValid() bool { return n.Addr.IsValid() }

// ClaimState is where a claim stands, as its claimant announces it.
type ClaimState uint8

const (
	// Pending: announced, waiting for a majority of the voters.
	Pending ClaimState = 1
	// Confirmed: a majority of the voters granted it; the owner hands out
	// its addresses and the cluster routes the block to it.
	Confirmed ClaimState = 2
	// Released: the claimant gave the pending claim up, for good (it never
	// claims the block again in this incarnation); voters holding a grant
	// for it revoke the grant.
	Released ClaimState = 3
)

func (s ClaimState) String() string {
	switch s {
	case Pending:
		return "pending"
	case Confirmed:
		return "confirmed"
	case Released:
		return "released"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Valid reports whether s is one of the three states.
func (s ClaimState) Valid() bool { return s >= Pending && s <= Released }

// Claim is a claimant's claim of one block, as announced.
type Claim struct {
	Block     netip.Prefix
	Owner     Node
	State     ClaimState
	VoterHash uint32 // hash of the claimant's voter list (VoterHash)
}

// Grant is a voter's vote for one claim, as announced.
type Grant struct {
	Block     netip.Prefix
	Voter     Node
	To        Node
	VoterHash uint32 // hash of the voter's voter list
}

// Record says a node is there: its incarnation, when that incarnation was
// born (Unix seconds, shown to operators; it orders nothing), the voter
// list it uses, and the earlier incarnations of its address it has learned
// of (Predecessors, sorted). Only an incarnation itself names its
// predecessors, and it names only incarnations it saw while it ran, so a
// predecessor is always older: that, not a clock, is how the cluster
// orders two incarnations of one address.
//
// Addr6 is the node's IPv6 address, the next hop of its IPv6 blocks on
// the other nodes (invalid: none, or no IPv6 pool). IPv6Only says the node
// has no IPv4 address: it is reached only at Addr6, and its VXLAN runs
// over IPv6 (docs/design.md, "VXLAN over an IPv6 underlay"). Both travel
// with the record only to be routed by: no decision reads them.
type Record struct {
	Node         Node
	Born         uint32
	VoterHash    uint32
	Voters       []netip.Addr
	Predecessors []uint32
	Addr6        netip.Addr
	IPv6Only     bool
}

// UnknownList is the VoterHash of a record whose node cannot name all its
// voters yet (Input.Unresolved): it claims and votes for nothing, so its
// list is no other list; it is not reached under any list either.
const UnknownList uint32 = 0

// Equal reports whether r and o say the same.
func (r Record) Equal(o Record) bool {
	return r.Node == o.Node && r.Born == o.Born && r.VoterHash == o.VoterHash && slices.Equal(r.Voters, o.Voters) &&
		slices.Equal(r.Predecessors, o.Predecessors) && r.Addr6 == o.Addr6 && r.IPv6Only == o.IPv6Only
}

// Forget says an operator removed a node incarnation for good (`reef node
// forget`). Every node that learns it keeps it and announces it on.
type Forget struct {
	Node Node
}

// Seen says an incarnation of a node exists that some record of the same
// address does not name as a predecessor: a node that knows two
// incarnations of one address and cannot order them announces each, so
// that the one running learns of the other and names it. Addr6 is the
// IPv6 address that incarnation's record announced, when the announcer
// knows it: a node known by a router ID names as its earlier incarnation
// only one of its own IPv6 address (Input.IPv6Only).
type Seen struct {
	Node  Node
	Addr6 netip.Addr
}

// Table is one snapshot of what the cluster announces, as this node
// receives it: several copies of one announcement (through two route
// reflectors, or stale ones a peer keeps over a graceful restart) may all
// be in it. Announcements of this node's own incarnation are left out by
// the caller or ignored.
type Table struct {
	Records []Record
	Claims  []Claim
	Grants  []Grant
	Forgets []Forget
	Seen    []Seen
}

// Len is the number of announcements in t.
func (t Table) Len() int {
	return len(t.Records) + len(t.Claims) + len(t.Grants) + len(t.Forgets) + len(t.Seen)
}

// Sort puts t in a canonical order, so that two equal tables compare equal.
func (t *Table) Sort() {
	slices.SortFunc(t.Records, func(a, b Record) int { return cmpNode(a.Node, b.Node) })
	slices.SortFunc(t.Claims, func(a, b Claim) int {
		return cmp.Or(cmpPrefix(a.Block, b.Block), cmpNode(a.Owner, b.Owner), cmp.Compare(a.State, b.State))
	})
	slices.SortFunc(t.Grants, func(a, b Grant) int {
		return cmp.Or(cmpPrefix(a.Block, b.Block), cmpNode(a.Voter, b.Voter), cmpNode(a.To, b.To))
	})
	slices.SortFunc(t.Forgets, func(a, b Forget) int { return cmpNode(a.Node, b.Node) })
	slices.SortFunc(t.Seen, func(a, b Seen) int { return cmpNode(a.Node, b.Node) })
}

func cmpNode(a, b Node) int { return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Inc, b.Inc)) }

// cmpPrefix orders prefixes as netip.Addr.Compare orders their addresses,
// then by length. Two IPv4 addresses, every block today, compare as
// numbers: the general Compare was a fifth of a Decide over a hundred
// nodes' paths (sortedKeys of every step).
func cmpPrefix(a, b netip.Prefix) int {
	x, y := a.Addr(), b.Addr()
	if x.Is4() && y.Is4() {
		p, q := x.As4(), y.As4()
		return cmp.Or(cmp.Compare(binary.BigEndian.Uint32(p[:]), binary.BigEndian.Uint32(q[:])), cmp.Compare(a.Bits(), b.Bits()))
	}
	return cmp.Or(x.Compare(y), cmp.Compare(a.Bits(), b.Bits()))
}

// Voters is a normalised voter list: sorted, without duplicates.
func Voters(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// VoterHash is the hash every node announces of its voter list; two nodes
// with the same list, in any order, have the same hash.
func VoterHash(voters []netip.Addr) uint32 {
	h := fnv.New32a()
	for _, a := range Voters(voters) {
		h.Write(a.AsSlice())
	}
	if s := h.Sum32(); s != UnknownList {
		return s
	}
	return UnknownList + 1
}

// Majority is the number of grants a claim needs among n voters.
func Majority(n int) int { return n/2 + 1 }
