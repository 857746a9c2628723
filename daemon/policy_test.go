package daemon

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
	"github.com/reefcni/reef/store"
)

// TestPolicyGetsEveryAddressOfAPod: a dual-stack pod's record, read back
// from the store as policyDataplane.locked reads it, gives policy both of
// its addresses, so that a policy isolating the pod isolates it in both
// families (the IPv6 address left out would go unfiltered).
func TestPolicyGetsEveryAddressOfAPod(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: netip.MustParseAddr("192.168.10.20")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v4 := store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	v6 := store.Pool{CIDR: netip.MustParsePrefix("fd00:10:244::/120"), BlockSize: 122}
	b4, b6 := netip.MustParsePrefix("10.244.0.0/26"), netip.MustParsePrefix("fd00:10:244::/122")
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: b4, Pool: v4.CIDR}, {Block: b6, Pool: v6.CIDR}},
		Confirm: []netip.Prefix{b4, b6}}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := st.Allocate(store.Endpoint{Handle: "net.a", HostVeth: "reefa", PodNamespace: "x", PodName: "a", State: store.EndpointReady}, v4, v6)
	if err != nil || len(ep.Addrs()) != 2 {
		t.Fatalf("Allocate: %s %v", ep.AddrsString(), err)
	}
	// A tunnel address (no pod) is not policy's.
	if _, _, err := st.Allocate(store.Endpoint{Handle: "reef-vxlan", State: store.EndpointReserved}, v4); err != nil {
		t.Fatal(err)
	}
	eps, err := st.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	local := localEndpoints(eps)
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	in := policy.Input{
		Policies:   []*networkingv1.NetworkPolicy{deny},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "x"}}},
		Pods:       []*policy.Pod{policy.PodFrom(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})},
		Local:      local,
	}
	got := policy.Compile(in).Isolated[policy.Ingress]
	if want := ep.Addrs(); !slices.Equal(got, want) {
		t.Errorf("isolated for ingress: %v, want both of x/a's addresses %v (local endpoints %+v)", got, want, local)
	}
}

// TestClusterConditions: each cluster policy's status condition says
// whether reef enforces it as written, in part (what not, and what it
// does instead), or not at all (why), at the generation compiled.
func TestClusterConditions(t *testing.T) {
	mk := func(name string, gen int64, edit func(*cnp.ClusterNetworkPolicy)) *cnp.ClusterNetworkPolicy {
		p := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen},
			Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1,
				Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
		edit(p)
		return p
	}
	pols := []*cnp.ClusterNetworkPolicy{
		mk("whole", 3, func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: &metav1.LabelSelector{}}}}}
		}),
		mk("domains", 1, func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnp.DomainName{"example.com"}}}}}
		}),
		mk("tier", 2, func(p *cnp.ClusterNetworkPolicy) { p.Spec.Tier = "Developer" }),
	}
	got := clusterConditions(pols, policy.Compile(policy.Input{ClusterPolicies: pols}))
	want := map[string]kube.Condition{
		"whole": {Status: metav1.ConditionTrue, Reason: kube.ReasonEnforced, Message: "reef enforces this policy as written", Generation: 3},
		"domains": {Status: metav1.ConditionFalse, Reason: kube.ReasonPartiallyEnforced, Generation: 1,
			Message: "reef enforces this policy except: spec.egress[0].to[0].domainNames: domain name peers are not enforced by reef: this Accept rule matches nothing"},
		"tier": {Status: metav1.ConditionFalse, Reason: kube.ReasonNotEnforced, Generation: 2,
			Message: `reef does not enforce this policy: spec.tier: unknown tier "Developer"`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
}
