package policy

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/reefcni/reef/nat/nft"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Recompile is Compile for the CNI ADD and DEL paths. prev is the State
// last applied, compiled from the same policies (the same Shape: the
// caller checks); local are this node's endpoints now, and pod the one pod
// whose addresses changed (its new endpoint is in local), as the informer
// has it now, or nil for a DEL (the pods whose endpoints went since prev
// are found from local). Only the policies the pods whose endpoints
// changed can affect (they are selected, or a peer of one of their rules)
// are compiled again, against prev's view of the API with pod and local
// put in (index.patched); the others are prev's. Nothing is done per pod
// of the cluster: the cost is in the policies those pods affect. It
// returns the State and what in it was compiled again with a different
// result (Changes, for SetsOf); ok is false when prev was not made by
// Compile or Recompile.
//
// The API's other changes since prev reach the table with the next
// Compile, which every informer event brings; what the pod and the
// endpoints change is exact, as TestRecompileIsCompile checks.
func Recompile(prev State, local []Endpoint, pod *Pod) (st State, ch Changes, ok bool) {
	if prev.ix == nil {
		return State{}, Changes{}, false
	}
	for _, ep := range local {
		if prev.fams != 0 && familyOf(ep.IP)&prev.fams == 0 {
			return State{}, Changes{}, false // a family not rendered: Compile
		}
	}
	ix, touched := prev.ix.patched(local, pod)
	maybe, maybeCluster := candidates(ix, prev, touched)
	isolated := [2]map[netip.Addr]bool{{}, {}}
	for i, c := range prev.Policies {
		if maybe[i] && slices.ContainsFunc(touched, func(p *Pod) bool { return affects(ix, c.src, p) }) {
			n, err := compilePolicy(ix, c.src)
			if err != nil {
				return State{}, Changes{}, false // compiled before: cannot happen
			}
			c = n
			ch.policies = append(ch.policies, len(st.Policies))
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
	if !recompileClusters(ix, prev, touched, maybeCluster, &st, &ch) {
		return State{}, Changes{}, false
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
	st.ix, st.fams = ix, prev.fams
	return st, ch, true
}

// Changes are what a Recompile compiled again, for SetsOf: the
// NetworkPolicies (indexes in State.Policies), the cluster policies whose
// own sets differ from prev's (indexes in State.Cluster), and the shared
// peer sets of cluster rules (ClusterRule.peers) whose addresses differ.
type Changes struct {
	policies []int
	cluster  []int
	shared   map[string]bool
}

// Policies counts the NetworkPolicies compiled again.
func (ch Changes) Policies() int { return len(ch.policies) }

// recompileClusters is Recompile's part for cluster policies: those a
// touched pod can affect are compiled again against the patched index,
// the others are prev's. Those skipped stay skipped (their reasons are
// the spec's), so the compiled ones are prev's list, in its order; a
// policy's notes of what is not enforced come with it. A policy compiled
// again to the same sets stays prev's; one whose only change is in
// shared peer sets (a selection many rules name) adds those to ch, not
// its own sets. ok is false on an error (compiled before: cannot happen).
func recompileClusters(ix *index, prev State, touched []*Pod, maybe []bool, st *State, ch *Changes) bool {
	ch.shared = map[string]bool{}
	decided := map[string]bool{} // shared sets compared already
	for i, c := range prev.Cluster {
		notes := slices.DeleteFunc(slices.Clone(prev.NotEnforced), func(n NotEnforced) bool { return n.Name != c.Name })
		if maybe[i] && slices.ContainsFunc(touched, func(p *Pod) bool { return clusterAffects(ix, c.src, p) }) {
			n, nn := reshared(ix, c, touched), notes
			if n == nil {
				var err error
				if n, nn, err = compileCluster(ix, c.src); err != nil {
					return false
				}
			}
			own, shared := clusterChanges(c, n, decided)
			for _, name := range shared {
				ch.shared[name] = true
			}
			if own {
				ch.cluster = append(ch.cluster, len(st.Cluster))
			}
			if own || len(shared) > 0 {
				c, notes = n, nn
			}
		}
		st.Cluster = append(st.Cluster, c)
		st.NotEnforced = append(st.NotEnforced, notes...)
	}
	return true
}

// reshared is c compiled again when the touched pods are only peers of
// its rules whose peer set is a shared selection (ClusterRule.peers
// "sel."): those rules' peers are the selection's in ix, the rest is c's.
// It is nil when a touched pod can change more (it is of the subject; it
// is a peer of a rule with a peer set of its own; an egress rule has a
// named port, looked up on its peers' pods and those in its networks):
// compileCluster is needed.
func reshared(ix *index, c *ClusterCompiled, touched []*Pod) *ClusterCompiled {
	p := c.src
	out := *c
	cloned := [2]bool{}
	rule := func(d Direction, key string, peers []cnp.ClusterNetworkPolicyEgressPeer) bool {
		names := false
		for _, pod := range touched {
			if slices.ContainsFunc(peers, func(pe cnp.ClusterNetworkPolicyEgressPeer) bool { return peerNames(ix, pe.Namespaces, pe.Pods, pod) }) {
				names = true
			}
		}
		if !names {
			return true
		}
		j := slices.IndexFunc(out.Rules[d], func(r ClusterRule) bool { return r.key == key })
		if j < 0 || !strings.HasPrefix(out.Rules[d][j].peers, "sel.") {
			return false
		}
		var sel selection
		found := 0
		for _, pe := range peers {
			if pe.Namespaces != nil || pe.Pods != nil {
				var err error
				if sel, err = peerSelection(ix, pe); err != nil {
					return false
				}
				found++
			}
		}
		if found != 1 || "sel."+sel.name != out.Rules[d][j].peers {
			return false
		}
		if !cloned[d] {
			out.Rules[d], cloned[d] = slices.Clone(out.Rules[d]), true
		}
		out.Rules[d][j].Peers = sel.ranges
		return true
	}
	for _, pod := range touched {
		if peerNames(ix, p.Spec.Subject.Namespaces, p.Spec.Subject.Pods, pod) {
			return nil
		}
	}
	for i, r := range p.Spec.Ingress {
		peers := make([]cnp.ClusterNetworkPolicyEgressPeer, len(r.From))
		for j, f := range r.From {
			peers[j] = cnp.ClusterNetworkPolicyEgressPeer{Namespaces: f.Namespaces, Pods: f.Pods}
		}
		if !rule(Ingress, "in."+strconv.Itoa(i), peers) {
			return nil
		}
	}
	for i, r := range p.Spec.Egress {
		// Its named ports are looked up on its peers' pods, those of its
		// networks too, whether or not a touched pod is a peer.
		if hasNamedClusterPort(r.Protocols) {
			return nil
		}
		if !rule(Egress, "eg."+strconv.Itoa(i), r.To) {
			return nil
		}
	}
	return &out
}

// clusterChanges compares a cluster policy compiled again (b) with prev's
// (a): own, its own sets differ (selected pods, its rules' own peers,
// named ports); shared, the shared peer sets of its rules whose addresses
// differ. decided are the shared sets compared before (true: differ),
// each compared once.
func clusterChanges(a, b *ClusterCompiled, decided map[string]bool) (own bool, shared []string) {
	own = !slices.Equal(a.Selected, b.Selected)
	for d := range 2 {
		if len(a.Rules[d]) != len(b.Rules[d]) {
			return true, nil
		}
		for i, rb := range b.Rules[d] {
			ra := a.Rules[d][i]
			if ra.peers != rb.peers || ra.AnyPeer != rb.AnyPeer || len(ra.Ports) != len(rb.Ports) {
				return true, nil
			}
			for j := range rb.Ports {
				if !slices.Equal(ra.Ports[j].Named, rb.Ports[j].Named) {
					own = true
				}
			}
			if !strings.HasPrefix(rb.peers, "sel.") {
				own = own || !slices.Equal(ra.Peers, rb.Peers)
				continue
			}
			differ, seen := decided[rb.peers]
			if !seen {
				differ = !sameRanges(ra.Peers, rb.Peers)
				decided[rb.peers] = differ
			}
			if differ {
				shared = append(shared, rb.peers)
			}
		}
	}
	return own, shared
}

// sameRanges is slices.Equal, quick for the one slice a kept selection
// shares.
func sameRanges(a, b []Range) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	return slices.Equal(a, b)
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
	return clusterNamesAny(p, func(nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod) bool {
		return peerNames(ix, nsSel, pods, pod)
	})
}

// clusterNamesAny reports whether names holds for p's subject or one of
// its rules' peers, or p has an egress rule with a named port and a peer
// that is not pods (its ports are looked up on every pod of its networks).
func clusterNamesAny(p *cnp.ClusterNetworkPolicy, names func(nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod) bool) bool {
	if names(p.Spec.Subject.Namespaces, p.Spec.Subject.Pods) {
		return true
	}
	for _, r := range p.Spec.Ingress {
		for _, f := range r.From {
			if names(f.Namespaces, f.Pods) {
				return true
			}
		}
	}
	for _, r := range p.Spec.Egress {
		for _, to := range r.To {
			if names(to.Namespaces, to.Pods) || (hasNamedClusterPort(r.Protocols) && to.Namespaces == nil && to.Pods == nil) {
				return true
			}
		}
	}
	return false
}

// peerNames reports whether a subject or peer of a cluster policy (by
// namespaces, or by pods) can name pod: a selector that does not parse
// counts as naming it.
func peerNames(ix *index, nsSel *metav1.LabelSelector, pods *cnp.NamespacedPod, pod *Pod) bool {
	matches := func(nsSel, podSel *metav1.LabelSelector) bool {
		ns, err := ix.selector(nsSel)
		if err != nil || !ns.Matches(nsLabels(ix, pod.Namespace)) {
			return err != nil
		}
		if podSel == nil {
			return true
		}
		ps, err := ix.selector(podSel)
		return err != nil || ps.Matches(labels.Set(pod.Labels))
	}
	switch {
	case nsSel != nil:
		return matches(nsSel, nil)
	case pods != nil:
		return matches(&pods.NamespaceSelector, &pods.PodSelector)
	}
	return false
}

// hasNamedPort reports whether a NetworkPolicy rule has a named port.
func hasNamedPort(ports []networkingv1.NetworkPolicyPort) bool {
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.Type == intstr.String })
}

// hasNamedClusterPort reports whether a cluster policy rule has a named
// port.
func hasNamedClusterPort(ps []cnp.ClusterNetworkPolicyProtocol) bool {
	return slices.ContainsFunc(ps, func(p cnp.ClusterNetworkPolicyProtocol) bool { return p.DestinationNamedPort != "" })
}

func peersAffect(ix *index, ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, pod *Pod, lbl labels.Set) bool {
	named := hasNamedPort(ports)
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

// SetsOf renders the sets a Recompile's Changes can have changed: the
// isolated sets, those of the NetworkPolicies compiled again, the own sets
// of the cluster policies whose own sets changed, and the shared cluster
// peer sets that changed. Applied over the table of the State Recompile
// started from, they give Table(st) (TestRecompileIsCompile).
func SetsOf(st State, ch Changes) []nft.Set {
	sub := State{Isolated: st.Isolated, Peers: st.Peers, fams: st.fams}
	for _, i := range ch.policies {
		sub.Policies = append(sub.Policies, st.Policies[i])
	}
	t := render(sub, false, nil)
	own := map[int]bool{}
	for _, i := range ch.cluster {
		own[i] = true
	}
	t.Sets = append(t.Sets, clusterSets(st, func(i int) bool { return own[i] }, func(name string) bool { return ch.shared[name] })...)
	return t.Sets
}
