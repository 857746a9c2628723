package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// vpnKey is the NLRI of a VPN path, less the label: what GoBGP keys its
// table by (one path per peer per key).
type vpnKey struct {
	rd     netip.Addr
	kind   Kind
	prefix netip.Prefix
}

// ownPath is one path the speaker announces, as it last announced it.
type ownPath struct {
	path   *apiutil.Path
	lcs    []LargeCommunity
	nh     netip.Addr
	marked bool // 65535:0, for the other nodes to stand in (standin.go, standin6.go)
}

// entry names one announcement of a table, for errors: its kind and its
// index in the table's slice of that kind (or in confirmed, for
// kindUnicast).
type entry struct {
	kind Kind
	i    int
}

const kindUnicast Kind = 0

func describe(t *blockproto.Table, confirmed []UnicastBlock, e entry) string {
	switch e.kind {
	case KindRecord:
		r := t.Records[e.i]
		if r.Addr6.IsValid() {
			return fmt.Sprintf("record of %s (born %d, voters %v, IPv6 address %s)", r.Node, r.Born, r.Voters, r.Addr6)
		}
		return fmt.Sprintf("record of %s (born %d, voters %v)", r.Node, r.Born, r.Voters)
	case KindClaim:
		c := t.Claims[e.i]
		return fmt.Sprintf("claim of %s by %s (%s)", c.Block, c.Owner, c.State)
	case KindGrant:
		g := t.Grants[e.i]
		return fmt.Sprintf("grant of %s by %s to %s", g.Block, g.Voter, g.To)
	case KindForget:
		return fmt.Sprintf("forget of %s", t.Forgets[e.i].Node)
	case KindSeen:
		return fmt.Sprintf("seen incarnation %s", t.Seen[e.i].Node)
	}
	b := confirmed[e.i]
	return fmt.Sprintf("confirmed block %s of %s (%s unicast)", b.Block, b.Owner, familyName(b.Block))
}

func familyName(p netip.Prefix) string {
	if p.Addr().Is6() {
		return "IPv6"
	}
	return "IPv4"
}

// vpnFamilies are the block protocol's families in GoBGP's terms.
var vpnFamilies = []struct {
	rf  bgppkt.Family
	afi AFI
}{{bgppkt.RF_IPv4_VPN, AFIIPv4}, {bgppkt.RF_IPv6_VPN, AFIIPv6}}

// vpnAFI is the block protocol's family of a GoBGP family, if it is one.
func vpnAFI(rf bgppkt.Family) (AFI, bool) {
	for _, f := range vpnFamilies {
		if f.rf == rf {
			return f.afi, true
		}
	}
	return 0, false
}

// AnnounceTable makes the node's own VPN paths (VPN-IPv4, and VPN-IPv6 for
// the claims and grants of IPv6 blocks) exactly t's entries and its own
// unicast paths exactly the confirmed blocks: the IPv4 ones in IPv4
// unicast, next hop the owner; the IPv6 ones in IPv6 unicast, next hop
// Config.NodeAddressV6, and not at all without one (Start said so). New and
// changed paths are added (a new path replaces the old one of the same
// NLRI), the rest withdrawn. An entry that fails the import filter every
// peer applies (DecodeVPN, DecodeUnicast, checkUnicast6) is not announced,
// nor two different entries of one NLRI (the first is); the error names
// each such entry and each path GoBGP refused. Paths GoBGP refused are
// tried again at the next call.
func (sp *Speaker) AnnounceTable(t blockproto.Table, confirmed []UnicastBlock) error {
	a := &announcement{t: &t, confirmed: confirmed}
	defer func() { // restart.go; after the unlock
		if !a.refused {
			sp.blocksIn()
		}
	}()
	sp.announcing.Lock()
	defer sp.announcing.Unlock()
	want := a.wantVPN(sp.cfg.ASN)
	sp.addVPN(a, want)
	sp.withdrawVPN(a, want)
	wantUC := sp.wantUnicast(a)
	sp.addUnicast(a, wantUC)
	sp.withdrawUnicast(a, wantUC)
	return errors.Join(a.errs...)
}

// announcement is one call of AnnounceTable: what it announces, and the
// errors of the entries it does not.
type announcement struct {
	t         *blockproto.Table
	confirmed []UnicastBlock
	errs      []error
	// refused: GoBGP refused an add or a withdrawal, which the next call
	// tries again (the entries the import filter refuses would never go
	// in: they do not count).
	refused bool
}

// fail records that the entry e is not announced, and why.
func (a *announcement) fail(e entry, err error) {
	a.errs = append(a.errs, fmt.Errorf("announce %s: %w", describe(a.t, a.confirmed, e), err))
}

// vpnWant is one VPN path of the table, with the entry it encodes.
type vpnWant struct {
	rt VPNRoute
	e  entry
}

// wantVPN encodes the table's entries, keyed by NLRI. Of two entries of
// one NLRI the first is kept, and the second is an error unless its
// communities are the same.
func (a *announcement) wantVPN(asn uint32) map[vpnKey]vpnWant {
	t := a.t
	want := make(map[vpnKey]vpnWant, t.Len())
	add := func(e entry, rt VPNRoute, err error) {
		if err != nil {
			a.fail(e, err)
			return
		}
		k := vpnKey{rt.RD.Addr, Kind(rt.RD.Number), rt.Prefix}
		if prev, ok := want[k]; ok {
			if !slices.Equal(prev.rt.Communities, rt.Communities) {
				a.fail(e, fmt.Errorf("same NLRI %s as the %s, which is announced instead", rt, describe(t, a.confirmed, prev.e)))
			}
			return
		}
		want[k] = vpnWant{rt, e}
	}
	for i, r := range t.Records {
		rt, err := EncodeRecord(asn, r)
		add(entry{KindRecord, i}, rt, err)
	}
	for i, c := range t.Claims {
		rt, err := EncodeClaim(asn, c)
		add(entry{KindClaim, i}, rt, err)
	}
	for i, g := range t.Grants {
		rt, err := EncodeGrant(asn, g)
		add(entry{KindGrant, i}, rt, err)
	}
	for i, f := range t.Forgets {
		rt, err := EncodeForget(asn, f)
		add(entry{KindForget, i}, rt, err)
	}
	for i, x := range t.Seen {
		rt, err := EncodeSeen(asn, x)
		add(entry{KindSeen, i}, rt, err)
	}
	return want
}

// addVPN adds the paths of want that are new or differ from what the
// speaker announced (next hop, communities, the graceful shutdown mark).
// A path every peer would drop, or that cannot be encoded, leaves want, so
// that withdrawVPN withdraws what was announced before.
func (sp *Speaker) addVPN(a *announcement, want map[vpnKey]vpnWant) {
	var (
		asn, pools = sp.cfg.ASN, sp.cfg.Pools
		adds       []*apiutil.Path
		addKeys    []vpnKey
		addWhat    []entry
		addLCs     [][]LargeCommunity
		scratch    blockproto.Table
		nextHop    = sp.cfg.RouterID
		vpnNH, _   = bgppkt.NewPathAttributeNextHop(nextHop)
		confirmed6 = confirmedIPv6(a.confirmed)
	)
	for k, w := range want {
		marked := sp.marksVPN(k, confirmed6)
		if cur, ok := sp.ownVPN[k]; ok && cur.nh == nextHop && slices.Equal(cur.lcs, w.rt.Communities) && cur.marked == marked {
			continue
		}
		scratch = blockproto.Table{Records: scratch.Records[:0], Claims: scratch.Claims[:0], Grants: scratch.Grants[:0], Forgets: scratch.Forgets[:0], Seen: scratch.Seen[:0]}
		if err := DecodeVPN(asn, pools, w.rt.AFI(), w.rt.RD, w.rt.Prefix, w.rt.Communities, &scratch); err != nil {
			a.fail(w.e, fmt.Errorf("every peer would drop it: %w", err))
			delete(want, k)
			continue
		}
		p, err := vpnPath(w.rt, vpnNH)
		if err != nil {
			a.fail(w.e, err)
			delete(want, k)
			continue
		}
		if marked {
			p.Attrs = append(p.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{GracefulShutdownCommunity}))
		}
		adds, addKeys, addWhat, addLCs = append(adds, p), append(addKeys, k), append(addWhat, w.e), append(addLCs, w.rt.Communities)
	}
	sp.addPaths(adds, func(i int, err error) {
		if err != nil {
			a.fail(addWhat[i], err)
			a.refused = true
			return
		}
		sp.ownVPN[addKeys[i]] = ownPath{path: adds[i], lcs: addLCs[i], nh: nextHop, marked: hasCommunity(adds[i].Attrs, GracefulShutdownCommunity)}
	})
}

// confirmedIPv6 is the set of the IPv6 blocks of confirmed.
func confirmedIPv6(confirmed []UnicastBlock) map[netip.Prefix]bool {
	confirmed6 := map[netip.Prefix]bool{}
	for _, b := range confirmed {
		if b.Block.Addr().Is6() {
			confirmed6[b.Block] = true
		}
	}
	return confirmed6
}

// withdrawVPN withdraws the speaker's own VPN paths that want lacks.
func (sp *Speaker) withdrawVPN(a *announcement, want map[vpnKey]vpnWant) {
	var dels []*apiutil.Path
	var delKeys []vpnKey
	for k, cur := range sp.ownVPN {
		if _, ok := want[k]; !ok {
			dels, delKeys = append(dels, cur.path), append(delKeys, k)
		}
	}
	sp.deletePaths(dels, func(i int, err error) {
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("withdraw %s %s: %w", delKeys[i].kind, dels[i].Nlri, err))
			a.refused = true
			return
		}
		delete(sp.ownVPN, delKeys[i])
	})
}

// wantUnicast maps each confirmed block the speaker announces in unicast
// to its index in a.confirmed. Of two entries of one block the first is
// kept, and the second is an error unless it is the same.
func (sp *Speaker) wantUnicast(a *announcement) map[netip.Prefix]int {
	wantUC := make(map[netip.Prefix]int, len(a.confirmed))
	for i, b := range a.confirmed {
		if b.Block.Addr().Is6() && !sp.cfg.NodeAddressV6.IsValid() {
			continue // no next hop for it (Start said so); not an error of the entry
		}
		if j, ok := wantUC[b.Block]; ok {
			if a.confirmed[j] != b {
				a.fail(entry{kindUnicast, i}, fmt.Errorf("same block as the %s, which is announced instead", describe(a.t, a.confirmed, entry{kindUnicast, j})))
			}
			continue
		}
		wantUC[b.Block] = i
	}
	return wantUC
}

// addUnicast adds the blocks of wantUC that are new or differ from what
// the speaker announced. A block every peer would drop, or that cannot be
// encoded, leaves wantUC, so that withdrawUnicast withdraws what was
// announced before.
func (sp *Speaker) addUnicast(a *announcement, wantUC map[netip.Prefix]int) {
	asn, pools := sp.cfg.ASN, sp.cfg.Pools
	var ucAdds []*apiutil.Path
	var ucIdx []int
	var ucLCs [][]LargeCommunity
	var ucNH []netip.Addr
	for p, i := range wantUC {
		b := a.confirmed[i]
		lcs := EncodeUnicast(asn, b)
		nh := b.Owner.Addr
		if b.Block.Addr().Is6() {
			nh = sp.cfg.NodeAddressV6
		}
		if cur, ok := sp.ownUnicast[p]; ok && cur.nh == nh && slices.Equal(cur.lcs, lcs) && cur.marked == sp.marks4(p) {
			continue
		}
		var err error
		if b.Block.Addr().Is6() {
			err = checkUnicast6(asn, pools, b.Block, nh, lcs)
		} else {
			_, err = DecodeUnicast(asn, pools, b.Block, nh, lcs)
		}
		if err != nil {
			a.fail(entry{kindUnicast, i}, fmt.Errorf("every peer would drop it: %w", err))
			delete(wantUC, p)
			continue
		}
		path, err := sp.blockPath(b.Block, nh, lcs)
		if err != nil {
			a.fail(entry{kindUnicast, i}, err)
			delete(wantUC, p)
			continue
		}
		ucAdds, ucIdx, ucLCs, ucNH = append(ucAdds, path), append(ucIdx, i), append(ucLCs, lcs), append(ucNH, nh)
	}
	sp.addPaths(ucAdds, func(j int, err error) {
		b := a.confirmed[ucIdx[j]]
		if err != nil {
			a.fail(entry{kindUnicast, ucIdx[j]}, err)
			a.refused = true
			return
		}
		sp.ownUnicast[b.Block] = ownPath{path: ucAdds[j], lcs: ucLCs[j], nh: ucNH[j], marked: sp.marks4(b.Block)}
	})
}

// withdrawUnicast withdraws the speaker's own unicast blocks that wantUC
// lacks.
func (sp *Speaker) withdrawUnicast(a *announcement, wantUC map[netip.Prefix]int) {
	var dels []*apiutil.Path
	var delPrefixes []netip.Prefix
	for p, cur := range sp.ownUnicast {
		if _, ok := wantUC[p]; !ok {
			dels, delPrefixes = append(dels, cur.path), append(delPrefixes, p)
		}
	}
	sp.deletePaths(dels, func(i int, err error) {
		if err != nil {
			a.errs = append(a.errs, fmt.Errorf("withdraw confirmed block %s (%s unicast): %w", delPrefixes[i], familyName(delPrefixes[i]), err))
			a.refused = true
			return
		}
		delete(sp.ownUnicast, delPrefixes[i])
	})
}

// addPaths adds ps in one GoBGP call and reports each path to done. GoBGP
// answers a call in which a path fails with that error alone (having added
// the others), so then each is added again on its own to tell which
// (adding a path again only sends the peers the same UPDATE again).
func (sp *Speaker) addPaths(ps []*apiutil.Path, done func(i int, err error)) {
	if len(ps) == 0 {
		return
	}
	resps, err := sp.s.AddPath(apiutil.AddPathRequest{Paths: ps})
	if err == nil && len(resps) == len(ps) {
		for i := range ps {
			done(i, resps[i].Error)
		}
		return
	}
	if len(ps) == 1 {
		done(0, err)
		return
	}
	for i, p := range ps {
		_, err := sp.s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
		done(i, err)
	}
}

// deletePaths withdraws ps in one GoBGP call, or one by one if that fails
// (GoBGP then withdraws none of them), and reports each path to done.
func (sp *Speaker) deletePaths(ps []*apiutil.Path, done func(i int, err error)) {
	if len(ps) == 0 {
		return
	}
	if err := sp.s.DeletePath(apiutil.DeletePathRequest{Paths: ps}); err == nil || len(ps) == 1 {
		for i := range ps {
			done(i, err)
		}
		return
	}
	for i, p := range ps {
		done(i, sp.s.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{p}}))
	}
}

func largeCommunities(lcs []LargeCommunity) *bgppkt.PathAttributeLargeCommunities {
	vals := make([]*bgppkt.LargeCommunity, len(lcs))
	for i, lc := range lcs {
		vals[i] = bgppkt.NewLargeCommunity(lc.ASN, lc.Data1, lc.Data2)
	}
	return bgppkt.NewPathAttributeLargeCommunities(vals)
}

// vpnPath is rt as a GoBGP path in rt's family: label 0, next hop nh
// (GoBGP moves it into MP_REACH_NLRI; in VPN-IPv6 an IPv4 next hop goes as
// an IPv4-mapped IPv6 address, as RFC 4659 has it for an IPv4 core), no
// route target.
func vpnPath(rt VPNRoute, nh *bgppkt.PathAttributeNextHop) (*apiutil.Path, error) {
	if nh == nil {
		return nil, errors.New("the router ID is not an IPv4 address")
	}
	rd, err := bgppkt.NewRouteDistinguisherIPAddressAS(rt.RD.Addr, rt.RD.Number)
	if err != nil {
		return nil, fmt.Errorf("encode route distinguisher %s: %w", rt.RD, err)
	}
	nlri, err := bgppkt.NewLabeledVPNIPAddrPrefix(rt.Prefix, *bgppkt.NewMPLSLabelStack(0), rd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", rt, err)
	}
	family := bgppkt.RF_IPv4_VPN
	if rt.AFI() == AFIIPv6 {
		family = bgppkt.RF_IPv6_VPN
	}
	return &apiutil.Path{
		Family: family,
		Nlri:   nlri,
		Attrs:  []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nh, largeCommunities(rt.Communities)},
	}, nil
}

// unicastPath is a block (or a service CIDR) as a GoBGP path of its
// family (IPv4 or IPv6 unicast) with next hop nh and, if any, the large
// communities lcs.
func unicastPath(block netip.Prefix, nh netip.Addr, lcs []LargeCommunity) (*apiutil.Path, error) {
	nlri, err := bgppkt.NewIPAddrPrefix(block)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", block, err)
	}
	nhAttr, err := bgppkt.NewPathAttributeNextHop(nh)
	if err != nil {
		return nil, fmt.Errorf("encode next hop %s: %w", nh, err)
	}
	family := bgppkt.RF_IPv4_UC
	if block.Addr().Is6() {
		family = bgppkt.RF_IPv6_UC
	}
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nhAttr}
	if len(lcs) > 0 {
		attrs = append(attrs, largeCommunities(lcs))
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs}, nil
}
