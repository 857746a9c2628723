package bgp

import (
	"testing"

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
