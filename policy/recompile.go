package policy

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/nat/nft"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Recompile is Compile for the CNI ADD path. prev is the State last
// applied, compiled from the same policies (the same Shape: the caller
// checks); local are this node's endpoints now, and pod the one pod
// whose addresses changed (its new endpoint is in local), as the
// informer has it now. Only the policies the pod (and any other pod whose
// endpoints changed since prev) can affect (it is selected, or a peer of
// one of their rules) are compiled again, against
// prev's view of the API with pod and local put in (index.patched); the
// others are prev's. Nothing is done per pod of the cluster: the cost is
// in the policies the pod affects. It returns the State and the indexes
// (in its Policies) of those compiled again; ok is false when prev was
// not made by Compile or Recompile.
//
// The API's other changes since prev reach the table with the next
// Compile, which every informer event brings; what the pod and the
// endpoints change is exact, as TestRecompileIsCompile checks.
func Recompile(prev State, local []Endpoint, pod *Pod) (st State, changed []int, ok bool) {
	if prev.ix == nil {
		return State{}, nil, false
	}
	ix, touched := prev.ix.patched(local, pod)
	isolated := [2]map[netip.Addr]bool{{}, {}}
	for _, c := range prev.Policies {
		if slices.ContainsFunc(touched, func(p *Pod) bool { return affects(ix, c.src, p) }) {
			n, err := compilePolicy(ix, c.src)
			if err != nil {
				return State{}, nil, false // compiled before: cannot happen
			}
			c = n
			changed = append(changed, len(st.Policies))
		}
		for d := range 2 {
			if c.Covers[d] {
				for _, a := range c.Selected {
					isolated[d][a] = true
				}
			}
		}
		st.Policies = append(st.Policies, c)
	}
	// Skipped reasons depend on the spec only: prev's hold.
	st.Skipped = slices.Clone(prev.Skipped)
	// Cluster policies the same way: those a touched pod can affect are
	// compiled again against the patched index, the others are prev's.
	// Those skipped stay skipped (their reasons are the spec's), so the
	// compiled ones are prev's list, in its order; a policy's notes of what
	// is not enforced come with it.
	for _, c := range prev.Cluster {
		notes := slices.DeleteFunc(slices.Clone(prev.NotEnforced), func(n NotEnforced) bool { return n.Name != c.Name })
		if slices.ContainsFunc(touched, func(p *Pod) bool { return clusterAffects(ix, c.src, p) }) {
			n, nn, err := compileCluster(ix, c.src)
			if err != nil {
				return State{}, nil, false // compiled before: cannot happen
			}
			c, notes = n, nn
		}
		st.Cluster = append(st.Cluster, c)
		st.NotEnforced = append(st.NotEnforced, notes...)
	}
	// Peer sets: prev's, those the recompiled policies use computed again
	// (a set shared with a policy not compiled again has the same peers
	// and namespace, so the pod affects that policy too).
	st.Peers = make(map[string][]Range, len(prev.Peers))
	for k, v := range prev.Peers {
		st.Peers[k] = v
	}
	for k, v := range ix.peers {
		st.Peers[k] = v
	}
	for d := range 2 {
		for a := range isolated[d] {
			st.Isolated[d] = append(st.Isolated[d], a)
		}
		slices.SortFunc(st.Isolated[d], netip.Addr.Compare)
	}
	st.ix = ix
	return st, changed, true
}

func sortedPolicies(in []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	pols := slices.DeleteFunc(slices.Clone(in), func(p *networkingv1.NetworkPolicy) bool { return p == nil })
	slices.SortFunc(pols, func(a, b *networkingv1.NetworkPolicy) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return slices.CompactFunc(pols, func(a, b *networkingv1.NetworkPolicy) bool {
		return a.Namespace == b.Namespace && a.Name == b.Name
	})
}

// affects reports whether pod can change what policy p compiles to: it
// is in p's namespace and selected, or a rule's peers can name it (or, for
// a named port, resolve on it). A selector that does not parse counts as
// affecting: compiling again gives the same error.
func affects(ix *index, p *networkingv1.NetworkPolicy, pod *Pod) bool {
	lbl := labels.Set(pod.Labels)
	if pod.Namespace == p.Namespace {
		if s, err := ix.selector(&p.Spec.PodSelector); err != nil || s.Matches(lbl) {
			return true
		}
	}
	for _, r := range p.Spec.Ingress {
		if peersAffect(ix, p.Namespace, r.From, r.Ports, pod, lbl) {
			return true
		}
	}
	for _, r := range p.Spec.Egress {
		if peersAffect(ix, p.Namespace, r.To, r.Ports, pod, lbl) {
			return true
		}
	}
	return false
}

// clusterAffects is affects for a cluster policy: pod is of its subject,
// or a rule's namespace or pod peers can name it; a rule with a named port
// and a peer that is not pods (nodes, networks) counts as affected by
// every pod, as does a selector that does not parse.
func clusterAffects(ix *index, p *cnp.ClusterNetworkPolicy, pod *Pod) bool {
	lbl, nsLbl := labels.Set(pod.Labels), nsLabels(ix, pod.Namespace)
	matches := func(nsSel, podSel *metav1.LabelSelector) bool {
		ns, err := ix.selector(nsSel)
		if err != nil || !ns.Matches(nsLbl) {
			return err != nil
		}
		if podSel == nil {
			return true
		}
		ps, err := ix.selector(podSel)
		return err != nil || ps.Matches(lbl)
	}
	peer := func(nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod) bool {
		switch {
		case nsSel != nil:
			return matches(nsSel, nil)
		case pods != nil:
			return matches(&pods.NamespaceSelector, &pods.PodSelector)
		}
		return false
	}
	named := func(ps []cnp.ClusterNetworkPolicyProtocol) bool {
		return slices.ContainsFunc(ps, func(p cnp.ClusterNetworkPolicyProtocol) bool { return p.DestinationNamedPort != "" })
	}
	if peer(p.Spec.Subject.Namespaces, p.Spec.Subject.Pods) {
		return true
	}
	for _, r := range p.Spec.Ingress {
		for _, f := range r.From {
			if peer(f.Namespaces, f.Pods) {
				return true
			}
		}
	}
	for _, r := range p.Spec.Egress {
		for _, to := range r.To {
			if peer(to.Namespaces, to.Pods) || (named(r.Protocols) && to.Namespaces == nil && to.Pods == nil) {
				return true
			}
		}
	}
	return false
}

func peersAffect(ix *index, ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, pod *Pod, lbl labels.Set) bool {
	named := slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.Type == intstr.String })
	if len(peers) == 0 {
		return named // every pod is a peer; only named ports look at them
	}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			if named {
				return true
			}
			continue
		}
		nsMatch := peer.NamespaceSelector == nil && pod.Namespace == ns
		if peer.NamespaceSelector != nil {
			s, err := ix.selector(peer.NamespaceSelector)
			if err != nil {
				return true
			}
			nsMatch = s.Matches(nsLabels(ix, pod.Namespace))
		}
		if !nsMatch {
			continue
		}
		if peer.PodSelector == nil {
			return true
		}
		s, err := ix.selector(peer.PodSelector)
		if err != nil || s.Matches(lbl) {
			return true
		}
	}
	return false
}

// SetsOf renders the sets of the policies at indexes (of st.Policies),
// the isolated sets and those of every cluster policy: with Recompile, the
// sets an ADD can change.
func SetsOf(st State, indexes []int) []nft.Set {
	sub := State{Isolated: st.Isolated, Peers: st.Peers, Cluster: st.Cluster}
	for _, i := range indexes {
		sub.Policies = append(sub.Policies, st.Policies[i])
	}
	return Sets(sub)
}
