package daemon

// The pass's endpoints: which of the store's records a pass counts, and
// the release of those no pod can use any more.

import (
	"fmt"

	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/store"
)

// goneObservations is how many passes in a row must find a pod's netns gone
// before its address is released: one miss may be a runtime still setting
// up a namespace bind mount.
const goneObservations = 2

// know tells mark what the store holds for each pod, so that an operation
// that names a pod by one key (a DEL, by its handle) touches all of the
// pod's objects (activity.Mark.Know).
func know(mark *activity.Mark, eps []store.Endpoint) {
	for _, ep := range eps {
		if ep.State != store.EndpointReserved {
			mark.Know(ep.Handle, ep.HostVeth, ep.Addrs())
		}
	}
}

// untouched are the endpoints of eps that no CNI operation touched.
func untouched(eps []store.Endpoint, t activity.Touched) []store.Endpoint {
	var out []store.Endpoint
	for _, ep := range eps {
		if ep.State == store.EndpointReserved || !t.Pod(ep.Handle, ep.HostVeth, ep.Addrs()...) {
			out = append(out, ep)
		}
	}
	return out
}

// readyEndpoints are the endpoints a routes-only pass counts: what a
// whole pass would release stays for it, so only ready attachments and
// reserved addresses.
func readyEndpoints(eps []store.Endpoint) []store.Endpoint {
	var live []store.Endpoint
	for _, ep := range eps {
		if ep.State == store.EndpointReady || ep.State == store.EndpointReserved {
			live = append(live, ep)
		}
	}
	return live
}

// resolveEndpoints releases what no pod can use any more and returns the
// endpoints that stay. A pending record is an ADD that never finished (the
// daemon died, or its rollback failed): the runtime got no result and will
// retry or delete, so the address is freed. A ready record whose netns is
// gone (a reboot, a runtime that never sent DEL) is freed on the second pass
// in a row that finds it gone.
func (r *reconciler) resolveEndpoints(eps []store.Endpoint, touched activity.Touched, errs *[]error) []store.Endpoint {
	var live []store.Endpoint
	seen := map[string]bool{}
	for _, ep := range eps {
		seen[ep.Handle] = true
		switch {
		case ep.State == store.EndpointReserved:
		case touched.Pod(ep.Handle, ep.HostVeth, ep.Addrs()...):
			// A CNI operation's: it decides; the next pass sees what it did.
			delete(r.gone, ep.Handle)
			continue
		case ep.State != store.EndpointReady:
			r.release(ep, "its ADD never finished", errs)
			continue
		case r.cni.ReleaseDeferred(ep.Handle):
			r.release(ep, "its DEL came while the store could not be written", errs)
			continue
		case !r.cni.Alive(ep):
			r.gone[ep.Handle]++
			if r.gone[ep.Handle] >= goneObservations {
				r.release(ep, "its network namespace is gone", errs)
				delete(r.gone, ep.Handle)
				continue
			}
			r.log.Info("pod's network namespace is gone; releasing its address on the next pass if still gone", "ip", ep.AddrsString(), "netns", ep.Netns, "container", ep.ContainerID)
		default:
			delete(r.gone, ep.Handle)
		}
		live = append(live, ep)
	}
	for h := range r.gone {
		if !seen[h] {
			delete(r.gone, h)
		}
	}
	return live
}

func (r *reconciler) release(ep store.Endpoint, why string, errs *[]error) {
	released, err := r.cni.Release(ep, false)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("release %s of %s: %w", ep.AddrsString(), ep.ContainerID, err))
		return
	}
	if !released {
		r.log.Info("not releasing an address now: its record changed since the pass read it, or an operation on its container is in flight", "ip", ep.AddrsString(), "container", ep.ContainerID)
		return
	}
	r.log.Warn("released address: "+why, "ip", ep.AddrsString(), "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName)
}
