package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/policy"
)

// TestPrintPodViews: the text of reef policy show, with the tiers around
// the NetworkPolicies in each direction.
func TestPrintPodViews(t *testing.T) {
	rv := func(peers, addrs, ports string) policy.RuleView {
		return policy.RuleView{Peers: []string{peers}, Addresses: []string{addrs}, Ports: []string{ports}}
	}
	views := []policy.PodView{{
		Pod: "x/a", IPs: []string{"10.244.0.2"}, IsolatedIngress: true,
		IngressOrder: policy.OrderView{
			Admin: []policy.ClusterRuleView{
				{Policy: "pass-z", Tier: "Admin", Priority: 5, Rule: "ingress[0]", Action: "Pass", RuleView: rv("every pod in namespaces ns=z", "10.244.0.9", "any")},
				{Policy: "deny-y-81", Tier: "Admin", Priority: 10, Rule: "ingress[0]", Name: "no-81", Action: "Deny", RuleView: rv("every pod in namespaces ns=y", "10.244.0.7", "TCP/81")},
			},
			NetworkPolicies:    []string{"x/allow-from-y"},
			BaselineNotReached: []string{"baseline-deny-y ingress[0]"},
			Otherwise:          policy.OtherwiseIsolated,
		},
		EgressOrder: policy.OrderView{
			Admin: []policy.ClusterRuleView{{Policy: "dns", Tier: "Admin", Priority: 20, Rule: "egress[0]", Action: "Deny", Note: "enforced as Deny of all traffic (fail closed): ...",
				RuleView: rv("domain names example.com", "any", "any")}},
			Baseline:  []policy.ClusterRuleView{{Policy: "bl", Tier: "Baseline", Priority: 1, Rule: "egress[0]", Action: "Deny", RuleView: rv("networks 192.0.2.0/24", "192.0.2.0/24", "any")}},
			Otherwise: policy.OtherwiseAllowed,
		},
		Policies: []policy.PolicyView{{Name: "x/allow-from-y", Types: []string{"Ingress"}, Ingress: []policy.RuleView{rv("every pod in namespaces ns=y", "10.244.0.7", "TCP/80")}}},
	}}
	var b strings.Builder
	printPodViews(&b, views)
	want := `pod x/a  10.244.0.2
  ingress: isolated by a NetworkPolicy
  egress: no NetworkPolicy isolates it
  ingress, decided by the first that matches:
    Admin 5 pass-z ingress[0]: Pass from every pod in namespaces ns=z
      addresses: 10.244.0.9
      ports:     any
    Admin 10 deny-y-81 ingress[0] no-81: Deny from every pod in namespaces ns=y
      addresses: 10.244.0.7
      ports:     TCP/81
    NetworkPolicy: x/allow-from-y (rules below)
    Baseline baseline-deny-y ingress[0]: not reached (a NetworkPolicy isolates the pod)
    otherwise: dropped: a NetworkPolicy isolates the pod and none allows it
  egress, decided by the first that matches:
    Admin 20 dns egress[0]: Deny to domain names example.com
      note:      enforced as Deny of all traffic (fail closed): ...
      addresses: any
      ports:     any
    NetworkPolicy: none isolates the pod
    Baseline 1 bl egress[0]: Deny to networks 192.0.2.0/24
      addresses: 192.0.2.0/24
      ports:     any
    otherwise: allowed: no policy isolates the pod (the default)
  policy x/allow-from-y (Ingress)
    ingress[0]: from every pod in namespaces ns=y
      addresses: 10.244.0.7
      ports:     TCP/80
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
