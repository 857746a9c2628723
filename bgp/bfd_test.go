package bgp

import (
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// TestBFDState: GoBGP's session states as reef status names them; a peer
// GoBGP has no BFD state for (unspecified) is down.
func TestBFDState(t *testing.T) {
	for in, want := range map[api.BfdSessionState]string{
		api.BfdSessionState_BFD_SESSION_STATE_UP:          BFDUp,
		api.BfdSessionState_BFD_SESSION_STATE_DOWN:        BFDDown,
		api.BfdSessionState_BFD_SESSION_STATE_INIT:        BFDInit,
		api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:  BFDAdminDown,
		api.BfdSessionState_BFD_SESSION_STATE_UNSPECIFIED: BFDDown,
	} {
		if got := bfdState(in); got != want {
			t.Errorf("bfdState(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestNoGracefulRestartWithBFD: a router with BFD is offered no graceful
// restart (so it drops a node whose daemon died when its connection
// closes, FRR included); one without BFD is offered the mesh's.
func TestNoGracefulRestartWithBFD(t *testing.T) {
	gr := &api.GracefulRestart{Enabled: true, RestartTime: 120}
	if got := externalGracefulRestart(ExternalPeer{BFD: &BFD{}}, gr); got != nil {
		t.Errorf("with BFD: %v, want none", got)
	}
	if got := externalGracefulRestart(ExternalPeer{}, gr); got != gr {
		t.Errorf("without BFD: %v, want %v", got, gr)
	}
}

// TestExternalPeerGracefulRestart: the peer GoBGP is given for a router
// without BFD has graceful restart, on the session and on every family
// (a capability with no families would let the router drop the node's
// routes over a planned restart); one with BFD has it on neither (a
// family's setting alone makes a restarting node wait for the router's
// End-of-RIB, TestRestartingSendsOnEndOfRIBWithBFDRouterDown).
func TestExternalPeerGracefulRestart(t *testing.T) {
	sp := &Speaker{cfg: Config{NodeAddress: netip.MustParseAddr("192.0.2.1"), NodeAddressV6: netip.MustParseAddr("2001:db8::1"), RestartTime: 120 * time.Second}}
	router := netip.MustParseAddr("192.0.2.254")
	for _, bfd := range []*BFD{nil, {MinInterval: 300 * time.Millisecond, Multiplier: 3}} {
		peer := sp.externalPeer(ExternalPeer{Address: router, ASN: 65000, BFD: bfd})
		want := bfd == nil
		if got := peer.GetGracefulRestart().GetEnabled(); got != want {
			t.Errorf("BFD %v: session graceful restart %v, want %v", bfd != nil, got, want)
		}
		if len(peer.GetAfiSafis()) != 2 {
			t.Fatalf("BFD %v: families %v, want IPv4 and IPv6 unicast", bfd != nil, peer.GetAfiSafis())
		}
		for _, f := range peer.GetAfiSafis() {
			if got := f.GetMpGracefulRestart().GetConfig().GetEnabled(); got != want {
				t.Errorf("BFD %v: family %v graceful restart %v, want %v", bfd != nil, f.GetConfig().GetFamily(), got, want)
			}
		}
	}
}
