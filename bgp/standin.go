package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// Stand-ins: a router with BFD drops a node's pod blocks as soon as the
// node's BFD session goes down, and a planned restart of reef takes BFD
// down like a crash does (BIRD 2 even with graceful restart: bfd.go). The
// pods on the node have no other path, so a Service-style drain cannot
// help them. Instead, the other nodes announce the restarting node's
// blocks for it while it is away, next hop the owner itself, which still
// forwards to its pods (docs/bgp.md, "Planned restarts"):
//
//   - The owner, on a planned stop (SIGTERM), announces its IPv4 blocks
//     again marked with RFC 8326's GRACEFUL_SHUTDOWN community (65535:0),
//     and waits until GoBGP has written them to its cluster peers, then
//     gracefulShutdownTime, before it exits (PlannedStop). The same paths
//     reach its routers marked: one that honours the community (the
//     documented configs do) prefers the stand-ins while the owner is
//     still up.
//   - Every node, by an export policy statement per external peer with
//     BFD (eBGP, IPv4: StandInPeers), sends such a router every block
//     path it learned over the cluster's sessions that carries the mark:
//     next hop unchanged (the owner's own address, as the owner set it),
//     the cluster's AS prepended once more (so the owner's own path wins
//     when both are there), 65535:0 taken off (a stand-in is not going
//     away) and the peer's communities added. Nothing else of another
//     node's ever goes to a router, and nothing of this goes to the
//     cluster: the statements match external peers only.
//   - While the owner is away its peers keep its marked paths, stale,
//     over graceful restart; the stand-ins last as long. The new daemon
//     announces its blocks marked too (Config.PlannedMark), until each of
//     its own BFD routers is established and has been sent its blocks
//     (unmarkWhenRouted): only then can the peers withdraw their
//     stand-ins without a gap at the router. A node that never comes back
//     loses its stale paths, and the stand-ins with them, when the restart
//     time ends.
//
// A node that is killed or cut off marks nothing: no stand-ins, and BFD
// takes its routes away as before.

// StandInPeers are the external peers a node stands in toward for IPv4
// blocks: those with BFD (without it, graceful restart already keeps the
// owner's routes), over eBGP (GoBGP sends an iBGP peer nothing it learned
// over iBGP), at IPv4 addresses (a session at an IPv6 address carries no
// IPv4 unicast: externalFamilies). StandInPeers6 are those for IPv6
// blocks.
func StandInPeers(cfg *Config) []ExternalPeer {
	var out []ExternalPeer
	for _, p := range cfg.ExternalPeers {
		if p.BFD != nil && p.ASN != cfg.ASN && p.Address.Is4() && p.Multihop == 0 {
			out = append(out, p)
		}
	}
	return out
}

// standsIn reports whether the node marks blocks for stand-ins, of
// either family (standsIn4, standsIn6).
func (cfg *Config) standsIn() bool {
	return cfg.standsIn4() || cfg.standsIn6()
}

// standsIn4 reports whether the node marks its IPv4 blocks for
// stand-ins: it has IPv4 blocks to mark and external peers that IPv4
// stand-ins go to. The other nodes of a rack have the same routers, so a
// node without such routers asks nobody, and its stop does not wait for
// nothing. A node whose BFD routers are all at IPv6 addresses marks its
// IPv4 blocks no more than one without BFD routers: its IPv4 routers,
// without BFD, keep its IPv4 blocks over graceful restart, and the mark
// would only lower the preference of its one path there, and ask the
// other nodes to announce its blocks to their IPv4 BFD routers, which
// this node does not peer with.
func (cfg *Config) standsIn4() bool {
	return cfg.NodeAddress.IsValid() && len(StandInPeers(cfg)) > 0
}

// marks4 reports whether the node's block p goes out marked: an IPv4
// block while the node's blocks are marked and it marks IPv4 ones. The
// caller holds sp.announcing.
func (sp *Speaker) marks4(p netip.Prefix) bool {
	return sp.marked && p.Addr().Is4() && sp.cfg.standsIn4()
}

// Names of the sets and statements of the stand-ins.
const (
	standInBlocks = "reef-stand-in-blocks"     // the IPv4 pools' blocks, exactly
	standInMarked = "reef-stand-in-marked"     // 65535:0
	standInPeer   = "reef-stand-in-peer"       // one per peer: -<i>
	standInStmt   = "reef-external-export-for" // one per peer: -<i>
)

// standInStatements define the sets of the stand-ins and return the
// export statements that send marked blocks of other nodes to the
// StandInPeers; none when there is no such peer or no IPv4 pool.
func (sp *Speaker) standInStatements(ctx context.Context) ([]*api.Statement, error) {
	stmts, sets := standInPolicy(&sp.cfg)
	stmts6, sets6 := standInPolicy6(&sp.cfg)
	stmts, sets = append(stmts, stmts6...), append(sets, sets6...)
	for _, set := range sets {
		if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: set}); err != nil {
			return nil, fmt.Errorf("define %s for the stand-ins: %w", set.Name, err)
		}
	}
	return stmts, nil
}

// standInPolicy is the stand-ins' export statements and the sets they
// name, from the config alone.
func standInPolicy(cfg *Config) ([]*api.Statement, []*api.DefinedSet) {
	var blocks []*api.Prefix
	for _, p := range cfg.Pools {
		if p.CIDR.Addr().Is4() {
			blocks = append(blocks, &api.Prefix{IpPrefix: p.CIDR.Masked().String(), MaskLengthMin: uint32(p.BlockSize), MaskLengthMax: uint32(p.BlockSize)})
		}
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	return standInExports(cfg, standInFamily{
		peers: StandInPeers(cfg), peerSet: standInPeer, stmt: standInStmt,
		sets: []*api.DefinedSet{
			{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: standInBlocks, Prefixes: blocks},
			{DefinedType: api.DefinedType_DEFINED_TYPE_COMMUNITY, Name: standInMarked, List: []string{"65535:0"}},
		},
		match: func() *api.Conditions {
			return &api.Conditions{
				RouteType:    api.Conditions_ROUTE_TYPE_INTERNAL, // learned from the cluster
				PrefixSet:    &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: standInBlocks},
				CommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: standInMarked},
				AfiSafiIn:    []*api.Family{{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}},
			}
		},
		actions: func(std []string) *api.Actions {
			act := &api.Actions{
				// GoBGP sets an eBGP peer's next hop to itself for a path
				// it did not originate; unchanged puts the owner's back.
				Nexthop: &api.NexthopAction{Unchanged: true},
				// The mark off: a router that honours it would give the
				// stand-in local preference 0 as well.
				Community: &api.CommunityAction{Type: api.CommunityAction_TYPE_REMOVE, Communities: []string{"65535:0"}},
			}
			if len(std) > 0 {
				// The owner's block carries no other standard community.
				act.Community = &api.CommunityAction{Type: api.CommunityAction_TYPE_REPLACE, Communities: std}
			}
			return act
		},
	})
}

// standInFamily is what the export statements of one family's
// stand-ins (standInPolicy, standInPolicy6) differ in.
type standInFamily struct {
	peers         []ExternalPeer
	peerSet, stmt string            // the names of a peer's neighbor set and statement, before -<i>
	sets          []*api.DefinedSet // the sets match names
	// match is what a statement matches besides its peer; actions what
	// it does, given the peer's standard communities, besides accepting
	// with the AS prepended once more and the peer's large communities
	// added.
	match   func() *api.Conditions
	actions func(std []string) *api.Actions
}

// standInExports is a statement per peer of f, and the sets they name
// (f's own first); none without a peer.
func standInExports(cfg *Config, f standInFamily) ([]*api.Statement, []*api.DefinedSet) {
	if len(f.peers) == 0 {
		return nil, nil
	}
	sets := f.sets
	var stmts []*api.Statement
	for i, p := range f.peers {
		set := fmt.Sprintf("%s-%d", f.peerSet, i)
		sets = append(sets, &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: set, List: []string{netip.PrefixFrom(p.Address, p.Address.BitLen()).String()}})
		std, large, _ := SplitCommunities(p.Communities) // checked by addExternalPeers
		act := f.actions(std)
		act.RouteAction = api.RouteAction_ROUTE_ACTION_ACCEPT
		act.AsPrepend = &api.AsPrependAction{Asn: cfg.ASN, Repeat: 1}
		if len(large) > 0 {
			act.LargeCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: large}
		}
		cond := f.match()
		cond.NeighborSet = &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set}
		stmts = append(stmts, &api.Statement{Name: fmt.Sprintf("%s-%d", f.stmt, i), Conditions: cond, Actions: act})
	}
	return stmts, sets
}

// blockPath is the path of one of the node's blocks, marked with 65535:0
// when the speaker's IPv4 blocks are (marks4).
func (sp *Speaker) blockPath(block netip.Prefix, nh netip.Addr, lcs []LargeCommunity) (*apiutil.Path, error) {
	path, err := unicastPath(block, nh, lcs)
	if err != nil || !sp.marks4(block) {
		return path, err
	}
	path.Attrs = append(path.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{GracefulShutdownCommunity}))
	return path, nil
}

// mark announces the node's IPv4 blocks again with the mark on or off
// (when it marks them at all: standsIn4), and the claims of its IPv6
// ones (standsIn6), and returns those blocks.
func (sp *Speaker) mark(on bool) ([]netip.Prefix, error) {
	sp.announcing.Lock()
	defer sp.announcing.Unlock()
	sp.marked = on
	var blocks []netip.Prefix
	var paths []*apiutil.Path
	for p, cur := range sp.ownUnicast {
		if !p.Addr().Is4() || !sp.cfg.standsIn4() {
			continue
		}
		path, err := sp.blockPath(p, cur.nh, cur.lcs)
		if err != nil {
			return nil, err
		}
		blocks, paths = append(blocks, p), append(paths, path)
	}
	var errs []error
	sp.addPaths(paths, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("announce block %s again (marked %v): %w", blocks[i], on, err))
			return
		}
		cur := sp.ownUnicast[blocks[i]]
		cur.path, cur.marked = paths[i], sp.marks4(blocks[i])
		sp.ownUnicast[blocks[i]] = cur
	})
	// The IPv6 blocks: their confirmed claims in VPN-IPv6, the only
	// paths of them the other nodes get (standin6.go).
	confirmed6 := map[netip.Prefix]bool{}
	for p := range sp.ownUnicast {
		if p.Addr().Is6() {
			confirmed6[p] = true
		}
	}
	var keys []vpnKey
	paths = paths[:0]
	for k, cur := range sp.ownVPN {
		want := sp.marksVPN(k, confirmed6)
		if !(k.kind == KindClaim && confirmed6[k.prefix]) || cur.marked == want {
			continue
		}
		keys, paths = append(keys, k), append(paths, withMark(cur.path, want))
	}
	sp.addPaths(paths, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("announce the claim of block %s again (marked %v): %w", keys[i].prefix, on, err))
			return
		}
		cur := sp.ownVPN[keys[i]]
		cur.path, cur.marked = paths[i], hasCommunity(paths[i].Attrs, GracefulShutdownCommunity)
		sp.ownVPN[keys[i]] = cur
	})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	for p := range confirmed6 {
		if sp.cfg.standsIn6() {
			blocks = append(blocks, p)
		}
	}
	slices.SortFunc(blocks, netip.Prefix.Compare)
	return blocks, nil
}

// PlannedStop asks the other nodes to stand in for this node's IPv4
// blocks at their BFD routers: it announces them marked and waits until
// GoBGP has written them to every established peer of the cluster (mesh
// or reflector), or ctx ends. It returns those peers; none when there is
// nothing to mark (no IPv4 block, no established cluster peer, no
// external peer with BFD on this node: standsIn). The caller waits for
// the peers to pass the stand-ins on (a few milliseconds: no decision of
// anyone's is involved) before it stops.
func (sp *Speaker) PlannedStop(ctx context.Context) ([]netip.Addr, error) {
	if !sp.cfg.standsIn() {
		return nil, nil
	}
	var peers []netip.Addr
	for _, s := range sp.snapshot() {
		if s.Type != PeerExternal && s.Established {
			peers = append(peers, s.Address)
		}
	}
	if len(peers) == 0 {
		return nil, nil
	}
	before, err := sp.UpdateCounts(ctx)
	if err != nil {
		return nil, err
	}
	blocks, err := sp.mark(true)
	if err != nil || len(blocks) == 0 {
		return nil, err
	}
	sp.log.Info("planned stop: blocks marked GRACEFUL_SHUTDOWN (65535:0) for the other nodes to stand in at their BFD routers", "blocks", blocks, "peers", peers)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := sp.notSentTo(ctx, peers, blocks, before, true, true)
		if err == nil && len(missing) == 0 {
			return peers, nil
		}
		select {
		case <-ctx.Done():
			return peers, fmt.Errorf("marked blocks not sent to %v: %w", missing, ctx.Err())
		case <-tick.C:
		}
	}
}

// notSentTo are the peers of peers, still established, to which GoBGP
// has not yet written every block of blocks marked as wanted: their
// Adj-RIB-Out lacks one so, or their count of UPDATEs written has not
// moved past before. An IPv4 block is looked for in IPv4 unicast; an IPv6
// one in VPN-IPv6, as its confirmed claim, toward the cluster (vpn6), and
// in IPv6 unicast, unmarked (only IPv4 blocks go to routers marked),
// toward a router.
func (sp *Speaker) notSentTo(ctx context.Context, peers []netip.Addr, blocks []netip.Prefix, before map[netip.Addr]Updates, marked, vpn6 bool) ([]netip.Addr, error) {
	has6 := slices.ContainsFunc(blocks, func(p netip.Prefix) bool { return p.Addr().Is6() })
	return sp.unsentPeers(ctx, peers, before, func(peer netip.Addr) bool {
		seen := map[netip.Prefix]bool{}
		_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer.String(), Family: bgppkt.RF_IPv4_UC},
			func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
				uc, ok := nlri.(*bgppkt.IPAddrPrefix)
				if !ok || !slices.Contains(blocks, uc.Prefix) {
					return
				}
				for _, p := range paths {
					if !p.Withdrawal && hasCommunity(p.Attrs, GracefulShutdownCommunity) == marked {
						seen[uc.Prefix] = true
					}
				}
			})
		if has6 && vpn6 {
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer.String(), Family: bgppkt.RF_IPv6_VPN},
				func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
					vpn, ok := nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
					if !ok || !slices.Contains(blocks, vpn.Prefix) {
						return
					}
					if rd := rdOf(vpn.RD); rd.Addr != sp.cfg.RouterID || Kind(rd.Number) != KindClaim {
						return
					}
					for _, p := range paths {
						if !p.Withdrawal && hasCommunity(p.Attrs, GracefulShutdownCommunity) == marked {
							seen[vpn.Prefix] = true
						}
					}
				})
		} else if has6 {
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer.String(), Family: bgppkt.RF_IPv6_UC},
				func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
					uc, ok := nlri.(*bgppkt.IPAddrPrefix)
					if !ok || !slices.Contains(blocks, uc.Prefix) {
						return
					}
					for _, p := range paths {
						if !p.Withdrawal {
							seen[uc.Prefix] = true
						}
					}
				})
		}
		return len(seen) >= len(blocks)
	})
}

// standInSettle is how long a starting node keeps its blocks marked after
// its BFD routers have been sent them: for the routers to take them in
// before the other nodes withdraw their stand-ins.
const standInSettle = time.Second

// unmarkWhenRouted runs on a node that starts marked (Config.PlannedMark):
// once it has IPv4 blocks announced and every one of its StandInPeers is
// established and has been sent them, it waits standInSettle and takes
// the mark off, which ends the other nodes' stand-ins. It gives up
// waiting after the restart time, as long as a router would keep the
// node's routes over graceful restart, and takes the mark off anyway.
func (sp *Speaker) unmarkWhenRouted(ctx context.Context) {
	deadline := time.Now().Add(sp.cfg.RestartTime)
	peers := StandInPeers(&sp.cfg)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		blocks, routed := sp.routedBy(ctx, peers)
		if time.Now().After(deadline) {
			if blocks > 0 {
				sp.log.Warn("blocks still marked for stand-ins after the restart time: taking the mark off; a router may not have this node's blocks", "routers", peers)
			}
			break
		}
		if routed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(standInSettle):
			}
			break
		}
	}
	blocks, err := sp.mark(false)
	if err != nil {
		sp.log.Error("take the stand-in mark off the blocks", "error", err)
		return
	}
	sp.log.Info("started after a planned stop: the routers have this node's blocks; mark taken off, the other nodes' stand-ins end", "blocks", blocks, "routers", peers)
}

// routedBy counts the node's IPv4 blocks announced, and reports whether
// there are some and every one of peers is established and has been sent
// them (its Adj-RIB-Out holds them and GoBGP has written UPDATEs to it).
func (sp *Speaker) routedBy(ctx context.Context, peers []ExternalPeer) (int, bool) {
	sp.announcing.Lock()
	var blocks []netip.Prefix
	for p := range sp.ownUnicast {
		if p.Addr().Is4() || sp.cfg.standsIn6() {
			blocks = append(blocks, p)
		}
	}
	sp.announcing.Unlock()
	if len(blocks) == 0 {
		return 0, false
	}
	up := map[netip.Addr]bool{}
	for _, s := range sp.snapshot() {
		up[s.Address] = s.Established
	}
	var addrs, addrs6 []netip.Addr
	for _, p := range peers {
		if !up[p.Address] {
			return len(blocks), false
		}
		addrs = append(addrs, p.Address)
	}
	for _, p := range StandInPeers6(&sp.cfg) {
		if !up[p.Address] {
			return len(blocks), false
		}
		addrs6 = append(addrs6, p.Address)
	}
	var blocks4, blocks6 []netip.Prefix
	for _, b := range blocks {
		if b.Addr().Is4() {
			blocks4 = append(blocks4, b)
		} else {
			blocks6 = append(blocks6, b)
		}
	}
	missing, err := sp.notSentTo(ctx, addrs, blocks4, nil, true, false)
	if err != nil || len(missing) > 0 {
		return len(blocks), false
	}
	missing, err = sp.notSentTo(ctx, addrs6, blocks6, nil, true, false)
	return len(blocks), err == nil && len(missing) == 0
}

// StandIn is another node's block this node announces to one of its
// routers for it, next hop the owner.
type StandIn struct {
	Block         netip.Prefix
	Owner, Router netip.Addr
}

// String is the stand-in as `reef status` shows it.
func (s StandIn) String() string {
	return fmt.Sprintf("%s via %s to %s", s.Block, s.Owner, s.Router)
}

// StandIns are the stand-ins this node announces now: the blocks its
// established StandInPeers and StandInPeers6 are sent that are not its
// own. It reads their Adj-RIB-Out, so it is for `reef status` and a
// scrape, not for a loop.
func (sp *Speaker) StandIns(ctx context.Context) []StandIn {
	sp.announcing.Lock()
	own := make(map[netip.Prefix]bool, len(sp.ownUnicast))
	for p := range sp.ownUnicast {
		own[p] = true
	}
	sp.announcing.Unlock()
	up := map[netip.Addr]bool{}
	for _, s := range sp.snapshot() {
		up[s.Address] = s.Established
	}
	var out []StandIn
	for _, f := range []struct {
		peers  []ExternalPeer
		family bgppkt.Family
	}{{StandInPeers(&sp.cfg), bgppkt.RF_IPv4_UC}, {StandInPeers6(&sp.cfg), bgppkt.RF_IPv6_UC}} {
		for _, p := range f.peers {
			if !up[p.Address] {
				continue
			}
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: p.Address.String(), Family: f.family},
				func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
					uc, ok := nlri.(*bgppkt.IPAddrPrefix)
					if !ok || own[uc.Prefix] || checkBlock(sp.cfg.Pools, uc.Prefix) != nil {
						return // its own block, or a Service prefix
					}
					for _, path := range paths {
						if _, nh := pathAttrs(nil, path.Attrs); !path.Withdrawal {
							out = append(out, StandIn{Block: uc.Prefix, Owner: nh, Router: p.Address})
						}
					}
				})
		}
	}
	slices.SortFunc(out, func(a, b StandIn) int {
		if c := a.Block.Compare(b.Block); c != 0 {
			return c
		}
		return a.Router.Compare(b.Router)
	})
	return out
}

// BlocksMarked reports whether this node's IPv4 blocks go out marked for
// the other nodes to stand in for them.
func (sp *Speaker) BlocksMarked() bool {
	sp.announcing.Lock()
	defer sp.announcing.Unlock()
	return sp.marked
}

// MarkedBlocks counts this node's blocks that go out marked 65535:0 now,
// by family: its IPv4 blocks (in IPv4 unicast) and the claims of its
// IPv6 blocks (in VPN-IPv6).
func (sp *Speaker) MarkedBlocks() (ipv4, ipv6 int) {
	sp.announcing.Lock()
	defer sp.announcing.Unlock()
	for p, cur := range sp.ownUnicast {
		if cur.marked && p.Addr().Is4() {
			ipv4++
		}
	}
	for k, cur := range sp.ownVPN {
		if cur.marked && k.kind == KindClaim && k.prefix.Addr().Is6() {
			ipv6++
		}
	}
	return ipv4, ipv6
}

// StandInBlocks counts the blocks of other nodes this node stands in
// for now (StandIns), by family: a block sent to two routers counts
// once. It reads the routers' Adj-RIB-Out, so it is for a scrape, not
// for a loop.
func (sp *Speaker) StandInBlocks(ctx context.Context) (ipv4, ipv6 int) {
	seen := map[netip.Prefix]bool{}
	for _, s := range sp.StandIns(ctx) {
		if seen[s.Block] {
			continue
		}
		seen[s.Block] = true
		if s.Block.Addr().Is4() {
			ipv4++
		} else {
			ipv6++
		}
	}
	return ipv4, ipv6
}
