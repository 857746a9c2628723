package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/nat/nft"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if len(r.Ports) == 0 {
		v.Ports = []string{"any"}
	}
	for _, p := range r.Ports {
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
		v.Ports = append(v.Ports, s)
	}
	return v
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
