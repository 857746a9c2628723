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
	"slices"

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

// lcSet is the reef communities of one path, gathered for validation.
type lcSet struct {
	seen   uint64                               // bit d1-lcReefFirst for each data1 seen (gather lets only 100..123 in)
	val    [lcIPv6Only - lcReefFirst + 1]uint32 // by d1-lcReefFirst
	voters int                                  // number of distinct <asn>:114 values
	preds  int                                  // number of distinct <asn>:118 values
}

func (s *lcSet) has(d1 uint32) bool { return s.seen&(1<<(d1-lcReefFirst)) != 0 }

// gather reads the communities of asn in lcs. allowed is the data1 values
// the kind carries besides the marker, kind and incarnation, which all
// carry.
func (s *lcSet) gather(asn uint32, lcs []LargeCommunity, allowed []uint32) error {
	for i, lc := range lcs {
		if lc.ASN != asn || lc.Data1 < lcReefFirst || lc.Data1 > lcReefLast {
			continue
		}
		switch lc.Data1 {
		case lcMarker, lcKind, lcInc:
		default:
			if !slices.Contains(allowed, lc.Data1) {
				return fmt.Errorf("community %d:%d:%d does not belong on it: %w", asn, lc.Data1, lc.Data2, ErrNotReef)
			}
		}
		if lc.Data1 == lcVoter || lc.Data1 == lcPredecessor {
			// One per voter or predecessor; a repeated value is redundant
			// (RFC 8092 asks receivers to drop repeats).
			if !slices.Contains(lcs[:i], lc) {
				if lc.Data1 == lcVoter {
					s.voters++
				} else {
					s.preds++
				}
			}
			s.seen |= 1 << (lc.Data1 - lcReefFirst)
			continue
		}
		if s.has(lc.Data1) {
			if s.val[lc.Data1-lcReefFirst] == lc.Data2 {
				continue // an exact repeat is redundant
			}
			return fmt.Errorf("community %d:%d:* twice, with %d and %d: %w", asn, lc.Data1, s.val[lc.Data1-lcReefFirst], lc.Data2, ErrNotReef)
		}
		s.seen |= 1 << (lc.Data1 - lcReefFirst)
		s.val[lc.Data1-lcReefFirst] = lc.Data2
	}
	if !s.has(lcMarker) {
		return fmt.Errorf("no reef community %d:%d:0: %w", asn, lcMarker, ErrNotReef)
	}
	if v := s.val[lcMarker-lcReefFirst]; v != 0 {
		return fmt.Errorf("reef community is %d:%d:%d, not %d:%d:0: %w", asn, lcMarker, v, asn, lcMarker, ErrNotReef)
	}
	return nil
}

// require checks that every one of d1s is there.
func (s *lcSet) require(asn uint32, d1s ...uint32) error {
	for _, d1 := range d1s {
		if !s.has(d1) {
			return fmt.Errorf("community %d:%d:* missing: %w", asn, d1, ErrNotReef)
		}
	}
	return nil
}

func (s *lcSet) get(d1 uint32) uint32 { return s.val[d1-lcReefFirst] }

var (
	allowedRecord = []uint32{lcVoterHash, lcBorn, lcVoter, lcPredecessor, lcAddr6, lcAddr6 + 1, lcAddr6 + 2, lcAddr6 + 3, lcIPv6Only}
	allowedClaim  = []uint32{lcVoterHash, lcState}
	allowedGrant  = []uint32{lcVoterHash, lcGrantee, lcGranteeInc}
	allowedForget = []uint32{}
	allowedSeen   = []uint32{lcAddr6, lcAddr6 + 1, lcAddr6 + 2, lcAddr6 + 3}
	allowedUC     = []uint32{}
)

// DecodeVPN validates one learned VPN path and appends what it announces
// to t. It accepts only what a reef node may announce: a prefix of the
// path's family (afi, not IPv4-mapped), a type 1 RD whose number is a
// Kind, the reef community of this AS, a kind community equal to the RD
// number and every community of the kind, once; claims and grants of a
// block of a configured pool (in VPN-IPv6 only those of an IPv6 pool);
// records of the RD's /32, forgets and seen incarnations of a /32, all in
// VPN-IPv4; node addresses (RD, grantee, voters) that are unicast IPv4
// outside every pool. The error, wrapping ErrNotReef, says why a path was
// dropped. rd and prefix are the path's NLRI, lcs its large communities.
func DecodeVPN(asn uint32, pools []Pool, afi AFI, rd RD, prefix netip.Prefix, lcs []LargeCommunity, t *blockproto.Table) error {
	if err := decodeVPN(asn, pools, afi, rd, prefix, lcs, t); err != nil {
		return fmt.Errorf("%s:%s: %w", rd, prefix, err) // named only on failure: no allocation otherwise
	}
	return nil
}

func decodeVPN(asn uint32, pools []Pool, afi AFI, rd RD, prefix netip.Prefix, lcs []LargeCommunity, t *blockproto.Table) error {
	k, allowed, err := vpnKind(afi, rd, prefix)
	if err != nil {
		return err
	}
	d := vpnDecoder{asn: asn, pools: pools, prefix: prefix, lcs: lcs, t: t}
	if err := d.s.gather(asn, lcs, allowed); err != nil {
		return err
	}
	if err := d.s.require(asn, lcKind); err != nil {
		return err
	}
	if got := d.s.get(lcKind); got != uint32(k) {
		return fmt.Errorf("kind community %d:%d:%d does not match the RD's %d (%s): %w", asn, lcKind, got, k, k, ErrNotReef)
	}
	if err := checkNode(pools, rd.Addr, "node"); err != nil {
		return err
	}
	d.node = blockproto.Node{Addr: rd.Addr}
	switch k {
	case KindRecord:
		return d.record()
	case KindClaim:
		return d.claim()
	case KindGrant:
		return d.grant()
	case KindForget:
		return d.forget()
	case KindSeen:
		return d.seen()
	}
	return nil
}

// vpnKind checks a path's family and RD and returns the kind its RD
// names, with the communities that kind carries.
func vpnKind(afi AFI, rd RD, prefix netip.Prefix) (Kind, []uint32, error) {
	if err := checkFamily(afi, prefix); err != nil {
		return 0, nil, err
	}
	if rd.Type != 1 {
		return 0, nil, fmt.Errorf("route distinguisher of type %d, not 1 (address:number): %w", rd.Type, ErrNotReef)
	}
	k := Kind(rd.Number)
	var allowed []uint32
	switch k {
	case KindRecord:
		allowed = allowedRecord
	case KindClaim:
		allowed = allowedClaim
	case KindGrant:
		allowed = allowedGrant
	case KindForget:
		allowed = allowedForget
	case KindSeen:
		allowed = allowedSeen
	default:
		return 0, nil, fmt.Errorf("route distinguisher number %d is not a reef kind (1..5): %w", rd.Number, ErrNotReef)
	}
	if afi != AFIIPv4 && k != KindClaim && k != KindGrant {
		return 0, nil, fmt.Errorf("a %s travels in %s, not %s: %w", k, AFIIPv4, afi, ErrNotReef)
	}
	return k, allowed, nil
}

// vpnDecoder is one learned VPN path whose family, RD, kind community and
// node have passed decodeVPN's checks: what the decoder of its kind
// checks further and appends to t.
type vpnDecoder struct {
	asn    uint32
	pools  []Pool
	prefix netip.Prefix
	lcs    []LargeCommunity
	s      lcSet
	node   blockproto.Node
	t      *blockproto.Table
}

// record decodes a record: its prefix is its node's /32.
func (d *vpnDecoder) record() error {
	asn, s := d.asn, &d.s
	if err := s.require(asn, lcInc, lcVoterHash, lcBorn); err != nil {
		return err
	}
	if want := netip.PrefixFrom(d.node.Addr, 32); d.prefix != want {
		return fmt.Errorf("a record's prefix must be %s: %w", want, ErrNotReef)
	}
	voters, err := d.voters()
	if err != nil {
		return err
	}
	d.node.Inc = s.get(lcInc)
	preds, err := d.predecessors()
	if err != nil {
		return err
	}
	addr6, err := s.addr6(asn, d.pools)
	if err != nil {
		return err
	}
	only6 := s.has(lcIPv6Only)
	if v := s.get(lcIPv6Only); only6 && (v != 1 || !addr6.IsValid()) {
		return fmt.Errorf("community %d:%d:%d on a record with IPv6 address %v: want %d:%d:1 beside the node's IPv6 address: %w", asn, lcIPv6Only, v, addr6, asn, lcIPv6Only, ErrNotReef)
	}
	d.t.Records = append(d.t.Records, blockproto.Record{Node: d.node, Born: s.get(lcBorn), VoterHash: s.get(lcVoterHash), Voters: voters,
		Predecessors: preds, Addr6: addr6, IPv6Only: only6})
	return nil
}

// voters are a record's voters, sorted and without duplicates; nil for
// none.
func (d *vpnDecoder) voters() ([]netip.Addr, error) {
	if d.s.voters == 0 {
		return nil, nil
	}
	voters := make([]netip.Addr, 0, d.s.voters)
	for _, lc := range d.lcs {
		if lc.ASN == d.asn && lc.Data1 == lcVoter {
			v := uintAddr(lc.Data2)
			if err := checkNode(d.pools, v, "voter"); err != nil {
				return nil, err
			}
			voters = append(voters, v)
		}
	}
	slices.SortFunc(voters, netip.Addr.Compare)
	return slices.Compact(voters), nil
}

// predecessors are the earlier incarnations a record names, sorted and
// without duplicates; nil for none. A record never names its own
// (d.node.Inc).
func (d *vpnDecoder) predecessors() ([]uint32, error) {
	if d.s.preds == 0 {
		return nil, nil
	}
	preds := make([]uint32, 0, d.s.preds)
	for _, lc := range d.lcs {
		if lc.ASN == d.asn && lc.Data1 == lcPredecessor {
			if lc.Data2 == d.node.Inc {
				return nil, fmt.Errorf("a record names its own incarnation %08x as an earlier one: %w", d.node.Inc, ErrNotReef)
			}
			preds = append(preds, lc.Data2)
		}
	}
	slices.Sort(preds)
	return slices.Compact(preds), nil
}

// claim decodes a claim of a block of a configured pool.
func (d *vpnDecoder) claim() error {
	s := &d.s
	if err := s.require(d.asn, lcInc, lcVoterHash, lcState); err != nil {
		return err
	}
	if err := checkBlock(d.pools, d.prefix); err != nil {
		return err
	}
	st := s.get(lcState)
	if st > 255 || !blockproto.ClaimState(st).Valid() {
		return fmt.Errorf("unknown claim state %d: %w", st, ErrNotReef)
	}
	d.node.Inc = s.get(lcInc)
	d.t.Claims = append(d.t.Claims, blockproto.Claim{Block: d.prefix, Owner: d.node, State: blockproto.ClaimState(st), VoterHash: s.get(lcVoterHash)})
	return nil
}

// grant decodes a vote for a block of a configured pool.
func (d *vpnDecoder) grant() error {
	s := &d.s
	if err := s.require(d.asn, lcInc, lcVoterHash, lcGrantee, lcGranteeInc); err != nil {
		return err
	}
	if err := checkBlock(d.pools, d.prefix); err != nil {
		return err
	}
	to := blockproto.Node{Addr: uintAddr(s.get(lcGrantee)), Inc: s.get(lcGranteeInc)}
	if err := checkNode(d.pools, to.Addr, "grantee"); err != nil {
		return err
	}
	d.node.Inc = s.get(lcInc)
	d.t.Grants = append(d.t.Grants, blockproto.Grant{Block: d.prefix, Voter: d.node, To: to, VoterHash: s.get(lcVoterHash)})
	return nil
}

// forget decodes a forget: its prefix is the forgotten incarnation.
func (d *vpnDecoder) forget() error {
	if err := d.s.require(d.asn, lcInc); err != nil {
		return err
	}
	if d.prefix.Bits() != 32 {
		return fmt.Errorf("a forget's prefix must be a /32: %w", ErrNotReef)
	}
	d.node.Inc = d.s.get(lcInc)
	if p := addrUint(d.prefix.Addr()); p != d.node.Inc {
		return fmt.Errorf("forgets incarnation %08x by its prefix but %08x by its community: %w", p, d.node.Inc, ErrNotReef)
	}
	d.t.Forgets = append(d.t.Forgets, blockproto.Forget{Node: d.node})
	return nil
}

// seen decodes a seen incarnation: its prefix is the incarnation, with
// the IPv6 address that incarnation's record announced, if any.
func (d *vpnDecoder) seen() error {
	if err := d.s.require(d.asn, lcInc); err != nil {
		return err
	}
	if d.prefix.Bits() != 32 {
		return fmt.Errorf("a seen incarnation's prefix must be a /32: %w", ErrNotReef)
	}
	d.node.Inc = d.s.get(lcInc)
	if p := addrUint(d.prefix.Addr()); p != d.node.Inc {
		return fmt.Errorf("names incarnation %08x by its prefix but %08x by its community: %w", p, d.node.Inc, ErrNotReef)
	}
	addr6, err := d.s.addr6(d.asn, d.pools)
	if err != nil {
		return err
	}
	d.t.Seen = append(d.t.Seen, blockproto.Seen{Node: d.node, Addr6: addr6})
	return nil
}

// checkFamily accepts a prefix of the path's family: IPv4 in VPN-IPv4,
// IPv6 (not IPv4-mapped: an IPv4 block has one encoding) in VPN-IPv6.
func checkFamily(afi AFI, prefix netip.Prefix) error {
	a := prefix.Addr()
	switch {
	case afi == AFIIPv4 && a.Is4(), afi == AFIIPv6 && a.Is6() && !a.Is4In6():
		return nil
	case afi != AFIIPv4 && afi != AFIIPv6:
		return fmt.Errorf("%s is not a family of reef's: %w", afi, ErrNotReef)
	case a.Is4In6():
		return fmt.Errorf("IPv4-mapped prefix in %s: %w", afi, ErrNotReef)
	}
	return fmt.Errorf("prefix of the other family in %s: %w", afi, ErrNotReef)
}

// checkBlock accepts a prefix inside a configured pool of its family with
// exactly that pool's block length, without host bits. An IPv4-mapped IPv6
// prefix is no block: an IPv4 block has one encoding.
func checkBlock(pools []Pool, prefix netip.Prefix) error {
	if prefix.Addr().Is4In6() {
		return fmt.Errorf("IPv4-mapped: %w", ErrNotReef)
	}
	inPool := false
	for _, p := range pools {
		if p.CIDR.Contains(prefix.Addr()) && prefix.Bits() >= p.CIDR.Bits() {
			if prefix.Bits() != p.BlockSize {
				return fmt.Errorf("inside pool %s but not a /%d block: %w", p.CIDR, p.BlockSize, ErrNotReef)
			}
			// The protocol uses the first 2^32 blocks of a pool (all of an
			// IPv4 pool's): a block past them no node claims.
			bp := blockproto.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}
			if last := bp.Block(bp.NumBlocks() - 1); prefix.Addr().Compare(last.Addr()) > 0 {
				return fmt.Errorf("past the %d blocks of pool %s the protocol uses (the last is %s): %w", bp.NumBlocks(), p.CIDR, last, ErrNotReef)
			}
			inPool = true
		}
	}
	if !inPool {
		return fmt.Errorf("outside every pool: %w", ErrNotReef)
	}
	if prefix != prefix.Masked() {
		return fmt.Errorf("host bits set: %w", ErrNotReef)
	}
	return nil
}

// checkNode accepts a node address: unicast IPv4, outside every pool (a
// pod address is never a node's).
func checkNode(pools []Pool, a netip.Addr, role string) error {
	if !a.Is4() || !a.IsGlobalUnicast() {
		return fmt.Errorf("%s %s is not a unicast IPv4 address: %w", role, a, ErrNotReef)
	}
	for _, p := range pools {
		if p.CIDR.Contains(a) {
			return fmt.Errorf("%s %s is a pod address (pool %s): %w", role, a, p.CIDR, ErrNotReef)
		}
	}
	return nil
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintAddr(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}
