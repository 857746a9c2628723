package blockproto

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math/bits"
	"net/netip"
)

// Pool is what the protocol needs of an address pool.
type Pool struct {
	CIDR      netip.Prefix
	BlockSize int
}

// maxBlockBits caps the blocks of a pool the protocol uses at 2^32: an
// IPv4 pool has no more, and an IPv6 pool (a /56 of /122 blocks has 2^66)
// is used from its start.
const maxBlockBits = 32

// NumBlocks is how many blocks of the pool the protocol uses: all of an
// IPv4 pool's, at most 2^32 of an IPv6 pool's.
func (p Pool) NumBlocks() int {
	if !p.CIDR.IsValid() || p.CIDR.Addr().Is4In6() || p.BlockSize < p.CIDR.Bits() || p.BlockSize > p.CIDR.Addr().BitLen() {
		return 0
	}
	return 1 << min(p.BlockSize-p.CIDR.Bits(), maxBlockBits)
}

// Block returns the pool's block number i, 0 <= i < NumBlocks.
func (p Pool) Block(i int) netip.Prefix {
	a := p.CIDR.Masked().Addr().As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	// Add i << (address bits - block length), in 128 bits.
	var addHi, addLo uint64
	switch s := uint(p.CIDR.Addr().BitLen() - p.BlockSize); {
	case s < 64:
		addHi, addLo = uint64(i)>>(64-s), uint64(i)<<s
	default:
		addHi = uint64(i) << (s - 64)
	}
	lo, carry := bits.Add64(lo, addLo, 0)
	hi, _ = bits.Add64(hi, addHi, carry)
	binary.BigEndian.PutUint64(a[:8], hi)
	binary.BigEndian.PutUint64(a[8:], lo)
	start := netip.AddrFrom16(a)
	if p.CIDR.Addr().Is4() {
		start = start.Unmap()
	}
	return netip.PrefixFrom(start, p.BlockSize)
}

// Offset is where a node named name starts its search among n blocks: a
// hash of the name, so that fresh nodes go for different blocks and
// competing claims are rare.
func Offset(name string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(uint64(h.Sum32()) % uint64(n))
}

// OwnState is where one of this node's own claims stands.
type OwnState uint8

const (
	// OwnPending: claimed and announced, not yet granted by a majority.
	OwnPending OwnState = 1
	// OwnConfirmed: granted by a majority; addresses are handed out.
	OwnConfirmed OwnState = 2
	// OwnLost: confirmed, but another node announces the block confirmed
	// too (a restored backup, a forget of this node while it was away).
	// No address is handed out from it any more; pods that have one keep it.
	OwnLost OwnState = 3
)

func (s OwnState) String() string {
	switch s {
	case OwnPending:
		return "pending"
	case OwnConfirmed:
		return "confirmed"
	case OwnLost:
		return "lost"
	}
	return fmt.Sprintf("own(%d)", uint8(s))
}

// OwnBlock is a block this node claimed.
type OwnBlock struct {
	Block netip.Prefix
	Pool  netip.Prefix
	State OwnState
	Used  int // allocated addresses, for messages about conflicts
}

// RemoteBlock is another node's confirmed block, remembered so that it
// stays routed and taken while its owner is out of reach.
type RemoteBlock struct {
	Block netip.Prefix
	Pool  netip.Prefix
	Owner Node
}

// Incarnation is what a record tells of a node's current incarnation.
// Nothing orders two incarnations by Born (a wall clock): an incarnation
// is superseded only when a later one names it (incarnations.go).
type Incarnation struct {
	Inc  uint32
	Born uint32
	// Addr6 is the IPv6 address its record announced (Record.Addr6), kept
	// so that a Seen of it can say which node it was.
	Addr6 netip.Addr
}

// State is what a node keeps in its store for the protocol. Everything in
// it must be persisted before anything derived from it is announced.
type State struct {
	Self Node
	Born uint32
	Own  map[netip.Prefix]OwnBlock
	// Released are the blocks this incarnation claimed and gave up: it
	// never claims them again, so a stale grant from the earlier claim can
	// never count for a new one.
	Released map[netip.Prefix]bool
	// Grants are this node's votes, as a voter: block -> claimant.
	Grants map[netip.Prefix]Node
	Remote map[netip.Prefix]RemoteBlock
	// Forgotten are incarnations an operator forgot (announced on to
	// everyone); Superseded those replaced by a newer incarnation of the
	// same address (each node sees that for itself).
	Forgotten  map[Node]bool
	Superseded map[Node]bool
	// Known is the newest incarnation seen of every other address.
	Known map[netip.Addr]Incarnation
	// Recovered: the store was rebuilt from the kernel after damage (`reef
	// store recover`), keeping this incarnation and its confirmed blocks
	// but not the blocks it gave up (Released) nor its votes (Grants). So
	// it claims no new block, since a stale copy of a vote from a claim it
	// gave up could count again, and as a voter it grants only confirmed
	// owners, since it may have voted for another claimant of a pending
	// claim. It keeps serving its own blocks. A claim it made and lost with
	// the file is not released (it cannot tell a pending one from a
	// confirmed one others remember): the voters keep that block for it
	// until a new incarnation (an empty state dir on a drained node) ends
	// the mode and supersedes this one.
	Recovered bool
	// Restricted: this node's store is new (its state dir was wiped, or
	// `reef store recover` drew a new incarnation) while the node is in
	// bgp.voters, so the votes it cast before, under an earlier
	// incarnation, are lost: a block may be confirmed with one of them.
	// As a voter it then grants only confirmed owners (a claimant that
	// announces the block confirmed, or one it remembers), never a pending
	// claim, its own included: a rival could otherwise gather a majority
	// with this voter's second vote for the block. Unlike Recovered it
	// claims blocks as any node does (the other voters decide). It applies
	// only while the node is a voter of a list of more than one voter, and
	// ends when the node is added to the list again after it was taken out
	// (raft's rule: a member that lost its disk is a new member), which the
	// daemon sees at start (docs/ipam.md, "Changing the voter list").
	Restricted bool
}

// NewState is the state of a new store: the incarnation self, born at
// born, holding no block, vote or memory of other nodes, with every map
// allocated (Decide and Apply write into them).
func NewState(self Node, born uint32) State {
	return State{Self: self, Born: born, Own: map[netip.Prefix]OwnBlock{}, Released: map[netip.Prefix]bool{},
		Grants: map[netip.Prefix]Node{}, Remote: map[netip.Prefix]RemoteBlock{}, Forgotten: map[Node]bool{},
		Superseded: map[Node]bool{}, Known: map[netip.Addr]Incarnation{}}
}

// Clone returns a deep copy of s, with every map allocated.
func (s State) Clone() State {
	c := s
	c.Own = cloneMap(s.Own)
	c.Released = cloneMap(s.Released)
	c.Grants = cloneMap(s.Grants)
	c.Remote = cloneMap(s.Remote)
	c.Forgotten = cloneMap(s.Forgotten)
	c.Superseded = cloneMap(s.Superseded)
	c.Known = cloneMap(s.Known)
	return c
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return maps.Clone(m)
}

// Changes is what one decision asks to persist, in one transaction, before
// anything is announced.
type Changes struct {
	Claim      []OwnBlock // new pending claims
	Confirm    []netip.Prefix
	Release    []netip.Prefix // own pending claims given up
	Lose       []netip.Prefix // own confirmed blocks seen confirmed by another
	Grant      []Grant        // votes cast by this node (Block, To)
	Revoke     []netip.Prefix // votes withdrawn
	Remember   []RemoteBlock
	Unremember []netip.Prefix
	Forget     []Node // forgets learned
	Supersede  []Node // incarnations replaced by newer ones
	Known      []KnownIncarnation
}

// KnownIncarnation is a node address with its newest known incarnation.
type KnownIncarnation struct {
	Addr netip.Addr
	Incarnation
}

// Empty reports whether c changes nothing.
func (c Changes) Empty() bool {
	return len(c.Claim)+len(c.Confirm)+len(c.Release)+len(c.Lose)+len(c.Grant)+len(c.Revoke)+
		len(c.Remember)+len(c.Unremember)+len(c.Forget)+len(c.Supersede)+len(c.Known) == 0
}

func (c *Changes) add(o Changes) {
	c.Claim = append(c.Claim, o.Claim...)
	c.Confirm = append(c.Confirm, o.Confirm...)
	c.Release = append(c.Release, o.Release...)
	c.Lose = append(c.Lose, o.Lose...)
	c.Grant = append(c.Grant, o.Grant...)
	c.Revoke = append(c.Revoke, o.Revoke...)
	c.Remember = append(c.Remember, o.Remember...)
	c.Unremember = append(c.Unremember, o.Unremember...)
	c.Forget = append(c.Forget, o.Forget...)
	c.Supersede = append(c.Supersede, o.Supersede...)
	c.Known = append(c.Known, o.Known...)
}

// Apply returns s with c applied: what the store holds once c is written.
func Apply(s State, c Changes) State {
	s = s.Clone()
	for _, k := range c.Known {
		s.Known[k.Addr] = k.Incarnation
	}
	for _, n := range c.Forget {
		s.Forgotten[n] = true
	}
	for _, n := range c.Supersede {
		s.Superseded[n] = true
	}
	for _, b := range c.Claim {
		b.State = OwnPending
		s.Own[b.Block] = b
	}
	for _, p := range c.Confirm {
		b := s.Own[p]
		b.State = OwnConfirmed
		s.Own[p] = b
	}
	for _, p := range c.Lose {
		b := s.Own[p]
		b.State = OwnLost
		s.Own[p] = b
	}
	for _, p := range c.Release {
		delete(s.Own, p)
		s.Released[p] = true
	}
	for _, p := range c.Revoke {
		delete(s.Grants, p)
	}
	for _, g := range c.Grant {
		s.Grants[g.Block] = g.To
	}
	for _, p := range c.Unremember {
		delete(s.Remote, p)
	}
	for _, r := range c.Remember {
		s.Remote[r.Block] = r
	}
	return s
}
