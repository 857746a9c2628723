package bgp

import (
	"context"
	"slices"
	"sync"
	"time"
)

// ownIn is what of the paths a node originates is in GoBGP's table since
// the start: a restarted speaker (Config.Restarting) sends its updates and
// End-of-RIB only once they are, and the End-of-RIBs it waits for
// (restartWaitsFor) are in, or a peer's deferral timer ended (below)
// (server.WaitLocalRoutesOption of third_party/gobgp.diff). A peer drops
// the stale paths of the node that its End-of-RIB does not bring again
// (RFC 4724 4.2): sent before the node's table, it would drop the node's
// blocks at the mesh peers, and at a router with graceful restart its
// blocks and Service addresses, until the table came moments later.
// The block engine's first AnnounceTable (made only once the first
// reconcile pass is done, daemon/blocks.go) brings the blocks; with
// Service addresses configured, the Service announcer's first
// SetServiceAddresses (made only once its informers have listed) brings
// them, and is waited for when a router keeps them over the restart
// (waitsForAddrs). A call counts when GoBGP refused none of its paths: the entries
// it leaves out itself (what reef's import filter refuses, a Service
// address outside the CIDRs, an IPv6 one without a next hop) would be
// left out by every later call too, while a path GoBGP refused is tried
// again at the next call, which then counts.
//
// A peer's deferral timer (10 s) that expires before the paths are in
// does not release it: GoBGP holds it until they are, or until
// ownPathsWait after the speaker started, and then sends its updates and
// End-of-RIB without them, as the deferral timer did before: with the
// API away and no first reconcile pass, the rest of the node's updates
// (the mark's removal that ends the stand-ins, what it reflects) must not
// wait without end.
type ownIn struct {
	mu           sync.Mutex
	blocks, addr bool
	told         bool
}

// ownPathsWait is how long after the speaker's start a restarted node's
// peers wait for its own paths at most (ownIn): well above a first
// reconcile pass (seconds; tens with thousands of pods and a large
// policy), half of the restart time the peers are told (bgpRestartTime,
// daemon.go, 120 s).
const ownPathsWait = 60 * time.Second

// waitsForAddrs says whether the node's own paths include its Service
// addresses (ownIn): with Service address CIDRs set and a router that
// keeps the node's paths over a restart, one offered graceful restart
// (no BFD, externalGracefulRestart). The Service addresses go to routers
// alone, and a router with BFD kept nothing of the node: its End-of-RIB
// drops nothing, and the addresses reach it once they are set. Without
// such a router the sync need not wait for the Kubernetes API, and the
// cluster's sessions (claims, votes, the mark's removal) are not held
// while it is slow or away.
func (cfg *Config) waitsForAddrs() bool {
	return len(cfg.ServiceAddressCIDRs) > 0 && slices.ContainsFunc(cfg.ExternalPeers, ExternalPeer.keepsOverRestart)
}

// blocksIn and addrsIn record a part of the node's own paths as in the
// table (ownIn).
func (sp *Speaker) blocksIn() { sp.ownPathsIn(func(o *ownIn) { o.blocks = true }) }
func (sp *Speaker) addrsIn()  { sp.ownPathsIn(func(o *ownIn) { o.addr = true }) }

func (sp *Speaker) ownPathsIn(set func(*ownIn)) {
	o := &sp.ownPaths
	o.mu.Lock()
	defer o.mu.Unlock()
	set(o)
	if o.told || !o.blocks || !o.addr && sp.cfg.waitsForAddrs() {
		return
	}
	o.told = true
	if err := sp.s.LocalRoutesReady(context.Background()); err != nil {
		sp.log.Warn("could not tell GoBGP the node's paths are in; after a restart its updates wait for the deferral timer", "error", err)
		return
	}
	if sp.cfg.Restarting {
		sp.log.Info("after a restart: the node's own paths are in; its updates and End-of-RIB go out once the End-of-RIBs waited for are in", "serviceAddresses", sp.cfg.waitsForAddrs())
		return
	}
	sp.log.Info("the node's own paths are in", "serviceAddresses", sp.cfg.waitsForAddrs())
}
