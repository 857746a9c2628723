package daemon

import (
	"log/slog"

	"github.com/reefcni/reef/routes"
)

// bgpStart is what the daemon before this one left behind, for the BGP
// speaker's start.
//
// The speaker starts as a restarting speaker (graceful restart's Restart
// State and Forwarding State bits, RFC 4724) when the kernel kept reef's
// dataplane since a daemon before this one: its routes (the pods', the
// blackholes of the node's blocks, the other nodes' blocks), whether that
// daemon stopped on SIGTERM (a planned restart, an upgrade) or died
// (kill -9, an OOM kill, a panic). A restarting speaker sends its peers
// its updates and End-of-RIB only once the node's own paths are in its
// table (bgp/restart.go, at most ownPathsWait), so that a peer that kept
// the node's paths over the restart (a router with graceful restart, a
// mesh peer) does not drop them before the new daemon's first reconcile
// pass has announced them. Started without the bits, a router drops the
// node's paths as soon as the session is up again (Forwarding State bit
// clear, RFC 4724 4.2), and every peer at the End-of-RIB sent at once,
// before the table: pods behind the router lose their traffic to the
// node until the first pass ends, which takes seconds on a node with many
// pods (TestCrashRestartSlowFirstPassBird). After a reboot (planned or
// not) the kernel holds none of reef's routes, and at a first start none
// or, with the state dir wiped on a live kernel, an old node's, which the
// new store does not know (its first pass removes the old pods): the
// speaker starts without the bits, and what the peers kept of the node
// goes at once, which is right, as its pods are gone.
type bgpStart struct {
	planned bool // the daemon before stopped on SIGTERM (flagPlannedRestart)
	// restarting: the speaker starts with the restart bits; the kernel
	// holds routes of reef's (kernelKept) and the store is not new
	// (store.Store.Created).
	restarting bool
}

// readBGPStart reads reef's routes through their owner (routes.Blocks)
// for bgpStart, made by a store that was created at this start (created)
// or not. Should the read fail (netlinksafe has already retried an
// interrupted dump), the speaker starts without the bits, as at a first
// start, rather than the daemon not at all.
func readBGPStart(k interface{ Read() (routes.State, error) }, planned, created bool, log *slog.Logger) bgpStart {
	have, err := k.Read()
	if err != nil {
		log.Warn("could not read reef's routes: the BGP speaker starts without the graceful-restart bits, as at a first start", "error", err)
		return bgpStart{planned: planned}
	}
	return bgpStart{planned: planned, restarting: !created && kernelKept(have)}
}

// kernelKept says whether the kernel still holds reef's dataplane from a
// daemon before this one: a route of reef's protocol in the main table,
// of either family. A reboot leaves none.
func kernelKept(have routes.State) bool { return len(have.Routes) > 0 }
