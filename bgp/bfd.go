package bgp

import (
	"context"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"
)

// BFD with the external peers (bgp.externalPeers[].bfd) is GoBGP's: each
// peer with BFD gets a session of its own, and GoBGP answers the router's
// packets on UDP port 3784. What it does, read from its code (our copy,
// third_party/gobgp/pkg/server/bfd_*.go), and what that means for reef:
//
//   - Single-hop only (RFC 5881): packets to port 3784 with TTL 255, from
//     a source port in 49152..65535; no multi-hop (RFC 5883), no echo
//     function, no authentication, no demand mode. The config refuses bfd
//     on a multihop peer.
//   - Timers: it sends every DesiredMinTxInterval (no jitter, and also
//     before the session is up), and its detection time is the router's
//     Detect Mult times the larger of its RequiredMinRxInterval and the
//     router's DesiredMinTxInterval (RFC 5880 6.8.4). It does not slow
//     down to a router that asks for a longer interval, so the router's
//     intervals should be no longer than reef's (the lab's are equal).
//   - When its session goes down (the router's packets stop, or the router
//     says Down or AdminDown) it resets the BGP session on reef's side
//     (a Cease NOTIFICATION "BFD is down"). It takes AdminDown for a
//     failure, which RFC 5882 3.2 says it should not; routers only send it
//     when their operator disables BFD.
//   - It never sends AdminDown: a stopping reef just falls silent, which
//     the router cannot tell from a dead node. This is why a planned stop
//     de-prefers the node's Service routes first (GracefulShutdown) and
//     has the other nodes stand in for its blocks (standin.go) instead of
//     relying on AdminDown. Sending it would not help with the lab's
//     routers anyway: BIRD 2 takes a received AdminDown for a BFD down
//     like any other, and FRR already keeps the routes, because the
//     kernel closes the BGP connection before BFD goes down and FRR
//     ignores a BFD down during a graceful restart (docs/bgp.md, "Why not
//     BFD AdminDown").

// BFD states as `reef status` shows them.
const (
	BFDOff       = ""
	BFDUp        = "up"
	BFDDown      = "down"
	BFDInit      = "init"
	BFDAdminDown = "admin down"
)

// BFDStates are the BFD states of the external peers that run BFD, by
// address, from GoBGP's peer list (one ListPeer per such peer).
func (sp *Speaker) BFDStates(ctx context.Context) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, p := range sp.cfg.ExternalPeers {
		if p.BFD == nil {
			continue
		}
		out[p.Address] = BFDDown
		_ = sp.s.ListPeer(ctx, &api.ListPeerRequest{Address: p.Address.String()}, func(peer *api.Peer) {
			out[p.Address] = bfdState(peer.GetState().GetBfdState().GetSessionState())
		})
	}
	return out
}

func bfdState(s api.BfdSessionState) string {
	switch s {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return BFDUp
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return BFDInit
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return BFDAdminDown
	default:
		return BFDDown
	}
}
