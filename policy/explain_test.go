package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// orderLines is an OrderView as the test writes it, one line a step.
func orderLines(o OrderView) []string {
	rule := func(r ClusterRuleView) string {
		s := fmt.Sprintf("%s %d %s %s %s from %s [%s] %s", r.Tier, r.Priority, r.Policy, r.Rule, r.Action,
			strings.Join(r.Peers, "; "), strings.Join(r.Addresses, ","), strings.Join(r.Ports, ","))
		if r.Note != "" {
			s += " (" + r.Note + ")"
		}
		return s
	}
	var out []string
	for _, r := range o.Admin {
		out = append(out, rule(r))
	}
	out = append(out, "NetworkPolicy "+strings.Join(o.NetworkPolicies, ","))
	for _, r := range o.Baseline {
		out = append(out, rule(r))
	}
	if len(o.BaselineNotReached) > 0 {
		out = append(out, "not reached "+strings.Join(o.BaselineNotReached, ","))
	}
	return append(out, o.Otherwise)
}

// TestExplainClusterOrder: reef policy show's order for each direction
// of sampleInput's x/a (isolated for ingress and egress by NetworkPolicy)
// and x/b (for egress only), with Admin policies of two priorities, a
// Pass turned into a Deny (fail closed), and Baseline policies that are
// reached only where no NetworkPolicy isolates the pod.
func TestExplainClusterOrder(t *testing.T) {
	in := sampleInput()
	deny81 := clusterPolicy("deny-y-81", cnp.AdminTier, 10, nsSubject("ns", "x"))
	deny81.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Name: "no-81", Action: "Deny", From: fromNS("ns", "y"), Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(81)}}}
	pass := clusterPolicy("pass-y", cnp.AdminTier, 5, nsSubject("ns", "x"))
	pass.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Pass", From: fromNS("ns", "y")}}
	dns := clusterPolicy("dns", cnp.AdminTier, 20, nsSubject("ns", "x"))
	dns.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Pass", To: []cnp.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnp.DomainName{"example.com"}}}}}
	only := clusterPolicy("only-b", cnp.AdminTier, 1, cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("pod", "b")}})
	only.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Accept", From: fromNS("ns", "y")}}
	base := clusterPolicy("baseline", cnp.BaselineTier, 3, nsSubject("ns", "x"))
	base.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Deny", From: fromNS("ns", "y")}}
	base.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Pass", To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"192.0.2.0/24"}}}}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{base, deny81, dns, pass, only}

	views := Explain(Compile(in), in, "")
	if len(views) != 2 || views[0].Pod != "x/a" || views[1].Pod != "x/b" {
		t.Fatalf("views %+v, want x/a and x/b", views)
	}
	failClosed := "enforced as Deny of all traffic (fail closed): spec.egress[0].to[0].domainNames: domain name peers are not enforced by reef: this Pass rule denies all traffic (fail closed)"
	for _, tc := range []struct {
		pod, dir string
		got      OrderView
		want     []string
	}{{
		pod: "x/a", dir: "ingress", got: views[0].IngressOrder,
		want: []string{
			"Admin 5 pass-y ingress[0] Pass from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] any",
			"Admin 10 deny-y-81 ingress[0] Deny from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] TCP/81",
			"NetworkPolicy x/allow-y",
			"not reached baseline ingress[0]",
			OtherwiseIsolated,
		},
	}, {
		pod: "x/a", dir: "egress", got: views[0].EgressOrder,
		want: []string{
			"Admin 20 dns egress[0] Deny from domain names example.com [any] any (" + failClosed + ")",
			"NetworkPolicy x/egress-y",
			"not reached baseline egress[0]",
			OtherwiseIsolated,
		},
	}, {
		pod: "x/b", dir: "ingress", got: views[1].IngressOrder,
		want: []string{
			"Admin 1 only-b ingress[0] Accept from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] any",
			"Admin 5 pass-y ingress[0] Pass from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] any",
			"Admin 10 deny-y-81 ingress[0] Deny from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] TCP/81",
			"NetworkPolicy ",
			"Baseline 3 baseline ingress[0] Deny from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] any",
			OtherwiseAllowed,
		},
	}} {
		if d := cmp.Diff(tc.want, orderLines(tc.got)); d != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.pod, tc.dir, d)
		}
	}

	// Without cluster policies: NetworkPolicies and the default only.
	in.ClusterPolicies = nil
	v := Explain(Compile(in), in, "x/b")
	if d := cmp.Diff([]string{"NetworkPolicy ", OtherwiseAllowed}, orderLines(v[0].IngressOrder)); d != "" {
		t.Errorf("x/b ingress without cluster policies (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"NetworkPolicy x/egress-y", OtherwiseIsolated}, orderLines(v[0].EgressOrder)); d != "" {
		t.Errorf("x/b egress without cluster policies (-want +got):\n%s", d)
	}
}

// TestExplainBaselinePass: a Baseline Pass allows, and says so.
func TestExplainBaselinePass(t *testing.T) {
	in := sampleInput()
	base := clusterPolicy("baseline", cnp.BaselineTier, 3, nsSubject("ns", "x"))
	base.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Pass", From: fromNS("ns", "y")}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{base}
	v := Explain(Compile(in), in, "x/b")
	want := []string{"NetworkPolicy ",
		"Baseline 3 baseline ingress[0] Pass from every pod in namespaces ns=y [10.0.1.1-10.0.1.2] any (Pass in the Baseline tier: allowed (nothing comes after it))",
		OtherwiseAllowed}
	if d := cmp.Diff(want, orderLines(v[0].IngressOrder)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
