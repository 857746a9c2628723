package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/reefcni/reef/blockproto"
)

// Config is the speaker's configuration.
type Config struct {
	ASN  uint32
	Port int
	// RouterID is the node's identity (docs/design.md, "IPv6-only
	// nodes"): the BGP router ID, the RD and next hop of its VPN paths.
	// It is NodeAddress on a node that has one, bgp.routerID otherwise.
	RouterID netip.Addr
	// NodeAddress is the node's IPv4 address: the local address of its
	// IPv4 sessions and the next hop of its IPv4 blocks; unset, RouterID.
	NodeAddress netip.Addr
	// IPv6Only: the node has no IPv4 address (NodeAddress stays unset); it
	// offers no IPv4 unicast, and its sessions are to IPv6 peers.
	IPv6Only bool
	// NodeAddressV6 is the node's IPv6 address, the next hop of its
	// confirmed IPv6 blocks in IPv6 unicast to its external peers. Unset,
	// those blocks are not exported (the speaker logs why, once, and
	// ExternalStatus says it). It is the local address of sessions to IPv6
	// peers. The node is still known by RouterID alone: records, route
	// distinguishers, voters and grantees are 32-bit identities.
	NodeAddressV6 netip.Addr
	// ListenAddress is where the speaker takes sessions in; unset, every
	// IPv4 address (0.0.0.0). Two speakers in one host (tests) need one
	// each.
	ListenAddress netip.Addr
	// Peers are the configured neighbours: the other nodes of a full mesh,
	// or, on a route reflector, the other reflectors.
	Peers        []netip.Addr
	PeerPrefixes []netip.Prefix // sessions accepted passively from these
	// RouteReflectors are the reflectors a client peers with instead of
	// Peers: ordinary iBGP neighbours, which reflect its paths.
	RouteReflectors []netip.Addr
	// RouteReflector makes the speaker a route reflector (RFC 4456): the
	// sessions accepted through PeerPrefixes are its clients, Peers are
	// non-clients (the other reflectors), and the cluster ID is RouterID.
	RouteReflector bool
	// ExternalPeers are the node's routers (external.go): they get this
	// node's confirmed blocks and give it nothing.
	ExternalPeers []ExternalPeer
	// ServiceCIDRs are announced to the external peers, next hop the node
	// (services.go); never to the cluster's own sessions.
	ServiceCIDRs []netip.Prefix
	// ServiceAddressCIDRs hold the Service addresses the daemon may
	// announce to the external peers (SetServiceAddresses): as for
	// ServiceCIDRs, nothing inside them goes to the cluster's sessions or
	// is taken from any peer (serviceaddrs.go).
	ServiceAddressCIDRs []netip.Prefix
	Password            string // TCP MD5; "" for none
	Keepalive           time.Duration
	Hold                time.Duration
	// RestartTime is how long peers keep our routes after the session
	// drops: above the worst-case time for the daemon to come back.
	RestartTime time.Duration
	// Restarting sets the graceful-restart R bit: only after a planned
	// restart, so that peers do not hold our updates back otherwise.
	Restarting bool
	// PlannedMark starts the speaker with its IPv4 blocks marked for the
	// other nodes to stand in for them at their BFD routers, until its
	// own BFD routers have them (standin.go): after a planned stop.
	PlannedMark bool
	Pools       []Pool
	// LogLevel of GoBGP's own log lines.
	LogLevel slog.Level
}

const peerGroup = "reef"

// Speaker is the embedded GoBGP server of one node. GoBGP runs every API
// call through its own loop, so the methods are safe from any goroutine.
type Speaker struct {
	cfg Config
	s   *server.BgpServer
	log *slog.Logger

	// announcing serialises AnnounceTable (and the old Announce); it
	// guards the maps of what was announced.
	announcing sync.Mutex
	ownVPN     map[vpnKey]ownPath
	ownUnicast map[netip.Prefix]ownPath
	// marked: the IPv4 blocks go out marked 65535:0 (standin.go).
	marked bool

	mu        sync.Mutex
	badSeen   map[string]bool           // peer|prefix already logged as dropped
	stuck     map[netip.Addr]stuckState // peers seen between OPEN and Established
	waiting   map[netip.Addr]time.Time  // passive peers that never connected, since (dial.go)
	waitFor   time.Duration             // how long (passiveWait; tests shorten it)
	readd     map[netip.Addr]bool       // peers to add again as dialled ones (dial.go)
	sessions  map[netip.Addr]PeerStatus // from GoBGP's peer events (notePeer)
	named     map[netip.Addr]bool       // sessions whose hostname was looked up
	adminDown map[netip.Addr]time.Time  // peers whose events say admin down, since
	services  []netip.Prefix            // the service CIDRs added to the table (services.go)
	addrs     serviceAddrs              // the Service addresses originated (serviceaddrs.go)
	naming    sync.Mutex                // one hostname lookup at a time (Sessions)

	dropped atomic.Uint64

	lmu     sync.Mutex // guards learned and marks6
	learned learned    // the best paths of IPv4 VPN (learned.go)
	// marks6 are the other nodes' IPv6 claims that carry 65535:0
	// (standin6.go).
	marks6      map[nlriKey]bool
	standInWake chan struct{}            // wakes standInLoop; nil without StandInPeers6
	standInMu   sync.Mutex               // guards standIns6
	standIns6   map[netip.Prefix]ownPath // the IPv6 stand-ins originated
	// copiesUntil: LearnedTable reads every copy of every path until
	// then (a session went down; notePeer). Guarded by mu.
	copiesUntil time.Time
}

// Start runs the speaker and connects to the peers. onChange is called
// (from GoBGP's goroutines; it must not block) whenever a path or a peer
// changes.
func Start(ctx context.Context, cfg Config, log *slog.Logger, onChange func()) (*Speaker, error) {
	sp, err := listen(ctx, cfg, log, onChange)
	if err != nil {
		return nil, err
	}
	if err := sp.connect(ctx); err != nil {
		return nil, err
	}
	return sp, nil
}

// listen starts the GoBGP server, with no peers yet. (Tests with several
// speakers in one process start them all before any connects: GoBGP's
// StartBgp writes a package variable that the sessions of other servers
// in the process read.)
func listen(ctx context.Context, cfg Config, log *slog.Logger, onChange func()) (*Speaker, error) {
	if !cfg.NodeAddress.IsValid() && !cfg.IPv6Only {
		cfg.NodeAddress = cfg.RouterID
	}
	if cfg.NodeAddressV6.IsValid() {
		if err := checkAddr6(cfg.Pools, cfg.NodeAddressV6, "node IPv6 address"); err != nil {
			return nil, fmt.Errorf("start BGP: %w: it cannot be the next hop of the node's IPv6 blocks", err)
		}
	}
	lvl := &slog.LevelVar{}
	lvl.Set(cfg.LogLevel)
	s := server.NewBgpServer(server.LoggerOption(log.With("component", "gobgp"), lvl))
	go s.Serve()
	sp := &Speaker{cfg: cfg, s: s, log: log, ownVPN: map[vpnKey]ownPath{}, ownUnicast: map[netip.Prefix]ownPath{}, badSeen: map[string]bool{}, standInWake: make(chan struct{}, 1),
		stuck: map[netip.Addr]stuckState{}, waiting: map[netip.Addr]time.Time{}, waitFor: passiveWait, readd: map[netip.Addr]bool{}, sessions: map[netip.Addr]PeerStatus{}, named: map[netip.Addr]bool{}, adminDown: map[netip.Addr]time.Time{}}

	sp.marked = cfg.standsIn() && cfg.PlannedMark

	listen := []string{"0.0.0.0"}
	if cfg.NodeAddressV6.IsValid() && cfg.ipv6Peers() {
		listen = append(listen, "::")
	}
	if cfg.ListenAddress.IsValid() {
		listen = []string{cfg.ListenAddress.String()}
	}
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:             cfg.ASN,
		RouterId:        cfg.RouterID.String(),
		ListenPort:      int32(cfg.Port),
		ListenAddresses: listen,
		// Only the families reef speaks: without a list GoBGP builds a
		// table for each of the 30 it knows, twice (global and route
		// server RIB), at 2,048 map shards each, 8 MiB of heap.
		Families: cfg.families(),
	}}); err != nil {
		return nil, fmt.Errorf("start BGP (AS %d, router ID %s, port %d): %w", cfg.ASN, cfg.RouterID, cfg.Port, err)
	}
	// Woken by changes of the best paths, not by every UPDATE received:
	// GoBGP builds the whole peer configuration for each UPDATE it hands an
	// update watcher, 9% of a route-reflector client's CPU. A second copy
	// of a path (through the other reflector) says what the best copy
	// says. The same events keep LearnedTable's mirror, and only a change
	// of the mirror wakes the step (learned.go). The watcher is set before
	// any peer is added, so the mirror misses no change.
	if err := s.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnBestPath:   sp.watchBestPath(onChange),
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, t time.Time) { sp.notePeer(ev, t); onChange() },
	}, server.WatchBestPath(false), server.WatchPeer()); err != nil {
		return nil, fmt.Errorf("watch BGP events: %w", err)
	}
	return sp, nil
}

// connect adds the peers, the peer group for peerPrefixes and, on a route
// reflector, its import policy, and starts the session watcher.
func (sp *Speaker) connect(ctx context.Context) error {
	cfg, s := &sp.cfg, sp.s
	// The external peers' policies before the reflector's: GoBGP appends
	// each policy assigned to a direction of the global RIB to those
	// assigned before, and the first with a verdict decides. The
	// reflector's import policy accepts a path another reflector
	// originates, so it must come after the service sets' import policy,
	// which drops a Service address from any peer. (The export policies
	// match disjoint neighbours, and reject where they overlap.)
	if err := sp.addExternalPeers(ctx); err != nil {
		return err
	}
	if cfg.RouteReflector {
		if err := sp.acceptOwnPathsOnly(ctx, cfg.Peers); err != nil {
			return err
		}
	}
	// Configured peers first: a configured peer that connects before it is
	// added would otherwise be taken in as a dynamic one, and adding it
	// afterwards fails ("can't overwrite the existing peer").
	now := time.Now()
	for _, peer := range cfg.configured() {
		if cfg.self(peer) {
			continue // a config shared by all nodes lists this one too
		}
		passive := cfg.passive(peer) // dial.go
		if err := sp.addPeer(ctx, peer, passive); err != nil {
			return fmt.Errorf("add BGP peer %s: %w", peer, err)
		}
		if passive {
			sp.mu.Lock()
			sp.waiting[peer] = now
			sp.mu.Unlock()
		}
	}
	if len(cfg.PeerPrefixes) > 0 {
		pg := &api.PeerGroup{
			Conf:            &api.PeerGroupConf{PeerGroupName: peerGroup, PeerAsn: cfg.ASN, AuthPassword: cfg.Password},
			Timers:          sp.timers(),
			GracefulRestart: sp.gracefulRestart(),
			AfiSafis:        sp.afiSafis(),
		}
		if cfg.RouteReflector {
			// One cluster per reflector (cluster ID = its address): two
			// reflectors of a cluster reflect each other's clients' paths
			// to their own clients, so a client that reaches one reflector
			// still hears every speaker.
			pg.RouteReflector = &api.RouteReflector{RouteReflectorClient: true, RouteReflectorClusterId: cfg.RouterID.String()}
		}
		if err := s.AddPeerGroup(ctx, &api.AddPeerGroupRequest{PeerGroup: pg}); err != nil {
			return fmt.Errorf("add BGP peer group: %w", err)
		}
		for _, p := range cfg.PeerPrefixes {
			if err := s.AddDynamicNeighbor(ctx, &api.AddDynamicNeighborRequest{DynamicNeighbor: &api.DynamicNeighbor{
				Prefix: p.String(), PeerGroup: peerGroup,
			}}); err != nil {
				return fmt.Errorf("accept BGP sessions from %s: %w", p, err)
			}
		}
	}
	go sp.watchSessions(ctx)
	if len(StandInPeers6(&sp.cfg)) > 0 {
		go sp.standInLoop(ctx)
	}
	if sp.cfg.standsIn() && sp.cfg.PlannedMark {
		go sp.unmarkWhenRouted(ctx)
	}
	return nil
}

func (sp *Speaker) timers() *api.Timers {
	return &api.Timers{Config: &api.TimersConfig{
		ConnectRetry:      3,
		HoldTime:          uint64(sp.cfg.Hold / time.Second),
		KeepaliveInterval: uint64(sp.cfg.Keepalive / time.Second),
		// Updates go out at once: claims must reach every peer quickly.
		MinimumAdvertisementInterval: 0,
		// After an administrative reset (`gobgp neighbor reset`), try
		// again within a second.
		IdleHoldTimeAfterReset: 1,
	}}
}

func (sp *Speaker) gracefulRestart() *api.GracefulRestart {
	return &api.GracefulRestart{
		Enabled:         true,
		RestartTime:     uint32(sp.cfg.RestartTime / time.Second),
		LocalRestarting: sp.cfg.Restarting,
		// Only while restarting: how long to wait for peers' End-of-RIB
		// before sending our own updates anyway.
		DeferralTime: 10,
	}
}

// The names of the policies of a route reflector (acceptOwnPathsOnly).
const (
	reflectorSet       = "reef-other-reflectors"
	reflectorSet4      = "reef-other-reflectors-ipv4"
	reflectorPolicy    = "reef-reflector-import"
	reflectorExpPolicy = "reef-reflector-export"
)

// acceptOwnPathsOnly makes a route reflector and the other reflectors
// (reflectors, its configured peers) exchange only the paths each
// originates, not those each reflects from its clients. Every client
// peers with every reflector, so a reflector has each client's paths
// first hand and loses nothing by it. Without it, GoBGP v4.8.0 freezes
// replaced paths: a reflector prefers the other reflector's copy of a
// client's path (lower router ID; GoBGP does not compare CLUSTER_LIST
// lengths), and when its best path moves from a client's to a
// non-client's it sends the non-client no withdrawal of what it sent
// before (BgpServer.filterpath, "iBGP handling"). Two reflectors then hold
// each other's copy as best, and a client's later update or withdrawal of
// that NLRI goes nowhere: in the lab, grants that changed their grantee
// never reached the claimants, and TestRouteReflectors, without these
// policies, keeps a withdrawn claim and block on both reflectors for good.
// Two policies on the global RIB:
//
//   - export: to the other reflectors, only the paths this reflector
//     originates (route type local); a client's path is not sent to them.
//     This needs nothing but the other reflectors' addresses, of either
//     family.
//   - import: from the other reflectors at IPv4 addresses, only the paths
//     whose next hop is the sender itself (its identity, or that
//     IPv4-mapped in VPN-IPv6), for a reflector that reflects anyway (BIRD
//     or FRR beside reef). A reflector at an IPv6 address is named by an
//     identity this one learns only from its paths (docs/design.md,
//     "IPv6-only nodes"), so its paths cannot be told apart by next hop
//     before they are taken; the export policy of a reef reflector at an
//     IPv6 address is what keeps its clients' paths away.
func (sp *Speaker) acceptOwnPathsOnly(ctx context.Context, reflectors []netip.Addr) error {
	var others, others4, nextHops []string
	for _, a := range reflectors {
		if sp.cfg.self(a) {
			continue
		}
		others = append(others, netip.PrefixFrom(a, a.BitLen()).String())
		if a.Is4() {
			others4 = append(others4, netip.PrefixFrom(a, 32).String())
			// A VPN-IPv6 path's next hop is the router ID IPv4-mapped
			// (vpnPath), which an IPv4 prefix does not contain.
			nextHops = append(nextHops, netip.PrefixFrom(a, 32).String(), netip.PrefixFrom(netip.AddrFrom16(a.As16()), 128).String())
		}
	}
	if len(others) == 0 {
		return nil
	}
	for name, list := range map[string][]string{reflectorSet: others, reflectorSet4: others4} {
		if len(list) == 0 {
			continue
		}
		if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: name, List: list,
		}}); err != nil {
			return fmt.Errorf("define the other route reflectors %v: %w", list, err)
		}
	}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: reflectorExpPolicy, Statements: []*api.Statement{{
		Name:       reflectorExpPolicy + "-reflected",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: reflectorSet}, RouteType: api.Conditions_ROUTE_TYPE_INTERNAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("add the route reflector's export policy: %w", err)
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT, // "": the global RIB
		Policies: []*api.Policy{{Name: reflectorExpPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign the route reflector's export policy: %w", err)
	}
	if len(others4) == 0 {
		return nil
	}
	fromOthers := &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: reflectorSet4}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: reflectorPolicy, Statements: []*api.Statement{
		{
			Name:       reflectorPolicy + "-own",
			Conditions: &api.Conditions{NeighborSet: fromOthers, NextHopInList: nextHops},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		},
		{
			Name:       reflectorPolicy + "-reflected",
			Conditions: &api.Conditions{NeighborSet: fromOthers},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		},
	}}}); err != nil {
		return fmt.Errorf("add the route reflector's import policy: %w", err)
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, // "": the global RIB
		Policies: []*api.Policy{{Name: reflectorPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign the route reflector's import policy: %w", err)
	}
	return nil
}

// families are the families of the global RIB: IPv4 unicast and both VPN
// families always, IPv6 unicast when the node has an IPv6 address to be the
// next hop of its IPv6 blocks.
func (cfg *Config) families() []uint32 {
	fs := []uint32{
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV4_UNICAST]),
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV6_UNICAST]),
	}
	if cfg.NodeAddress.IsValid() {
		fs = append(fs, uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]))
	}
	if cfg.NodeAddressV6.IsValid() {
		fs = append(fs, uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]))
	}
	return fs
}

// v6Withheld says why the node's IPv6 blocks are not exported to its
// external peers, or "" when they are, or there is nothing to say (no IPv6
// pool, no external peer).
func (cfg *Config) v6Withheld() string {
	if len(cfg.ExternalPeers) == 0 || cfg.NodeAddressV6.IsValid() || !slices.ContainsFunc(cfg.Pools, func(p Pool) bool { return p.CIDR.Addr().Is6() }) {
		return ""
	}
	return "IPv6 blocks are not exported to external peers: the node has no IPv6 address (nodeAddressV6) to be their next hop"
}

// local is the speaker's address toward peer: the node's address of the
// peer's family (invalid when it has none).
func (cfg *Config) local(peer netip.Addr) netip.Addr {
	switch {
	case !peer.Is4():
		return cfg.NodeAddressV6
	case cfg.NodeAddress.IsValid() || cfg.IPv6Only:
		return cfg.NodeAddress
	}
	return cfg.RouterID
}

// self reports whether a names this node: its identity or an address.
func (cfg *Config) self(a netip.Addr) bool {
	return a == cfg.RouterID || a == cfg.NodeAddress || cfg.NodeAddressV6.IsValid() && a == cfg.NodeAddressV6
}

// ipv6Peers reports whether any neighbour is an IPv6 address: a node of
// the cluster (an IPv6-only node's sessions) or a router.
func (cfg *Config) ipv6Peers() bool {
	return slices.ContainsFunc(cfg.configured(), netip.Addr.Is6) ||
		slices.ContainsFunc(cfg.ExternalPeers, func(p ExternalPeer) bool { return p.Address.Is6() }) || slices.ContainsFunc(cfg.PeerPrefixes, func(p netip.Prefix) bool { return p.Addr().Is6() })
}

// configured are the neighbours the speaker dials: Peers, or on a route
// reflector client RouteReflectors (the config never sets both).
func (cfg *Config) configured() []netip.Addr {
	return append(append([]netip.Addr(nil), cfg.Peers...), cfg.RouteReflectors...)
}

// afiSafis are the families of every session of the cluster (mesh, route
// reflectors, their clients): IPv4 unicast (confirmed IPv4 blocks, for the
// network to route by), VPN-IPv4 (the block protocol) and VPN-IPv6 (the
// block protocol's paths about IPv6 blocks), each with graceful restart
// and a prefix limit (PrefixLimits). A peer that offers only some of them
// (an older reef: no VPN-IPv6) gets a session in those it offers.
func (sp *Speaker) afiSafis() []*api.AfiSafi {
	lim := PrefixLimits(sp.cfg.Pools)
	fs := []*api.AfiSafi{
		afiSafi(api.Family_AFI_IP, api.Family_SAFI_MPLS_VPN, lim.VPN),
		afiSafi(api.Family_AFI_IP6, api.Family_SAFI_MPLS_VPN, lim.VPNv6),
	}
	if sp.cfg.NodeAddress.IsValid() {
		// An IPv6-only node has no IPv4 address to be the next hop of
		// IPv4 blocks (and no IPv4 pool).
		fs = append([]*api.AfiSafi{afiSafi(api.Family_AFI_IP, api.Family_SAFI_UNICAST, lim.Unicast)}, fs...)
	}
	return fs
}

// afiSafi is one family of a session, with graceful restart and a prefix
// limit.
func afiSafi(afi api.Family_Afi, safi api.Family_Safi, limit uint32) *api.AfiSafi {
	f := &api.Family{Afi: afi, Safi: safi}
	return &api.AfiSafi{
		Config:            &api.AfiSafiConfig{Family: f, Enabled: true},
		MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		PrefixLimits:      &api.PrefixLimit{Family: f, MaxPrefixes: limit, ShutdownThresholdPct: prefixWarnPct},
	}
}

// Every BGP session has a prefix limit: a speaker that announces more
// than its family can legitimately hold is cut off before it can fill the
// node's memory. GoBGP sends a Cease NOTIFICATION ("maximum number of
// prefixes reached") and keeps the session down (admin state PFX_CT; reef
// re-enables only peers left down by its own resets), so a flooding peer
// stays cut off until the daemon restarts. The import filter already drops what is not a reef path; the
// limit bounds what it has to look at. The limits are generous, from the
// pools: a full mesh session carries only its peer's paths, but a route
// reflector's carries every speaker's, so the limit is what the whole
// cluster may announce, with room to spare:
//
//   - IPv4 unicast holds one path per confirmed IPv4 block: twice the
//     blocks of the IPv4 pools, at least 16,384;
//   - VPN-IPv4 holds, per IPv4 block, its confirmed claim, the few pending
//     or released claims of a contest and one grant per voter, plus one
//     record per node and one forget per node ever forgotten: 16 paths per
//     block of the IPv4 pools, at least 131,072;
//   - VPN-IPv6 holds the same per IPv6 block, and nothing else: 16 paths
//     per block of the IPv6 pools, at least 131,072. The blocks of a pool
//     are those the protocol uses (blockproto.Pool.NumBlocks: at most 2^32
//     of an IPv6 pool), so an IPv6 pool of the usual size (a /56 of /122)
//     saturates the limit, as all of IPv4 in /32s does.
//
// GoBGP logs a warning once a session passes prefixWarnPct of its limit.
const (
	minUnicastPrefixes = 16384
	minVPNPrefixes     = 131072
	// maxVPNv6Blocks is the most IPv6 blocks the VPN-IPv6 limit counts:
	// 65,536 blocks of /122 hold four million pods.
	maxVPNv6Blocks = 1 << 16
	prefixWarnPct  = 80
)

// limitOf describes the prefix limit of the session with peer.
func (sp *Speaker) limitOf(peer netip.Addr) string {
	if p, ok := sp.cfg.external(peer); ok {
		switch fams := sp.cfg.externalFamilies(peer); {
		case len(fams) == 2:
			return fmt.Sprintf("%d IPv4 or %d IPv6 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes, p.MaxPrefixes)
		case fams[0] == bgppkt.RF_IPv6_UC:
			return fmt.Sprintf("%d IPv6 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes)
		}
		return fmt.Sprintf("%d IPv4 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes)
	}
	lim := PrefixLimits(sp.cfg.Pools)
	return fmt.Sprintf("%d IPv4 unicast, %d IPv4 VPN or %d IPv6 VPN paths (from the pools)", lim.Unicast, lim.VPN, lim.VPNv6)
}

// Limits are the prefix limits of a session, per family: IPv4 unicast,
// VPN-IPv4 and VPN-IPv6.
type Limits struct{ Unicast, VPN, VPNv6 uint32 }

// PrefixLimits returns the prefix limits of every session for pools.
func PrefixLimits(pools []Pool) Limits {
	var blocks4, blocks6 uint64
	for _, p := range pools {
		n := uint64(blockproto.Pool(p).NumBlocks())
		if p.CIDR.Addr().Is6() {
			blocks6 += n
		} else {
			blocks4 += n
		}
	}
	clamp := func(v uint64, floor uint32) uint32 {
		return uint32(min(max(v, uint64(floor)), 1<<32-1))
	}
	// An IPv6 pool's blocks (2^32 of a /56 of /122s) say nothing about how
	// many a cluster uses: count at most maxVPNv6Blocks of them, so that a
	// peer that floods claims is cut off long before memory runs out.
	return Limits{Unicast: clamp(2*blocks4, minUnicastPrefixes), VPN: clamp(16*blocks4, minVPNPrefixes),
		VPNv6: clamp(16*min(blocks6, maxVPNv6Blocks), minVPNPrefixes)}
}

// Stop closes every session (with a NOTIFICATION: peers drop our paths at
// once) and the listener.
func (sp *Speaker) Stop(ctx context.Context) error {
	if err := sp.s.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		return fmt.Errorf("stop BGP: %w", err)
	}
	return nil
}

func (sp *Speaker) drop(peer netip.Addr, prefix string, err error) {
	sp.mu.Lock()
	key := peer.String() + "|" + prefix
	first := !sp.badSeen[key]
	sp.badSeen[key] = true
	sp.mu.Unlock()
	if first {
		sp.dropped.Add(1)
		sp.log.Warn("dropped a path that is not a reef block", "peer", peer, "prefix", prefix, "why", err)
	}
}

// Dropped counts the distinct (peer, NLRI) paths refused so far.
func (sp *Speaker) Dropped() uint64 { return sp.dropped.Load() }

// PeerStatus is one BGP neighbour as `reef status` shows it.
type PeerStatus struct {
	Address     netip.Addr
	Hostname    string // from the peer's FQDN capability
	State       string // idle, connect, active, opensent, openconfirm, established
	Established bool
	Since       time.Time // of the current state when established, else zero
	Received    uint64    // paths from the peer (Status only), both families
	Accepted    uint64    // of them, those that passed the import filter
	Dynamic     bool      // accepted through peerPrefixes
	Type        PeerType
	// CutOff is a session closed for sending more than its prefix limit:
	// it stays closed until the daemon restarts.
	CutOff bool
}

// PeerType is the part a neighbour plays in the node's BGP topology.
type PeerType string

// The peer types.
const (
	PeerMesh      PeerType = "mesh"      // a node of the full mesh
	PeerReflector PeerType = "reflector" // a route reflector: this node's, or, on a reflector, another one
	PeerClient    PeerType = "client"    // a route reflector client of this node
	PeerExternal  PeerType = "external"  // a router (bgp.externalPeers)
)

// peerType is what a neighbour is to this speaker: on a client, every
// configured neighbour is a reflector; on a reflector, the configured ones
// are the other reflectors and the dynamic ones its clients.
func (cfg *Config) peerType(addr netip.Addr, dynamic bool) PeerType {
	if _, ok := cfg.external(addr); ok && !dynamic {
		return PeerExternal
	}
	switch {
	case len(cfg.RouteReflectors) > 0:
		return PeerReflector
	case cfg.RouteReflector && dynamic:
		return PeerClient
	case cfg.RouteReflector:
		return PeerReflector
	}
	return PeerMesh
}

// hostname asks GoBGP for the name a peer gave in its OPEN (the FQDN
// capability, which GoBGP's peer events leave out). ListPeer answers in
// GoBGP's main loop and counts the peer's paths as it does, so Sessions
// asks once per session.
func (sp *Speaker) hostname(ctx context.Context, peer netip.Addr) (string, error) {
	var name string
	err := sp.s.ListPeer(ctx, &api.ListPeerRequest{Address: peer.String()}, func(p *api.Peer) {
		for _, c := range p.GetState().GetRemoteCap() {
			if f := c.GetFqdn(); f != nil {
				name = f.GetHostName()
			}
		}
	})
	if err != nil {
		return "", fmt.Errorf("look up BGP peer %s: %w", peer, err)
	}
	return name, nil
}
