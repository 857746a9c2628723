package bgp

import (
	"context"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// GoBGP v4.8.0 does not always resolve a connection collision (RFC 4271
// 6.8). When both ends dial at once, each may take the other's outgoing
// connection as its session: the OPENs cross, each sends its KEEPALIVE on
// the connection it chose, and each waits on the other one for a KEEPALIVE
// that never comes. Both ends then sit in OpenConfirm with no session (seen
// in the 3-node lab and in the 50-node mesh).
//
// The speaker watches its sessions every second. A session in OpenConfirm,
// where a sound one spends one round trip, for longer than confirmStuck is
// taken down and up again by the end with the lower router ID only: the
// other end sees its connection close and goes back to Idle, and the two
// dial afresh (GoBGP spreads the dials over a quarter of a second, so a
// second collision is unlikely). Any session still short of Established
// after anyStuck is reset by either end, whatever the cause.

// stuckState is when a peer was first seen in its current state short of
// Established.
type stuckState struct {
	state string
	since time.Time
}

// stuckLimits are the thresholds of stuckPeers.
type stuckLimits struct {
	confirm time.Duration // OpenConfirm, lower router ID resets
	any     time.Duration // OpenSent or OpenConfirm, either end resets
}

func (sp *Speaker) stuckLimits() stuckLimits {
	return stuckLimits{
		confirm: max(sp.cfg.Keepalive, 3*time.Second),
		any:     max(2*sp.cfg.Hold, 6*time.Second),
	}
}

// stuckPeers updates seen with peers (the sessions now) and returns the
// peers whose session must be reset. self is our router ID.
func stuckPeers(self netip.Addr, peers []PeerStatus, seen map[netip.Addr]stuckState, now time.Time, lim stuckLimits) []netip.Addr {
	live := map[netip.Addr]bool{}
	var reset []netip.Addr
	for _, p := range peers {
		if p.State != "opensent" && p.State != "openconfirm" {
			continue
		}
		live[p.Address] = true
		st, ok := seen[p.Address]
		if !ok || st.state != p.State {
			seen[p.Address] = stuckState{state: p.State, since: now}
			continue
		}
		held := now.Sub(st.since)
		yields := p.State == "openconfirm" && self.Less(p.Address) && held >= lim.confirm
		if yields || held >= lim.any {
			reset = append(reset, p.Address)
			delete(seen, p.Address)
		}
	}
	for a := range seen {
		if !live[a] {
			delete(seen, a)
		}
	}
	return reset
}

// watchSessions resets stuck sessions (see stuckPeers) every second for as
// long as ctx lives.
func (sp *Speaker) watchSessions(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lim := sp.stuckLimits()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			peers, err := sp.Peers(ctx)
			if err != nil {
				continue
			}
			sp.mu.Lock()
			reset := stuckPeers(sp.cfg.RouterID, peers, sp.stuck, now, lim)
			sp.mu.Unlock()
			for _, a := range reset {
				sp.resetSession(ctx, a)
			}
		}
	}
}

// resetSession takes a peer's session down and up again, which closes its
// connections and makes it connect afresh.
func (sp *Speaker) resetSession(ctx context.Context, peer netip.Addr) {
	sp.log.Warn("BGP session stuck between OPEN and Established; resetting it", "peer", peer)
	if err := sp.s.DisablePeer(ctx, &api.DisablePeerRequest{Address: peer.String(), Communication: "stuck before Established"}); err != nil {
		sp.log.Warn("reset stuck BGP session", "peer", peer, "error", err)
		return
	}
	if err := sp.s.EnablePeer(ctx, &api.EnablePeerRequest{Address: peer.String()}); err != nil {
		sp.log.Warn("re-enable BGP session", "peer", peer, "error", err)
	}
}
