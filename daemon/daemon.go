// Package daemon is `reef daemon`: configuration, wiring and lifecycle. It
// opens the store, drains DELs queued while it was down, repairs the
// dataplane, serves the CNI and Node APIs on the unix socket and runs the
// reconcile loop until SIGTERM. Stopping never touches the dataplane: pods
// keep their traffic while the daemon restarts or is upgraded.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	sdaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/pendingdel"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
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
	ipipOverhead  = 20
)

// bgpRestartTime is what peers are told to wait for this node after its
// sessions drop before they flush its routes: well above the worst-case
// start of the daemon, so a restart or upgrade never costs a route.
const bgpRestartTime = 120 * time.Second

// flagPlannedRestart is set in the store at SIGTERM and read at start.
const flagPlannedRestart = "planned-restart"

// Daemon is one running reef daemon.
type Daemon struct {
	cfg     Config
	log     *slog.Logger
	uplink  Uplink
	mtu     int
	store   *store.Store
	cni     *cniserver.Server
	rec     *reconciler
	speaker *bgp.Speaker
	blocks  *blockEngine
	policy  *policyDataplane // nil: NetworkPolicy off
	started time.Time
	// bgpCounters are GoBGP's counters for the metrics, read every
	// bgpCountersEvery.
	bgpCounters atomic.Pointer[bgpCounters]
}

// DeriveMTU is the pods' MTU: the configured one, or the uplink's less the
// largest overhead of an encapsulation some pool may use.
func DeriveMTU(cfg Config, uplinkMTU int) int {
	if cfg.MTU != 0 {
		return cfg.MTU
	}
	overhead := 0
	for _, p := range cfg.Pools {
		if p.VXLANMode != EncapNever {
			overhead = max(overhead, vxlanOverhead)
		}
		if p.IPIPMode != EncapNever {
			overhead = max(overhead, ipipOverhead)
		}
	}
	return uplinkMTU - overhead
}

// Run runs the daemon until ctx is cancelled (SIGTERM/SIGINT in main).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	d := &Daemon{cfg: cfg, log: log, started: time.Now()}
	log.Info("starting reef", "version", version.Version, "commit", version.Commit, "gobgp", version.GoBGP(), "node", cfg.NodeName)

	up, err := DetectUplink(cfg.Interface, cfg.NodeAddress)
	if err != nil {
		return fmt.Errorf("node address: %w", err)
	}
	d.uplink = up
	d.mtu = DeriveMTU(cfg, up.MTU)
	log.Info("node address chosen", "address", up.Address, "interface", up.Interface, "why", up.Reason, "podMTU", d.mtu)

	dbPath := filepath.Join(cfg.StateDir, "reef.db")
	st, err := store.Open(dbPath, store.Options{Node: cfg.NodeName, Address: up.Address, Timeout: storeLockTimeout})
	if err != nil {
		return err
	}
	defer st.Close()
	d.store = st
	if err := st.IdentityErr(); err != nil {
		log.Warn("could not write the identity file; `reef store recover` needs it after a damage (retried at the next start)", "error", err)
	}
	// A planned restart (SIGTERM) is marked in the store; only then does
	// the speaker tell peers it is restarting, so that they do not hold our
	// updates back after an unplanned start.
	planned, err := st.Flag(flagPlannedRestart)
	if err != nil {
		return err
	}
	if err := st.SetFlag(flagPlannedRestart, false); err != nil {
		return err
	}

	var pools []store.Pool
	for _, p := range cfg.Pools {
		pools = append(pools, store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	cniCfg := cniserver.Config{Pools: pools, MTU: d.mtu, DeferredDir: DeferredDir(cfg)}
	if v := os.Getenv("REEF_TEST_PAUSE_AFTER_VETH"); v != "" {
		if cniCfg.TestPauseAfterVeth, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("REEF_TEST_PAUSE_AFTER_VETH: value %q is not a duration", v)
		}
		log.Warn("test hook on: every ADD pauses after creating the veth", "pause", v)
	}
	d.cni = cniserver.New(cniCfg, st, log.With("component", "cni"))
	kernel, err := routes.NewKernel()
	if err != nil {
		return err
	}
	defer kernel.Close()
	d.rec = newReconciler(st, d.cni, kernel, log, cfg.ReconcileInterval)
	m := d.newMetrics()
	d.rec.metrics = m
	d.cni.Observe = m.CNI
	d.setupNAT()
	if err := d.setupPolicy(ctx); err != nil {
		return err
	}
	d.rec.net = netInfo{node: cfg.NodeName, uplink: up, pools: cfg.Pools, podMTU: d.mtu}

	var bgpPools []bgp.Pool
	for _, p := range pools {
		bgpPools = append(bgpPools, bgp.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	restartTime := bgpRestartTime
	if v := os.Getenv("REEF_TEST_BGP_RESTART_TIME"); v != "" {
		if restartTime, err = time.ParseDuration(v); err != nil || restartTime < time.Second {
			return fmt.Errorf("REEF_TEST_BGP_RESTART_TIME: value %q is not a duration of 1s or more", v)
		}
		log.Warn("test hook on: peers are told to keep this node's routes for this long after a drop", "restartTime", v)
	}
	gobgpLevel := slog.LevelWarn
	if cfg.LogLevel == "debug" {
		gobgpLevel = slog.LevelInfo
	}
	d.speaker, err = bgp.Start(ctx, bgp.Config{
		ASN: cfg.BGP.ASN, Port: cfg.BGP.Port, RouterID: up.Address,
		Peers: cfg.BGP.Peers, PeerPrefixes: cfg.BGP.PeerPrefixes, Password: cfg.BGP.Password,
		RouteReflectors: cfg.BGP.RouteReflectors, RouteReflector: cfg.BGP.RouteReflector,
		Keepalive: cfg.BGP.KeepaliveTime, Hold: cfg.BGP.HoldTime,
		RestartTime: restartTime, Restarting: planned,
		ExternalPeers: cfg.BGP.externalPeers(),
		Pools:         bgpPools, LogLevel: gobgpLevel,
	}, log.With("component", "bgp"), d.rec.BGPChanged)
	if err != nil {
		return err
	}
	lim := bgp.PrefixLimits(bgpPools)
	log.Info("BGP speaker started", "asn", cfg.BGP.ASN, "port", cfg.BGP.Port, "peers", len(cfg.BGP.Peers),
		"peerPrefixes", len(cfg.BGP.PeerPrefixes), "routeReflectors", cfg.BGP.RouteReflectors, "routeReflector", cfg.BGP.RouteReflector,
		"prefixLimitUnicast", lim.Unicast, "prefixLimitVPN", lim.VPN, "plannedRestart", planned, "externalPeers", len(cfg.BGP.ExternalPeers))
	voters, err := voterList(cfg, up.Address, st)
	if err != nil {
		return err
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
	d.blocks = newBlockEngine(st, d.speaker, log, cfg.NodeName, voters.Voters, pools, d.rec.TriggerBlocks)
	d.blocks.metrics = m
	d.rec.blocks = d.blocks
	d.cni.NeedBlock = d.blocks.Need

	lis, err := listenSocket(cfg.Socket, log)
	if err != nil {
		return err
	}
	srv := newServer(log, d.cni, &nodeService{d: d})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.Info("serving", "socket", cfg.Socket)
	go d.runWatchdog(ctx) // WatchdogSec= of reef.service; pings only while healthy
	d.serveMetrics(ctx, m)

	// Before ADD is served: finish the DELs the shim queued while the daemon
	// was away, then bring the kernel in line with the store.
	d.drainPendingDeletes()
	if err := d.rec.Once(); err != nil {
		log.Error("first reconcile pass had errors; serving anyway, the loop retries", "error", err)
	}
	// The kernel now holds what the store says, and nothing of pods the
	// store does not know: the node may announce.
	d.blocks.AllowAnnounce()
	d.cni.SetReady(true)
	sdNotify(log, sdaemon.SdNotifyReady)
	log.Info("ready: serving ADD", "endpoints", d.endpointCount())

	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone, drainDone := make(chan struct{}), make(chan struct{})
	go func() { d.rec.Run(loopCtx); close(loopDone) }()
	go func() { d.drainLoop(loopCtx); close(drainDone) }()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve %s: %w", cfg.Socket, err)
	}
	sdNotify(log, sdaemon.SdNotifyStopping)
	log.Info("stopping; the dataplane stays as it is, BGP sessions close without a Cease")
	if err := st.SetFlag(flagPlannedRestart, true); err != nil {
		log.Error("mark planned restart", "error", err)
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
