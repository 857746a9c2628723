package policy

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/nat/nft"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

func TestCompileSample(t *testing.T) {
	st := Compile(sampleInput())
	if len(st.Skipped) != 0 {
		t.Fatalf("skipped: %+v", st.Skipped)
	}
	if got, want := st.Isolated[Ingress], []netip.Addr{addr("10.0.0.1")}; !slices.Equal(got, want) {
		t.Errorf("isolated for ingress: %v, want %v (x/a only)", got, want)
	}
	if got, want := st.Isolated[Egress], []netip.Addr{addr("10.0.0.1"), addr("10.0.0.2")}; !slices.Equal(got, want) {
		t.Errorf("isolated for egress: %v, want %v (every pod of x)", got, want)
	}
	var in *Compiled
	for _, c := range st.Policies {
		if c.Name == "allow-y" {
			in = c
		}
	}
	if in == nil || len(in.Rules[Ingress]) != 3 || in.Covers[Egress] {
		t.Fatalf("allow-y: %+v", in)
	}
	r := in.Rules[Ingress]
	if want := []Range{{addr("10.0.1.1"), addr("10.0.1.2")}}; !slices.Equal(r[0].Peers, want) {
		t.Errorf("from namespace y: %v, want %v (both pods of y, merged)", r[0].Peers, want)
	}
	if p := r[0].Ports; len(p) != 1 || p[0].String() != "TCP/80" {
		t.Errorf("ports: %v", p)
	}
	if want := []Range{{addr("10.0.0.2"), addr("10.0.0.2")}}; !slices.Equal(r[1].Peers, want) {
		t.Errorf("from pod b of x: %v, want %v (the local endpoint's address)", r[1].Peers, want)
	}
	if p := r[1].Ports; len(p) != 1 || !slices.Equal(p[0].Named, []AddrPort{{addr("10.0.0.1"), 8080}}) {
		t.Errorf("named port http: %+v, want 10.0.0.1 . 8080 (x/a's containerPort)", p)
	}
	if want := []Range{{addr("192.0.2.0"), addr("192.0.2.127")}}; !slices.Equal(r[2].Peers, want) || len(r[2].Ports) != 0 {
		t.Errorf("ipBlock minus except: %v %v, want %v, every port", r[2].Peers, r[2].Ports, want)
	}
}

func TestCompileSkipsOnlyTheBadPolicy(t *testing.T) {
	in := sampleInput()
	bad := netpol("x", "bad", sel("pod", "a"), nil)
	bad.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}
	in.Policies = append(in.Policies, bad)
	st := Compile(in)
	if len(st.Skipped) != 1 || st.Skipped[0].Name != "bad" || !strings.Contains(st.Skipped[0].Reason, `spec.ingress[0]: from[0].ipBlock: cidr "10.0.0.0/33"`) {
		t.Fatalf("skipped: %+v", st.Skipped)
	}
	if len(st.Policies) != 2 {
		t.Fatalf("policies enforced: %d, want the two good ones", len(st.Policies))
	}
}

func TestCompileNamespaceAndPodSelectorAnd(t *testing.T) {
	in := sampleInput()
	p := netpol("x", "and", sel("pod", "b"), nil)
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "b")}}}}
	in.Policies = []*networkingv1.NetworkPolicy{p}
	st := Compile(in)
	if got := st.Policies[0].Rules[Ingress][0].Peers; !slices.Equal(got, []Range{{addr("10.0.1.2"), addr("10.0.1.2")}}) {
		t.Errorf("pod b of namespace y: %v", got)
	}
	if got := st.Isolated[Ingress]; !slices.Equal(got, []netip.Addr{addr("10.0.0.2")}) {
		t.Errorf("isolated: %v", got)
	}
}

func TestCompileEgressNamedPortResolvesOnPeers(t *testing.T) {
	in := sampleInput()
	in.Pods[2] = pod("y", "a", "10.0.1.1", []string{"pod", "a"}, withPort("dns", corev1.ProtocolUDP, 53))
	p := netpol("x", "dns", sel(), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolUDP, "dns"), named(corev1.ProtocolTCP, "dns")}}}
	in.Policies = []*networkingv1.NetworkPolicy{p}
	r := Compile(in).Policies[0].Rules[Egress][0]
	if !r.AnyPeer || !slices.Equal(r.Ports[0].Named, []AddrPort{{addr("10.0.1.1"), 53}}) || len(r.Ports[1].Named) != 0 {
		t.Errorf("egress to any peer on UDP dns: %+v (want y/a . 53 for UDP, nothing for TCP)", r)
	}
}

// A sidecar's named port (an init container with restartPolicy Always)
// is the pod's, as a container's is; a plain init container's is not
// (it has ended before the pod serves).
func TestCompileNamedPortOfSidecar(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecars := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{Name: "metrics", Protocol: corev1.ProtocolTCP, ContainerPort: 7000}}},
			{Name: "proxy", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "metrics", Protocol: corev1.ProtocolTCP, ContainerPort: 9090}}},
		}
	}
	in := sampleInput()
	in.Pods[0] = pod("x", "a", "10.0.0.1", []string{"pod", "a"}, onNode("n1"), sidecars)
	in.Pods[2] = pod("y", "a", "10.0.1.1", []string{"pod", "a"}, sidecars)
	ing := netpol("x", "metrics-in", sel("pod", "a"), []networkingv1.PolicyType{networkingv1.PolicyTypeIngress})
	ing.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "metrics")}}}
	eg := netpol("x", "metrics-out", sel(), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	eg.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel()}}, Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "metrics")}}}
	in.Policies = []*networkingv1.NetworkPolicy{ing, eg}
	out := Compile(in)
	if got := out.Policies[0].Rules[Ingress][0].Ports[0].Named; !slices.Equal(got, []AddrPort{{addr("10.0.0.1"), 9090}}) {
		t.Errorf("ingress on the sidecar's named port: %+v, want 10.0.0.1 . 9090", got)
	}
	if got := out.Policies[1].Rules[Egress][0].Ports[0].Named; !slices.Equal(got, []AddrPort{{addr("10.0.0.1"), 9090}, {addr("10.0.1.1"), 9090}}) {
		t.Errorf("egress to the sidecars' named port: %+v, want 10.0.0.1 . 9090 and 10.0.1.1 . 9090", got)
	}
}

func TestMergeRanges(t *testing.T) {
	rs := mergeRanges([]Range{
		{addr("10.0.0.5"), addr("10.0.0.5")}, {addr("10.0.0.1"), addr("10.0.0.3")}, {addr("10.0.0.4"), addr("10.0.0.4")},
		{addr("10.0.0.2"), addr("10.0.0.2")}, {addr("10.0.0.9"), addr("10.0.0.9")}, {addr("fd00::1"), addr("fd00::1")},
	})
	want := []Range{{addr("10.0.0.1"), addr("10.0.0.5")}, {addr("10.0.0.9"), addr("10.0.0.9")}, {addr("fd00::1"), addr("fd00::1")}}
	if !slices.Equal(rs, want) {
		t.Errorf("merge: %v, want %v", rs, want)
	}
}

func TestSetsAreTablesSets(t *testing.T) {
	st := Compile(benchInput(300, 20, 40, 30))
	if !reflect.DeepEqual(Sets(st), Table(st).Sets) {
		t.Fatal("Sets(st) differs from Table(st).Sets")
	}
}

// noKeys is tb without its rules' keys (the Renderer's tables have
// them, Table's not).
func noKeys(tb nft.Table) nft.Table {
	for i := range tb.Chains {
		tb.Chains[i].Rules = slices.Clone(tb.Chains[i].Rules)
		for j := range tb.Chains[i].Rules {
			tb.Chains[i].Rules[j].Key = ""
		}
	}
	return tb
}

// TestRendererIsTable: the Renderer's table is Table's, the first time
// and when it reuses every policy's rules, and after a policy changed.
func TestRendererIsTable(t *testing.T) {
	in := benchInput(300, 20, 40, 30)
	var r Renderer
	for round := range 3 {
		if round == 2 {
			p := in.Policies[3].DeepCopy()
			p.ResourceVersion = "changed"
			p.Spec.Ingress[0].Ports = p.Spec.Ingress[0].Ports[:1]
			in.Policies = append(slices.Clone(in.Policies[:3]), append([]*networkingv1.NetworkPolicy{p}, in.Policies[4:]...)...)
		}
		st := Compile(in)
		if got, want := noKeys(r.Table(st)), Table(st); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the Renderer's table differs from Table's", round)
		}
	}
}

// TestRendererIsTableCluster: the same with cluster policies, whose rules
// the Renderer keeps too: a rule's action and ports changed, a policy
// gone, are rendered anew.
func TestRendererIsTableCluster(t *testing.T) {
	in := benchClusterInput()
	var r Renderer
	for round := range 4 {
		switch round {
		case 2:
			c := in.ClusterPolicies[5].DeepCopy()
			c.Spec.Ingress[0].Action = cnp.ClusterNetworkPolicyRuleActionDeny
			c.Spec.Ingress[2].Protocols[0].TCP.DestinationPort.Range.End = 5999
			in.ClusterPolicies = append(slices.Clone(in.ClusterPolicies[:5]), append([]*cnp.ClusterNetworkPolicy{c}, in.ClusterPolicies[6:]...)...)
		case 3:
			in.ClusterPolicies = slices.Delete(slices.Clone(in.ClusterPolicies), 30, 31)
		}
		st := Compile(in)
		got, want := r.Table(st), Table(st)
		for i := range got.Chains {
			got.Chains[i].Rules = slices.Clone(got.Chains[i].Rules)
			for j := range got.Chains[i].Rules {
				got.Chains[i].Rules[j].Key = ""
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the Renderer's table differs from Table's", round)
		}
	}
}

// TestCompileIgnoresOrder: the informer lists objects in no particular
// order; the table depends only on which objects there are.
func TestCompileIgnoresOrder(t *testing.T) {
	in := benchInput(300, 20, 40, 30)
	want := Table(Compile(in))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		in.Pods = slices.Clone(in.Pods)
		in.Policies = slices.Clone(in.Policies)
		rng.Shuffle(len(in.Pods), func(i, j int) { in.Pods[i], in.Pods[j] = in.Pods[j], in.Pods[i] })
		rng.Shuffle(len(in.Policies), func(i, j int) { in.Policies[i], in.Policies[j] = in.Policies[j], in.Policies[i] })
		if !reflect.DeepEqual(Table(Compile(in)), want) {
			t.Fatal("the table depends on the order of the objects")
		}
	}
}

// TestPeerSetsShared: rules with the same peers share one set: across
// namespaces for namespaceSelectors, within one for a podSelector alone.
func TestPeerSetsShared(t *testing.T) {
	in := benchInput(300, 20, 40, 30) // ingress peers: team t0-t9 AND tier=web
	st := Compile(in)
	keys := map[string]bool{}
	for _, c := range st.Policies {
		keys[c.Rules[Ingress][0].PeerKey] = true
	}
	if len(keys) != 10 {
		t.Errorf("%d ingress peer sets for 40 policies over 10 teams, want 10", len(keys))
	}
	a, b := netpol("x", "a", sel(), nil), netpol("y", "b", sel(), nil)
	for _, p := range []*networkingv1.NetworkPolicy{a, b} {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}}}}
	}
	in = sampleInput()
	in.Policies = []*networkingv1.NetworkPolicy{a, b}
	st = Compile(in)
	if st.Policies[0].Rules[Ingress][0].PeerKey == st.Policies[1].Rules[Ingress][0].PeerKey {
		t.Error("podSelector-only peers of namespaces x and y share a set")
	}
}

// TestCompileDualStackPod: a dual-stack pod is two endpoints of one pod
// here (and two status.podIPs elsewhere): both of its addresses are
// isolated, and a peer selector stands for both.
func TestCompileDualStackPod(t *testing.T) {
	in := sampleInput()
	a6, b6 := addr("fd00:10:244::1"), addr("fd00:10:244::2")
	in.Local = append(in.Local, Endpoint{Namespace: "x", Name: "a", IP: a6}, Endpoint{Namespace: "x", Name: "b", IP: b6})
	st := Compile(in)
	if !slices.Contains(st.Isolated[Ingress], a6) || !slices.Contains(st.Isolated[Ingress], addr("10.0.0.1")) {
		t.Errorf("isolated for ingress %v, want both of x/a's addresses", st.Isolated[Ingress])
	}
	// x/b is the peer of allow-y's second rule: its set holds both of b's.
	found := false
	for _, rs := range st.Peers {
		if slices.ContainsFunc(rs, func(r Range) bool { return r.From == b6 && r.To == b6 }) &&
			slices.ContainsFunc(rs, func(r Range) bool { return r.From == addr("10.0.0.2") }) {
			found = true
		}
	}
	if !found {
		t.Errorf("no peer set holds both of x/b's addresses: %v", st.Peers)
	}
}
