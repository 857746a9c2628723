package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// Stand-ins for IPv6 blocks. The IPv4 ones are other nodes' IPv4
// unicast paths passed on by an export statement (standin.go); IPv6
// blocks never travel between the nodes in IPv6 unicast, only as the
// block protocol's claims in VPN-IPv6, which cannot be exported to a
// router as IPv6 unicast. So the stand-ins for them are originated:
//
//   - The owner, on a planned stop, announces the VPN-IPv6 claims of its
//     confirmed IPv6 blocks again marked 65535:0 (mark); a standard
//     community, which the block protocol does not read (DecodeVPN reads
//     large communities only), so an older reef sees the same claims. It
//     starts marked after a planned stop too, and unmarks once its BFD
//     routers have its IPv6 blocks (unmarkWhenRouted, routedBy).
//   - Every node with StandInPeers6 notes which claims of other nodes
//     carry the mark (onBestPath: noteMark6) and, from those and the
//     learned claims and records, computes the stand-ins it wants
//     (wantStandIns6, pure): a confirmed claim of another node, marked,
//     whose owner's record names its IPv6 address. It originates an IPv6
//     unicast path per block, next hop the owner's IPv6 address, tagged
//     <asn>:124:0, and withdraws it when the mark or the claim is gone
//     (applyStandIns6: a diff against what it announced, idempotent).
//   - Export statements send tagged paths to the StandInPeers6 with the
//     cluster's AS prepended once more, and reject them to every other
//     peer: other routers, the mesh, reflectors (which do not negotiate
//     IPv6 unicast anyway). Nothing is taken from routers (external.go),
//     and nothing reads IPv6 unicast from the mesh, so a stand-in is
//     never believed back; 124 is outside what DecodeVPN lets in.

// lcStandIn tags an originated stand-in (<asn>:124:0), for the export
// statements to tell it from the node's own IPv6 blocks.
const lcStandIn = 124

// StandInPeers6 are the external peers a node stands in toward for IPv6
// blocks: with BFD, eBGP, single-hop, and a session that carries IPv6
// unicast (the node has an IPv6 address: externalFamilies).
func StandInPeers6(cfg *Config) []ExternalPeer {
	if !cfg.NodeAddressV6.IsValid() {
		return nil
	}
	var out []ExternalPeer
	for _, p := range cfg.ExternalPeers {
		if p.BFD != nil && p.ASN != cfg.ASN && p.Multihop == 0 {
			out = append(out, p)
		}
	}
	return out
}

// standsIn6 reports whether the node marks its IPv6 blocks for stand-ins:
// it has an IPv6 pool and StandInPeers6.
func (cfg *Config) standsIn6() bool {
	return len(StandInPeers6(cfg)) > 0 && slices.ContainsFunc(cfg.Pools, func(p Pool) bool { return p.CIDR.Addr().Is6() })
}

// marksVPN reports whether the node's VPN path k goes out marked: the
// claim of a confirmed IPv6 block while the node's blocks are marked.
func (sp *Speaker) marksVPN(k vpnKey, confirmed6 map[netip.Prefix]bool) bool {
	return sp.marked && k.kind == KindClaim && k.prefix.Addr().Is6() && confirmed6[k.prefix] && sp.cfg.standsIn6()
}

// withMark is a copy of p with the mark 65535:0 as its only standard
// community, or without standard communities.
func withMark(p *apiutil.Path, on bool) *apiutil.Path {
	q := *p
	q.Attrs = slices.DeleteFunc(slices.Clone(p.Attrs), func(a bgppkt.PathAttributeInterface) bool {
		_, ok := a.(*bgppkt.PathAttributeCommunities)
		return ok
	})
	if on {
		q.Attrs = append(q.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{GracefulShutdownCommunity}))
	}
	return &q
}

// standIn6 is one originated stand-in: next hop the owner's IPv6
// address, with the owner's incarnation in its communities.
type standIn6 struct {
	Owner6 netip.Addr
	Owner  blockproto.Node
}

// wantStandIns6 are the IPv6 blocks the node stands in for: each marked
// claim (by owner and block) that is a confirmed claim of another node
// than self in claims, whose owner has a record of the same incarnation
// with an IPv6 address. Two owners of one block (never, once confirmed)
// give the lower owner.
func wantStandIns6(self netip.Addr, marked map[nlriKey]bool, claims map[nlriKey]blockproto.Claim, records map[nlriKey]blockproto.Record) map[netip.Prefix]standIn6 {
	out := map[netip.Prefix]standIn6{}
	for k := range marked {
		c, ok := claims[k]
		if !ok || c.State != blockproto.Confirmed || !c.Block.Addr().Is6() || c.Owner.Addr == self || c.Owner.Addr != k.rd {
			continue
		}
		r, ok := records[nlriKey{c.Owner.Addr, netip.PrefixFrom(c.Owner.Addr, 32)}]
		if !ok || r.Node.Inc != c.Owner.Inc || !r.Addr6.IsValid() {
			continue
		}
		if prev, ok := out[c.Block]; ok && prev.Owner.Addr.Less(c.Owner.Addr) {
			continue
		}
		out[c.Block] = standIn6{Owner6: r.Addr6, Owner: c.Owner}
	}
	return out
}

// noteMark6 notes whether the VPN path p of key, another node's, is a
// marked IPv6 claim; gone reports it withdrawn or replaced by the node's
// own. It reports whether the marks changed.
func (sp *Speaker) noteMark6(key vpnKey, p *apiutil.Path, gone bool) bool {
	if key.kind != KindClaim || !key.prefix.Addr().Is6() || len(StandInPeers6(&sp.cfg)) == 0 {
		return false
	}
	n := nlriKey{key.rd, key.prefix}
	on := !gone && hasCommunity(p.Attrs, GracefulShutdownCommunity)
	sp.lmu.Lock()
	defer sp.lmu.Unlock()
	if sp.marks6[n] == on {
		return false
	}
	if on {
		if sp.marks6 == nil {
			sp.marks6 = map[nlriKey]bool{}
		}
		sp.marks6[n] = true
	} else {
		delete(sp.marks6, n)
	}
	return true
}

// standInLoop applies the stand-ins each time the marks or the learned
// table change (wakeStandIns), until ctx ends.
func (sp *Speaker) standInLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sp.standInWake:
		}
		sp.lmu.Lock()
		want := wantStandIns6(sp.cfg.RouterID, sp.marks6, sp.learned.claims, sp.learned.records)
		sp.lmu.Unlock()
		if err := sp.applyStandIns6(want); err != nil {
			sp.log.Error("stand-ins for IPv6 blocks", "error", err)
		}
	}
}

// wakeStandIns wakes standInLoop; it never blocks.
func (sp *Speaker) wakeStandIns() {
	if sp.standInWake == nil {
		return
	}
	select {
	case sp.standInWake <- struct{}{}:
	default:
	}
}

// applyStandIns6 announces the stand-ins of want that are not announced
// as they are, and withdraws those announced that want lacks. Calling it
// again with the same want changes nothing.
func (sp *Speaker) applyStandIns6(want map[netip.Prefix]standIn6) error {
	sp.standInMu.Lock()
	defer sp.standInMu.Unlock()
	if sp.standIns6 == nil {
		sp.standIns6 = map[netip.Prefix]ownPath{}
	}
	var errs []error
	var adds []*apiutil.Path
	var addBlocks []netip.Prefix
	var addLCs [][]LargeCommunity
	for b, w := range want {
		lcs := append(EncodeUnicast(sp.cfg.ASN, UnicastBlock{Block: b, Owner: w.Owner}), LargeCommunity{sp.cfg.ASN, lcStandIn, 0})
		if cur, ok := sp.standIns6[b]; ok && cur.nh == w.Owner6 && slices.Equal(cur.lcs, lcs) {
			continue
		}
		if err := checkUnicast6(sp.cfg.ASN, sp.cfg.Pools, b, w.Owner6, lcs[:2]); err != nil {
			errs = append(errs, fmt.Errorf("stand in for %s: %w", b, err))
			continue
		}
		path, err := unicastPath(b, w.Owner6, lcs)
		if err != nil {
			errs = append(errs, fmt.Errorf("stand in for %s: %w", b, err))
			continue
		}
		adds, addBlocks, addLCs = append(adds, path), append(addBlocks, b), append(addLCs, lcs)
	}
	sp.addPaths(adds, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("stand in for %s: %w", addBlocks[i], err))
			return
		}
		sp.standIns6[addBlocks[i]] = ownPath{path: adds[i], lcs: addLCs[i], nh: want[addBlocks[i]].Owner6}
		sp.log.Info("standing in for another node's IPv6 block at the BFD routers", "block", addBlocks[i], "owner", want[addBlocks[i]].Owner6)
	})
	var dels []*apiutil.Path
	var delBlocks []netip.Prefix
	for b, cur := range sp.standIns6 {
		if _, ok := want[b]; !ok {
			dels, delBlocks = append(dels, cur.path), append(delBlocks, b)
		}
	}
	sp.deletePaths(dels, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("withdraw the stand-in for %s: %w", delBlocks[i], err))
			return
		}
		delete(sp.standIns6, delBlocks[i])
		sp.log.Info("stand-in for another node's IPv6 block withdrawn", "block", delBlocks[i])
	})
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Names of the sets and statements of the IPv6 stand-ins.
const (
	standInTag   = "reef-stand-in6-tag"        // <asn>:124:0
	standInPeer6 = "reef-stand-in6-peer"       // one per peer: -<i>
	standInStmt6 = "reef-external-export-6for" // one per peer: -<i>, then -rest
)

// standInPolicy6 is the IPv6 stand-ins' export statements and the sets
// they name, from the config alone: tagged paths to each StandInPeers6,
// the AS prepended and the peer's communities added, and to no other
// peer. None without such a peer.
func standInPolicy6(cfg *Config) ([]*api.Statement, []*api.DefinedSet) {
	tag := func() *api.MatchSet { return &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: standInTag} }
	stmts, sets := standInExports(cfg, standInFamily{
		peers: StandInPeers6(cfg), peerSet: standInPeer6, stmt: standInStmt6,
		sets: []*api.DefinedSet{{DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: standInTag, List: []string{fmt.Sprintf("^%d:%d:0$", cfg.ASN, lcStandIn)}}},
		match: func() *api.Conditions {
			return &api.Conditions{
				RouteType:         api.Conditions_ROUTE_TYPE_LOCAL,
				LargeCommunitySet: tag(),
				AfiSafiIn:         []*api.Family{{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}},
			}
		},
		actions: func(std []string) *api.Actions {
			if len(std) == 0 {
				return &api.Actions{}
			}
			return &api.Actions{Community: &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: std}}
		},
	})
	if len(stmts) == 0 {
		return nil, nil
	}
	stmts = append(stmts, &api.Statement{
		Name:       standInStmt6 + "-rest",
		Conditions: &api.Conditions{LargeCommunitySet: tag()},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	})
	return stmts, sets
}
