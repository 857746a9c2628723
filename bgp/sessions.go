package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// The block protocol asks for the sessions on every reconcile pass, the
// session watcher every second, and `reef status` (monitoring may poll it)
// whenever it is run. GoBGP's ListPeer answers in its main loop and counts
// every peer's received paths as it does: with 49 peers relaying 49 blocks
// each, that was a quarter of the daemons' CPU in the 50-node lab, and it
// held up BGP updates. So the speaker keeps the sessions itself, from
// GoBGP's peer events (notePeer); Sessions reads those. Status counts the
// paths with a pass over the tables (CountPaths) when it is asked.

// notePeer records a peer event: the session's state, since when it is
// established, and whether the peer is administratively down (a reset in
// progress, see resetSession). GoBGP leaves the FQDN capability out of its
// events, so the hostname is looked up once per session by Sessions.
func (sp *Speaker) notePeer(ev *apiutil.WatchEventMessage_PeerEvent, t time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	// GoBGP fills both from the peer's address; a dynamic peer that was
	// disabled would have none, which is why resetSession leaves dynamic
	// peers alone.
	addr := ev.Peer.State.NeighborAddress
	if !addr.IsValid() {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	_, keptOut := sp.keptOut[addr]
	if ev.Peer.State.AdminState != api.PeerState_ADMIN_STATE_DOWN {
		delete(sp.adminDown, addr)
	} else if _, ok := sp.adminDown[addr]; !ok && !keptOut { // kept out (keepOut): no reset to finish (leftDown)
		sp.adminDown[addr] = t
		if c, ok := sp.downSeen[addr]; ok {
			close(c) // resetSession waits for this event
			delete(sp.downSeen, addr)
		}
	}
	old := sp.sessions[addr]
	st := PeerStatus{Address: addr, State: fsmStateName(ev.Peer.State.SessionState), Dynamic: !sp.static(addr),
		CutOff: keptOut || ev.Peer.State.AdminState == api.PeerState_ADMIN_STATE_PFX_CT}
	if st.CutOff && !old.CutOff {
		sp.log.Error("BGP peer sent more routes than the session's prefix limit; the session is closed and stays closed until `reef peer reset` or a restart",
			"peer", addr, "limit", sp.limitOf(addr), "reset", "reef peer reset "+addr.String())
	}
	if st.CutOff && st.Dynamic && !keptOut {
		in := make(chan struct{})
		sp.keptOut[addr] = in
		go func() {
			defer close(in)
			sp.keepOut(addr)
		}()
	}
	st.Type = sp.cfg.peerType(addr, st.Dynamic)
	st.Established = ev.Peer.State.SessionState == bgppkt.BGP_FSM_ESTABLISHED
	if old.Established && !st.Established && st.Type != PeerExternal {
		// Its paths may stay, stale, for the restart time it gave.
		if until := t.Add(sp.cfg.RestartTime + sp.cfg.Hold); until.After(sp.copiesUntil) {
			sp.copiesUntil = until
		}
	}
	switch {
	case st.Established && old.Established:
		st.Since = old.Since
	case st.Established:
		st.Since = t
		delete(sp.named, addr) // a new session: its OPEN may name the peer anew
	}
	if st.Dynamic && st.State == "idle" && !st.CutOff {
		// A dynamic peer without a session is no peer of ours: GoBGP
		// removes it, or keeps it only to wait for it to come back.
		delete(sp.sessions, addr)
		delete(sp.named, addr)
		delete(sp.adminDown, addr)
		return
	}
	// A configured peer's name outlives its session: `reef node forget`
	// takes the name of a node that is down.
	st.Hostname = old.Hostname
	sp.sessions[addr] = st
}

// keepOut keeps a dynamic peer (bgp.peerPrefixes) that its prefix limit
// cut off out until PeerReset or a restart, as a configured peer is kept
// (GoBGP's admin state PFX_CT). GoBGP removes a dynamic peer whose session
// ends and takes the next connection from its address as a new peer, so
// a flooding node came back every 10 to 15 s, flooded again and was cut
// off again. In its place goes a configured peer that is administratively
// down and passive: GoBGP closes every connection it makes and never dials
// it. The dynamic peer is being removed when the event comes, and may have
// reconnected since, so the address is freed and the peer added until
// GoBGP takes it.
func (sp *Speaker) keepOut(addr netip.Addr) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peer := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr.String(), PeerAsn: sp.cfg.ASN, AdminDown: true, Description: "cut off by its prefix limit"},
		Transport: &api.Transport{PassiveMode: true},
	}
	for {
		err := sp.s.AddPeer(ctx, &api.AddPeerRequest{Peer: peer})
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			sp.log.Error("cannot keep the BGP peer cut off by its prefix limit out; it may connect again", "peer", addr, "error", err)
			return
		}
		_ = sp.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}) // the dynamic peer, if it is still there
		time.Sleep(100 * time.Millisecond)
	}
}

// Sessions returns every peer the speaker has seen, sorted by address, as
// of GoBGP's last event for each, without path counts. The hostname of a
// session that came up since it was last asked is looked up first (one
// ListPeer of that peer), so that blocks learned from it are recorded with
// the owner's name; callers wait for a lookup under way. A lookup that
// fails is tried again at the next call.
func (sp *Speaker) Sessions(ctx context.Context) []PeerStatus {
	sp.naming.Lock()
	defer sp.naming.Unlock()
	sp.mu.Lock()
	var unnamed []netip.Addr
	for a, st := range sp.sessions {
		if st.Established && !sp.named[a] {
			unnamed = append(unnamed, a)
		}
	}
	sp.mu.Unlock()
	for _, a := range unnamed {
		name, err := sp.hostname(ctx, a)
		if err != nil {
			continue
		}
		sp.mu.Lock()
		if st, ok := sp.sessions[a]; ok && st.Established {
			if name != "" {
				st.Hostname = name
				sp.sessions[a] = st
			}
			sp.named[a] = true // a peer that sends no name is not asked again
		}
		sp.mu.Unlock()
	}
	return sp.snapshot()
}

// Status is Sessions with each peer's path counts (both families), from a
// pass over the tables (CountPaths): what `reef status` shows. When the
// tables cannot be listed, the counts are left zero.
func (sp *Speaker) Status(ctx context.Context) []PeerStatus {
	out := sp.Sessions(ctx)
	counts, err := sp.CountPaths()
	if err != nil {
		sp.log.Warn("cannot count the BGP paths for the status", "error", err)
		return out
	}
	for i := range out {
		c := counts.Peers[out[i].Address]
		out[i].Received = c.Unicast.Received + c.VPN.Received
		out[i].Accepted = c.Unicast.Accepted + c.VPN.Accepted
	}
	return out
}

// snapshot is the sessions as recorded, sorted by address.
func (sp *Speaker) snapshot() []PeerStatus {
	sp.mu.Lock()
	out := make([]PeerStatus, 0, len(sp.sessions))
	for _, st := range sp.sessions {
		out = append(out, st)
	}
	sp.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out
}

func (sp *Speaker) static(a netip.Addr) bool {
	_, ext := sp.cfg.external(a)
	return ext || slices.Contains(sp.cfg.Peers, a) || slices.Contains(sp.cfg.RouteReflectors, a)
}

func fsmStateName(s bgppkt.FSMState) string {
	switch s {
	case bgppkt.BGP_FSM_IDLE:
		return "idle"
	case bgppkt.BGP_FSM_CONNECT:
		return "connect"
	case bgppkt.BGP_FSM_ACTIVE:
		return "active"
	case bgppkt.BGP_FSM_OPENSENT:
		return "opensent"
	case bgppkt.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case bgppkt.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

// GoBGP v4.8.0 does not always resolve a connection collision (RFC 4271
// 6.8). When both ends dial at once, each may take the other's outgoing
// connection as its session: the OPENs cross, each sends its KEEPALIVE on
// the connection it chose, and each waits on the other one for a KEEPALIVE
// that never comes. Both ends then sit in OpenConfirm with no session (seen
// in the 3-node lab and in the 50-node mesh).
//
// The speaker watches its sessions every second. A session in OpenConfirm,
// where a sound one spends one round trip, for longer than 3 s (stuckLimits) is
// taken down and up again by the end with the lower router ID: the other
// end sees its connection close and goes back to Idle, and the two dial
// afresh (GoBGP spreads the dials over a quarter of a second, so a second
// collision is unlikely). The end with the higher router ID does the same
// after 6 s, for a pair whose lower end sits in Active instead (seen in the
// 50-node mesh). Any session still short of Established after 10 s is
// reset by either end, whatever the cause.

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

// The limits do not follow the BGP timers: an end sends its KEEPALIVE
// as soon as it has taken the OPEN (RFC 4271 8.2.2), not a keepalive
// interval later, so a sound session leaves OpenSent and OpenConfirm within
// round trips whatever the timers; with the production 30 s hold time, a
// limit of two hold times left a stuck pair of a 50-node mesh without a
// session for a minute.
func (sp *Speaker) stuckLimits() stuckLimits {
	return stuckLimits{confirm: 3 * time.Second, any: 10 * time.Second}
}

// stuckPeers updates seen with peers (the sessions now) and returns the
// peers whose session must be reset. local is our address toward a peer.
func stuckPeers(local func(netip.Addr) netip.Addr, peers []PeerStatus, seen map[netip.Addr]stuckState, now time.Time, lim stuckLimits) []netip.Addr {
	live := map[netip.Addr]bool{}
	var reset []netip.Addr
	for _, p := range peers {
		// Dynamic peers are left alone: we never dial them, so they cannot
		// collide, and the end that dials resets its side. (GoBGP cannot
		// take a disabled dynamic peer up again.)
		if p.Dynamic || p.State != "opensent" && p.State != "openconfirm" {
			continue
		}
		live[p.Address] = true
		st, ok := seen[p.Address]
		if !ok || st.state != p.State {
			seen[p.Address] = stuckState{state: p.State, since: now}
			continue
		}
		held := now.Sub(st.since)
		// In OpenConfirm the lower router ID resets first; the higher one
		// resets after twice as long, for the pairs whose lower end is not
		// in OpenConfirm itself (it sits in Active, its outgoing
		// connection waiting on the one the higher end abandoned).
		confirm := lim.confirm
		if !local(p.Address).Less(p.Address) {
			confirm *= 2
		}
		yields := p.State == "openconfirm" && held >= confirm
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
			peers := sp.Sessions(ctx)
			sp.mu.Lock()
			reset := stuckPeers(sp.cfg.local, peers, sp.stuck, now, lim)
			down := leftDown(sp.adminDown, now, lim.any+10*time.Second)
			dial := overduePassive(peers, sp.waiting, now, sp.waitFor)
			readd := readdable(sp.readd, peers)
			sp.mu.Unlock()
			for _, a := range dial {
				sp.dialInstead(ctx, a)
			}
			for _, a := range readd {
				sp.redial(ctx, a)
			}
			for _, a := range reset {
				sp.resetSession(ctx, a)
			}
			for _, a := range down {
				sp.log.Warn("BGP peer still administratively down after a reset; enabling it again", "peer", a)
				sp.enable(ctx, a)
			}
		}
	}
}

// resetSession takes a configured peer's session down and up again, which
// closes its connections and makes it connect afresh. GoBGP takes the two
// requests through a channel that holds one and drops what does not fit,
// so the peer is enabled only once its event says it is down.
func (sp *Speaker) resetSession(ctx context.Context, peer netip.Addr) {
	sp.log.Warn("BGP session stuck between OPEN and Established; resetting it", "peer", peer)
	// The event that says the peer is down closes seen (notePeer).
	seen := make(chan struct{})
	sp.mu.Lock()
	_, down := sp.adminDown[peer]
	if !down {
		sp.downSeen[peer] = seen
	}
	sp.mu.Unlock()
	if err := sp.s.DisablePeer(ctx, &api.DisablePeerRequest{Address: peer.String(), Communication: "stuck before Established"}); err != nil {
		sp.log.Warn("reset stuck BGP session", "peer", peer, "error", err)
		sp.mu.Lock()
		delete(sp.downSeen, peer)
		sp.mu.Unlock()
		return
	}
	if !down {
		timeout := time.NewTimer(5 * time.Second)
		select {
		case <-seen:
		case <-ctx.Done():
		case <-timeout.C:
			sp.log.Warn("BGP peer did not report itself down within 5s of the reset; enabling it anyway", "peer", peer)
			sp.mu.Lock()
			delete(sp.downSeen, peer)
			sp.mu.Unlock()
		}
		timeout.Stop()
	}
	sp.enable(ctx, peer)
}

// enable takes a configured peer administratively up.
func (sp *Speaker) enable(ctx context.Context, peer netip.Addr) {
	if err := sp.s.EnablePeer(ctx, &api.EnablePeerRequest{Address: peer.String()}); err != nil {
		sp.log.Warn("re-enable BGP session", "peer", peer, "error", err)
	}
}

// leftDown returns the configured peers whose events have said admin down
// for longer than limit: reef takes a peer down only for a moment (a
// reset), so such a peer lost its enable request and needs another.
func leftDown(adminDown map[netip.Addr]time.Time, now time.Time, limit time.Duration) []netip.Addr {
	var out []netip.Addr
	for a, since := range adminDown {
		if now.Sub(since) >= limit {
			out = append(out, a)
			adminDown[a] = now // wait a whole limit again for its event
		}
	}
	return out
}

// Updates are a peer's UPDATE messages, received and sent, as GoBGP counts
// them for the session's life.
type Updates struct{ Received, Sent uint64 }

// UpdateCounts asks GoBGP for every peer's UPDATE counters. ListPeer
// answers in GoBGP's main loop and counts paths as it does (see above):
// the metrics ask at most once per scrape, not a loop.
func (sp *Speaker) UpdateCounts(ctx context.Context) (map[netip.Addr]Updates, error) {
	out := map[netip.Addr]Updates{}
	err := sp.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		m := p.GetState().GetMessages()
		out[a.Unmap()] = Updates{Received: m.GetReceived().GetUpdate(), Sent: m.GetSent().GetUpdate()}
	})
	if err != nil {
		return nil, fmt.Errorf("list BGP peers: %w", err)
	}
	return out, nil
}
