package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

// tunnels is the one owner of the node's tunnels: vxlan.reef (the device,
// its addresses, its neighbours of both families and its fdb entries),
// tunl0 (its MTU, its state and reef's address on it), and the tunnel
// addresses the store holds for them. The pass hands it a snapshot of what
// the tunnels are made of (tunnelSnapshot); Sync decides which device that
// changes, computes the device's desired state (the addresses in the
// store first), reads the kernel, diffs and applies the difference. What
// it keeps is what it last brought each device in line with; the
// reconciler keeps nothing of the tunnels.
type tunnels struct {
	tunnelDeps
	log *slog.Logger
	// vxlanIn and ipipIn are the snapshots of the last sync of each
	// device that ended without error (nil: none yet). A routes-only pass
	// whose snapshot gives a device the same needs nothing of it.
	vxlanIn, ipipIn *tunnelSnapshot
	// kept is the snapshot whose sync kept peers (or the device) that it
	// drops, for Finish to remove once the routes through them changed.
	kept *tunnelSnapshot
}

// tunnelDeps are what the tunnels' owner works with, all given to
// newTunnels.
type tunnelDeps struct {
	kernel  tunnelKernel
	store   tunnelStore
	sysctls tunnelSysctls    // vxlan.reef's IPv6 settings (*sysctl.Owner)
	metrics *metrics.Metrics // nil: metrics off
}

// tunnelKernel is the kernel's side of the tunnels (*tunnel.Kernel);
// the state tests give a fake kernel.
type tunnelKernel interface {
	ReadTunnel() (tunnel.State, error)
	ApplyTunnel(want tunnel.State, plan tunnel.Plan, settings func(link string) error) error
	ReadIPIP() (tunnel.IPIPState, error)
	ApplyIPIP(p tunnel.IPIPPlan) error
}

// tunnelStore is where the tunnel addresses are reserved (*store.Store).
type tunnelStore interface {
	Endpoint(handle string) (store.Endpoint, bool, error)
	Allocate(ep store.Endpoint, pools ...store.Pool) (store.Endpoint, bool, error)
	Release(handle string) (store.Endpoint, bool, error)
}

// tunnelSysctls is the sysctl owner's side of vxlan.reef.
type tunnelSysctls interface {
	Tunnel(v6 bool) ([]sysctl.Change, error)
}

var (
	_ tunnelKernel  = (*tunnel.Kernel)(nil)
	_ tunnelStore   = (*store.Store)(nil)
	_ tunnelSysctls = (*sysctl.Owner)(nil)
)

func newTunnels(deps tunnelDeps, log *slog.Logger) *tunnels {
	return &tunnels{tunnelDeps: deps, log: log.With("component", "tunnels")}
}

// tunnelSnapshot is what the tunnels are made of, as a pass sees it: the
// node's network and pools, its confirmed blocks (the tunnel addresses are
// reserved in the first of each pool's) and the nodes vxlan.reef reaches.
type tunnelSnapshot struct {
	net   netInfo
	own   []netip.Prefix
	peers vxPeers
}

// sameVXLAN and sameIPIP say whether s gives a device what was, the
// snapshot of its last sync. The node's network and pools change only with
// a restart, whose first pass syncs everything.
func (s tunnelSnapshot) sameVXLAN(was *tunnelSnapshot) bool {
	return was != nil && slices.Equal(s.own, was.own) && s.peers.equal(was.peers)
}

func (s tunnelSnapshot) sameIPIP(was *tunnelSnapshot) bool {
	return was != nil && slices.Equal(s.own, was.own)
}

// Sync brings the tunnels in line with s. With resync (a whole pass) it
// reads both devices and repairs whatever differs, drift included;
// without (a routes-only pass) it syncs only a device whose part of s
// changed since its last sync that ended without error: through route
// reflectors every node hears every block of the cluster come, and few
// of them change the tunnels. A device whose sync failed is synced again
// by the next Sync, whatever it is given.
//
// Make before break: what s adds to vxlan.reef comes now, before the
// routes through it; what it drops (a peer now reached directly, or the
// device) stays until Finish, after the routes: removed first, the
// routes still through it would lose their packets meanwhile.
func (t *tunnels) Sync(s tunnelSnapshot, resync bool) error {
	var errs []error
	if resync || t.kept != nil || !s.sameVXLAN(t.vxlanIn) { // kept: a Finish that did not come
		kept, err := t.syncVXLAN(s, true)
		if t.kept = nil; kept {
			t.kept = &s
		} else {
			t.vxlanIn = recorded(s, err)
		}
		errs = append(errs, err)
	}
	if resync || !s.sameIPIP(t.ipipIn) {
		err := t.syncIPIP(s.net)
		t.ipipIn = recorded(s, err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Finish removes from vxlan.reef what the last Sync kept (Sync), once the
// routes are in line with its snapshot.
func (t *tunnels) Finish() error {
	if t.kept == nil {
		return nil
	}
	s := *t.kept
	t.kept = nil
	_, err := t.syncVXLAN(s, false)
	t.vxlanIn = recorded(s, err)
	return err
}

// recorded is what a device's sync leaves as its last snapshot: s if it
// ended without error, else none, so that the next Sync tries again.
func recorded(s tunnelSnapshot, err error) *tunnelSnapshot {
	if err != nil {
		return nil
	}
	return &s
}
