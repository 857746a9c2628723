package bgp

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/reefcni/reef/blockproto"
)

// Decoding and validation of learned block protocol paths: a path is
// believed only when it is exactly what a reef node may announce.

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
