package tc

import (
	"net/netip"

	"github.com/reefcni/reef/internal/netnstest"
)

// Kernel tests run in throw-away namespaces (internal/netnstest), never in
// the namespace the test was started in.
var (
	requireRoot = netnstest.RequireRoot
	netnsHandle = netnstest.Handle
	in          = netnstest.Do
)

// testBusy is a podlink.Busy of fixed objects.
type testBusy struct {
	links map[string]bool
	addrs map[netip.Addr]bool
}

func (b testBusy) Link(name string) bool   { return b.links[name] }
func (b testBusy) Addr(ip netip.Addr) bool { return b.addrs[ip] }
