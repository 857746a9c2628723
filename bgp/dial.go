package bgp

import (
	"context"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// Who dials whom. When both ends of a session dial at once, GoBGP v4.8.0
// does not always resolve the collision (sessions.go), and its outgoing
// connection manager goes on redialling a peer whose session came in on
// the accepted connection. In a mesh every pair does both at a cold start:
// 25 of 1,225 sessions of the 50-node lab mesh were stuck for seconds, and
// the daemons logged 20,000 "Closed an accepted connection". So, as
// Calico's BIRD mesh does, only one end of a mesh pair dials: the one with
// the higher address. The lower end waits for it (GoBGP's passive mode).
//
// The lower end cannot know that the higher one lists it: a node that joins
// a running cluster lists the others, while they take it in through
// bgp.peerPrefixes and never dial it. So a passive peer that has not
// connected within passiveWait of the start, not even to OpenSent, is
// added again as one this end dials. A peer that has connected once dials
// again after its restarts; it stays passive. Route reflectors
// (RouteReflectors) are always dialled: they take their clients in
// dynamically.
const passiveWait = 10 * time.Second

// passive says whether the speaker waits for peer to dial it rather than
// dialling it.
func (cfg *Config) passive(peer netip.Addr) bool {
	return slices.Contains(cfg.Peers, peer) && cfg.local(peer).Less(peer)
}

// addPeer adds a configured neighbour.
func (sp *Speaker) addPeer(ctx context.Context, peer netip.Addr, passive bool) error {
	cfg := &sp.cfg
	return sp.s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: peer.String(), PeerAsn: cfg.ASN, AuthPassword: cfg.Password},
		Timers:          sp.timers(),
		GracefulRestart: sp.gracefulRestart(),
		AfiSafis:        sp.afiSafis(),
		Transport:       &api.Transport{LocalAddress: cfg.local(peer).String(), RemotePort: uint32(cfg.Port), PassiveMode: passive},
	}})
}

// overduePassive updates waiting (passive peers that never connected, and
// since when they are waited for) with peers (the sessions now) and returns
// those waited for longer than wait, which this end must dial instead.
func overduePassive(peers []PeerStatus, waiting map[netip.Addr]time.Time, now time.Time, wait time.Duration) []netip.Addr {
	var out []netip.Addr
	for _, p := range peers {
		since, ok := waiting[p.Address]
		if !ok || p.Dynamic {
			continue
		}
		switch {
		case p.State == "opensent" || p.State == "openconfirm" || p.State == "established":
			delete(waiting, p.Address) // it dials this node: it stays passive
		case now.Sub(since) >= wait:
			out = append(out, p.Address)
			delete(waiting, p.Address)
		}
	}
	return out
}

// dialInstead replaces a passive peer with one this end dials. Should the
// peer connect between the two steps, GoBGP takes it in as a dynamic peer
// and the add fails; redial retries it once that session is gone.
func (sp *Speaker) dialInstead(ctx context.Context, peer netip.Addr) {
	sp.log.Info("BGP peer has not connected to this node; dialling it instead (does it list this node in bgp.peers?)", "peer", peer, "waited", sp.waitFor)
	if err := sp.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: peer.String()}); err != nil {
		sp.log.Warn("remove passive BGP peer to dial it", "peer", peer, "error", err)
		return
	}
	sp.redial(ctx, peer)
}

// redial adds peer as one this end dials, or leaves it for the next
// attempt (sp.readd).
func (sp *Speaker) redial(ctx context.Context, peer netip.Addr) {
	err := sp.addPeer(ctx, peer, false)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err != nil {
		if !sp.readd[peer] {
			sp.log.Warn("add BGP peer to dial it; retrying", "peer", peer, "error", err)
		}
		sp.readd[peer] = true
		return
	}
	delete(sp.readd, peer)
}

// readdable returns the peers of readd that no dynamic peer holds now:
// their add can be tried again. The record of the configured peer that
// was removed stays (a configured peer's outlives its session, notePeer)
// and holds nothing.
func readdable(readd map[netip.Addr]bool, peers []PeerStatus) []netip.Addr {
	var out []netip.Addr
	for a := range readd {
		if !slices.ContainsFunc(peers, func(p PeerStatus) bool { return p.Address == a && p.Dynamic }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
