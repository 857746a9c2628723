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
