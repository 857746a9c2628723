package routes

import (
	"net/netip"

	"github.com/reefcni/reef/internal/keyed"
)

// Busy says whether a CNI operation is writing a pod's objects, or wrote
// them since the reconcile pass began reading (cniserver/activity's Mark):
// a node-side veth by name, a pod's /32 by its address. The pass leaves
// such objects alone; the next pass sees them in the store.
type Busy interface {
	Link(name string) bool
	Addr(ip netip.Addr) bool
}

// podLocks is one lock per pod object this package writes from both sides,
// ADD and DEL on one, the reconcile pass on the other: a node-side veth
// (with its qdiscs), its ifb and a pod's /32. SetupPod, TeardownPod,
// SetBandwidth and SetPodMTU hold them while they write; the pass takes one
// for each pod object it changes and asks Busy under it, so that an
// operation that began after the pass read the kernel cannot write the
// object between the pass's check and its change. They are this package's
// own: no caller sees them.
var podLocks keyed.Mutex

func lockLink(name string) (unlock func())   { return podLocks.Lock("link " + name) }
func lockAddr(ip netip.Addr) (unlock func()) { return podLocks.Lock("addr " + ip.String()) }
func lockIFB(name string) (unlock func())    { return podLocks.Lock("ifb " + name) }

// lockPod locks a pod's veth and its ifb (IFBName), in that order: what
// ADD's and DEL's writers hold. An ifb is locked by its own name because
// it has no alias for a moment after its creation, and the pass's
// DeleteIFB learns its veth from the alias.
func lockPod(hostVeth string) (unlock func()) {
	unlockLink := lockLink(hostVeth)
	unlockIFB := lockIFB(IFBName(hostVeth))
	return func() { unlockIFB(); unlockLink() }
}

// notBusy is the Busy of a caller alone on the node (tests, `reef cleanup`).
type notBusy struct{}

func (notBusy) Link(string) bool     { return false }
func (notBusy) Addr(netip.Addr) bool { return false }

// orNotBusy is b, or notBusy when b is nil.
func orNotBusy(b Busy) Busy {
	if b == nil {
		return notBusy{}
	}
	return b
}
