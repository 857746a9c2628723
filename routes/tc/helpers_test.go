package tc

import "github.com/reefcni/reef/internal/netnstest"

// Kernel tests run in throw-away namespaces (internal/netnstest), never in
// the namespace the test was started in.
var (
	requireRoot = netnstest.RequireRoot
	netnsHandle = netnstest.Handle
	in          = netnstest.Do
)
