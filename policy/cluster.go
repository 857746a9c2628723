package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/google/nftables/expr"

	"github.com/reefcni/reef/nat/nft"
)

// This file is ClusterNetworkPolicy (sigs.k8s.io/network-policy-api,
// v1beta1): cluster-wide rules in two tiers around NetworkPolicy. A
// connection is decided, in each direction, by the first of
//
//	the Admin tier:    its policies by priority (then name), their rules
//	                   in the order written: Accept, Deny, or Pass (on to
//	                   NetworkPolicy)
//	NetworkPolicy:     for a pod some NetworkPolicy isolates in that
//	                   direction, as today: allowed or dropped
//	the Baseline tier: the same, for pods no NetworkPolicy isolates; Pass
//	                   is the default
//	the default:       allowed
//
// In table inet reef this is: the base chain jumps first to the Admin
// chain (adm-in, adm-eg), one flat list of rules whose Pass is `return`;
// the rule that accepted pods no NetworkPolicy isolates goes instead to
// the Baseline chain (bl-in, bl-eg), whose last rule accepts. With no
// ClusterNetworkPolicy the table is the same as without this file.

// Action is a cluster policy rule's verdict.
type Action string

const (
	Accept Action = "Accept"
	Deny   Action = "Deny"
	Pass   Action = "Pass"
)

// ClusterRule is one rule of a cluster policy in one direction: traffic
// with any of Peers (AnyPeer: every address) on any of Ports (none: every
// port and protocol) gets Action.
type ClusterRule struct {
	Name    string
	Action  Action
	AnyPeer bool
	Peers   []Range
	Ports   []Port
	// key names the rule's peer set: policy, direction and index.
	key string
}

// ClusterCompiled is one ClusterNetworkPolicy as enforced on this node.
type ClusterCompiled struct {
	Name     string
	Tier     cnp.Tier
	Priority int32
	// Selected are this node's pods of its subject, sorted.
	Selected []netip.Addr
	Rules    [2][]ClusterRule
	src      *cnp.ClusterNetworkPolicy
}

// NotEnforced is a part of a cluster policy reef does not enforce as
// written, and what it does instead; the rest of the policy is enforced.
type NotEnforced struct {
	Name   string // the ClusterNetworkPolicy
	Field  string // spec.egress[0].to[1].domainNames
	Reason string
}

func (n NotEnforced) String() string { return n.Name + ": " + n.Field + ": " + n.Reason }

// sortedCluster is the cluster policies in the order they are checked:
// Admin before Baseline, by priority, then (for equal priorities, where
// the API leaves the order to the implementation) by name.
func sortedCluster(in []*cnp.ClusterNetworkPolicy) []*cnp.ClusterNetworkPolicy {
	pols := slices.DeleteFunc(slices.Clone(in), func(p *cnp.ClusterNetworkPolicy) bool { return p == nil })
	slices.SortFunc(pols, func(a, b *cnp.ClusterNetworkPolicy) int {
		return cmp.Or(cmp.Compare(tierRank(a.Spec.Tier), tierRank(b.Spec.Tier)),
			cmp.Compare(a.Spec.Priority, b.Spec.Priority), strings.Compare(a.Name, b.Name))
	})
	return slices.CompactFunc(pols, func(a, b *cnp.ClusterNetworkPolicy) bool { return a.Name == b.Name })
}

func tierRank(t cnp.Tier) int {
	if t == cnp.AdminTier {
		return 0
	}
	return 1
}

// ClusterShape fingerprints the cluster policies as Shape does
// NetworkPolicies: the same ClusterShape, the same chains and sets.
func ClusterShape(pols []*cnp.ClusterNetworkPolicy) string {
	keys := make([]string, 0, len(pols))
	for _, p := range pols {
		if p != nil {
			v := p.ResourceVersion
			if v == "" {
				v = fmt.Sprintf("%v", p.Spec)
			}
			keys = append(keys, p.Name+"@"+v+"#"+strconv.FormatInt(p.Generation, 10))
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// compileCluster compiles one cluster policy; what it cannot enforce is
// returned, with the API's fail-closed reading applied: a rule reef
// cannot express matches nothing if it accepts, and everything (denied)
// if it denies or passes. An error is a policy that cannot be enforced
// at all (an unknown tier, a selector that does not parse): skipped.
func compileCluster(ix *index, p *cnp.ClusterNetworkPolicy) (*ClusterCompiled, []NotEnforced, error) {
	c := &ClusterCompiled{Name: p.Name, Tier: p.Spec.Tier, Priority: p.Spec.Priority, src: p}
	if p.Spec.Tier != cnp.AdminTier && p.Spec.Tier != cnp.BaselineTier {
		return nil, nil, fmt.Errorf("spec.tier: unknown tier %q", p.Spec.Tier)
	}
	subj, err := subjectPods(ix, p.Spec.Subject)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.subject: %w", err)
	}
	for _, pi := range subj {
		if _, ok := ix.local[pi.pod.Namespace+"/"+pi.pod.Name]; ok {
			c.Selected = append(c.Selected, pi.addrs...)
		}
	}
	slices.SortFunc(c.Selected, netip.Addr.Compare)
	c.Selected = slices.Compact(c.Selected)
	var notes []NotEnforced
	for i, r := range p.Spec.Ingress {
		peers := make([]cnp.ClusterNetworkPolicyEgressPeer, len(r.From))
		for j, f := range r.From {
			peers[j] = cnp.ClusterNetworkPolicyEgressPeer{Namespaces: f.Namespaces, Pods: f.Pods}
		}
		where := fmt.Sprintf("spec.ingress[%d]", i)
		rule, n, err := compileClusterRule(ix, where, "from", r.Name, r.Action, peers, r.Protocols)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, n...)
		if rule != nil {
			rule.key = fmt.Sprintf("in.%d", i)
			c.Rules[Ingress] = append(c.Rules[Ingress], *rule)
		}
	}
	for i, r := range p.Spec.Egress {
		where := fmt.Sprintf("spec.egress[%d]", i)
		rule, n, err := compileClusterRule(ix, where, "to", r.Name, r.Action, r.To, r.Protocols)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, n...)
		if rule != nil {
			rule.key = fmt.Sprintf("eg.%d", i)
			c.Rules[Egress] = append(c.Rules[Egress], *rule)
		}
	}
	for i := range notes {
		notes[i].Name = p.Name
	}
	return c, notes, nil
}

// subjectPods are the pods of a subject, on any node.
func subjectPods(ix *index, s cnp.ClusterNetworkPolicySubject) ([]podInfo, error) {
	switch {
	case s.Namespaces != nil && s.Pods == nil:
		return namespacedPods(ix, s.Namespaces, nil)
	case s.Pods != nil && s.Namespaces == nil:
		return namespacedPods(ix, &s.Pods.NamespaceSelector, &s.Pods.PodSelector)
	}
	return nil, fmt.Errorf("want exactly one of namespaces and pods")
}

// namespacedPods are the pods of the namespaces nsSel selects that
// podSel (nil: every pod) selects.
func namespacedPods(ix *index, nsSel, podSel *metav1.LabelSelector) ([]podInfo, error) {
	ns, err := ix.selector(nsSel)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	ps := labels.Everything()
	if podSel != nil {
		if ps, err = ix.selector(podSel); err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	return podsIn(ix, matchingNamespaces(ix, ns), ps), nil
}

// compileClusterRule compiles one rule (ingress peers come as egress
// peers with only namespaces and pods). A nil rule matches nothing.
func compileClusterRule(ix *index, where, peersField, name string, action cnp.ClusterNetworkPolicyRuleAction,
	peers []cnp.ClusterNetworkPolicyEgressPeer, protos []cnp.ClusterNetworkPolicyProtocol) (*ClusterRule, []NotEnforced, error) {
	r := &ClusterRule{Name: name, Action: Action(action)}
	switch r.Action {
	case Accept, Deny, Pass:
	default:
		return nil, nil, fmt.Errorf("%s.action: unknown action %q", where, action)
	}
	var notes []NotEnforced
	// failClosed is the API's reading of what an implementation cannot
	// match: an Accept matches nothing, a Deny or Pass denies everything.
	failClosed := func(field, what string) (*ClusterRule, []NotEnforced, error) {
		if r.Action == Accept {
			return nil, append(notes, NotEnforced{Field: field, Reason: what + " not enforced by reef: this Accept rule matches nothing"}), nil
		}
		return &ClusterRule{Name: name, Action: Deny, AnyPeer: true},
			append(notes, NotEnforced{Field: field, Reason: what + " not enforced by reef: this " + string(r.Action) + " rule denies all traffic (fail closed)"}), nil
	}
	var ranges []Range
	for j, peer := range peers {
		field := fmt.Sprintf("%s.%s[%d]", where, peersField, j)
		switch {
		case peer.Nodes != nil:
			return failClosed(field+".nodes", "node peers are")
		case len(peer.DomainNames) > 0:
			return failClosed(field+".domainNames", "domain name peers are")
		case peer.Namespaces != nil:
			pods, err := namespacedPods(ix, peer.Namespaces, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("%s.namespaces: %w", field, err)
			}
			ranges = appendPodRanges(ranges, pods)
		case peer.Pods != nil:
			pods, err := namespacedPods(ix, &peer.Pods.NamespaceSelector, &peer.Pods.PodSelector)
			if err != nil {
				return nil, nil, fmt.Errorf("%s.pods: %w", field, err)
			}
			ranges = appendPodRanges(ranges, pods)
		case len(peer.Networks) > 0:
			for k, n := range peer.Networks {
				pfx, err := netip.ParsePrefix(string(n))
				if err != nil {
					return nil, nil, fmt.Errorf("%s.networks[%d]: %w", field, k, err)
				}
				rs, err := blockRanges(&networkingv1.IPBlock{CIDR: pfx.Masked().String()})
				if err != nil {
					return nil, nil, fmt.Errorf("%s.networks[%d]: %w", field, k, err)
				}
				ranges = append(ranges, rs...)
			}
		default:
			return failClosed(field, "a peer with no field reef knows (a newer CRD?) is")
		}
	}
	r.Peers = mergeRanges(ranges)
	for j, pr := range protos {
		field := fmt.Sprintf("%s.protocols[%d]", where, j)
		var proto corev1.Protocol
		var dp *cnp.Port
		switch {
		case pr.DestinationNamedPort != "":
			return failClosed(field+".destinationNamedPort", "named ports are")
		case pr.TCP != nil:
			proto, dp = corev1.ProtocolTCP, pr.TCP.DestinationPort
		case pr.UDP != nil:
			proto, dp = corev1.ProtocolUDP, pr.UDP.DestinationPort
		case pr.SCTP != nil:
			proto, dp = corev1.ProtocolSCTP, pr.SCTP.DestinationPort
		default:
			return failClosed(field, "a protocol with no field reef knows is")
		}
		np := networkingv1.NetworkPolicyPort{Protocol: &proto}
		switch {
		case dp == nil:
		case dp.Range != nil:
			from, end := intstr.FromInt32(dp.Range.Start), dp.Range.End
			np.Port, np.EndPort = &from, &end
		default:
			n := intstr.FromInt32(dp.Number)
			np.Port = &n
		}
		port, err := compilePort(np, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", field, err)
		}
		r.Ports = append(r.Ports, port)
	}
	return r, notes, nil
}

func appendPodRanges(rs []Range, pods []podInfo) []Range {
	for _, pi := range pods {
		for _, a := range pi.addrs {
			rs = append(rs, Range{a, a})
		}
	}
	return rs
}

// compileClusters compiles the cluster policies into st.
func compileClusters(ix *index, pols []*cnp.ClusterNetworkPolicy, st *State) {
	for _, p := range sortedCluster(pols) {
		c, notes, err := compileCluster(ix, p)
		if err != nil {
			st.Skipped = append(st.Skipped, Skipped{Name: p.Name, Cluster: true, Reason: err.Error()})
			continue
		}
		st.Cluster = append(st.Cluster, c)
		st.NotEnforced = append(st.NotEnforced, notes...)
	}
}

// Chains of the cluster tiers, per direction.
func adminChain(d Direction) string    { return "adm-" + dirTag(d) }
func baselineChain(d Direction) string { return "bl-" + dirTag(d) }

func clusterSelSet(f family, c *ClusterCompiled) string {
	return limitName("csel" + f.suffix + "." + c.Name)
}
func clusterPeerSet(f family, c *ClusterCompiled, r ClusterRule) string {
	return limitName("cpeers" + f.suffix + "." + r.key + "." + c.Name)
}

// hasTier reports whether some cluster policy of tier t has rules in d.
func hasTier(st State, t cnp.Tier, d Direction) bool {
	return slices.ContainsFunc(st.Cluster, func(c *ClusterCompiled) bool { return c.Tier == t && len(c.Rules[d]) > 0 })
}

// renderCluster adds the cluster policies' sets, and with withChains
// their tier chains, to t.
func renderCluster(st State, t *nft.Table, withChains bool) {
	for _, c := range st.Cluster {
		for _, f := range families {
			t.Sets = append(t.Sets, addrSet(f, clusterSelSet(f, c), cut("reef: this node's pods ClusterNetworkPolicy "+c.Name+" selects"), false, c.Selected))
			for d := Ingress; d <= Egress; d++ {
				for i, r := range c.Rules[d] {
					if r.AnyPeer {
						continue
					}
					s := nft.Set{Name: clusterPeerSet(f, c, r), KeyType: f.addr.Name, KeyLen: f.addr.Bytes, Interval: true,
						Comment: cut(fmt.Sprintf("reef: peers of ClusterNetworkPolicy %s %s[%d]", c.Name, d, i))}
					for _, rg := range r.Peers {
						if f.holds(rg.From) {
							s.Elems = append(s.Elems, nft.Elem{From: rg.From, To: rg.To})
						}
					}
					t.Sets = append(t.Sets, s)
				}
			}
		}
	}
	if !withChains {
		return
	}
	for d := Ingress; d <= Egress; d++ {
		for _, tier := range []cnp.Tier{cnp.AdminTier, cnp.BaselineTier} {
			if !hasTier(st, tier, d) {
				continue
			}
			ch := nft.Chain{Name: adminChain(d)}
			if tier == cnp.BaselineTier {
				ch.Name = baselineChain(d)
			}
			for _, c := range st.Cluster {
				if c.Tier != tier {
					continue
				}
				for i, r := range c.Rules[d] {
					for _, f := range families {
						ch.Rules = append(ch.Rules, clusterRules(f, d, c, i, r)...)
					}
				}
			}
			if tier == cnp.BaselineTier {
				ch.Rules = append(ch.Rules, nft.Rule{Comment: "reef: no Baseline rule decided: allowed",
					Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
			}
			t.Chains = append(t.Chains, ch)
		}
	}
}

// clusterRules renders rule i of a cluster policy in family f: one rule
// per port entry (one when it has none), each with the rule's verdict.
func clusterRules(f family, d Direction, c *ClusterCompiled, i int, r ClusterRule) []nft.Rule {
	ex := match(f, f.offset(d, false), clusterSelSet(f, c), false)
	if !r.AnyPeer {
		ex = append(ex,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.offset(d, true), Len: f.addr.Bytes},
			&expr.Lookup{SourceRegister: 1, SetName: clusterPeerSet(f, c, r)})
	}
	v := &expr.Verdict{Kind: expr.VerdictAccept}
	switch {
	case r.Action == Deny:
		v = &expr.Verdict{Kind: expr.VerdictDrop}
	case r.Action == Pass && c.Tier == cnp.AdminTier:
		v = &expr.Verdict{Kind: expr.VerdictReturn} // on to NetworkPolicy, in the base chain
	}
	comment := fmt.Sprintf("reef: ClusterNetworkPolicy %s (%s %d) %s[%d] %s", c.Name, c.Tier, c.Priority, d, i, r.Action)
	if r.Name != "" {
		comment += " " + r.Name
	}
	if len(r.Ports) == 0 {
		return []nft.Rule{{Comment: cut(comment), Exprs: append(ex, &expr.Counter{}, v)}}
	}
	var rules []nft.Rule
	for _, p := range r.Ports {
		e := append(slices.Clone(ex), l4proto(p.Proto)...)
		if !p.Any {
			e = append(e, dportIn(p.From, p.To)...)
		}
		e = append(e, &expr.Counter{}, v)
		rules = append(rules, nft.Rule{Comment: cut(fmt.Sprintf("%s port %s", comment, p)), Exprs: e})
	}
	return rules
}
