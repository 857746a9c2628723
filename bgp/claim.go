// Package bgp is reef's embedded BGP speaker (GoBGP as a library) and the
// encoding of the block protocol on the wire. Every reef node announces the
// blocks it claims, and re-announces the blocks of owners it cannot reach,
// as IPv4 unicast prefixes whose next hop is the owner's node address and
// whose BGP large communities say who owns the block, since when, and in
// what state. Everything learned is validated before it is believed:
// a peer can announce nothing but reef blocks of the configured pools.
package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// ClaimState is the state of a block claim as announced.
type ClaimState uint32

const (
	// Pending: the claim is announced so that others see the block taken,
	// but nobody routes to it or blackholes it yet.
	Pending ClaimState = 0
	// Confirmed: the owner hands out addresses from the block.
	Confirmed ClaimState = 1
	// Forgotten: a tombstone. An operator ran `reef node forget` for the
	// owner at Claimed; every claim of that owner made before is void.
	Forgotten ClaimState = 2
)

func (s ClaimState) String() string {
	switch s {
	case Pending:
		return "pending"
	case Confirmed:
		return "confirmed"
	case Forgotten:
		return "forgotten"
	}
	return fmt.Sprintf("state(%d)", uint32(s))
}

// Claim is one node's claim of one block, as carried by a BGP path.
type Claim struct {
	Block   netip.Prefix
	Owner   netip.Addr // the owner's node address, also the path's next hop
	Claimed time.Time  // when the owner claimed it (for Forgotten: when it was forgotten), millisecond precision
	State   ClaimState
	// From is the peer the path came from; zero for our own paths. A path
	// whose From differs from Owner is a re-announcement (a proxy) of an
	// owner the sender cannot reach.
	From netip.Addr
}

// Beats reports whether c wins a conflict with o over the same block: the
// earlier claim wins, and of two claims made in the same millisecond the
// lower owner address. Every node computes the same answer from the same
// two claims.
func (c Claim) Beats(o Claim) bool {
	if !c.Claimed.Equal(o.Claimed) {
		return c.Claimed.Before(o.Claimed)
	}
	return c.Owner.Less(o.Owner)
}

// The large communities reef puts on a block path, under the global
// administrator = the cluster's AS number:
//
//	<asn>:100:0          this is a reef block (the "reef community")
//	<asn>:101:<secs>     claim time, Unix seconds
//	<asn>:102:<millis>   claim time, milliseconds within the second
//	<asn>:103:<owner>    owner's node address as a 32-bit number
//	<asn>:104:<state>    0 pending, 1 confirmed, 2 forgotten (tombstone)
const (
	lcMarker  = 100
	lcSeconds = 101
	lcMillis  = 102
	lcOwner   = 103
	lcState   = 104
)

// LargeCommunity is one (global, data1, data2) triple.
type LargeCommunity struct{ ASN, Data1, Data2 uint32 }

// Encode returns the large communities of a claim.
func Encode(asn uint32, c Claim) []LargeCommunity {
	ms := c.Claimed.UnixMilli()
	return []LargeCommunity{
		{asn, lcMarker, 0},
		{asn, lcSeconds, uint32(ms / 1000)},
		{asn, lcMillis, uint32(ms % 1000)},
		{asn, lcOwner, addrUint(c.Owner)},
		{asn, lcState, uint32(c.State)},
	}
}

// Pool is what the import filter needs to know of a configured pool.
type Pool struct {
	CIDR      netip.Prefix
	BlockSize int
}

// ErrNotReef marks a path that is not a reef block claim at all.
var ErrNotReef = errors.New("not a reef block")

// Decode validates a learned path and turns it into a claim. It accepts
// only what a reef node may announce: an IPv4 prefix inside a configured
// pool with exactly that pool's block length, the reef community of this
// AS, a complete claim, and (except for tombstones) a next hop equal to the
// owner. The error says why a path was dropped.
func Decode(asn uint32, pools []Pool, prefix netip.Prefix, nextHop netip.Addr, lcs []LargeCommunity) (Claim, error) {
	if !prefix.Addr().Is4() {
		return Claim{}, fmt.Errorf("%s: not IPv4: %w", prefix, ErrNotReef)
	}
	inPool := false
	for _, p := range pools {
		if p.CIDR.Contains(prefix.Addr()) && prefix.Bits() >= p.CIDR.Bits() {
			if prefix.Bits() != p.BlockSize {
				return Claim{}, fmt.Errorf("%s: inside pool %s but not a /%d block: %w", prefix, p.CIDR, p.BlockSize, ErrNotReef)
			}
			inPool = true
		}
	}
	if !inPool {
		return Claim{}, fmt.Errorf("%s: outside every pool: %w", prefix, ErrNotReef)
	}
	if prefix != prefix.Masked() {
		return Claim{}, fmt.Errorf("%s: host bits set: %w", prefix, ErrNotReef)
	}
	vals := map[uint32]uint32{}
	for _, lc := range lcs {
		if lc.ASN != asn {
			continue
		}
		if _, dup := vals[lc.Data1]; dup {
			return Claim{}, fmt.Errorf("%s: community %d:%d:* twice: %w", prefix, asn, lc.Data1, ErrNotReef)
		}
		vals[lc.Data1] = lc.Data2
	}
	if _, ok := vals[lcMarker]; !ok {
		return Claim{}, fmt.Errorf("%s: no reef community %d:%d:0: %w", prefix, asn, lcMarker, ErrNotReef)
	}
	for _, k := range []uint32{lcSeconds, lcMillis, lcOwner, lcState} {
		if _, ok := vals[k]; !ok {
			return Claim{}, fmt.Errorf("%s: community %d:%d:* missing: %w", prefix, asn, k, ErrNotReef)
		}
	}
	if vals[lcMillis] > 999 {
		return Claim{}, fmt.Errorf("%s: milliseconds %d out of range: %w", prefix, vals[lcMillis], ErrNotReef)
	}
	c := Claim{
		Block:   prefix,
		Owner:   uintAddr(vals[lcOwner]),
		Claimed: time.UnixMilli(int64(vals[lcSeconds])*1000 + int64(vals[lcMillis])).UTC(),
		State:   ClaimState(vals[lcState]),
	}
	if c.State > Forgotten {
		return Claim{}, fmt.Errorf("%s: unknown claim state %d: %w", prefix, c.State, ErrNotReef)
	}
	if !c.Owner.IsGlobalUnicast() {
		return Claim{}, fmt.Errorf("%s: owner %s is not a unicast address: %w", prefix, c.Owner, ErrNotReef)
	}
	if c.State != Forgotten && nextHop != c.Owner {
		return Claim{}, fmt.Errorf("%s: next hop %s is not the owner %s: %w", prefix, nextHop, c.Owner, ErrNotReef)
	}
	for _, p := range pools {
		if p.CIDR.Contains(c.Owner) {
			return Claim{}, fmt.Errorf("%s: owner %s is a pod address: %w", prefix, c.Owner, ErrNotReef)
		}
	}
	return c, nil
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintAddr(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}
