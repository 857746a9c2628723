package policy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/nat/nft"
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
// namespace peers, named ports (of the subject; of a network's pods),
// node peers and networks.
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
	// A named port looked up on the pods of a network the ADDs' addresses
	// are in (checkRecompile's 10.251.0.0/16): every pod there changes
	// its ports.
	toNet := clusterPolicy("named-to-net", cnp.AdminTier, 30, cnp.ClusterNetworkPolicySubject{Pods: all("app", "app-4")})
	toNet.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionAccept,
		To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"10.251.0.0/16"}}}, Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{db, pass, base, toNet}
	return in
}

// checkRecompile: Recompile of prev gives exactly the table Compile
// gives for in, and compiles only some of the policies again.
func checkRecompile(t *testing.T, prev State, in Input, p *Pod) State {
	t.Helper()
	st, ch, ok := Recompile(prev, in.Local, p)
	if !ok {
		t.Fatal("Recompile refused a State Compile made")
	}
	want := Compile(in)
	if !reflect.DeepEqual(Table(st), Table(want)) {
		t.Fatal("Recompile's table differs from Compile's")
	}
	if got := withSets(t, Table(prev), SetsOf(st, ch)); !reflect.DeepEqual(got, Table(want)) {
		t.Fatalf("the table before with SetsOf's sets differs from Compile's:\n%s", setsDiff(got, Table(want)))
	}
	if ch.Policies() == len(want.Policies) {
		t.Errorf("compiled again all %d policies", len(want.Policies))
	}
	return st
}

// withSets is t with the elements of each of sets in its set of that
// name, as the ADD's nft.DiffElements applies them (elements only: a
// shared set's comment names the first policy rendered with it); a set t
// lacks fails the test.
func withSets(t *testing.T, tab nft.Table, sets []nft.Set) nft.Table {
	t.Helper()
	tab.Sets = slices.Clone(tab.Sets)
	for _, s := range sets {
		i := slices.IndexFunc(tab.Sets, func(h nft.Set) bool { return h.Name == s.Name })
		if i < 0 {
			t.Fatalf("SetsOf has set %s, which the table before lacks", s.Name)
		}
		tab.Sets[i].Elems = s.Elems
	}
	return tab
}

// setsDiff names the sets whose elements differ between two tables of
// the same sets.
func setsDiff(a, b nft.Table) string {
	var out []string
	for i, s := range a.Sets {
		if i >= len(b.Sets) || !reflect.DeepEqual(s, b.Sets[i]) {
			out = append(out, s.Name)
		}
	}
	return strings.Join(out, "\n")
}

// TestAddressOfDeletedLocalPod: a pod of this node whose endpoint is gone
// (its DEL ran) while its object still has its address in status stands
// for no address, so a new pod of the node given that address does not
// get its place in peer sets; a remote pod keeps its status' addresses.
// The DEL and the ADD through Recompile give what Compile gives.
func TestAddressOfDeletedLocalPod(t *testing.T) {
	in := sampleInput()
	in.NodeName = "n1"
	prev := Compile(in)
	recompile := func(prev State, in Input, p *Pod) State { // checkRecompile's checks but the last (x/b is in both policies)
		t.Helper()
		st, ch, ok := Recompile(prev, in.Local, p)
		want := Compile(in)
		if !ok || !reflect.DeepEqual(Table(st), Table(want)) || !reflect.DeepEqual(withSets(t, Table(prev), SetsOf(st, ch)), Table(want)) {
			t.Fatal("Recompile's table differs from Compile's")
		}
		return st
	}
	fromB := func(st State) []Range { return st.Policies[0].Rules[Ingress][1].Peers } // x/allow-y ingress[1]: from pod=b of x
	if got := fromB(prev); !slices.Equal(got, []Range{{addr("10.0.0.2"), addr("10.0.0.2")}}) {
		t.Fatalf("peers of pod=b with x/b's endpoint: %v, want 10.0.0.2", got)
	}
	// x/b's DEL: its object stays, Running, status 10.0.0.2.
	in.Local = in.Local[:1]
	st := recompile(prev, in, nil)
	if got := fromB(st); len(got) != 0 {
		t.Errorf("peers of pod=b after x/b's DEL: %v, want none (its status is stale)", got)
	}
	// x/c, another pod of the node, gets 10.0.0.2.
	c := pod("x", "c", "", []string{"pod", "c"}, onNode("n1"))
	in.Pods = append(in.Pods, c)
	in.Local = append(in.Local, Endpoint{Namespace: "x", Name: "c", IP: addr("10.0.0.2")})
	st = recompile(st, in, c)
	if got := fromB(st); len(got) != 0 {
		t.Errorf("peers of pod=b with x/c at x/b's old address: %v, want none", got)
	}
	// Without the node's name, a pod without an endpoint is taken at its
	// status, as a remote one is.
	in.NodeName = ""
	if got := fromB(Compile(in)); !slices.Equal(got, []Range{{addr("10.0.0.2"), addr("10.0.0.2")}}) {
		t.Errorf("peers of pod=b, no NodeName: %v, want 10.0.0.2 (the status')", got)
	}
}

// TestAddressOfPodBeingDeleted: a pod of another node being deleted
// (deletionTimestamp set) stands for the addresses of its status that no
// pod not being deleted has: its DEL came after the deletion started, and
// its node may have given the address to a new pod, whose it is now.
// Alone at its address (its graceful termination), it keeps it.
func TestAddressOfPodBeingDeleted(t *testing.T) {
	in := sampleInput()
	in.NodeName = "n1"
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	old := pod("x", "old", "10.0.1.9", []string{"pod", "b"}, onNode("n2"), deleting)
	in.Pods = append(in.Pods, old, pod("x", "new", "10.0.1.9", []string{"pod", "z"}, onNode("n2")))
	fromB := func(st State) []Range { return st.Policies[0].Rules[Ingress][1].Peers } // x/allow-y ingress[1]: from pod=b of x
	if got := fromB(Compile(in)); !slices.Equal(got, []Range{{addr("10.0.0.2"), addr("10.0.0.2")}}) {
		t.Errorf("peers of pod=b, x/old being deleted and x/new at its address: %v, want x/b's 10.0.0.2 only", got)
	}
	in.Pods = in.Pods[:len(in.Pods)-1]
	if got := fromB(Compile(in)); !slices.Equal(got, []Range{{addr("10.0.0.2"), addr("10.0.0.2")}, {addr("10.0.1.9"), addr("10.0.1.9")}}) {
		t.Errorf("peers of pod=b, x/old being deleted alone at its address: %v, want 10.0.0.2 and 10.0.1.9", got)
	}
}

// TestRecompileIsCompile: for an ADD (a pod of the API without an address
// gets its endpoint) and a DEL (an endpoint goes), Recompile from the
// State before gives exactly the table Compile gives, and the sets SetsOf
// renders from it, put in the table before, give that table too: for one
// ADD, and for ADDs then DELs in a row, each from the State the one
// before made.
func TestRecompileIsCompile(t *testing.T) {
	t.Run("NetworkPolicy", func(t *testing.T) { testRecompileIsCompile(t, recompileInput()) })
	t.Run("ClusterNetworkPolicy", func(t *testing.T) {
		in := recompileClusterInput()
		if st := Compile(in); len(st.Cluster) != len(in.ClusterPolicies) {
			t.Fatalf("compiled %d of the %d cluster policies: %+v", len(st.Cluster), len(in.ClusterPolicies), st.Skipped)
		}
		testRecompileIsCompile(t, in)
	})
	// bench-policy's ClusterNetworkPolicy step, with one of the pods an
	// ADD of its own namespace's, unlabelled like bench-policy's: most
	// cluster policies name it only in a shared peer set (reshared).
	t.Run("Cluster50", func(t *testing.T) {
		in := benchClusterInput()
		in.Namespaces = append(in.Namespaces, ns("bench"))
		in.Pods[77] = pod("bench", "add-0", "10.250.9.9", []string{"app", "app-7"})
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
		// DELs in a row (no pod: the endpoints that went are found from
		// local), each from the State the one before made, the ADDs'
		// pods and pods local from the start.
		for _, name := range []string{adds[1].Name, "p3", adds[4].Name, "p0"} {
			seq.Local = slices.DeleteFunc(slices.Clone(seq.Local), func(e Endpoint) bool { return e.Name == name })
			st = checkRecompile(t, st, seq, nil)
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

// TestInsertAddr: insertAddr is mergeRanges with the address added, for
// every address in and around merged ranges of both families (in a
// range, at its ends, next to one, between two that it joins, at the
// ends of the address space).
func TestInsertAddr(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	base := addrs("0.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.9", "255.255.255.255", "::", "fd00::1", "fd00::3", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	var rs []Range
	for _, a := range base {
		rs = append(rs, Range{a, a})
	}
	rs = mergeRanges(rs)
	before := slices.Clone(rs)
	for _, a := range append(base, addrs("0.0.0.1", "10.0.0.0", "10.0.0.3", "10.0.0.5", "10.0.0.8", "10.0.0.10", "255.255.255.254", "::1", "fd00::", "fd00::2", "fd00::4", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe")...) {
		want := mergeRanges(append(slices.Clone(rs), Range{a, a}))
		if got := insertAddr(rs, a); !slices.Equal(got, want) {
			t.Errorf("insertAddr(%v, %s) = %v, want %v", rs, a, got, want)
		}
	}
	if !slices.Equal(rs, before) {
		t.Errorf("insertAddr changed its argument: %v, was %v", rs, before)
	}
}

// TestAddressOfLocalPodAfterRecover: while the node has a record that
// reef store recover rebuilt without its pod's name, this node's pods are
// taken at their status, as before endpoints alone counted: the pod of
// that record is a peer at its address (it lost its place otherwise until
// it was recreated). With only named records, x/b without an endpoint
// has none.
func TestAddressOfLocalPodAfterRecover(t *testing.T) {
	in := sampleInput()
	in.NodeName = "n1"
	fromB := func(st State) []Range { return st.Policies[0].Rules[Ingress][1].Peers } // x/allow-y ingress[1]: from pod=b of x
	in.Local = in.Local[:1]
	if got := fromB(Compile(in)); len(got) != 0 {
		t.Fatalf("peers of pod=b without its endpoint: %v, want none", got)
	}
	in.Local = append(in.Local, Endpoint{IP: addr("10.0.0.2")}) // recovered: no name
	if got := fromB(Compile(in)); !slices.Equal(got, []Range{{addr("10.0.0.2"), addr("10.0.0.2")}}) {
		t.Errorf("peers of pod=b with a nameless record of its address: %v, want 10.0.0.2 (its status)", got)
	}
	if views := Explain(Compile(in), in, ""); slices.ContainsFunc(views, func(v PodView) bool { return v.Pod == "/" }) {
		t.Errorf("Explain lists the nameless record as a pod: %+v", views)
	}
}
