package routes

import "net/netip"

// Busy says whether a CNI operation is writing a pod's objects, or wrote
// them since the reconcile pass began reading (cniserver/activity's
// Mark): a node-side veth by name, a pod's /32 or /128 by its address.
// The pass leaves such objects alone; the next pass sees them in the
// store. Pods asks it under the object's lock, just before each change.
type Busy interface {
	Link(name string) bool
	Addr(ip netip.Addr) bool
}

// orNotBusy is b, or a Busy that names nothing when b is nil (a caller
// alone on the node: tests, `reef cleanup`).
func orNotBusy(b Busy) Busy {
	if b == nil {
		return notBusy{}
	}
	return b
}

type notBusy struct{}

func (notBusy) Link(string) bool     { return false }
func (notBusy) Addr(netip.Addr) bool { return false }
