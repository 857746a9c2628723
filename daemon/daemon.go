// Package daemon is `reef daemon`: configuration, wiring and lifecycle. It
// opens the store, drains DELs queued while it was down, repairs the
// dataplane, serves the CNI and Node APIs on the unix socket and runs the
// reconcile loop until SIGTERM. Stopping never touches the dataplane: pods
// keep their traffic while the daemon restarts or is upgraded.
package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	sdaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/cniserver/pendingdel"
	"github.com/reefcni/reef/lbipam"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/nat/nft"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
	"github.com/reefcni/reef/version"
)

// storeLockTimeout bounds the wait for the store's file lock; a second
// daemon on the same state dir fails with an error naming the file.
const storeLockTimeout = time.Second

// Overheads of the encapsulations a pool may use, subtracted from the
// uplink MTU when the MTU is derived.
const (
	vxlanOverhead = 50
	// vxlanOverhead6 is VXLAN's over an IPv6 underlay: a 40-byte outer
	// header instead of 20.
	vxlanOverhead6 = 70
	ipipOverhead   = 20
)

// bgpRestartTime is what peers are told to wait for this node after its
// sessions drop before they flush its routes: well above the worst-case
// start of the daemon, so a restart or upgrade never costs a route.
const bgpRestartTime = 120 * time.Second

// flagPlannedRestart is set in the store at SIGTERM and read at start.
const flagPlannedRestart = "planned-restart"

// Daemon is one running reef daemon: its parts, each made once by build
// and given everything it works with.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	identity netip.Addr // the node in the block protocol (DetectNode)
	uplink   Uplink     // Address invalid on an IPv6-only node
	uplink6  Uplink6    // zero: no IPv6 pool, or a node alone without an IPv6 address
	mtu      int
	store    *store.Store
	cni      *cniserver.Server
	rec      *reconciler
	speaker  *bgp.Speaker
	blocks   *blockEngine
	policy   *policyDataplane   // nil: NetworkPolicy off
	services *serviceAnnouncer  // nil: no Service addresses to announce
	lbIPAM   *lbipam.Controller // nil: this node does not assign LoadBalancer addresses
	metrics  *metrics.Metrics   // nil: metrics off
	started  time.Time
	// firstPassDelay: the reef-test hook REEF_TEST_FIRST_PASS_DELAY.
	firstPassDelay time.Duration
	// bgpCounters are GoBGP's counters for the metrics, read every
	// bgpCountersEvery.
	bgpCounters atomic.Pointer[bgpCounters]
}

// DeriveMTU is the pods' MTU: the configured one, or the uplink's less the
// largest overhead of an encapsulation some pool may use, VXLAN's over
// the node's underlay (IPv6 on an IPv6-only node: underlay6).
func DeriveMTU(cfg Config, uplinkMTU int, underlay6 bool) int {
	if cfg.MTU != 0 {
		return cfg.MTU
	}
	overhead := 0
	for _, p := range cfg.Pools {
		if p.VXLANMode != EncapNever {
			overhead = max(overhead, vxlanOverheadOf(underlay6))
		}
		if p.IPIPMode != EncapNever {
			overhead = max(overhead, ipipOverhead)
		}
	}
	return uplinkMTU - overhead
}

// Run runs the daemon until ctx is cancelled (SIGTERM/SIGINT in main).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	log.Info("starting reef", "version", version.Version, "commit", version.Commit, "gobgp", version.GoBGP(), "node", cfg.NodeName)
	hooks, err := readTestHooks(log)
	if err != nil {
		return err
	}
	d, closeAll, err := build(ctx, cfg, hooks, log)
	defer closeAll()
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

// nodeAddresses finds the node's identity, its uplinks of both families
// and the pods' MTU, and checks that the peers are of families it has.
func nodeAddresses(cfg Config, log *slog.Logger) (node NodeUplink, up Uplink, up6 Uplink6, mtu int, err error) {
	if node, err = DetectNode(cfg); err != nil {
		return node, up, up6, 0, err
	}
	up, up6 = node.Uplink, node.Uplink6
	mtu = DeriveMTU(cfg, up.MTU, node.IPv6Only)
	if node.IPv6Only {
		log.Info("IPv6-only node: known by bgp.routerID", "identity", node.Identity, "address6", up6.Address, "interface", up.Interface, "why", up.Reason+"; "+up6.Reason, "podMTU", mtu)
	} else {
		log.Info("node address chosen", "address", up.Address, "interface", up.Interface, "why", up.Reason, "podMTU", mtu)
		if up6, err = nodeAddress6(cfg, up, log); err != nil {
			return node, up, up6, 0, fmt.Errorf("node IPv6 address: %w", err)
		}
		if m := mtu6(cfg, up, up6, mtu); m != mtu {
			log.Info("pod MTU lowered to the IPv6 uplink's", "podMTU", m, "interface6", up6.Interface, "mtu6", up6.MTU, "from", mtu)
			mtu = m
		}
	}
	if err := detectedInPool(cfg, up, up6); err != nil {
		return node, up, up6, 0, err
	}
	if err := podMTU6(cfg, mtu, up, up6); err != nil {
		return node, up, up6, 0, err
	}
	return node, up, up6, mtu, checkPeerFamilies(cfg, up, up6)
}

// podMTU6 refuses a derived pod MTU below IPv6's least beside an IPv6
// pool (the config refuses such an mtu it gives): the kernel would take
// IPv6 off every pod's interface, and every ADD would fail.
func podMTU6(cfg Config, mtu int, up Uplink, up6 Uplink6) error {
	i := slices.IndexFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() })
	if cfg.MTU != 0 || i < 0 || mtu >= minMTU6 {
		return nil
	}
	iface := up.Interface
	switch {
	case iface == "":
		iface = up6.Interface // an IPv6-only node
	case up6.Interface != "" && up6.Interface != iface:
		iface += ", IPv6 " + up6.Interface
	}
	return cfg.KeyError(fmt.Sprintf("pools[%d].cidr", i), fmt.Sprintf("value %q is IPv6, but the pods' MTU derived from the uplink (%s, less the encapsulation) is %d, below %d, the least IPv6 runs on: raise the uplink's MTU, or give pools that need no encapsulation (vxlanMode: Never)",
		cfg.Pools[i].CIDR, iface, mtu, minMTU6))
}

// detectedInPool refuses a node address, detected or given, that a pool
// holds (a pool that covers the node's subnet): the other nodes would drop
// every path of this node as one whose next hop is a pod address, and its
// pods could be given the node's own address. The config's check sees
// only a nodeAddress the file gives.
func detectedInPool(cfg Config, up Uplink, up6 Uplink6) error {
	for i, p := range cfg.Pools {
		for _, a := range []struct {
			addr       netip.Addr
			key, iface string
		}{{up.Address, "nodeAddress", up.Interface}, {up6.Address, "nodeAddressV6", up6.Interface}} {
			if a.addr.IsValid() && p.CIDR.Contains(a.addr) {
				at := fmt.Sprintf("pools[%d].cidr", i)
				return cfg.KeyError(at, fmt.Sprintf("value %q holds this node's address %s (on %s): a pod address is never a node's; give the pool a range outside the nodes' subnets (or set %s); a pool that has blocks in this node's store cannot change: drain the node, stop reef and empty its stateDir first (docs/ipam.md)",
					p.CIDR, a.addr, a.iface, a.key))
			}
		}
	}
	return nil
}

// build makes the daemon: every part, in the order in which they need each
// other, each given what it works with. The triggers of the reconcile loop
// are its pending set's, made first, so that the parts that trigger passes
// (nftables, NetworkPolicy, BGP, the block protocol) need not wait for the
// loop. closeAll closes what was opened, also after an error.
func build(ctx context.Context, cfg Config, hooks testHooks, log *slog.Logger) (d *Daemon, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	node, up, up6, mtu, err := nodeAddresses(cfg, log)
	if err != nil {
		return nil, closeAll, err
	}
	mine := nodeAddrs{node.Identity, up.Address, up6.Address}
	st, planned, err := openStore(cfg, node.Identity, log)
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, func() { st.Close() })
	kernel, tunKernel, err := openKernels(&closers)
	if err != nil {
		return nil, closeAll, err
	}
	// The one owner of the block routes (blackholes, other nodes'
	// blocks), which only the pass asks, and the speaker's start reads.
	blockRoutes := routes.NewBlocks(kernel)
	start := readBGPStart(blockRoutes, planned, st.Created(), log)
	work := newPending()
	m := newMetrics(cfg)
	pools := storePools(cfg.Pools)
	retired, err := configRetiredPools(cfg, pools, st, log)
	if err != nil {
		return nil, closeAll, err
	}
	// With NetworkPolicy on, every commit of reef's to its tables is
	// accounted in one nftables generation, so that the pass can tell
	// table inet reef is as applied without reading it (policyDataplane.
	// mustRead); with it off, no commit pays for that.
	var gens *nft.Generations
	if cfg.Kubernetes.Kubeconfig != "" {
		gens = nft.NewGenerations()
		closers = append(closers, func() { gens.Close() })
	}
	natDP := newNATDataplane(cfg.Pools, m, log, gens)
	policyDP, err := newPolicyDataplane(ctx, cfg.Kubernetes, cfg.Pools, st, m, log, work.TriggerPolicy, gens)
	if err != nil {
		return nil, closeAll, err
	}
	lbIPAM, err := startLBIPAM(ctx, cfg, hooks, log)
	if err != nil {
		return nil, closeAll, err
	}
	speaker, err := startSpeaker(ctx, cfg, node.Identity, up.Address, up6.Address, append(slices.Clone(pools), retired...), start, hooks, log, work.BGPChanged)
	if err != nil {
		return nil, closeAll, err
	}
	svcAddrs, err := newServiceAnnouncer(ctx, cfg, speaker, log)
	if err != nil {
		return nil, closeAll, err
	}
	blocks, err := startBlocks(cfg, blockEngineDeps{store: st, speaker: speaker, metrics: m, log: log, trigger: work.TriggerBlocks,
		mine: mine, addr6: up6.Address, v6only: node.IPv6Only, pools: pools, retired: retired})
	if err != nil {
		return nil, closeAll, err
	}
	// The one owner of the pods' kernel objects, asked by the CNI server
	// and the pass; the CNI operations' log, which the server writes and
	// the pass reads instead of locking them out (package activity).
	sysctls, ops := sysctl.New(sysctl.Proc{}), &activity.Log{}
	pods := routes.NewPods(kernel, sysctls)
	cni := cniserver.New(cniserver.Config{Pools: pools, MTU: mtu, DeferredDir: DeferredDir(cfg), TestPauseAfterVeth: hooks.pauseAfterVeth},
		cniserver.Deps{Store: st, Log: log.With("component", "cni"), Pods: pods, NeedBlock: blocks.Need,
			PodFilter: natDP, Policy: policyGate(policyDP), Activity: ops, Trigger: work.Trigger, Observe: m.CNI,
			Unavailable: blocks.unavailable})
	rec := newReconciler(reconcilerDeps{store: st, cni: cni, activity: ops, kernel: kernel, blockRoutes: blockRoutes, pods: pods, sysctls: sysctls, nat: natDP, policy: policyDP,
		blocks: blocks, tunnels: newTunnels(tunnelDeps{kernel: tunKernel, store: st, sysctls: sysctls, metrics: m}, log), metrics: m, net: netInfo{node: cfg.NodeName, uplink: up, uplink6: up6, pools: cfg.Pools, podMTU: mtu,
			identity: node.Identity, v6only: node.IPv6Only},
		pending: work, interval: cfg.ReconcileInterval, passLoop: hooks.passLoop}, log)
	d = &Daemon{cfg: cfg, log: log, identity: node.Identity, uplink: up, uplink6: up6, mtu: mtu, store: st, cni: cni, rec: rec, speaker: speaker,
		blocks: blocks, policy: policyDP, services: svcAddrs, lbIPAM: lbIPAM, metrics: m, started: time.Now(), firstPassDelay: hooks.firstPassDelay}
	return d, closeAll, nil
}

// openKernels opens reef's two netlink handles, the routes' and the
// tunnels', each closed with the daemon's closers.
func openKernels(closers *[]func()) (*routes.Kernel, *tunnel.Kernel, error) {
	kernel, err := routes.NewKernel()
	if err != nil {
		return nil, nil, err
	}
	*closers = append(*closers, kernel.Close)
	tunKernel, err := tunnel.NewKernel()
	if err != nil {
		return nil, nil, err
	}
	*closers = append(*closers, tunKernel.Close)
	return kernel, tunKernel, nil
}

// policyGate is the CNI server's view of NetworkPolicy: nil when it is off
// (a nil *policyDataplane in the interface would not be).
func policyGate(p *policyDataplane) cniserver.PolicyGate {
	if p == nil {
		return nil
	}
	return p
}

// openStore opens the state file, and says whether the last stop was
// planned (SIGTERM), clearing the mark: the node's blocks are then marked
// for stand-ins at the start (bgp.Config.PlannedMark). Whether the
// speaker starts with the graceful-restart bits is the kernel's to say
// (bgpStart).
func openStore(cfg Config, identity netip.Addr, log *slog.Logger) (st *store.Store, planned bool, err error) {
	dbPath := filepath.Join(cfg.StateDir, "reef.db")
	st, err = store.Open(dbPath, store.Options{Node: cfg.NodeName, Address: identity, Timeout: storeLockTimeout})
	if err != nil {
		return nil, false, err
	}
	if err := st.IdentityErr(); err != nil {
		log.Warn("could not write the identity file; `reef store recover` needs it after a damage (retried at the next start)", "error", err)
	}
	if planned, err = st.Flag(flagPlannedRestart); err == nil {
		err = st.SetFlag(flagPlannedRestart, false)
	}
	if err != nil {
		st.Close()
		return nil, false, err
	}
	return st, planned, nil
}

// startSpeaker starts the BGP speaker; changed is told of every update.
func startSpeaker(ctx context.Context, cfg Config, identity, addr, addr6 netip.Addr, pools []store.Pool, start bgpStart, hooks testHooks, log *slog.Logger, changed func()) (*bgp.Speaker, error) {
	var bgpPools []bgp.Pool
	for _, p := range pools {
		bgpPools = append(bgpPools, bgp.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	gobgpLevel := slog.LevelWarn
	if cfg.LogLevel == "debug" {
		gobgpLevel = slog.LevelInfo
	}
	sp, err := bgp.Start(ctx, bgp.Config{
		ASN: cfg.BGP.ASN, Port: cfg.BGP.Port, RouterID: identity, NodeAddress: addr, IPv6Only: !addr.IsValid(), NodeAddressV6: addr6,
		Peers: cfg.BGP.Peers, PeerPrefixes: cfg.BGP.PeerPrefixes, Password: cfg.BGP.Password,
		RouteReflectors: cfg.BGP.RouteReflectors, RouteReflector: cfg.BGP.RouteReflector,
		Keepalive: cfg.BGP.KeepaliveTime, Hold: cfg.BGP.HoldTime,
		RestartTime: cmp.Or(hooks.bgpRestartTime, bgpRestartTime), Restarting: start.restarting,
		PlannedMark:   start.planned && cfg.BGP.GracefulShutdownTime > 0,
		ExternalPeers: cfg.BGP.externalPeers(), ServiceCIDRs: cfg.BGP.ServiceClusterIPs,
		ServiceAddressCIDRs: cfg.BGP.serviceAddressCIDRs(),
		Pools:               bgpPools, LogLevel: gobgpLevel,
	}, log.With("component", "bgp"), changed)
	if err != nil {
		return nil, err
	}
	lim := bgp.PrefixLimits(bgpPools)
	log.Info("BGP speaker started", "asn", cfg.BGP.ASN, "port", cfg.BGP.Port, "peers", len(cfg.BGP.Peers),
		"peerPrefixes", len(cfg.BGP.PeerPrefixes), "routeReflectors", cfg.BGP.RouteReflectors, "routeReflector", cfg.BGP.RouteReflector,
		"prefixLimitUnicast", lim.Unicast, "prefixLimitVPN", lim.VPN, "prefixLimitVPNv6", lim.VPNv6, "plannedRestart", start.planned, "restarting", start.restarting, "externalPeers", len(cfg.BGP.ExternalPeers))
	return sp, nil
}

// startBlocks chooses the voter list and makes the block protocol's
// engine from deps, to which it adds the voters and their learned
// identities; deps.trigger asks for a step at once.
func startBlocks(cfg Config, deps blockEngineDeps) (*blockEngine, error) {
	st, log := deps.store, deps.log
	voters, err := voterList(cfg, deps.mine, st)
	if err != nil {
		return nil, err
	}
	names, err := st.VoterIdentities()
	if err != nil {
		return nil, err
	}
	inc, born := st.Incarnation()
	log.Info("block protocol", "incarnation", fmt.Sprintf("%08x", inc), "born", time.Unix(int64(born), 0).UTC(), "voters", voters.Voters, "alone", voters.Alone)
	if len(voters.Released) > 0 {
		log.Info("the voter list changed: pending claims made under the old one are given up, and made again when needed", "blocks", voters.Released)
	}
	switch {
	case voters.Restricted && voters.Voter:
		log.Warn("this node is in bgp.voters with a new store: it votes only for confirmed owners, never for a pending claim, until it is taken out of bgp.voters on every node and added back",
			"detail", blockproto.RestrictedReason)
	case voters.Restricted:
		log.Warn("this node's store is marked restricted (new while the node was in bgp.voters); out of the list now, it votes for nothing; once it is added back to bgp.voters on every node it votes for pending claims again")
	case voters.Lifted:
		log.Info("this node is back in bgp.voters after a start without it: it votes for pending claims again (its store is no longer taken for a wiped voter's)")
	}
	deps.name, deps.voters, deps.names = cfg.NodeName, voters.Voters, names
	return newBlockEngine(deps), nil
}

// serve serves the socket and the metrics, readies the node and runs the
// reconcile loop until ctx ends or the socket fails; then it stops, leaving
// the dataplane as it is.
func (d *Daemon) serve(ctx context.Context) error {
	lis, err := listenSocket(d.cfg.Socket, d.log)
	if err != nil {
		return err
	}
	srv := newServer(d.log, d.cni, &nodeService{d: d})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	d.log.Info("serving", "socket", d.cfg.Socket)
	go d.runWatchdog(ctx) // WatchdogSec= of reef.service; pings only while healthy
	d.serveMetrics(ctx, d.metrics)
	d.becomeReady()

	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone, drainDone := make(chan struct{}), make(chan struct{})
	go func() { d.rec.Run(loopCtx); close(loopDone) }()
	go func() { d.drainLoop(loopCtx); close(drainDone) }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve %s: %w", d.cfg.Socket, err)
	}
	sdNotify(d.log, sdaemon.SdNotifyStopping)
	d.gracefulShutdown() // first, while everything still forwards
	d.log.Info("stopping; the dataplane stays as it is, BGP sessions close without a Cease")
	if err := d.store.SetFlag(flagPlannedRestart, true); err != nil {
		d.log.Error("mark planned restart", "error", err)
	}
	d.cni.SetReady(false)
	stopLoop()
	<-loopDone
	<-drainDone
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	return err
}

// becomeReady finishes the DELs the shim queued while the daemon was away,
// brings the kernel in line with the store, and only then lets the node
// announce and serve ADD.
func (d *Daemon) becomeReady() {
	time.Sleep(d.firstPassDelay) // a reef-test hook; 0 otherwise
	d.drainPendingDeletes()
	if err := d.rec.Once(); err != nil {
		d.log.Error("first reconcile pass had errors; serving anyway, the loop retries", "error", err)
	}
	// The kernel now holds what the store says, and nothing of pods the
	// store does not know: the node may announce.
	d.blocks.AllowAnnounce()
	d.cni.SetReady(true)
	sdNotify(d.log, sdaemon.SdNotifyReady)
	d.log.Info("ready: serving ADD", "endpoints", d.endpointCount())
}

func (d *Daemon) endpointCount() int {
	eps, err := d.store.Endpoints()
	if err != nil {
		return -1
	}
	return len(eps)
}

// DeferredDir queues the DELs whose store part waits for the state dir to
// take writes: beside the socket (/run/reef), on another file system.
func DeferredDir(cfg Config) string { return filepath.Join(filepath.Dir(cfg.Socket), "deferred-del") }

// drainPendingDeletes runs every DEL the shim queued while the daemon was
// unreachable, and those done in the kernel while the store could not be
// written. An entry that fails stays queued for the next start; the
// reconcile loop frees its address anyway once the pod's netns is gone.
func (d *Daemon) drainPendingDeletes() {
	d.drainQueue(d.cfg.PendingDeleteDir)
	d.drainQueue(DeferredDir(d.cfg))
}

// drainLoop runs, every reconcile interval, the DELs the shim queued after
// the start's drain: a runtime's DEL that came while the daemon was
// starting, before its socket answered. (The deferred DELs wait for the
// store in the reconcile pass, not here.)
func (d *Daemon) drainLoop(ctx context.Context) {
	t := time.NewTicker(max(d.cfg.ReconcileInterval, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.drainQueue(d.cfg.PendingDeleteDir)
		}
	}
}

func (d *Daemon) drainQueue(dir string) {
	entries, bad, err := pendingdel.List(dir)
	if err != nil {
		d.log.Error("read queued DELs", "error", err)
		return
	}
	for _, f := range bad {
		d.log.Error("discarding unreadable queued DEL", "file", f)
		if err := pendingdel.Remove(f); err != nil {
			d.log.Error("remove queued DEL", "error", err)
		}
	}
	for _, e := range entries {
		cerr := d.runQueued(&reefv1.CNIRequest{ContainerId: e.ContainerID, Netns: e.Netns, Ifname: e.IfName,
			Args: e.Args, Path: e.Path, Netconf: e.Netconf})
		if cerr != nil {
			d.log.Error("queued DEL failed; kept for the next start", "container", e.ContainerID, "error", cerr.Msg, "details", cerr.Details)
			continue
		}
		if err := pendingdel.Remove(e.File); err != nil {
			d.log.Error("remove queued DEL", "error", err)
		}
		d.log.Info("ran queued DEL", "container", e.ContainerID, "queued", e.Queued)
	}
}

func sdNotify(log *slog.Logger, state string) {
	if _, err := sdaemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify", "state", state, "error", err)
	}
}

// runQueued runs one queued DEL. It is outside the gRPC server's panic
// recovery, and an entry that panicked would do so at every start: the
// panic is logged and the entry kept, never a crash loop.
func (d *Daemon) runQueued(req *reefv1.CNIRequest) (cerr *types.Error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("panic in a queued DEL", "container", req.GetContainerId(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			cerr = types.NewError(types.ErrInternal, "reef daemon hit an internal error running a queued DEL", fmt.Sprint(r))
		}
	}()
	return d.cni.Delete(req)
}
