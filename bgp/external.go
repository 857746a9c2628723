package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// External peers are the node's routers (a ToR, a core router, a
// firewall): sessions in IPv4 unicast, and IPv6 unicast when the node has
// an IPv6 address (Config.NodeAddressV6), eBGP when their AS differs from
// the cluster's. To them the node exports its own confirmed blocks (IPv4
// ones next hop the node's address, IPv6 ones its IPv6 address) and
// nothing else; from them it imports nothing. Both rules are GoBGP
// policies on the global RIB, keyed on the neighbour set of the external
// peers, and hold for both families:
//
//   - export: a path the speaker originated (route type local) goes out,
//     with the peer's communities added; every other path (other nodes'
//     blocks, learned over the mesh or from reflectors) is rejected. The
//     speaker originates unicast paths only for its confirmed blocks
//     (Speaker.AnnounceTable), and the block protocol's VPN families are
//     not negotiated on these sessions, so claims, votes and tombstones
//     never reach a router.
//   - import: every path is rejected. It stays in the peer's Adj-RIB-In,
//     bounded by the peer's prefix limit, where ExternalStatus counts it by
//     the reason it would be dangerous (ExternalDropReason).

// ExternalPeer is one of the node's routers.
type ExternalPeer struct {
	Address   netip.Addr
	ASN       uint32 // eBGP when it differs from Config.ASN, iBGP when equal
	Port      int    // the router's BGP port
	Password  string // TCP MD5; "" for none
	Keepalive time.Duration
	Hold      time.Duration
	// Multihop is the TTL of an eBGP session to a router that is not
	// directly connected; 0 for a directly connected one.
	Multihop uint8
	// MaxPrefixes is the session's prefix limit: past it, the session is
	// torn down and stays down until `reef peer reset` or a restart.
	MaxPrefixes uint32
	// Communities are added to every block and service CIDR exported to
	// the peer: standard ("65000:100") or large ("65000:1:2").
	Communities []string
	// BFD, if set, runs BFD with the router (nil: off).
	BFD *BFD
}

// BFD are the timers of a BFD session with an external peer, run by
// GoBGP's BFD (single-hop, RFC 5881: UDP port 3784, TTL 255,
// asynchronous mode, no echo, no authentication). MinInterval is both
// what reef sends at and the slowest it accepts from the router; the
// router declares the node dead after Multiplier intervals without a
// packet, and tears the BGP session down with it, and reef does the same
// on its side (GoBGP resets the session when BFD goes down).
type BFD struct {
	MinInterval time.Duration
	Multiplier  uint8
}

// Names of the policies and sets of external peers.
const (
	externalSet          = "reef-external-peers"
	externalExportPolicy = "reef-external-export"
	externalImportPolicy = "reef-external-import"
)

// external returns the external peer at a, if it is one.
func (cfg *Config) external(a netip.Addr) (ExternalPeer, bool) {
	for _, p := range cfg.ExternalPeers {
		if p.Address == a {
			return p, true
		}
	}
	return ExternalPeer{}, false
}

// SplitCommunities sorts communities into standard and large ones, and
// refuses one that is neither (the config check names the key).
func SplitCommunities(cs []string) (standard, large []string, err error) {
	for _, c := range cs {
		parts := strings.Split(c, ":")
		bits := 16
		if len(parts) == 3 {
			bits = 32
		} else if len(parts) != 2 {
			return nil, nil, fmt.Errorf("community %q is neither AS:value (standard) nor AS:value:value (large)", c)
		}
		for _, p := range parts {
			if _, err := strconv.ParseUint(p, 10, bits); err != nil {
				return nil, nil, fmt.Errorf("community %q: %q is not a number from 0 to %d", c, p, uint64(1)<<bits-1)
			}
		}
		if bits == 16 {
			standard = append(standard, c)
		} else {
			large = append(large, c)
		}
	}
	return standard, large, nil
}

// addExternalPeers installs the export and import policies of the
// external peers and adds the peers. Policies first: a session that comes
// up before its export policy exists would be sent the whole table.
func (sp *Speaker) addExternalPeers(ctx context.Context) error {
	peers := sp.cfg.ExternalPeers
	if len(peers) == 0 {
		return nil
	}
	var all []string
	for _, p := range peers {
		all = append(all, netip.PrefixFrom(p.Address, p.Address.BitLen()).String())
	}
	if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: externalSet, List: all,
	}}); err != nil {
		return fmt.Errorf("define the external BGP peers %v: %w", all, err)
	}
	export, err := sp.externalExportStatements(ctx, all)
	if err != nil {
		return err
	}
	if err := sp.addExternalPolicies(ctx, export); err != nil {
		return err
	}
	if err := sp.announceServices(); err != nil {
		return err
	}
	for _, p := range peers {
		if err := sp.addExternalPeer(ctx, p); err != nil {
			return fmt.Errorf("add external BGP peer %s (AS %d): %w", p.Address, p.ASN, err)
		}
	}
	if why := sp.cfg.v6Withheld(); why != "" {
		sp.log.Warn(why)
	}
	return nil
}

// externalExportStatements are the statements of the external peers'
// export policy, in order: the Service addresses, the stand-ins, each
// peer's communities on the node's own paths, then the node's own paths
// accepted and the rest rejected. all are the peers' neighbour sets'
// entries, in the order of Config.ExternalPeers.
func (sp *Speaker) externalExportStatements(ctx context.Context, all []string) ([]*api.Statement, error) {
	export, err := sp.serviceExportStatements(ctx, externalSet)
	if err != nil {
		return nil, err
	}
	standIns, err := sp.standInStatements(ctx)
	if err != nil {
		return nil, err
	}
	export = append(export, standIns...)
	for i, p := range sp.cfg.ExternalPeers {
		st, err := sp.communityStatement(ctx, i, p, all[i])
		if err != nil {
			return nil, err
		}
		if st != nil {
			export = append(export, st)
		}
	}
	externals := &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: externalSet}
	return append(export,
		&api.Statement{
			Name:       externalExportPolicy + "-own",
			Conditions: &api.Conditions{NeighborSet: externals, RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		},
		&api.Statement{
			Name:       externalExportPolicy + "-rest",
			Conditions: &api.Conditions{NeighborSet: externals},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		}), nil
}

// communityStatement is the statement that adds the communities of the
// i-th external peer p, whose neighbour set's entry is member, to the
// node's own paths it is sent; nil when p has none. It defines p's own
// neighbour set.
func (sp *Speaker) communityStatement(ctx context.Context, i int, p ExternalPeer, member string) (*api.Statement, error) {
	std, large, err := SplitCommunities(p.Communities)
	if err != nil {
		return nil, fmt.Errorf("external BGP peer %s: %w", p.Address, err)
	}
	if len(std) == 0 && len(large) == 0 {
		return nil, nil
	}
	set := fmt.Sprintf("%s-%d", externalSet, i)
	if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: set, List: []string{member},
	}}); err != nil {
		return nil, fmt.Errorf("define external BGP peer %s: %w", p.Address, err)
	}
	act := &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}
	if len(std) > 0 {
		act.Community = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: std}
	}
	if len(large) > 0 {
		act.LargeCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: large}
	}
	return &api.Statement{
		Name:       fmt.Sprintf("%s-own-%d", externalExportPolicy, i),
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set}, RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    act,
	}, nil
}

// addExternalPolicies adds the external peers' export policy (export)
// and their import policy, which takes nothing, and assigns both to the
// global RIB.
func (sp *Speaker) addExternalPolicies(ctx context.Context, export []*api.Statement) error {
	s := sp.s
	if err := s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: externalExportPolicy, Statements: export}}); err != nil {
		return fmt.Errorf("add the export policy of external BGP peers: %w", err)
	}
	if err := s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: externalImportPolicy, Statements: []*api.Statement{{
		Name:       externalImportPolicy + "-none",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: externalSet}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("add the import policy of external BGP peers: %w", err)
	}
	for dir, name := range map[api.PolicyDirection]string{
		api.PolicyDirection_POLICY_DIRECTION_EXPORT: externalExportPolicy,
		api.PolicyDirection_POLICY_DIRECTION_IMPORT: externalImportPolicy,
	} {
		if err := s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name: "", Direction: dir, // "": the global RIB
			Policies: []*api.Policy{{Name: name}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
		}}); err != nil {
			return fmt.Errorf("assign the policy %s: %w", name, err)
		}
	}
	return nil
}

// externalFamilies are the unicast families of the session with the
// external peer at peer. With a router at an IPv4 address: IPv4, and IPv6
// when the node has an IPv6 address to be the next hop of its IPv6
// blocks. With one at an IPv6 address: IPv6 only, the node's IPv6 address
// both the session's local address and the blocks' next hop. IPv4 blocks
// over an IPv6 session would need an IPv4 next hop the session cannot
// give without RFC 8950 (extended next hop), which reef does not offer; a
// dual-stack node lists the router's IPv4 address for them.
func (cfg *Config) externalFamilies(peer netip.Addr) []bgppkt.Family {
	switch {
	case peer.Is6():
		return []bgppkt.Family{bgppkt.RF_IPv6_UC}
	case cfg.NodeAddressV6.IsValid():
		return []bgppkt.Family{bgppkt.RF_IPv4_UC, bgppkt.RF_IPv6_UC}
	}
	return []bgppkt.Family{bgppkt.RF_IPv4_UC}
}

// externalGracefulRestart is what a router is offered of graceful
// restart: as in the mesh, the R bit and the restart time, so that a
// restart of the daemon (planned or a crash, the kernel alive: Config.
// Restarting) keeps the router's routes to this node's blocks; none
// toward a router with BFD. A router keeps a peer's routes over a graceful
// restart when the peer's connection closes, which it does at once when
// only the daemon dies (kill -9, an OOM kill): FRR then ignores the BFD
// down that follows and keeps a dead daemon's node for the restart time
// (BIRD ends the restart on it). Without the capability both routers drop
// the node's routes when its connection closes or BFD goes down, the
// sub-second failover asked of BFD; over a planned restart the Service
// addresses are drained first and the other nodes stand in for the node's
// IPv4 blocks (standin.go, docs/bgp.md "BFD").
func externalGracefulRestart(p ExternalPeer, gr *api.GracefulRestart) *api.GracefulRestart {
	if !p.keepsOverRestart() {
		return nil
	}
	return gr
}

// keepsOverRestart says whether router p keeps the node's paths over a
// restart of its daemon: it is offered graceful restart, which a router
// with BFD is not (externalGracefulRestart).
func (p ExternalPeer) keepsOverRestart() bool { return p.BFD == nil }

func (sp *Speaker) addExternalPeer(ctx context.Context, p ExternalPeer) error {
	return sp.s.AddPeer(ctx, &api.AddPeerRequest{Peer: sp.externalPeer(p)})
}

// externalPeer is router p as GoBGP is given it.
func (sp *Speaker) externalPeer(p ExternalPeer) *api.Peer {
	var families []*api.AfiSafi
	for _, rf := range sp.cfg.externalFamilies(p.Address) {
		afi := api.Family_AFI_IP
		if rf == bgppkt.RF_IPv6_UC {
			afi = api.Family_AFI_IP6
		}
		families = append(families, afiSafi(afi, api.Family_SAFI_UNICAST, p.MaxPrefixes))
	}
	gr := externalGracefulRestart(p, sp.gracefulRestart())
	if gr == nil {
		// No graceful restart per family either. GoBGP reads the
		// families' setting alone when it decides whose End-of-RIB a
		// restarting node waits for before it sends its own updates
		// (RFC 4724 4.1), and counts a peer with it that is not yet
		// established as one to wait for; a BFD router that came up after
		// the cluster's sessions then held every update to the cluster
		// back until the deferral timer (10 s), the mark's removal that
		// ends the other nodes' stand-ins among them. Nothing checks
		// again when such a peer comes up, since it is not restarting.
		// (Since then no router is waited for at all, restartWaitsFor;
		// this keeps the families in line with the capability.)
		for _, f := range families {
			f.MpGracefulRestart = nil
		}
	}
	peer := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password, Description: "external"},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:                 3,
			HoldTime:                     uint64(p.Hold / time.Second),
			KeepaliveInterval:            uint64(p.Keepalive / time.Second),
			MinimumAdvertisementInterval: 0, // a new block reaches the router at once
			IdleHoldTimeAfterReset:       1,
		}},
		GracefulRestart: gr,
		AfiSafis:        families,
		Transport:       &api.Transport{LocalAddress: sp.cfg.local(p.Address).String(), RemotePort: uint32(p.Port)},
	}
	if p.Multihop > 0 {
		peer.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	if b := p.BFD; b != nil {
		us := uint32(b.MinInterval / time.Microsecond)
		peer.Bfd = &api.BfdPeerConfig{Enabled: true, DesiredMinimumTxInterval: us, RequiredMinimumReceive: us, DetectionMultiplier: uint32(b.Multiplier)}
	}
	return peer
}

// The reasons ExternalDropReason gives, as `reef status -o json` keys them.
const (
	DropDefault       = "defaultRoute"  // 0.0.0.0/0 or ::/0
	DropPoolAggregate = "poolAggregate" // shorter than a block, overlapping a pool
	DropBlock         = "block"         // exactly a block of a pool: blocks are learned from the cluster only
	DropInsideBlock   = "insideBlock"   // longer than a block, inside a pool: would steal pod addresses
	DropNodeAddress   = "nodeAddress"   // covers a node's address: would steer node traffic
	DropOther         = "other"         // anything else: reef imports nothing from routers
)

// DropReasons are the reasons in the order `reef status` shows them.
var DropReasons = []string{DropDefault, DropPoolAggregate, DropBlock, DropInsideBlock, DropNodeAddress, DropOther}

// ExternalDropReason says why a route from an external peer must not be
// installed; reef imports none, and this sorts them for the operator by
// the harm each would do. nodes are the addresses and subnets of the
// cluster's nodes (this node, its peers, bgp.peerPrefixes).
func ExternalDropReason(prefix netip.Prefix, pools []Pool, nodes []netip.Prefix) string {
	prefix = prefix.Masked()
	if prefix.Bits() == 0 {
		return DropDefault
	}
	for _, p := range pools {
		if !p.CIDR.Overlaps(prefix) {
			continue
		}
		switch {
		case prefix.Bits() < p.BlockSize:
			return DropPoolAggregate
		case prefix.Bits() == p.BlockSize:
			return DropBlock
		default:
			return DropInsideBlock
		}
	}
	for _, n := range nodes {
		if n.Overlaps(prefix) {
			return DropNodeAddress
		}
	}
	return DropOther
}

// md5Hint follows the state of an external peer with a TCP MD5 password
// that is not established: a password that differs at the router gives no
// error anywhere, since each kernel drops the other's segments unanswered,
// and the session only waits, as for a router that is down.
const md5Hint = " (no answer: the router is down or unreachable, or its TCP MD5 password differs from bgp.externalPeers[].password)"

// ExternalStatus is one external peer as `reef status` shows it.
type ExternalStatus struct {
	PeerStatus
	ASN         uint32
	MaxPrefixes uint32            // per family
	Sent        uint64            // blocks and service CIDRs exported to it (its Adj-RIB-Out), both families
	Dropped     map[string]uint64 // its routes, all dropped, by reason (DropReasons)
	// Withheld says why some of the node's blocks are not exported to it
	// (IPv6 blocks without a node IPv6 address), "" when none are.
	Withheld string
	// BFD is the state of the BFD session with it: BFDUp, BFDDown,
	// BFDInit, BFDAdminDown; BFDOff ("") without bfd.
	BFD string
}

// ExternalStatus lists the external peers, in the order of the config,
// with what was sent to each and what each sent, by drop reason, in every
// unicast family of the session. It reads each peer's Adj-RIB-In and
// Adj-RIB-Out (bounded by the prefix limit and by the node's own blocks),
// so it is for `reef status`, not for a loop.
func (sp *Speaker) ExternalStatus(ctx context.Context) []ExternalStatus {
	if len(sp.cfg.ExternalPeers) == 0 {
		return nil
	}
	sessions := map[netip.Addr]PeerStatus{}
	for _, s := range sp.Sessions(ctx) {
		sessions[s.Address] = s
	}
	nodes := slices.Clone(sp.cfg.PeerPrefixes)
	for _, a := range append(append([]netip.Addr{sp.cfg.RouterID, sp.cfg.NodeAddressV6}, sp.cfg.Peers...), sp.cfg.RouteReflectors...) {
		if a.IsValid() {
			nodes = append(nodes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	withheld := sp.cfg.v6Withheld()
	bfd := sp.BFDStates(ctx)
	var out []ExternalStatus
	for _, p := range sp.cfg.ExternalPeers {
		st := ExternalStatus{PeerStatus: sessions[p.Address], ASN: p.ASN, MaxPrefixes: p.MaxPrefixes, Dropped: map[string]uint64{}, Withheld: withheld, BFD: bfd[p.Address]}
		st.Address, st.Type = p.Address, PeerExternal
		switch {
		case st.State == "":
			st.State = "idle"
		case st.CutOff:
			st.State = fmt.Sprintf("cut off: sent more than maxPrefixes %d routes; closed until `reef peer reset %s` or a restart", p.MaxPrefixes, p.Address)
		case (st.State == "active" || st.State == "connect") && p.Password != "":
			st.State += md5Hint
		}
		if !st.Established {
			out = append(out, st) // GoBGP would list what it would send
			continue
		}
		for _, rf := range sp.cfg.externalFamilies(p.Address) {
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: p.Address.String(), Family: rf},
				func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
					uc, ok := nlri.(*bgppkt.IPAddrPrefix)
					for range paths {
						st.Received++
						if ok {
							st.Dropped[ExternalDropReason(uc.Prefix, sp.cfg.Pools, nodes)]++
						} else {
							st.Dropped[DropOther]++
						}
					}
				})
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: p.Address.String(), Family: rf},
				func(_ bgppkt.NLRI, paths []*apiutil.Path) {
					for _, path := range paths {
						if !path.Withdrawal {
							st.Sent++
						}
					}
				})
		}
		out = append(out, st)
	}
	return out
}
