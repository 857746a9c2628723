// Package podlink is what every writer of a pod's links shares: the name
// prefix that marks a link as reef's, and one lock per pod object (a
// node-side veth, its ifb, a pod's address). Package routes (the veth
// pairs and /32s), routes/tc (qdiscs and ifbs) and routes/sysctl (the
// veths' settings) build on it; no caller outside them sees the locks.
//
// ADD's and DEL's writers hold a pod's locks while they write; the
// reconcile pass takes one for each pod object it changes and asks Busy
// under it, so that a CNI operation that began after the pass read the
// kernel cannot write the object between the pass's check and its change
// (docs/design.md, "Who owns which kernel object").
package podlink

import (
	"net/netip"
	"slices"

	"github.com/reefcni/reef/internal/keyed"
)

// Prefix starts the name of every link reef creates: node-side veths and
// ifbs. A link without it is never reef's to change or delete.
const Prefix = "reef"

// Ours reports whether name carries Prefix (and more).
func Ours(name string) bool { return len(name) > len(Prefix) && name[:len(Prefix)] == Prefix }

// Busy says whether a CNI operation is writing a pod's objects, or wrote
// them since the reconcile pass began reading (cniserver/activity's
// Mark): a node-side veth by name, a pod's /32 or /128 by its address. The pass
// leaves such objects alone; the next pass sees them in the store.
type Busy interface {
	Link(name string) bool
	Addr(ip netip.Addr) bool
}

// OrNotBusy is b, or a Busy that names nothing when b is nil (a caller
// alone on the node: tests, `reef cleanup`).
func OrNotBusy(b Busy) Busy {
	if b == nil {
		return notBusy{}
	}
	return b
}

type notBusy struct{}

func (notBusy) Link(string) bool     { return false }
func (notBusy) Addr(netip.Addr) bool { return false }

var locks keyed.Mutex

// LockLink, LockAddr and LockIFB lock one pod object and return its
// unlock.
func LockLink(name string) (unlock func())   { return locks.Lock("link " + name) }
func LockAddr(ip netip.Addr) (unlock func()) { return locks.Lock("addr " + ip.String()) }
func LockIFB(name string) (unlock func())    { return locks.Lock("ifb " + name) }

// LockAddrs locks a pod's addresses in address order (IPv4 first), the
// one order every holder of more than one takes them in, and returns
// their unlock.
func LockAddrs(ips []netip.Addr) (unlock func()) {
	sorted := slices.Clone(ips)
	slices.SortFunc(sorted, netip.Addr.Compare)
	sorted = slices.Compact(sorted)
	unlocks := make([]func(), 0, len(sorted))
	for _, ip := range sorted {
		unlocks = append(unlocks, LockAddr(ip))
	}
	return func() {
		for _, u := range slices.Backward(unlocks) {
			u()
		}
	}
}

// LockPod locks a pod's veth and its ifb, in that order: what ADD's and
// DEL's writers of the veth, its qdiscs and its ifb hold. An ifb is
// locked by its own name because it has no alias for a moment after its
// creation, and the pass learns an ifb's veth from its alias.
func LockPod(hostVeth, ifb string) (unlock func()) {
	unlockLink := LockLink(hostVeth)
	unlockIFB := LockIFB(ifb)
	return func() { unlockIFB(); unlockLink() }
}
