package policy

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Endpoint is one of this node's pods as the store knows it: the address
// ADD gave it, before kubelet writes it into the Pod's status.
type Endpoint struct {
	Namespace, Name string
	IP              netip.Addr
}

// Input is everything the desired state depends on. The API objects are
// the informers' (trimmed) copies; Compile never modifies them.
type Input struct {
	Policies   []*networkingv1.NetworkPolicy
	Namespaces []*corev1.Namespace
	Pods       []*Pod
	// Local are this node's endpoints. A local pod's addresses are its
	// endpoints' (the API's status may lag or be stale); a remote pod's
	// are its status.podIPs. One without a name is a record `reef store
	// recover` rebuilt from the kernel (see NodeName).
	Local []Endpoint
	// NodeName is this node's name in the API (kubernetes.nodeName). A
	// pod scheduled to it that has no endpoint here has no address: its
	// sandbox is gone (its DEL ran) or not made yet, and its status is
	// stale, naming an address the node may have given another pod since.
	// Empty, or while Local has an endpoint without a name (a record
	// `reef store recover` rebuilt from the kernel: its pod is known by
	// its status alone): such a pod stands for its status.podIPs, as a
	// remote one.
	NodeName string
	// ClusterPolicies are the ClusterNetworkPolicies (cluster.go); none
	// when their CRD is not installed.
	ClusterPolicies []*cnp.ClusterNetworkPolicy
	// Nodes are the cluster's Nodes (their labels and status.addresses):
	// what a cluster policy's node peers stand for.
	Nodes []*corev1.Node
	// Families are the IP families this node's pods have addresses of
	// (its pools'): the table has sets and rules for those, and those of
	// Local's addresses, only. Zero: both.
	Families Families
}

// Families is a set of IP families (Input.Families).
type Families uint8

const (
	IPv4 Families = 1 << iota
	IPv6
)

// FamiliesOf are the families a table for in is rendered for: in.Families
// (zero: both) and those of its local endpoints' addresses. A family no
// local pod can have an address of needs no set and no rule: every rule
// matches a local pod's address, and the base chains accept the family's
// packets (no pod of it is isolated).
func FamiliesOf(in Input) Families {
	fs := in.Families
	if fs == 0 {
		return IPv4 | IPv6
	}
	for _, ep := range in.Local {
		fs |= familyOf(ep.IP)
	}
	return fs
}

func familyOf(a netip.Addr) Families {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

func (fs Families) String() string {
	switch fs { // zero is both, as in Input
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return "ipv4+ipv6"
}

// Direction is ingress (traffic to the selected pods) or egress (from
// them).
type Direction int

const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

// Rule is one allow rule of a policy in one direction: traffic from (or
// to) any of Peers, on any of Ports, is allowed. AnyPeer: the rule lists
// no peers, so every address is allowed. No Ports: every port and
// protocol.
type Rule struct {
	AnyPeer bool
	Peers   []Range // sorted, disjoint and not adjacent
	// PeerKey names the peers' set, shared by every rule with the same
	// peers (Calico's IP sets per selector do the same): a hash of the
	// peers as written, and of the namespace if a podSelector alone
	// refers to it.
	PeerKey string
	Ports   []Port
}

// Compiled is one policy as enforced on this node.
type Compiled struct {
	Namespace, Name string
	src             *networkingv1.NetworkPolicy
	// Selected are this node's pods the policy selects, sorted.
	Selected []netip.Addr
	// Covers: the policy's policyTypes include the direction; the
	// selected pods are then isolated in it, and Rules[d] is what it
	// allows (none: nothing).
	Covers [2]bool
	Rules  [2][]Rule
}

// Key is namespace/name.
func (c *Compiled) Key() string { return c.Namespace + "/" + c.Name }

// Skipped is a policy that cannot be enforced as written, and why. The
// others are enforced without it.
type Skipped struct {
	Namespace, Name string
	Reason          string
	Cluster         bool // a ClusterNetworkPolicy (no namespace)
}

// Key is namespace/name, or ClusterNetworkPolicy/name.
func (s Skipped) Key() string {
	if s.Cluster {
		return "ClusterNetworkPolicy/" + s.Name
	}
	return s.Namespace + "/" + s.Name
}

// State is the desired policy state of one node.
type State struct {
	Policies []*Compiled // sorted by namespace, name
	// Isolated are this node's pods that some policy isolates in each
	// direction, sorted.
	Isolated [2][]netip.Addr
	Skipped  []Skipped
	// Peers are the addresses of each peer set (Rule.PeerKey): the one
	// source the table's peer sets are rendered from.
	Peers map[string][]Range
	// Cluster are the ClusterNetworkPolicies, in the order they are
	// checked (sortedCluster); NotEnforced what of them reef does not
	// enforce as written.
	Cluster     []*ClusterCompiled
	NotEnforced []NotEnforced
	// ix is the index compiled from: Recompile starts from it.
	ix *index
	// fams are the families rendered (FamiliesOf); zero: both.
	fams Families
}

// families are the families st is rendered for, in the table's order.
func (st State) families() []family {
	if st.fams == 0 || st.fams == IPv4|IPv6 {
		return families
	}
	if st.fams == IPv4 {
		return families[:1]
	}
	return families[1:]
}

// Compile computes the desired state from the API objects and this node's
// endpoints. It is pure and total: a policy it cannot express is Skipped
// with its reason, never a panic or an error for the rest.
func Compile(in Input) State {
	ix := newIndex(in)
	var st State
	isolated := [2]map[netip.Addr]bool{{}, {}}
	for _, p := range sortedPolicies(in.Policies) {
		c, err := compilePolicy(ix, p)
		if err != nil {
			st.Skipped = append(st.Skipped, Skipped{Namespace: p.Namespace, Name: p.Name, Reason: err.Error()})
			continue
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
	for d := range 2 {
		for a := range isolated[d] {
			st.Isolated[d] = append(st.Isolated[d], a)
		}
		slices.SortFunc(st.Isolated[d], netip.Addr.Compare)
	}
	compileClusters(ix, in.ClusterPolicies, &st)
	st.Peers, st.ix, st.fams = ix.peers, ix, FamiliesOf(in)
	return st
}

// Shape fingerprints the policies as Table's chains and sets depend on
// them: their namespaces, names and resourceVersions. Pods and
// namespaces change elements only; the same Shape means the same chains,
// rules and sets.
func Shape(pols []*networkingv1.NetworkPolicy) string {
	keys := make([]string, 0, len(pols))
	for _, p := range pols {
		if p != nil {
			v := p.ResourceVersion
			if v == "" { // not from the API (tests): the spec itself
				v = fmt.Sprintf("%v", p.Spec)
			}
			keys = append(keys, p.Namespace+"/"+p.Name+"@"+v+"#"+strconv.FormatInt(p.Generation, 10))
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// Covers reports the directions a policy isolates its pods in: its
// policyTypes, or when it has none, ingress and, if it has egress rules,
// egress (the API's defaulting, for objects that missed it).
func Covers(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func compilePolicy(ix *index, p *networkingv1.NetworkPolicy) (*Compiled, error) {
	c := &Compiled{Namespace: p.Namespace, Name: p.Name, src: p}
	for _, t := range p.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			return nil, fmt.Errorf("spec.policyTypes: unknown type %q", t)
		}
	}
	c.Covers[Ingress], c.Covers[Egress] = Covers(p)
	sel, err := ix.selector(&p.Spec.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.podSelector: %w", err)
	}
	var selected []podInfo // this node's: ingress is enforced at the destination
	for _, pi := range ix.byNS[p.Namespace] {
		if _, ok := ix.local[p.Namespace+"/"+pi.pod.Name]; ok && sel.Matches(labels.Set(pi.pod.Labels)) {
			selected = append(selected, pi)
			c.Selected = append(c.Selected, pi.addrs...)
		}
	}
	slices.SortFunc(c.Selected, netip.Addr.Compare)
	c.Selected = slices.Compact(c.Selected)
	if c.Covers[Ingress] {
		for i, r := range p.Spec.Ingress {
			rule, err := compileRule(ix, p.Namespace, r.From, r.Ports, Ingress, selected)
			if err != nil {
				return nil, fmt.Errorf("spec.ingress[%d]: %w", i, err)
			}
			c.Rules[Ingress] = append(c.Rules[Ingress], rule)
		}
	}
	if c.Covers[Egress] {
		for i, r := range p.Spec.Egress {
			rule, err := compileRule(ix, p.Namespace, r.To, r.Ports, Egress, selected)
			if err != nil {
				return nil, fmt.Errorf("spec.egress[%d]: %w", i, err)
			}
			c.Rules[Egress] = append(c.Rules[Egress], rule)
		}
	}
	return c, nil
}

// compileRule resolves one rule's peers and ports. selected are the
// policy's pods on this node: the destinations of an ingress rule, whose
// containerPorts its named ports refer to.
func compileRule(ix *index, ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, d Direction, selected []podInfo) (Rule, error) {
	var r Rule
	var ranges []Range
	// peerPods are the pods the peers name, for an egress rule's named
	// ports; only looked for when it has one.
	var peerPods []podInfo
	wantPods := d == Egress && slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		return p.Port != nil && p.Port.Type == intstr.String
	})
	r.AnyPeer = len(peers) == 0
	if !r.AnyPeer {
		r.PeerKey = peerKey(ns, peers)
	}
	cached, haveCached := ix.peers[r.PeerKey]
	for i, peer := range peers {
		if haveCached && !wantPods {
			break // the same peers as a rule compiled before: their set is known
		}
		where := fmt.Sprintf("%s[%d]", map[Direction]string{Ingress: "from", Egress: "to"}[d], i)
		switch {
		case peer.IPBlock != nil:
			if peer.PodSelector != nil || peer.NamespaceSelector != nil {
				return r, fmt.Errorf("%s: ipBlock with a selector", where)
			}
			rs, err := blockRanges(peer.IPBlock)
			if err != nil {
				return r, fmt.Errorf("%s.ipBlock: %w", where, err)
			}
			ranges = append(ranges, rs...)
			if !wantPods {
				continue
			}
			for _, pi := range ix.pods {
				if slices.ContainsFunc(pi.addrs, func(a netip.Addr) bool { return inRanges(rs, a) }) {
					peerPods = append(peerPods, pi)
				}
			}
		case peer.PodSelector == nil && peer.NamespaceSelector == nil:
			return r, fmt.Errorf("%s: neither podSelector, namespaceSelector nor ipBlock", where)
		default:
			pods, err := selectPeers(ix, ns, peer)
			if err != nil {
				return r, fmt.Errorf("%s.%w", where, err)
			}
			for _, pi := range pods {
				for _, a := range pi.addrs {
					ranges = append(ranges, Range{a, a})
				}
			}
			if wantPods {
				peerPods = append(peerPods, pods...)
			}
		}
	}
	if r.AnyPeer {
	} else if haveCached {
		r.Peers = cached
	} else {
		r.Peers = mergeRanges(ranges)
		ix.peers[r.PeerKey] = r.Peers
	}
	if r.AnyPeer {
		peerPods = ix.pods
	}
	targets := selected // whose ports a named port means
	if d == Egress {
		targets = peerPods
	}
	for i, p := range ports {
		port, err := compilePort(p, targets)
		if err != nil {
			return r, fmt.Errorf("ports[%d]: %w", i, err)
		}
		r.Ports = append(r.Ports, port)
	}
	return r, nil
}

// peerKey names a rule's peer set: the peers as written, and the
// namespace when a podSelector alone means that namespace's pods. Rules
// of any namespace with the same namespaceSelectors and ipBlocks share it.
func peerKey(ns string, peers []networkingv1.NetworkPolicyPeer) string {
	h := fnv.New64a()
	if slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool { return p.PodSelector != nil && p.NamespaceSelector == nil }) {
		h.Write([]byte(ns))
	}
	h.Write([]byte{0})
	for _, p := range peers {
		b, _ := p.Marshal() // the API's protobuf: deterministic for these types
		h.Write(b)
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// selectPeers is the pods a selector peer names: podSelector alone in the
// policy's namespace, namespaceSelector alone every pod of the matching
// namespaces, both the matching pods of the matching namespaces.
func selectPeers(ix *index, ns string, peer networkingv1.NetworkPolicyPeer) ([]podInfo, error) {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		s, err := ix.selector(peer.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
		podSel = s
	}
	namespaces := []string{ns}
	if peer.NamespaceSelector != nil {
		nsSel, err := ix.selector(peer.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		namespaces = matchingNamespaces(ix, nsSel)
	}
	return podsIn(ix, namespaces, podSel), nil
}

// matchingNamespaces are the namespaces whose labels sel matches, sorted.
func matchingNamespaces(ix *index, sel labels.Selector) []string {
	var names []string
	for name := range ix.byNS {
		if sel.Matches(nsLabels(ix, name)) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// podsIn are the pods of the namespaces, in their order, that sel matches.
func podsIn(ix *index, namespaces []string, sel labels.Selector) []podInfo {
	var out []podInfo
	for _, n := range namespaces {
		for _, pi := range ix.byNS[n] {
			if sel.Matches(labels.Set(pi.pod.Labels)) {
				out = append(out, pi)
			}
		}
	}
	return out
}

// nsLabels are a namespace's labels, with the name label the API server
// sets on every namespace, also for one the informer has not seen yet.
func nsLabels(ix *index, name string) labels.Set {
	l := ix.nsLabels[name]
	if l["kubernetes.io/metadata.name"] == name {
		return l
	}
	out := labels.Set{}
	for k, v := range l {
		out[k] = v
	}
	out["kubernetes.io/metadata.name"] = name
	return out
}
