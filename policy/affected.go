package policy

import (
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// byNamespace remembers, per namespace, which policies and cluster
// policies a pod of it can affect, whatever its labels (nsAffects,
// nsClusterAffects): Recompile asks affects and clusterAffects of those
// only, not of every policy on every ADD. It belongs to one Compile: the
// States Recompile makes from it have the same policies, in the same
// order, and their indexes share its namespaces' labels (index.patched).
type byNamespace struct {
	mu sync.Mutex
	m  map[string]nsPolicies
}

// nsPolicies are indexes in State.Policies and State.Cluster.
type nsPolicies struct {
	policies, cluster []int
}

// of is what a pod of namespace ns can affect among prev's policies.
func (b *byNamespace) of(ix *index, prev State, ns string) nsPolicies {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.m[ns]; ok {
		return r
	}
	var r nsPolicies
	for i, c := range prev.Policies {
		if nsAffects(ix, c.src, ns) {
			r.policies = append(r.policies, i)
		}
	}
	for i, c := range prev.Cluster {
		if nsClusterAffects(ix, c.src, ns) {
			r.cluster = append(r.cluster, i)
		}
	}
	if b.m == nil {
		b.m = map[string]nsPolicies{}
	}
	b.m[ns] = r
	return r
}

// candidates marks the policies and cluster policies some pod of touched
// can affect (by its namespace): the only ones affects and
// clusterAffects need asking about.
func candidates(ix *index, prev State, touched []*Pod) (policies, cluster []bool) {
	policies, cluster = make([]bool, len(prev.Policies)), make([]bool, len(prev.Cluster))
	seen := map[string]bool{}
	for _, p := range touched {
		if seen[p.Namespace] {
			continue
		}
		seen[p.Namespace] = true
		r := ix.affected.of(ix, prev, p.Namespace)
		for _, i := range r.policies {
			policies[i] = true
		}
		for _, i := range r.cluster {
			cluster[i] = true
		}
	}
	return policies, cluster
}

// nsAffects reports whether some pod of namespace ns can affect p (see
// affects): p is of ns, or a rule's peers can name a pod of ns by its
// namespace, or a rule looks at every pod (a named port with no peers or
// an ipBlock). A selector that does not parse counts as affecting.
func nsAffects(ix *index, p *networkingv1.NetworkPolicy, ns string) bool {
	if p.Namespace == ns {
		return true
	}
	for _, r := range p.Spec.Ingress {
		if nsPeersAffect(ix, r.From, r.Ports, ns) {
			return true
		}
	}
	for _, r := range p.Spec.Egress {
		if nsPeersAffect(ix, r.To, r.Ports, ns) {
			return true
		}
	}
	return false
}

// nsPeersAffect is peersAffect for any pod of namespace ns, which is not
// the policy's.
func nsPeersAffect(ix *index, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, ns string) bool {
	named := hasNamedPort(ports)
	if len(peers) == 0 {
		return named
	}
	for _, peer := range peers {
		switch {
		case peer.IPBlock != nil:
			if named {
				return true
			}
		case peer.NamespaceSelector != nil:
			// A peer without one names pods of the policy's namespace.
			if nsSelects(ix, peer.NamespaceSelector, ns) {
				return true
			}
		}
	}
	return false
}

// nsClusterAffects is clusterAffects for any pod of namespace ns.
func nsClusterAffects(ix *index, p *cnp.ClusterNetworkPolicy, ns string) bool {
	return clusterNamesAny(p, func(nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod) bool { return nsNames(ix, nsSel, pods, ns) })
}

// nsNames is peerNames for any pod of namespace ns: its namespace
// selector selects ns.
func nsNames(ix *index, nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod, ns string) bool {
	switch {
	case nsSel != nil:
		return nsSelects(ix, nsSel, ns)
	case pods != nil:
		return nsSelects(ix, &pods.NamespaceSelector, ns)
	}
	return false
}

// nsSelects reports whether a namespace selector selects ns; one that
// does not parse counts as selecting it.
func nsSelects(ix *index, sel *metav1.LabelSelector, ns string) bool {
	s, err := ix.selector(sel)
	return err != nil || s.Matches(nsLabels(ix, ns))
}
