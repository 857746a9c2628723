package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// A session that its prefix limit cut off stays closed (sessions.go): a
// configured or external peer in GoBGP's admin state PFX_CT, a dynamic one
// behind keepOut's placeholder. PeerReset (`reef peer reset`, as BIRD's
// `birdc enable` and `gobgp neighbor X enable`) lets it connect again; the
// limit still holds, so a peer that floods again is cut off again.
//
// A configured peer is removed and added again, not enabled (GoBGP's
// EnablePeer): a session cut off in graceful restart (a peer that offered
// it, every reef node) keeps the peer's paths as stale until the peer's
// restart time is up, and GoBGP counts them against the limit. An enabled
// peer that came back with fewer routes was cut off again at its first
// UPDATE by the count of the flood. Removing the peer drops its paths.

// ErrNoPeer is PeerReset's error for an address that is no BGP peer of
// this node: not configured (bgp.peers, bgp.routeReflectors,
// bgp.externalPeers) and without a session.
var ErrNoPeer = errors.New("no BGP peer of this node")

// errCutOffAgain: a peer being let in by PeerReset was cut off again
// meanwhile; reset it again once its flood is gone.
var errCutOffAgain = errors.New("reset it again once its flood is gone")

// PeerReset lets the peer at addr connect again if its prefix limit cut
// it off, and reports whether it had (cutOff) with the peer as it was. A
// peer that was not cut off is left alone. Safe from any goroutine; one
// reset runs at a time.
func (sp *Speaker) PeerReset(ctx context.Context, addr netip.Addr) (was PeerStatus, cutOff bool, err error) {
	addr = addr.Unmap()
	sp.resetting.Lock()
	defer sp.resetting.Unlock()
	sp.mu.Lock()
	st, known := sp.sessions[addr]
	kept, keptOut := sp.keptOut[addr]
	sp.mu.Unlock()
	if !known {
		st = PeerStatus{Address: addr, State: "idle", Type: sp.cfg.peerType(addr, false)}
	}
	switch {
	case keptOut:
		err = sp.letIn(ctx, addr, kept)
	case sp.cfg.self(addr) || !known && !sp.static(addr):
		return st, false, fmt.Errorf("%s: %w", addr, ErrNoPeer)
	case !st.CutOff:
		return st, false, nil
	default:
		err = sp.addAgain(ctx, addr)
	}
	if err != nil {
		return st, true, err
	}
	sp.log.Warn("BGP peer cut off by its prefix limit may connect again (reef peer reset); the limit still holds", "peer", addr, "limit", sp.limitOf(addr))
	return st, true, nil
}

// letIn removes the placeholder that keeps a dynamic peer out (keepOut),
// once it is in (kept closed), so that the next connection from addr is a
// new dynamic peer.
func (sp *Speaker) letIn(ctx context.Context, addr netip.Addr, kept chan struct{}) error {
	select {
	case <-kept:
	case <-ctx.Done():
		return fmt.Errorf("BGP peer %s is still being kept out: %w", addr, ctx.Err())
	}
	sp.mu.Lock()
	delete(sp.keptOut, addr)
	sp.mu.Unlock()
	if err := sp.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		sp.mu.Lock()
		sp.keptOut[addr] = kept
		sp.mu.Unlock()
		return fmt.Errorf("remove the placeholder that keeps BGP peer %s out: %w", addr, err)
	}
	// The placeholder's record: a dynamic peer without a session is no
	// peer of ours (notePeer), and its series leave the metrics. A new
	// session from addr may have been recorded since. So may a cut-off
	// again (a late event of the flood, or a new one): keepOut runs again,
	// and the record stays, cut off, for reef status and the metrics.
	sp.mu.Lock()
	_, again := sp.keptOut[addr]
	if st, ok := sp.sessions[addr]; ok && st.CutOff && !again {
		delete(sp.sessions, addr)
		delete(sp.named, addr)
	}
	sp.mu.Unlock()
	if again {
		return fmt.Errorf("BGP peer %s was cut off by its prefix limit again while it was being let in: %w", addr, errCutOffAgain)
	}
	return nil
}

// addAgain removes a configured or external peer in PFX_CT, with its
// paths, and adds it again from the configuration.
func (sp *Speaker) addAgain(ctx context.Context, addr netip.Addr) error {
	if err := sp.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("remove BGP peer %s cut off by its prefix limit: %w", addr, err)
	}
	if p, ok := sp.cfg.external(addr); ok {
		if err := sp.addExternalPeer(ctx, p); err != nil {
			return fmt.Errorf("add external BGP peer %s (AS %d) again: %w; it has no session until reef restarts", addr, p.ASN, err)
		}
	} else {
		passive := sp.cfg.passive(addr)
		if err := sp.addPeer(ctx, addr, passive); err != nil {
			// It connected between the two steps and GoBGP took it in
			// as a dynamic peer (dial.go): added once that session ends.
			sp.mu.Lock()
			sp.readd[addr] = true
			sp.mu.Unlock()
			sp.log.Warn("add BGP peer again after reef peer reset; retrying", "peer", addr, "error", err)
		} else if passive {
			sp.mu.Lock()
			sp.waiting[addr] = time.Now()
			sp.mu.Unlock()
		}
	}
	return nil
}
