package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/reefcni/reef/nat/nft"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// PodView is what `reef policy show` prints of one of this node's pods:
// whether it is isolated in each direction and the policies that select
// it, with what each allows.
type PodView struct {
	Pod             string       `json:"pod"` // namespace/name
	IPs             []string     `json:"ips"`
	IsolatedIngress bool         `json:"isolatedIngress"`
	IsolatedEgress  bool         `json:"isolatedEgress"`
	Policies        []PolicyView `json:"policies"`
	// IngressOrder and EgressOrder say what decides each direction, with
	// the ClusterNetworkPolicy tiers around the NetworkPolicies.
	IngressOrder OrderView `json:"ingressOrder"`
	EgressOrder  OrderView `json:"egressOrder"`
}

// PolicyView is one policy that selects the pod.
type PolicyView struct {
	Name    string     `json:"name"` // namespace/name
	Types   []string   `json:"policyTypes"`
	Ingress []RuleView `json:"ingress,omitempty"`
	Egress  []RuleView `json:"egress,omitempty"`
}

// RuleView is one allow rule: the peers as written and the addresses
// they stand for now, and the ports.
type RuleView struct {
	Peers     []string `json:"peers"`     // as the policy says; ["any"] for none
	Addresses []string `json:"addresses"` // what they resolve to
	Ports     []string `json:"ports"`     // ["any"] for none; a named port with the numbers it stands for
}

// Explain describes this node's pods (in.Local) and the policies of st
// that select them; pod "namespace/name" limits it to one.
func Explain(st State, in Input, pod string) []PodView {
	addrs := map[string][]netip.Addr{}
	for _, ep := range in.Local {
		if ep.Name == "" {
			continue // a record reef store recover rebuilt: no pod known
		}
		k := ep.Namespace + "/" + ep.Name
		if pod == "" || k == pod {
			addrs[k] = append(addrs[k], ep.IP)
		}
	}
	var out []PodView
	for k, as := range addrs {
		slices.SortFunc(as, netip.Addr.Compare)
		v := PodView{Pod: k, Policies: []PolicyView{}}
		for _, a := range as {
			v.IPs = append(v.IPs, a.String())
		}
		v.IsolatedIngress = slices.ContainsFunc(as, func(a netip.Addr) bool {
			_, ok := slices.BinarySearchFunc(st.Isolated[Ingress], a, netip.Addr.Compare)
			return ok
		})
		v.IsolatedEgress = slices.ContainsFunc(as, func(a netip.Addr) bool {
			_, ok := slices.BinarySearchFunc(st.Isolated[Egress], a, netip.Addr.Compare)
			return ok
		})
		v.IngressOrder = explainOrder(st, Ingress, k, as, v.IsolatedIngress)
		v.EgressOrder = explainOrder(st, Egress, k, as, v.IsolatedEgress)
		ns, _, _ := strings.Cut(k, "/")
		for _, c := range st.Policies {
			if c.Namespace != ns || !slices.ContainsFunc(as, func(a netip.Addr) bool { return slices.Contains(c.Selected, a) }) {
				continue
			}
			pv := PolicyView{Name: c.Key()}
			for d := Ingress; d <= Egress; d++ {
				if !c.Covers[d] {
					continue
				}
				pv.Types = append(pv.Types, map[Direction]string{Ingress: "Ingress", Egress: "Egress"}[d])
				rules := []RuleView{}
				for i, r := range c.Rules[d] {
					if p, ok := st.Peers[r.PeerKey]; ok && !r.AnyPeer {
						r.Peers = p
					}
					rules = append(rules, ruleView(c.src, d, i, r))
				}
				if d == Ingress {
					pv.Ingress = rules
				} else {
					pv.Egress = rules
				}
			}
			v.Policies = append(v.Policies, pv)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b PodView) int { return cmp.Compare(a.Pod, b.Pod) })
	return out
}

func ruleView(src *networkingv1.NetworkPolicy, d Direction, i int, r Rule) RuleView {
	v := RuleView{Peers: []string{}, Addresses: []string{}, Ports: []string{}}
	var peers []networkingv1.NetworkPolicyPeer
	if src != nil {
		if d == Ingress && i < len(src.Spec.Ingress) {
			peers = src.Spec.Ingress[i].From
		} else if d == Egress && i < len(src.Spec.Egress) {
			peers = src.Spec.Egress[i].To
		}
	}
	if r.AnyPeer {
		v.Peers, v.Addresses = []string{"any"}, []string{"any"}
	}
	for _, p := range peers {
		v.Peers = append(v.Peers, describePeer(src.Namespace, p))
	}
	for _, rg := range r.Peers {
		v.Addresses = append(v.Addresses, rangeString(rg))
	}
	v.Ports = portStrings(r.Ports)
	return v
}

// portStrings are ports as `reef policy show` prints them: ["any"] for
// none, a named port with the numbers it stands for.
func portStrings(ports []Port) []string {
	if len(ports) == 0 {
		return []string{"any"}
	}
	out := []string{}
	for _, p := range ports {
		s := p.String()
		if p.Name != "" {
			var nums []string
			for _, ap := range p.Named {
				if n := fmt.Sprint(ap.Port); !slices.Contains(nums, n) {
					nums = append(nums, n)
				}
			}
			if len(nums) == 0 {
				nums = []string{"no pod defines it"}
			}
			s += " (" + strings.Join(nums, ", ") + ")"
		}
		out = append(out, s)
	}
	return out
}

func describePeer(ns string, p networkingv1.NetworkPolicyPeer) string {
	switch {
	case p.IPBlock != nil:
		s := "ipBlock " + p.IPBlock.CIDR
		if len(p.IPBlock.Except) > 0 {
			s += " except " + strings.Join(p.IPBlock.Except, ", ")
		}
		return s
	case p.NamespaceSelector != nil && p.PodSelector != nil:
		return fmt.Sprintf("pods %s in namespaces %s", selString(p.PodSelector), selString(p.NamespaceSelector))
	case p.NamespaceSelector != nil:
		return "every pod in namespaces " + selString(p.NamespaceSelector)
	case p.PodSelector != nil:
		return fmt.Sprintf("pods %s in namespace %s", selString(p.PodSelector), ns)
	}
	return "nothing"
}

func selString(s *metav1.LabelSelector) string {
	f := metav1.FormatLabelSelector(s)
	if f == "" || f == "<none>" {
		return "(all)"
	}
	return f
}

func rangeString(r Range) string { return nft.Elem{From: r.From, To: r.To}.String() }

// OrderView is how one direction of a pod is decided: the first of
// Admin (in order), the NetworkPolicies that isolate it, Baseline (only
// when none does), then Otherwise.
type OrderView struct {
	Admin []ClusterRuleView `json:"admin"`
	// NetworkPolicies isolate the pod in this direction: what they do
	// not allow is dropped, and Baseline is not reached.
	NetworkPolicies []string          `json:"networkPolicies"`
	Baseline        []ClusterRuleView `json:"baseline"`
	// BaselineNotReached names the Baseline rules that select the pod
	// but are never reached, because a NetworkPolicy isolates it.
	BaselineNotReached []string `json:"baselineNotReached,omitempty"`
	// Otherwise is the verdict when nothing above matches.
	Otherwise string `json:"otherwise"`
}

// ClusterRuleView is one rule of a ClusterNetworkPolicy that selects
// the pod, as enforced.
type ClusterRuleView struct {
	Policy   string `json:"policy"`
	Tier     string `json:"tier"`
	Priority int32  `json:"priority"`
	Rule     string `json:"rule"` // ingress[0], as written in the spec
	Name     string `json:"name,omitempty"`
	Action   string `json:"action"`
	// Note says when the action is not the one written (fail closed).
	Note string `json:"note,omitempty"`
	RuleView
}

// Verdicts of OrderView.Otherwise.
const (
	OtherwiseIsolated = "dropped: a NetworkPolicy isolates the pod and none allows it"
	OtherwiseAllowed  = "allowed: no policy isolates the pod (the default)"
)

// explainOrder is the decision order of direction d for a pod with
// addresses as (sorted).
func explainOrder(st State, d Direction, key string, as []netip.Addr, isolated bool) OrderView {
	v := OrderView{Admin: []ClusterRuleView{}, NetworkPolicies: []string{}, Baseline: []ClusterRuleView{}, Otherwise: OtherwiseAllowed}
	ns, _, _ := strings.Cut(key, "/")
	for _, c := range st.Policies {
		if c.Namespace == ns && c.Covers[d] && slices.ContainsFunc(as, func(a netip.Addr) bool { return slices.Contains(c.Selected, a) }) {
			v.NetworkPolicies = append(v.NetworkPolicies, c.Key())
		}
	}
	if isolated {
		v.Otherwise = OtherwiseIsolated
	}
	for _, c := range st.Cluster {
		if !anyIn(as, c.Selected) {
			continue
		}
		for _, r := range c.Rules[d] {
			rv := clusterRuleView(st, c, d, r)
			switch {
			case c.Tier == cnp.AdminTier:
				v.Admin = append(v.Admin, rv)
			case isolated:
				v.BaselineNotReached = append(v.BaselineNotReached, fmt.Sprintf("%s %s", c.Name, rv.Rule))
			default:
				v.Baseline = append(v.Baseline, rv)
			}
		}
	}
	return v
}

// anyIn reports whether one of as is in sorted.
func anyIn(as, sorted []netip.Addr) bool {
	return slices.ContainsFunc(as, func(a netip.Addr) bool {
		_, ok := slices.BinarySearchFunc(sorted, a, netip.Addr.Compare)
		return ok
	})
}

func clusterRuleView(st State, c *ClusterCompiled, d Direction, r ClusterRule) ClusterRuleView {
	dir, idx, _ := strings.Cut(r.key, ".") // "in.0"
	field := map[string]string{"in": "ingress", "eg": "egress"}[dir] + "[" + idx + "]"
	v := ClusterRuleView{Policy: c.Name, Tier: string(c.Tier), Priority: c.Priority, Rule: field, Name: r.Name, Action: string(r.Action),
		RuleView: RuleView{Peers: []string{}, Addresses: []string{}, Ports: portStrings(r.Ports)}}
	i, _ := strconv.Atoi(idx)
	var peers []cnp.ClusterNetworkPolicyEgressPeer
	if c.src != nil {
		if d == Ingress && i < len(c.src.Spec.Ingress) {
			for _, f := range c.src.Spec.Ingress[i].From {
				peers = append(peers, cnp.ClusterNetworkPolicyEgressPeer{Namespaces: f.Namespaces, Pods: f.Pods})
			}
			v.Action = string(c.src.Spec.Ingress[i].Action)
		} else if d == Egress && i < len(c.src.Spec.Egress) {
			peers = c.src.Spec.Egress[i].To
			v.Action = string(c.src.Spec.Egress[i].Action)
		}
	}
	for _, p := range peers {
		v.Peers = append(v.Peers, describeClusterPeer(p))
	}
	if r.AnyPeer {
		v.Addresses = []string{"any"}
	}
	for _, rg := range r.Peers {
		v.Addresses = append(v.Addresses, rangeString(rg))
	}
	if v.Action != string(r.Action) || (r.AnyPeer && len(peers) > 0) {
		var why []string
		for _, n := range st.NotEnforced {
			if n.Name == c.Name && strings.HasPrefix(n.Field, "spec."+field) {
				why = append(why, n.Field+": "+n.Reason)
			}
		}
		v.Action = string(r.Action)
		v.Note = "enforced as Deny of all traffic (fail closed): " + strings.Join(why, "; ")
	}
	if c.Tier == cnp.BaselineTier && r.Action == Pass {
		v.Note = "Pass in the Baseline tier: allowed (nothing comes after it)"
	}
	return v
}

func describeClusterPeer(p cnp.ClusterNetworkPolicyEgressPeer) string {
	switch {
	case p.Namespaces != nil:
		return "every pod in namespaces " + selString(p.Namespaces)
	case p.Pods != nil:
		return fmt.Sprintf("pods %s in namespaces %s", selString(&p.Pods.PodSelector), selString(&p.Pods.NamespaceSelector))
	case p.Nodes != nil:
		return "nodes " + selString(p.Nodes)
	case len(p.Networks) > 0:
		var ns []string
		for _, n := range p.Networks {
			ns = append(ns, string(n))
		}
		return "networks " + strings.Join(ns, ", ")
	case len(p.DomainNames) > 0:
		var ds []string
		for _, n := range p.DomainNames {
			ds = append(ds, string(n))
		}
		return "domain names " + strings.Join(ds, ", ")
	}
	return "a peer reef does not know"
}
