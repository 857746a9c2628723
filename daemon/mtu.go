package daemon

import (
	"fmt"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// recordMTUs keeps each record's MTU what its veth pair has, for CHECK,
// which compares the kernel with the record: once the node's end has the
// pods' MTU (veths, as syncRoutes left them), the record gets it too.
// Through the CNI server, under the pod's lock, compare-and-set; a pod a
// CNI operation touched waits for the next pass.
func (r *reconciler) recordMTUs(live []store.Endpoint, veths map[string]int, busy routes.Busy, errs *[]error) {
	mtu := r.net.podMTU
	for _, ep := range live {
		if mtu == 0 || ep.State != store.EndpointReady || ep.HostVeth == "" || ep.MTU == mtu || veths[ep.HostVeth] != mtu ||
			busy.Link(ep.HostVeth) {
			continue
		}
		if _, err := r.cni.Update(ep, func(rec *store.Endpoint) { rec.MTU = mtu }); err != nil {
			*errs = append(*errs, fmt.Errorf("record MTU %d of %s: %w", mtu, ep.IP, err))
		}
	}
}
