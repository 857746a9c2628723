package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/reefcni/reef/nat/nft"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// benchInput is the shape of reef-lab bench-policy: pods in namespaces
// (labels app, tier), namespaces with a team label, policies with an
// ingress rule (namespaceSelector AND podSelector, a port and a named
// port) and an egress ipBlock with an except; local endpoints among them.
func benchInput(pods, namespaces, policies, local int) Input {
	var in Input
	for i := range namespaces {
		in.Namespaces = append(in.Namespaces, ns(fmt.Sprintf("bg-%d", i), "team", fmt.Sprintf("t%d", i%10)))
	}
	for n := range pods {
		nsName := fmt.Sprintf("bg-%d", n%namespaces)
		ip := netip.AddrFrom4([4]byte{10, 250, byte(n >> 8), byte(n)})
		p := pod(nsName, fmt.Sprintf("p%d", n), ip.String(), []string{"app", fmt.Sprintf("app-%d", n%100), "tier", []string{"web", "db", "cache"}[n%3]},
			withPort("http", corev1.ProtocolTCP, 8080))
		in.Pods = append(in.Pods, p)
		if n < local {
			in.Local = append(in.Local, Endpoint{Namespace: nsName, Name: p.Name, IP: ip})
		}
	}
	tcp := corev1.ProtocolTCP
	for i := range policies {
		port, named := intstr.FromInt32(int32(8000+i%100)), intstr.FromString("http")
		in.Policies = append(in.Policies, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bg-%d", i%namespaces), Name: fmt.Sprintf("pol-%d", i), ResourceVersion: fmt.Sprint(1000 + i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *sel("app", fmt.Sprintf("app-%d", i%100)),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", fmt.Sprintf("t%d", i%10)), PodSelector: sel("tier", "web")}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}, {Protocol: &tcp, Port: &named}},
				}},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.250.0.0/16", Except: []string{fmt.Sprintf("10.250.%d.0/24", i%200)}}}},
				}},
			}})
	}
	return in
}

func BenchmarkCompile(b *testing.B) {
	in := benchInput(1000, 50, 100, 20)
	for b.Loop() {
		Compile(in)
	}
}

func BenchmarkTable(b *testing.B) {
	st := Compile(benchInput(1000, 50, 100, 20))
	for b.Loop() {
		Table(st)
	}
}

func BenchmarkDiff(b *testing.B) {
	in := benchInput(1000, 50, 100, 20)
	have := Table(Compile(in))
	in.Local = append(in.Local, Endpoint{Namespace: "bg-1", Name: "p999", IP: netip.MustParseAddr("10.250.3.231")})
	want := Table(Compile(in))
	for b.Loop() {
		nft.Diff([]nft.Table{want}, []nft.Table{have})
	}
}

func BenchmarkDiffElements(b *testing.B) {
	in := benchInput(1000, 50, 100, 20)
	have := Table(Compile(in))
	in.Local = append(in.Local, Endpoint{Namespace: "bg-1", Name: "p999", IP: netip.MustParseAddr("10.250.3.231")})
	want := Table(Compile(in))
	for b.Loop() {
		nft.DiffElements(want, have)
	}
}

func BenchmarkSets(b *testing.B) {
	st := Compile(benchInput(1000, 50, 100, 20))
	for b.Loop() {
		Sets(st)
	}
}

// BenchmarkScale is one sync's work at 5,000 pods, 500 namespaces and
// 500 policies: Compile, Table and the in-place diff with the table before.
func BenchmarkScale(b *testing.B) {
	in := benchInput(5000, 500, 500, 20)
	var r Renderer
	have := r.Table(Compile(in))
	b.ResetTimer()
	for b.Loop() {
		want := r.Table(Compile(in))
		nft.DiffInPlace([]nft.Table{want}, []nft.Table{have})
	}
}

// BenchmarkRecompile is an ADD's compile: one pod gets its endpoint.
func BenchmarkRecompile(b *testing.B) {
	b.Run("NetworkPolicy", func(b *testing.B) { benchRecompile(b, benchInput(1000, 50, 100, 20), false) })
	// With cluster policies: recompileClusterInput's three, over the same
	// 1,000 pods and 100 NetworkPolicies; full is what the ADD path did
	// before Recompile took cluster policies (Compile).
	withCluster := func() Input {
		in := benchInput(1000, 50, 100, 20)
		in.ClusterPolicies, in.Nodes = recompileClusterInput().ClusterPolicies, recompileClusterInput().Nodes
		return in
	}
	b.Run("ClusterNetworkPolicy", func(b *testing.B) { benchRecompile(b, withCluster(), false) })
	b.Run("ClusterNetworkPolicy-full", func(b *testing.B) { benchRecompile(b, withCluster(), true) })
	// bench-policy's ClusterNetworkPolicy step: 1,000 pods, 500
	// NetworkPolicies and 50 cluster policies of its shapes.
	b.Run("Cluster50", func(b *testing.B) { benchRecompile(b, benchClusterInput(), false) })
	b.Run("Cluster50-full", func(b *testing.B) { benchRecompile(b, benchClusterInput(), true) })
}

// BenchmarkCompileCluster50 is a full sync's compile in bench-policy's
// ClusterNetworkPolicy step.
func BenchmarkCompileCluster50(b *testing.B) {
	in := benchClusterInput()
	for b.Loop() {
		Compile(in)
	}
}

// benchClusterInput is benchInput(1000, 50, 500, 20) with the 50 cluster
// policies of reef-lab bench-policy (benchClusterPolicy): two for every
// namespace (kube-dns allowed, the metadata address denied), 23 Admin
// ones for a team's databases (its app accepted, its neighbour passed, a
// port range denied from every namespace, egress to two networks denied)
// and 25 Baseline ones for a team's namespaces (its own and monitoring
// in, every namespace denied; egress to its caches, private networks
// denied).
func benchClusterInput() Input {
	in := benchInput(1000, 50, 500, 20)
	team := func(j int) *metav1.LabelSelector { return sel("team", fmt.Sprintf("t%d", j%10)) }
	peers := func(ps ...cnp.ClusterNetworkPolicyIngressPeer) []cnp.ClusterNetworkPolicyIngressPeer { return ps }
	dns := clusterPolicy("allow-kube-dns", cnp.AdminTier, 1, nsSubject())
	dns.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionAccept,
		To:        []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel("kubernetes.io/metadata.name", "kube-system"), PodSelector: *sel("k8s-app", "kube-dns")}}},
		Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(53)}}}
	meta := clusterPolicy("deny-metadata", cnp.AdminTier, 2, nsSubject())
	meta.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
		To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"169.254.169.254/32"}}}}}
	in.ClusterPolicies = append(in.ClusterPolicies, dns, meta)
	for i := 2; i < 25; i++ {
		c := clusterPolicy(fmt.Sprintf("admin-db-%d", i), cnp.AdminTier, int32(10+i), cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(i),
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}}}}}})
		c.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(5432)},
				From: peers(cnp.ClusterNetworkPolicyIngressPeer{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(i), PodSelector: *sel("app", fmt.Sprintf("app-%d", i))}})},
			{Action: cnp.ClusterNetworkPolicyRuleActionPass, From: peers(cnp.ClusterNetworkPolicyIngressPeer{Namespaces: team(i + 1)})},
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: peers(cnp.ClusterNetworkPolicyIngressPeer{Namespaces: sel()}),
				Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 5000, End: 6999}}}}}},
		}
		c.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
			To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{cnp.CIDR(fmt.Sprintf("10.96.%d.0/24", i)), "192.0.2.0/24"}}}}}
		in.ClusterPolicies = append(in.ClusterPolicies, c)
	}
	for j := range 25 {
		c := clusterPolicy(fmt.Sprintf("baseline-team-%d", j), cnp.BaselineTier, int32(j), cnp.ClusterNetworkPolicySubject{Namespaces: team(j)})
		c.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: peers(cnp.ClusterNetworkPolicyIngressPeer{Namespaces: team(j)})},
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(9090)},
				From: peers(cnp.ClusterNetworkPolicyIngressPeer{Namespaces: sel("kubernetes.io/metadata.name", "monitoring")})},
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: peers(cnp.ClusterNetworkPolicyIngressPeer{Namespaces: sel()})},
		}
		c.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{
			{Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(6379)},
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(j), PodSelector: *sel("tier", "cache")}}}},
			{Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"10.0.0.0/8", "172.16.0.0/12"}}}},
		}
		in.ClusterPolicies = append(in.ClusterPolicies, c)
	}
	return in
}

func benchRecompile(b *testing.B, in Input, full bool) {
	p := in.Pods[33].DeepCopyObject().(*Pod)
	p.IPs = nil
	in.Pods[33] = p
	prev := Compile(in)
	in.Local = append(in.Local, Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.MustParseAddr("10.251.0.1")})
	for b.Loop() {
		if full {
			Table(Compile(in))
			continue
		}
		st, ch, ok := Recompile(prev, in.Local, p)
		if !ok {
			b.Fatal("Recompile refused")
		}
		SetsOf(st, ch)
	}
}

// BenchmarkCoverCluster50 is the daemon's work for one ADD (its Cover) in
// bench-policy's ClusterNetworkPolicy step: a pod of namespace bench (no
// labels) gets its endpoint; the shapes compared, Recompile, the sets it
// can change rendered and diffed with those of the table applied before.
func BenchmarkCoverCluster50(b *testing.B) {
	in := benchClusterInput()
	in.Namespaces = append(in.Namespaces, ns("bench"))
	for i, c := range in.ClusterPolicies { // as from the API: ClusterShape reads these
		c.UID, c.Generation = types.UID(fmt.Sprint("uid-", i)), 1
	}
	p := pod("bench", "add-0", "", []string{"app", "app-7"})
	in.Pods = append(in.Pods, p)
	prev := Compile(in)
	var r Renderer
	have := r.Table(prev)
	local := append(slices.Clone(in.Local), Endpoint{Namespace: "bench", Name: "add-0", IP: netip.MustParseAddr("10.251.0.1")})
	bySet := map[string]int{} // as the daemon keeps it (policyDataplane.appliedSets)
	for i, s := range have.Sets {
		bySet[s.Name] = i
	}
	for b.Loop() {
		_ = Shape(in.Policies) + ClusterShape(in.ClusterPolicies)
		st, ch, ok := Recompile(prev, local, p)
		if !ok {
			b.Fatal("Recompile refused")
		}
		sets := SetsOf(st, ch)
		sub := nft.Table{ID: TableID}
		for _, s := range sets {
			sub.Sets = append(sub.Sets, have.Sets[bySet[s.Name]])
		}
		if _, ok := nft.DiffElements(nft.Table{ID: TableID, Sets: sets}, sub); !ok {
			b.Fatal("DiffElements refused")
		}
	}
}
