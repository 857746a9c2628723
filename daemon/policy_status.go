package daemon

import (
	"errors"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
)

// What the policy dataplane reports: its log lines for what it cannot
// enforce, the cluster policies' status conditions, `reef status` and
// `reef policy show`.

// logNotEnforced logs each part of a ClusterNetworkPolicy reef does not
// enforce as written, once.
func (p *policyDataplane) logNotEnforced(ne []policy.NotEnforced) {
	now := map[string]bool{}
	for _, n := range ne {
		now[n.String()] = true
		if !p.notEnforced[n.String()] {
			p.log.Warn("ClusterNetworkPolicy: a part is not enforced as written", "policy", n.Name, "field", n.Field, "reason", n.Reason)
		}
	}
	p.notEnforced = now
}

// clusterConditions are the status conditions of the cluster policies:
// enforced as written, in part (what is not, and what reef does
// instead), or not at all (why). They depend on the specs only.
func clusterConditions(pols []*cnp.ClusterNetworkPolicy, st policy.State) map[string]kube.Condition {
	out := map[string]kube.Condition{}
	skipped := map[string]string{}
	for _, s := range st.Skipped {
		if s.Cluster {
			skipped[s.Name] = s.Reason
		}
	}
	notes := map[string][]string{}
	for _, n := range st.NotEnforced {
		notes[n.Name] = append(notes[n.Name], n.Field+": "+n.Reason)
	}
	for _, p := range pols {
		if p == nil {
			continue
		}
		c := kube.Condition{Status: metav1.ConditionTrue, Reason: kube.ReasonEnforced, Message: "reef enforces this policy as written", Generation: p.Generation}
		switch {
		case skipped[p.Name] != "":
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, kube.ReasonNotEnforced, "reef does not enforce this policy: "+skipped[p.Name]
		case len(notes[p.Name]) > 0:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, kube.ReasonPartiallyEnforced,
				"reef enforces this policy except: "+strings.Join(notes[p.Name], "; ")
		}
		out[p.Name] = c
	}
	return out
}

// logSkipped logs each policy that cannot be enforced once per reason.
func (p *policyDataplane) logSkipped(sk []policy.Skipped) {
	now := map[string]string{}
	for _, s := range sk {
		key := s.Key()
		now[key] = s.Reason
		if p.skipped[key] != s.Reason {
			p.log.Error("NetworkPolicy skipped: reef cannot enforce it as written; the others are enforced", "policy", key, "reason", s.Reason)
		}
	}
	p.skipped = now
}

// policyStatus is what `reef status` reports.
type policyStatus struct {
	API      kube.Status
	Policies int
	Isolated [2]int
	Skipped  []policy.Skipped
	LastErr  error
	// Cluster are the ClusterNetworkPolicies enforced, NotEnforced what
	// of them is not as written.
	Cluster     int
	NotEnforced []policy.NotEnforced
}

func (p *policyDataplane) status() policyStatus {
	s := policyStatus{API: p.watch.Status()}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.Policies = len(p.state.Policies)
	for _, sk := range p.state.Skipped {
		if !sk.Cluster {
			s.Policies++
		}
	}
	s.Isolated = [2]int{len(p.state.Isolated[0]), len(p.state.Isolated[1])}
	s.Skipped = slices.Clone(p.state.Skipped)
	s.Cluster = len(p.state.Cluster)
	s.NotEnforced = slices.Clone(p.state.NotEnforced)
	s.LastErr = p.lastErr
	return s
}

// explain is `reef policy show`: from the last compiled state.
func (p *policyDataplane) explain(pod string) ([]policy.PodView, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.synced {
		return nil, status.Error(codes.Unavailable, "reef has not read NetworkPolicy from the Kubernetes API yet (its informers have not synced)")
	}
	views := policy.Explain(p.state, p.in, pod)
	if pod != "" && len(views) == 0 {
		return nil, status.Errorf(codes.NotFound, "pod %s has no endpoint on this node (reef ipam show --show-allocations lists them)", pod)
	}
	return views, nil
}

// errPolicyOff is returned by `reef policy show` without the API.
var errPolicyOff = errors.New("NetworkPolicy is off: kubernetes.kubeconfig is not set in the config (docs/policy.md)")
