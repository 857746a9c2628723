package policy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// recompileInput is benchInput with policies that look at pods in every
// way: AnyPeer with a named port, an ipBlock with a named port, egress
// named ports, podSelector only.
func recompileInput() Input {
	in := benchInput(400, 20, 60, 10)
	anyNamed := netpol("bg-1", "any-named", sel(), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	anyNamed.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "http")}}}
	blockNamed := netpol("bg-2", "block-named", sel("app", "app-2"), nil)
	blockNamed.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.250.0.0/16"}}}},
		{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "db")}}, Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "http")}}}
	in.Policies = append(in.Policies, anyNamed, blockNamed)
	return in
}

// recompileClusterInput is recompileInput with cluster policies of both
// tiers that look at pods in every way: a subject by pod labels, pod and
// namespace peers, a named port, node peers and networks.
func recompileClusterInput() Input {
	in := recompileInput()
	withNodes(&in)
	all := func(kv ...string) *cnp.NamespacedPod {
		return &cnp.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel(kv...)}
	}
	db := clusterPolicy("db-from-app-2", cnp.AdminTier, 10, cnp.ClusterNetworkPolicySubject{Pods: all("tier", "db")})
	db.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{
		{Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Pods: all("app", "app-2")}},
			Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}},
		{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel()}}},
	}
	pass := clusterPolicy("app-3-pass", cnp.AdminTier, 20, cnp.ClusterNetworkPolicySubject{Pods: all("app", "app-3")})
	pass.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{
		{Action: cnp.ClusterNetworkPolicyRuleActionPass, To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "worker")}}},
		{Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"169.254.169.254/32"}}}},
	}
	base := clusterPolicy("baseline", cnp.BaselineTier, 5, nsSubject())
	base.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Pods: all("tier", "db")}}}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{db, pass, base}
	return in
}

// checkRecompile: Recompile of prev gives exactly the table Compile
// gives for in, and compiles only some of the policies again.
func checkRecompile(t *testing.T, prev State, in Input, p *Pod) State {
	t.Helper()
	st, changed, ok := Recompile(prev, in.Local, p)
	if !ok {
		t.Fatal("Recompile refused a State Compile made")
	}
	want := Compile(in)
	if !reflect.DeepEqual(Table(st), Table(want)) {
		t.Fatal("Recompile's table differs from Compile's")
	}
	if !reflect.DeepEqual(SetsOf(st, changed), SetsOf(want, changed)) {
		t.Fatal("SetsOf differs")
	}
	if len(changed) == len(want.Policies) {
		t.Errorf("compiled again all %d policies", len(want.Policies))
	}
	return st
}

// TestRecompileIsCompile: for an ADD (a pod of the API without an address
// gets its endpoint), Recompile from the State before gives exactly the
// table Compile gives, for one ADD and for ADDs in a row, each from the
// State the one before made.
func TestRecompileIsCompile(t *testing.T) {
	t.Run("NetworkPolicy", func(t *testing.T) { testRecompileIsCompile(t, recompileInput()) })
	t.Run("ClusterNetworkPolicy", func(t *testing.T) {
		in := recompileClusterInput()
		if st := Compile(in); len(st.Cluster) != len(in.ClusterPolicies) {
			t.Fatalf("compiled %d of the %d cluster policies: %+v", len(st.Cluster), len(in.ClusterPolicies), st.Skipped)
		}
		testRecompileIsCompile(t, in)
	})
}

func testRecompileIsCompile(t *testing.T, base Input) {
	in := base
	in.Pods = slices.Clone(base.Pods)
	in.Local = slices.Clone(base.Local)
	var adds []*Pod
	for _, n := range []int{1, 2, 21, 77, 399} {
		p := in.Pods[n].DeepCopyObject().(*Pod)
		p.IPs = nil // before kubelet writes it
		in.Pods[n] = p
		adds = append(adds, p)
	}
	first := Compile(in)
	for i, p := range adds {
		t.Run(fmt.Sprintf("one-%s", p.Name), func(t *testing.T) {
			one := in
			one.Local = append(slices.Clone(in.Local), Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.AddrFrom4([4]byte{10, 251, 0, byte(i + 1)})})
			checkRecompile(t, first, one, p)
		})
	}
	t.Run("in-a-row", func(t *testing.T) {
		st := first
		seq := in
		seq.Local = slices.Clone(in.Local)
		for i, p := range adds {
			seq.Local = append(seq.Local, Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.AddrFrom4([4]byte{10, 251, 1, byte(i + 1)})})
			st = checkRecompile(t, st, seq, p)
		}
	})
}

// TestRecompileAPIChanges: the ADD's pod as the API has it at the ADD
// wins over the view prev was compiled from: a pod the API did not have
// then, a pod whose labels changed since; and an endpoint that went
// since prev is gone from the sets.
func TestRecompileAPIChanges(t *testing.T) {
	base := recompileInput()
	in := base
	in.Pods = slices.Clone(base.Pods[:399]) // p399 is not in the API yet
	prev := Compile(in)

	t.Run("new-pod", func(t *testing.T) {
		p := base.Pods[399].DeepCopyObject().(*Pod)
		p.IPs = nil
		now := in
		now.Pods = append(slices.Clone(in.Pods), p)
		now.Local = append(slices.Clone(in.Local), Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.MustParseAddr("10.251.2.1")})
		checkRecompile(t, prev, now, p)
	})
	t.Run("relabelled", func(t *testing.T) {
		// p3 is local (benchInput's first 10 pods are): selected by
		// policies of app-3 before, of app-2 now.
		old := in.Pods[3]
		p := old.DeepCopyObject().(*Pod)
		p.Labels = map[string]string{"app": "app-2", "tier": "db"}
		now := in
		now.Pods = slices.Clone(in.Pods)
		now.Pods[3] = p
		checkRecompile(t, prev, now, p)
	})
	t.Run("endpoint-gone", func(t *testing.T) {
		// p5's endpoint went (a DEL) and p1 is added: both are exact.
		p := in.Pods[1].DeepCopyObject().(*Pod)
		now := in
		now.Pods = slices.Clone(in.Pods)
		now.Pods[1] = p
		now.Local = slices.DeleteFunc(slices.Clone(in.Local), func(e Endpoint) bool { return e.Name == "p5" })
		now.Local = append(now.Local, Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.MustParseAddr("10.251.2.2")})
		checkRecompile(t, prev, now, p)
	})
}
