package bgp

import (
	"cmp"
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
	"github.com/osrg/gobgp/v4/pkg/server"
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
	// Restarting sets the graceful-restart Restart State bit and each
	// family's Forwarding State bit, and holds the speaker's updates and
	// End-of-RIB back until the node's own paths are in (restart.go) and
	// its cluster peers' End-of-RIBs (restartWaitsFor): when the kernel
	// kept reef's routes since the daemon before (a planned stop or a
	// crash; daemon/restart.go), not at a first start or after a reboot,
	// when the node has nothing the peers should keep.
	Restarting bool
	// PlannedMark starts the speaker with its IPv4 blocks marked for the
	// other nodes to stand in for them at their BFD routers, until its
	// own BFD routers have them (standin.go): after a planned stop.
	PlannedMark bool
	Pools       []Pool
	// LogLevel of GoBGP's own log lines.
	LogLevel slog.Level
	// deferral is how long a restarting speaker waits for its peers'
	// End-of-RIB before it sends its own updates anyway (0: 10 s). Tests
	// set it long, to tell a send on End-of-RIB from one on the timer.
	deferral time.Duration
	// ownPathsWait replaces ownPathsWait (restart.go) in tests.
	ownPathsWait time.Duration
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
	// ownPaths: which of the node's own paths are in (restart.go).
	ownPaths ownIn

	mu        sync.Mutex
	badSeen   droppedPaths                 // logged as dropped, until withdrawn (forgetDropped)
	stuck     map[netip.Addr]stuckState    // peers seen between OPEN and Established
	waiting   map[netip.Addr]time.Time     // passive peers that never connected, since (dial.go)
	waitFor   time.Duration                // how long (passiveWait; tests shorten it)
	readd     map[netip.Addr]bool          // peers to add again as dialled ones (dial.go)
	sessions  map[netip.Addr]PeerStatus    // from GoBGP's peer events (notePeer)
	named     map[netip.Addr]bool          // sessions whose hostname was looked up
	adminDown map[netip.Addr]time.Time     // peers whose events say admin down, since
	keptOut   map[netip.Addr]chan struct{} // dynamic peers cut off by their prefix limit; closed once keepOut is done
	downSeen  map[netip.Addr]chan struct{} // resetSession's waits for a peer's admin-down event
	services  []netip.Prefix               // the service CIDRs added to the table (services.go)
	addrs     serviceAddrs                 // the Service addresses originated (serviceaddrs.go)
	naming    sync.Mutex                   // one hostname lookup at a time (Sessions)
	resetting sync.Mutex                   // one PeerReset at a time

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
	s := server.NewBgpServer(server.LoggerOption(log.With("component", "gobgp"), lvl), server.RestartWaitOption(cfg.restartWaitsFor),
		server.WaitLocalRoutesOption(cmp.Or(cfg.ownPathsWait, ownPathsWait)))
	go s.Serve()
	sp := &Speaker{cfg: cfg, s: s, log: log, ownVPN: map[vpnKey]ownPath{}, ownUnicast: map[netip.Prefix]ownPath{}, badSeen: droppedPaths{}, standInWake: make(chan struct{}, 1),
		stuck: map[netip.Addr]stuckState{}, waiting: map[netip.Addr]time.Time{}, waitFor: passiveWait, readd: map[netip.Addr]bool{}, sessions: map[netip.Addr]PeerStatus{}, named: map[netip.Addr]bool{}, adminDown: map[netip.Addr]time.Time{}, keptOut: map[netip.Addr]chan struct{}{}, downSeen: map[netip.Addr]chan struct{}{}}

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
		DeferralTime: uint32(cmp.Or(sp.cfg.deferral, 10*time.Second) / time.Second),
	}
}

// restartWaitsFor says whose End-of-RIB the speaker waits for after a
// restart (Restarting) before it sends its updates, RFC 4724 4.1's
// deferral: the cluster's sessions (mesh peers, reflectors, clients), not
// the routers. reef takes no route from a router (external.go), so a
// router's End-of-RIB cannot change what the node sends anyone, while
// GoBGP counts a peer with graceful restart that is not yet established
// as one to wait for: a router without BFD (graceful restart on) that came
// up after the cluster's sessions held every update to them back until
// its session was up, or until the deferral timer (10 s) when it stayed
// down, the mark's removal that ends the other nodes' stand-ins among
// them (TestRestartingSendsWithGracefulRestartRouterDown). A router that
// comes up before the cluster's End-of-RIBs still gets the node's paths
// only then, the whole table at once. A configured cluster peer not yet
// up (a mesh peer, a client's reflector, a reflector's other reflectors)
// is still waited for, as GoBGP does: a node's stand-ins at its routers
// come from the other nodes' paths. A reflector's clients are dynamic
// peers, which GoBGP knows only once they connect: a restarted reflector
// waits for those connected by then, so it may sync on the first
// clients' End-of-RIBs, and a client that connects later gets the table
// once its own End-of-RIB is in (GoBGP's behaviour, unchanged here).
// (third_party/gobgp.diff adds the option to GoBGP.)
func (cfg *Config) restartWaitsFor(peer netip.Addr) bool {
	return !slices.ContainsFunc(cfg.ExternalPeers, func(p ExternalPeer) bool { return p.Address == peer })
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

// Stop closes every session (with a NOTIFICATION: peers drop our paths at
// once) and the listener.
func (sp *Speaker) Stop(ctx context.Context) error {
	if err := sp.s.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		return fmt.Errorf("stop BGP: %w", err)
	}
	return nil
}

// droppedPaths are the paths the import filter refused and drop logged:
// for each NLRI, the peers that sent a path of it. An NLRI leaves when it
// is withdrawn, so the set is bounded by the table, not by every path a
// peer ever sent.
type droppedPaths map[string]map[netip.Addr]struct{}

// drop logs and counts a path from peer that the import filter refused,
// once while its NLRI is in the table.
func (sp *Speaker) drop(peer netip.Addr, prefix string, err error) {
	sp.mu.Lock()
	peers := sp.badSeen[prefix]
	_, seen := peers[peer]
	if !seen {
		if peers == nil {
			peers = map[netip.Addr]struct{}{}
			sp.badSeen[prefix] = peers
		}
		peers[peer] = struct{}{}
	}
	sp.mu.Unlock()
	if !seen {
		sp.dropped.Add(1)
		sp.log.Warn("dropped a path that is not a reef block", "peer", peer, "prefix", prefix, "why", err)
	}
}

// Dropped counts the paths refused so far: each (peer, NLRI) once while
// the NLRI is in the table, again if it comes back after a withdrawal.
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
	// it stays closed until PeerReset (`reef peer reset`) or a restart.
	CutOff bool
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
