package routes

import (
	"github.com/reefcni/reef/routes/podlink"
	"github.com/reefcni/reef/routes/tc"
)

// Busy says whether a CNI operation is busy with a pod's veth or /32
// (podlink.Busy): the reconcile pass leaves such objects alone.
type Busy = podlink.Busy

// lockPod locks a pod's veth and its ifb, as every writer of them does.
func lockPod(hostVeth string) (unlock func()) { return podlink.LockPod(hostVeth, tc.IFBName(hostVeth)) }
