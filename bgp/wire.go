// Package bgp is reef's embedded BGP speaker (GoBGP as a library) and the
// encoding of the block protocol (package blockproto) on the wire.
//
// Every protocol announcement (record, claim, grant, forget, seen) is one
// VPN path (SAFI 128): a type 1 route distinguisher <address>:<kind>, MPLS
// label 0 and a prefix, with the announcing speaker's router ID as next hop,
// no route target (so no PE router imports it into a VRF) and BGP large
// communities that carry the rest. The family is the prefix's: a claim or
// grant of an IPv6 block is a VPN-IPv6 path (AFI 2), everything else
// VPN-IPv4 (AFI 1); nodes are IPv4 addresses in both (see AFI). The
// confirmed blocks are also announced as plain unicast prefixes, for the
// routers of the network to route pod traffic by: IPv4 blocks in IPv4
// unicast, next hop the owner; IPv6 blocks in IPv6 unicast to external
// peers, next hop the node's IPv6 address. Everything learned is validated
// before it is believed: a peer can announce nothing but reef announcements
// about the configured pools.
package bgp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/reefcni/reef/blockproto"
)

// The large communities of reef's paths, under the global administrator =
// the cluster's AS number:
//
//	<asn>:100:0          this is reef's (the "reef community"), on every path
//	<asn>:110:<kind>     1 record, 2 claim, 3 grant, 4 forget, 5 seen (= the RD number)
//	<asn>:111:<inc>      incarnation of the node the RD names (unicast: of the owner)
//	<asn>:112:<hash>     voter hash (record, claim, grant)
//	<asn>:113:<born>     birth time, Unix seconds (record)
//	<asn>:114:<voter>    one per voter, its address as a number (record)
//	<asn>:115:<state>    claim state, blockproto.ClaimState (claim)
//	<asn>:116:<grantee>  address of the node granted to (grant)
//	<asn>:117:<inc>      its incarnation (grant)
//	<asn>:118:<inc>      one per earlier incarnation of the node it names (record)
//	<asn>:119..122:<n>   the node's IPv6 address, 32 bits each, most significant
//	                     first (record; all four or none)
//
// Data1 values 100..199 are reef's: one that a path of its kind does not
// carry makes the path invalid (an old reef's claim communities 101..104
// among them). Other data1 values and other global administrators are
// ignored. So a reef older than 119..122 drops the record of a node that
// carries an IPv6 address (its claims and votes still count; what the
// record says of the node is not learned): a node sends them only when it
// has an IPv6 pool and an IPv6 address, and a cluster adds an IPv6 pool
// once all its nodes run a reef that knows them (docs/bgp.md).
const (
	lcMarker      = 100
	lcKind        = 110
	lcInc         = 111
	lcVoterHash   = 112
	lcBorn        = 113
	lcVoter       = 114
	lcState       = 115
	lcGrantee     = 116
	lcGranteeInc  = 117
	lcPredecessor = 118
	lcAddr6       = 119 // to 122: lcAddr6+i holds bits 32i..32i+31 of the address
	lcIPv6Only    = 123 // value 1: the record's node has no IPv4 address (Record.IPv6Only)

	lcReefFirst = 100
	lcReefLast  = 199
)

// LargeCommunity is one (global, data1, data2) triple.
type LargeCommunity struct{ ASN, Data1, Data2 uint32 }

// Pool is what the import filter needs to know of a configured pool.
type Pool struct {
	CIDR      netip.Prefix
	BlockSize int
}

// ErrNotReef marks a path that is not a valid reef announcement at all.
var ErrNotReef = errors.New("not a reef block")

// Kind is what a VPN path of the block protocol announces: the assigned
// number of its route distinguisher, and the value of <asn>:110.
type Kind uint16

const (
	KindRecord Kind = 1
	KindClaim  Kind = 2
	KindGrant  Kind = 3
	KindForget Kind = 4
	KindSeen   Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindRecord:
		return "record"
	case KindClaim:
		return "claim"
	case KindGrant:
		return "grant"
	case KindForget:
		return "forget"
	case KindSeen:
		return "seen"
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// AFI is the address family of a block protocol path, all of SAFI 128
// (labelled VPN). A path goes in the family of its prefix: the claims and
// grants of an IPv6 block in VPN-IPv6, everything else (records, forgets
// and seen incarnations, whose prefixes are IPv4 /32s, and the claims and
// grants of IPv4 blocks) in VPN-IPv4. Only the block's encoding differs:
// the route distinguisher, the communities and the nodes they name (IPv4
// addresses) are the same in both.
type AFI uint16

// The families of the block protocol, by their IANA AFI numbers.
const (
	AFIIPv4 AFI = 1 // VPN-IPv4 (L3VPN_IPV4_UNICAST)
	AFIIPv6 AFI = 2 // VPN-IPv6 (L3VPN_IPV6_UNICAST)
)

func (a AFI) String() string {
	switch a {
	case AFIIPv4:
		return "VPN-IPv4"
	case AFIIPv6:
		return "VPN-IPv6"
	}
	return fmt.Sprintf("AFI %d", uint16(a))
}

// familyOf is the family a path about prefix goes in.
func familyOf(prefix netip.Prefix) AFI {
	if prefix.Addr().Is6() {
		return AFIIPv6
	}
	return AFIIPv4
}

// RD is a route distinguisher as reef reads it. Reef's are all type 1: an
// IPv4 address and a 2-byte assigned number (the Kind).
type RD struct {
	Type   uint16
	Addr   netip.Addr // type 1 only
	Number uint16     // type 1 only
}

func (rd RD) String() string {
	if rd.Type != 1 {
		return fmt.Sprintf("RD type %d", rd.Type)
	}
	return fmt.Sprintf("%s:%d", rd.Addr, rd.Number)
}

// VPNRoute is one protocol announcement as it goes on the wire, less the
// label (always 0) and the next hop (the announcer's router ID), which say
// nothing.
type VPNRoute struct {
	RD          RD
	Prefix      netip.Prefix
	Communities []LargeCommunity
}

func (r VPNRoute) String() string { return r.RD.String() + ":" + r.Prefix.String() }

// AFI is the family the route goes in: that of its prefix.
func (r VPNRoute) AFI() AFI { return familyOf(r.Prefix) }

func newRoute(asn uint32, addr netip.Addr, k Kind, prefix netip.Prefix, inc uint32, n int) VPNRoute {
	lcs := make([]LargeCommunity, 0, n)
	lcs = append(lcs, LargeCommunity{asn, lcMarker, 0}, LargeCommunity{asn, lcKind, uint32(k)}, LargeCommunity{asn, lcInc, inc})
	return VPNRoute{RD: RD{Type: 1, Addr: addr, Number: uint16(k)}, Prefix: prefix, Communities: lcs}
}

func need4(what string, a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("%s %s is not an IPv4 address", what, a)
	}
	return nil
}

// EncodeRecord returns the path of a record: RD <node>:1, prefix <node>/32.
// The voters go out normalised (blockproto.Voters).
func EncodeRecord(asn uint32, r blockproto.Record) (VPNRoute, error) {
	if err := need4("node", r.Node.Addr); err != nil {
		return VPNRoute{}, err
	}
	if r.Addr6.IsValid() && (!r.Addr6.Is6() || r.Addr6.Is4In6()) {
		return VPNRoute{}, fmt.Errorf("node IPv6 address %s is not an IPv6 address", r.Addr6)
	}
	voters := blockproto.Voters(r.Voters)
	rt := newRoute(asn, r.Node.Addr, KindRecord, netip.PrefixFrom(r.Node.Addr, 32), r.Node.Inc, 9+len(voters)+len(r.Predecessors))
	rt.Communities = append(rt.Communities, LargeCommunity{asn, lcVoterHash, r.VoterHash}, LargeCommunity{asn, lcBorn, r.Born})
	for _, v := range voters {
		if err := need4("voter", v); err != nil {
			return VPNRoute{}, err
		}
		rt.Communities = append(rt.Communities, LargeCommunity{asn, lcVoter, addrUint(v)})
	}
	for _, p := range r.Predecessors {
		rt.Communities = append(rt.Communities, LargeCommunity{asn, lcPredecessor, p})
	}
	rt.Communities = appendAddr6(rt.Communities, asn, r.Addr6)
	if r.IPv6Only {
		if !r.Addr6.IsValid() {
			return VPNRoute{}, fmt.Errorf("record of IPv6-only node %s has no IPv6 address", r.Node.Addr)
		}
		rt.Communities = append(rt.Communities, LargeCommunity{asn, lcIPv6Only, 1})
	}
	return rt, nil
}

// EncodeClaim returns the path of a claim: RD <owner>:2, prefix the block
// (of either family).
func EncodeClaim(asn uint32, c blockproto.Claim) (VPNRoute, error) {
	if err := need4("owner", c.Owner.Addr); err != nil {
		return VPNRoute{}, err
	}
	rt := newRoute(asn, c.Owner.Addr, KindClaim, c.Block, c.Owner.Inc, 5)
	rt.Communities = append(rt.Communities, LargeCommunity{asn, lcVoterHash, c.VoterHash}, LargeCommunity{asn, lcState, uint32(c.State)})
	return rt, nil
}

// EncodeGrant returns the path of a grant: RD <voter>:3, prefix the block
// (of either family).
func EncodeGrant(asn uint32, g blockproto.Grant) (VPNRoute, error) {
	if err := need4("voter", g.Voter.Addr); err != nil {
		return VPNRoute{}, err
	}
	if err := need4("grantee", g.To.Addr); err != nil {
		return VPNRoute{}, err
	}
	rt := newRoute(asn, g.Voter.Addr, KindGrant, g.Block, g.Voter.Inc, 6)
	rt.Communities = append(rt.Communities, LargeCommunity{asn, lcVoterHash, g.VoterHash},
		LargeCommunity{asn, lcGrantee, addrUint(g.To.Addr)}, LargeCommunity{asn, lcGranteeInc, g.To.Inc})
	return rt, nil
}

// EncodeForget returns the path of a forget: RD <forgotten node>:4, prefix
// its incarnation as an IPv4 address /32.
func EncodeForget(asn uint32, f blockproto.Forget) (VPNRoute, error) {
	if err := need4("node", f.Node.Addr); err != nil {
		return VPNRoute{}, err
	}
	return newRoute(asn, f.Node.Addr, KindForget, netip.PrefixFrom(uintAddr(f.Node.Inc), 32), f.Node.Inc, 3), nil
}

// EncodeSeen returns the path of a seen incarnation: RD <node>:5, prefix
// its incarnation as an IPv4 address /32 (the NLRI is the same whoever
// announces it), and the IPv6 address its record announced, when known
// (<asn>:119..122, as in a record).
func EncodeSeen(asn uint32, x blockproto.Seen) (VPNRoute, error) {
	if err := need4("node", x.Node.Addr); err != nil {
		return VPNRoute{}, err
	}
	rt := newRoute(asn, x.Node.Addr, KindSeen, netip.PrefixFrom(uintAddr(x.Node.Inc), 32), x.Node.Inc, 3)
	rt.Communities = appendAddr6(rt.Communities, asn, x.Addr6)
	return rt, nil
}
