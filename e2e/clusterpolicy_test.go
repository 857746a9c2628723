package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/policy"
)

var cnpGVR = cnp.SchemeGroupVersion.WithResource("clusternetworkpolicies")

// upstreamCNPCRD is the ClusterNetworkPolicy CRD as network-policy-api
// ships it (standard channel), read from the module go.mod requires.
func upstreamCNPCRD(t *testing.T) (string, []byte) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/network-policy-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/network-policy-api: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", "policy.networking.k8s.io_clusternetworkpolicies.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// adminIngress is a ClusterNetworkPolicy of tier on the pods of the
// namespaces labelled subjectNS: one ingress rule, action from the
// namespaces labelled fromNS, on TCP port (0: every port).
func clusterIngress(name string, tier cnp.Tier, prio int32, subjectNS, fromNS map[string]string, action cnp.ClusterNetworkPolicyRuleAction, port int32) *cnp.ClusterNetworkPolicy {
	r := cnp.ClusterNetworkPolicyIngressRule{Action: action, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: fromNS}}}}
	if port != 0 {
		r.Protocols = []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: port}}}}
	}
	return &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: tier, Priority: prio,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: subjectNS}},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{r}}}
}

// TestClusterNetworkPolicy: without the CRD, reef status says cluster
// policies are off and traffic is as before; with the upstream CRD applied
// to the lab's API server, the tiers decide as the API says: an Admin
// Deny a NetworkPolicy allow cannot override; an Admin Pass handed to a
// NetworkPolicy that then denies (and, the Pass deleted, the Admin Accept
// behind it decides instead); a Baseline Deny on pods no NetworkPolicy
// selects only; an egress Admin Deny to a network. (What reef does not enforce is reported in reef status:
// policy's unit tests; the standard channel's CRD has none of it.)
func TestClusterNetworkPolicy(t *testing.T) {
	pl := newPolicyLab(t, 1)
	n1 := pl.Nodes[0]
	x, y, z := map[string]string{"ns": "x"}, map[string]string{"ns": "y"}, map[string]string{"ns": "z"}
	pl.namespace(t, "x", x)
	pl.namespace(t, "y", y)
	pl.namespace(t, "z", z)
	xa := pl.pod(t, n1, "x", "a", map[string]string{"app": "a"})
	xb := pl.pod(t, n1, "x", "b", map[string]string{"app": "b"})
	ya := pl.pod(t, n1, "y", "a", map[string]string{"app": "a"})
	za := pl.pod(t, n1, "z", "a", map[string]string{"app": "a"})

	// No CRD: off, said; traffic as before.
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "ClusterNetworkPolicy off: the ClusterNetworkPolicy CRD (policy.networking.k8s.io/v1beta1 clusternetworkpolicies) is not installed") {
		t.Fatalf("reef status without the CRD: %v\n%s", err, out)
	}
	if n := strings.Count(n1.Log(), "ClusterNetworkPolicy off: the ClusterNetworkPolicy CRD"); n != 1 {
		t.Fatalf("the daemon's log says cluster policies are off %d times, want once", n)
	}
	if msg := pl.expect(t, probeWant{ya, xa, "tcp", 81, true}, probeWant{za, xa, "tcp", 80, true}, probeWant{ya, xb, "tcp", 80, true}); msg != "" {
		t.Fatalf("without the CRD: %s", msg)
	}

	path, crd := upstreamCNPCRD(t)
	if err := pl.API.ApplyCRDs(path, crd); err != nil {
		t.Fatal(err)
	}
	pl.waitClusterPoliciesOn(t)

	// x/a: a NetworkPolicy allows y on TCP 80 and 81 (so z is denied);
	// x/b: no NetworkPolicy.
	np := ingressFromNamespace("x", "allow-from-y", map[string]string{"app": "a"}, y, 80)
	tcp, p81 := corev1.ProtocolTCP, intstr.FromInt32(81)
	np.Spec.Ingress[0].Ports = append(np.Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p81})
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cnp.ClusterNetworkPolicy{
		clusterIngress("deny-y-81", cnp.AdminTier, 10, x, y, cnp.ClusterNetworkPolicyRuleActionDeny, 81),
		clusterIngress("pass-z", cnp.AdminTier, 5, x, z, cnp.ClusterNetworkPolicyRuleActionPass, 0),
		clusterIngress("accept-z", cnp.AdminTier, 20, x, z, cnp.ClusterNetworkPolicyRuleActionAccept, 0),
		clusterIngress("baseline-deny-y", cnp.BaselineTier, 10, x, y, cnp.ClusterNetworkPolicyRuleActionDeny, 0),
	} {
		if err := pl.API.CreateCustom(cnpGVR, "", c); err != nil {
			t.Fatalf("create ClusterNetworkPolicy %s: %v", c.Name, err)
		}
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t,
			probeWant{ya, xa, "tcp", 81, false}, // Admin Deny beats the NetworkPolicy's allow
			probeWant{ya, xa, "tcp", 80, true},  // the NetworkPolicy allows it; no Admin rule matches
			probeWant{za, xa, "tcp", 80, false}, // Admin Pass: the NetworkPolicy denies z; the Admin Accept behind the Pass is not reached
			probeWant{ya, xb, "tcp", 80, false}, // Baseline Deny: x/b has no NetworkPolicy
			probeWant{za, xb, "tcp", 80, true},  // Pass, no NetworkPolicy, Baseline does not match: allowed
			probeWant{xb, ya, "tcp", 80, true},  // y is no subject
		)
	})
	// reef policy show says what decides, in the order the probes found.
	showSteps(t, n1, "x/a", "ingress",
		"Admin 5 pass-z ingress[0]: Pass from every pod in namespaces ns=z",
		"Admin 10 deny-y-81 ingress[0]: Deny from every pod in namespaces ns=y",
		"Admin 20 accept-z ingress[0]: Accept from every pod in namespaces ns=z",
		"NetworkPolicy: x/allow-from-y (rules below)",
		"Baseline baseline-deny-y ingress[0]: not reached (a NetworkPolicy isolates the pod)",
		"otherwise: "+policy.OtherwiseIsolated)
	showSteps(t, n1, "x/b", "ingress",
		"Admin 5 pass-z ingress[0]: Pass from every pod in namespaces ns=z",
		"Admin 10 deny-y-81 ingress[0]: Deny from every pod in namespaces ns=y",
		"Admin 20 accept-z ingress[0]: Accept from every pod in namespaces ns=z",
		"NetworkPolicy: none isolates the pod",
		"Baseline 10 baseline-deny-y ingress[0]: Deny from every pod in namespaces ns=y",
		"otherwise: "+policy.OtherwiseAllowed)
	showSteps(t, n1, "y/a", "ingress", "NetworkPolicy: none isolates the pod", "otherwise: "+policy.OtherwiseAllowed)

	// Without the Pass, the Admin Accept behind it decides.
	if err := pl.API.DeleteCustom(cnpGVR, "", "pass-z"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string { return pl.expect(t, probeWant{za, xa, "tcp", 80, true}) })
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "ClusterNetworkPolicy on, 3 policies") {
		t.Fatalf("reef status with three cluster policies: %v\n%s", err, out)
	}

	// Egress: an Admin Deny from x to y/a's address (a network peer) on
	// TCP 80, which no NetworkPolicy of x's egress covers.
	egress := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: "deny-egress-ya-80"},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: x}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				To:        []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{cnp.CIDR(ya.IP.String() + "/32")}}},
				Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: 80}}}}}}}}
	if err := pl.API.CreateCustom(cnpGVR, "", egress); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{xb, ya, "tcp", 80, false}, probeWant{xb, ya, "tcp", 81, true}, probeWant{za, ya, "tcp", 80, true})
	})

	// Two Admin priorities, Pass then a NetworkPolicy that allows: y to
	// x on TCP 80 is passed at priority 2 and denied at 30. The Pass
	// comes first, and x/a's NetworkPolicy allows y on 80; x/b has none,
	// so the Baseline Deny decides there. Without the Pass, the Deny at
	// 30 beats the NetworkPolicy.
	for _, c := range []*cnp.ClusterNetworkPolicy{
		clusterIngress("pass-y-80", cnp.AdminTier, 2, x, y, cnp.ClusterNetworkPolicyRuleActionPass, 80),
		clusterIngress("deny-y-all", cnp.AdminTier, 30, x, y, cnp.ClusterNetworkPolicyRuleActionDeny, 0),
	} {
		if err := pl.API.CreateCustom(cnpGVR, "", c); err != nil {
			t.Fatalf("create ClusterNetworkPolicy %s: %v", c.Name, err)
		}
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t,
			probeWant{ya, xa, "tcp", 80, true},  // Pass (2), then the NetworkPolicy allows
			probeWant{ya, xa, "tcp", 81, false}, // deny-y-81 (10)
			probeWant{ya, xb, "tcp", 80, false}, // Pass (2), no NetworkPolicy, Baseline Deny
		)
	})
	if err := pl.API.DeleteCustom(cnpGVR, "", "pass-y-80"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{ya, xa, "tcp", 80, false}, probeWant{za, xa, "tcp", 80, true})
	})
}

// showSteps runs reef policy show for pod on n and compares the steps
// that decide direction dir (the lines of its "decided by" list, without
// each rule's addresses and ports) with want.
func showSteps(t *testing.T, n *lab.Node, pod, dir string, want ...string) {
	t.Helper()
	out, err := n.Reef("policy", "show", pod)
	if err != nil {
		t.Fatalf("reef policy show %s: %v\n%s", pod, err, out)
	}
	t.Logf("reef policy show %s:\n%s", pod, out)
	var got []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "  "+dir+", decided by the first that matches:":
			in = true
		case in && strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "      "):
			got = append(got, strings.TrimSpace(l))
		case in && !strings.HasPrefix(l, "      "):
			in = false
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reef policy show %s, %s: got\n%s\nwant\n%s\nthe output:\n%s", pod, dir, strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}
