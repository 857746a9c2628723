package daemon

// The CNI side of the policy dataplane (cniserver.PolicyGate): an ADD is
// admitted once its pod is known, its pod covered before the ADD returns
// (from the moment its record is written: pending), a DEL's uncovered.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/store"
)

// podWait bounds how long an ADD waits for the informer to see its pod:
// kubelet creates the Pod before the sandbox, so the watch event is
// usually there already.
const podWait = 5 * time.Second

// Admit is called before an ADD allocates: the pod must be known, so
// that the policies that select it cover it before the ADD returns.
func (p *policyDataplane) Admit(ctx context.Context, namespace, name string) *types.Error {
	if why := p.notSynced(); why != "" {
		return types.NewError(types.ErrTryAgainLater, why+"; try again later", "")
	}
	if name == "" {
		return nil // not a Kubernetes pod (no K8S_POD_NAME): no policy selects it
	}
	ctx, cancel := context.WithTimeout(ctx, podWait)
	defer cancel()
	if !p.watch.WaitPod(ctx, namespace, name) {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf(
			"pod %s/%s is not in reef's view of the Kubernetes API after %s, so its NetworkPolicies cannot cover it yet; try again later",
			namespace, name, podWait), "")
	}
	// reef knows its pods by their endpoints, so a wrong node name costs
	// nothing in enforcement; it is still a misconfiguration to report.
	if pod, ok := p.watch.Pod(namespace, name); ok && pod.NodeName != "" && pod.NodeName != p.nodeName && p.warnedNode.Swap(pod.NodeName) != pod.NodeName {
		p.log.Warn("an ADD's pod is scheduled to another node name than kubernetes.nodeName: set it to this node's name in the API",
			"pod", namespace+"/"+name, "spec.nodeName", pod.NodeName, "kubernetes.nodeName", p.nodeName)
	}
	return nil
}

// notSynced is why no ADD is admitted yet ("" once the informers have
// synced): the ADD's answer, and /readyz's while the daemon waits for the
// API.
func (p *policyDataplane) notSynced() string {
	if p.watch.Synced() {
		return ""
	}
	st := p.watch.Status()
	msg := "reef has not read NetworkPolicy from the Kubernetes API yet (its informers have not synced)"
	if !st.Reachable {
		msg += fmt.Sprintf("; the API %s is unreachable since %s: %s", st.Server, st.Since.Format(time.RFC3339), st.LastError)
	}
	return msg
}

// Cover brings the table in line with the endpoints, the ADD's own
// (recorded) included: the ADD calls it while the pod's veth is made,
// and waits for it before the node's routes to the pod are written
// (cniserver.PolicyGate).
//
// Its record need not be committed yet (cniserver calls it from the
// store's AllocateThen): ep is one of this node's endpoints for every
// compile until the ADD settles it (Settle) or undoes it (Uncover).
func (p *policyDataplane) Cover(ep store.Endpoint) error {
	p.setPending(ep.Handle, &ep)
	// Marked before the informer's copy is read: an event it handles
	// after the read asks for a sync (kube.Watcher.MarkLocal).
	p.watch.MarkLocal(ep.PodNamespace, ep.PodName)
	pod, _ := p.watch.Pod(ep.PodNamespace, ep.PodName)
	if err := p.locked(func(local []policy.Endpoint) error {
		p.covers++
		if pod == nil {
			return p.syncLocal(local, false) // not a pod of the API's (no K8S_POD_NAME)
		}
		return p.syncPod(local, pod)
	}); err != nil {
		return fmt.Errorf("cover pod %s/%s (%s) with its NetworkPolicies: %w", ep.PodNamespace, ep.PodName, ep.AddrsString(), err)
	}
	return nil
}

// Settle ends an ADD's Cover: ep's record is the store's now, or gone
// with an Uncover.
func (p *policyDataplane) Settle(ep store.Endpoint) {
	p.setPending(ep.Handle, nil)
}

// Uncover takes an endpoint that went (a DEL, a rolled-back ADD, the
// reconcile pass's release) out of the table: with the endpoints left,
// only what its pod affected is compiled again and changed (syncPod). A
// failure asks for a full sync, and the reconcile pass repairs what that
// misses: the address must not stay in a set for the next pod given it.
func (p *policyDataplane) Uncover(ep store.Endpoint) {
	p.setPending(ep.Handle, nil)
	if err := p.locked(func(local []policy.Endpoint) error {
		p.covers++
		return p.syncPod(local, nil)
	}); err != nil {
		p.log.Error("take pod out of its NetworkPolicies; a full sync follows", "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName,
			"ip", ep.AddrsString(), "error", err)
		p.trigger()
	}
}

// withPending are the store's endpoints eps with the pending ones (an
// ADD's record written but maybe not committed) put in, in place of a
// record of the same handle; eps is not changed.
//
// A pending endpoint whose address a stored record of another handle
// holds is left out: its commit failed (the address went back to the
// pool) and another ADD took the address before its Uncover came.
func withPending(eps []store.Endpoint, pending map[string]store.Endpoint) []store.Endpoint {
	if len(pending) == 0 {
		return eps
	}
	out := make([]store.Endpoint, 0, len(eps)+len(pending))
	held := map[netip.Addr]string{}
	for _, ep := range eps {
		if _, ok := pending[ep.Handle]; !ok {
			out = append(out, ep)
			for _, a := range ep.Addrs() {
				held[a] = ep.Handle
			}
		}
	}
	for _, ep := range pending {
		if !slices.ContainsFunc(ep.Addrs(), func(a netip.Addr) bool { _, ok := held[a]; return ok }) {
			out = append(out, ep)
		}
	}
	return out
}

// setPending puts ep among the pending endpoints (nil: takes it out) and
// counts the change as a cover: a compile that read the endpoints before
// it is made again.
func (p *policyDataplane) setPending(handle string, ep *store.Endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, had := p.pending[handle]
	switch {
	case ep != nil:
		if p.pending == nil {
			p.pending = map[string]store.Endpoint{}
		}
		p.pending[handle] = *ep
	case had:
		delete(p.pending, handle)
	default:
		return
	}
	p.covers++
}
