package daemon

import (
	"github.com/reefcni/reef/routes"
)

// bgpStart is what the daemon before this one left behind, for the BGP
// speaker's start.
//
// The speaker starts as a restarting speaker (graceful restart's Restart
// State and Forwarding State bits, RFC 4724) after a planned stop, and
// also when the kernel still holds the node's forwarding state: the
// daemon before died (kill -9, an OOM kill, a panic) while the kernel
// lived on, with the node's pods, their routes and its blocks'
// blackholes. A restarting speaker sends its peers its updates and
// End-of-RIB only once the node's own paths are in its table (bgp/
// restart.go), so that a peer that kept the node's paths over the
// restart (a router with graceful restart, a mesh peer) does not drop
// them before the new daemon's first reconcile pass has announced them.
// Started without the bits, a router drops the node's paths as soon as
// the session is up again (Forwarding State bit clear, RFC 4724 4.2),
// and every peer at the End-of-RIB sent at once, before the table: pods
// behind the router lose their traffic to the node until the first pass
// ends, which takes seconds on a node with many pods
// (TestCrashRestartSlowFirstPassBird). After a reboot the kernel holds
// none of it: the speaker starts without the bits, and what the peers
// kept of the node goes at once, which is right, as its pods are gone.
type bgpStart struct {
	planned bool // the daemon before stopped on SIGTERM (flagPlannedRestart)
	kept    bool // the kernel holds a blackhole of reef's (forwardingKept)
}

// restarting says whether the speaker starts with the restart bits.
func (s bgpStart) restarting() bool { return s.planned || s.kept }

// forwardingKept says whether the kernel still holds the node's
// forwarding state from a daemon before this one: a blackhole route of
// reef's, which reef writes for the node's own blocks alone, next to
// their pods' routes.
func forwardingKept(have routes.State) bool {
	for _, r := range have.Routes {
		if r.Kind == routes.Blackhole {
			return true
		}
	}
	return false
}
