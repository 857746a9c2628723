package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
	"github.com/reefcni/reef/store"
)

// fakePolicyAPI is the API as policyDataplane reads it, synced, with
// fixed objects. onInput, if set, runs once when Input is next called: a
// CNI operation between a sync's read of the endpoints and its compile
// (policy_states_test.go).
type fakePolicyAPI struct {
	in      policy.Input
	onInput func()
}

func (a *fakePolicyAPI) Synced() bool        { return true }
func (a *fakePolicyAPI) Status() kube.Status { return kube.Status{Synced: true, Reachable: true} }
func (a *fakePolicyAPI) Input() policy.Input {
	if f := a.onInput; f != nil {
		a.onInput = nil
		f()
	}
	in := a.in
	in.Local = nil
	return in
}
func (a *fakePolicyAPI) Policies() []*networkingv1.NetworkPolicy      { return a.in.Policies }
func (a *fakePolicyAPI) ClusterPolicies() []*cnp.ClusterNetworkPolicy { return a.in.ClusterPolicies }
func (a *fakePolicyAPI) Pod(namespace, name string) (*policy.Pod, bool) {
	i := slices.IndexFunc(a.in.Pods, func(p *policy.Pod) bool { return p.Namespace == namespace && p.Name == name })
	if i < 0 {
		return nil, false
	}
	return a.in.Pods[i], true
}
func (a *fakePolicyAPI) WaitPod(context.Context, string, string) bool   { return true }
func (a *fakePolicyAPI) MarkLocal(string, string)                       {}
func (a *fakePolicyAPI) SetClusterConditions(map[string]kube.Condition) {}

var _ policyAPI = (*fakePolicyAPI)(nil)

// incrementalAPI has pods that NetworkPolicies and cluster policies of
// both tiers select and name as peers: db pods of namespace a isolated
// for ingress from its web pods, every namespace's pods denied ingress
// from team-b (Admin, a shared peer set of all pods of a namespace
// selection), and Baseline web pods of every namespace accepted only
// from web pods (a shared set of a pod selection). The pods of this
// node (a/db-0, a/web-0, b/web-1, b/db-1) have no address in the API
// yet; 40 others of other nodes do.
func incrementalAPI() policy.Input {
	lbl := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	sel := func(kv ...string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: lbl(kv...)} }
	in := policy.Input{Namespaces: []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: lbl("kubernetes.io/metadata.name", "a", "team", "a")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: lbl("kubernetes.io/metadata.name", "b", "team", "b")}},
	}}
	pod := func(ns, name, app, ip string) *policy.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl("app", app), ResourceVersion: "1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if ip != "" {
			p.Status.PodIP = ip
		}
		return policy.PodFrom(p)
	}
	for _, l := range [][2]string{{"a", "db-0"}, {"a", "web-0"}, {"b", "web-1"}, {"b", "db-1"}} {
		in.Pods = append(in.Pods, pod(l[0], l[1], strings.Split(l[1], "-")[0], ""))
	}
	for i := range 40 {
		ns, app := []string{"a", "b"}[i%2], []string{"web", "db"}[i/2%2]
		in.Pods = append(in.Pods, pod(ns, fmt.Sprintf("remote-%d", i), app, fmt.Sprintf("10.250.0.%d", i+1)))
	}
	in.Policies = []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db", ResourceVersion: "7"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "db"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "web")}}}}}}}
	deny := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-team-b", UID: types.UID("u1"), Generation: 1},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1, Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("team", "a")},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("team", "b")}}}}}}
	web := &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-from-web", UID: types.UID("u2"), Generation: 1},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.BaselineTier, Priority: 1,
			Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel("app", "web")}},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{
				{Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel("app", "web")}}}},
				{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel()}}},
			}}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{deny, web}
	return in
}

// TestPolicyAddDelIncremental: with the policies applied, a pod's ADD
// (Cover) and DEL (Uncover) compile nothing in full and ask for no sync,
// and leave table inet reef in the fake kernel with the sets' elements a
// full compile of that moment gives: after a DEL, the pod's address in
// no set (a DEL that left an element behind fails here).
//
// On a node whose pools are all IPv4 (families IPv4) the table has no
// IPv6 set, and the same holds (a set of the family left behind by an
// ADD or DEL fails).
func TestPolicyAddDelIncremental(t *testing.T) {
	for _, fams := range []policy.Families{0, policy.IPv4} {
		t.Run(fams.String(), func(t *testing.T) { testPolicyAddDelIncremental(t, fams) })
	}
}

func testPolicyAddDelIncremental(t *testing.T, fams policy.Families) {
	st := storeWithBlock(t)
	k := newFakeKernel()
	api := &fakePolicyAPI{in: incrementalAPI()}
	syncs := 0
	p := &policyDataplane{watch: api, kernel: fakeNAT{k}, store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		families: fams, trigger: func() { syncs++ }, skipped: map[string]string{}, notEnforced: map[string]bool{}}
	add := func(ns, name string) store.Endpoint {
		t.Helper()
		ep, _, err := st.Allocate(store.Endpoint{Handle: "net." + name, HostVeth: "reef" + name, PodNamespace: ns, PodName: name, State: store.EndpointReady}, testPool)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Cover(ep); err != nil {
			t.Fatal(err)
		}
		return ep
	}
	// The first ADD compiles everything: nothing was applied.
	add("a", "db-0")
	if n := p.compiles.Load(); n != 1 {
		t.Fatalf("first ADD: %d full compiles, want 1", n)
	}
	eps := map[string]store.Endpoint{}
	for _, pod := range []string{"a/web-0", "b/web-1", "b/db-1"} {
		ns, name, _ := strings.Cut(pod, "/")
		eps[pod] = add(ns, name)
		checkFullTable(t, k, api, st, fams, "ADD of "+pod)
	}
	for _, pod := range []string{"b/web-1", "a/web-0"} {
		ep := eps[pod]
		if _, _, err := st.Release(ep.Handle); err != nil {
			t.Fatal(err)
		}
		p.Uncover(ep)
		checkFullTable(t, k, api, st, fams, "DEL of "+pod)
		if sets := setsHolding(k, ep.Addrs()[0]); len(sets) > 0 {
			t.Errorf("DEL of %s: its address %s is still in %v", pod, ep.Addrs()[0], sets)
		}
	}
	if n := p.compiles.Load(); n != 1 || syncs != 0 {
		t.Errorf("3 ADDs and 2 DELs after the first: %d full compiles in all (want 1), %d syncs asked for (want 0)", n, syncs)
	}
}

// checkFullTable: the fake kernel's table inet reef has the sets, and
// their elements, of a full compile of the API and the store's endpoints.
func checkFullTable(t *testing.T, k *fakeKernel, api *fakePolicyAPI, st *store.Store, fams policy.Families, what string) {
	t.Helper()
	eps, err := st.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	in := api.Input()
	in.Local, in.Families = localEndpoints(eps), fams
	want := elemsBySet(policy.Table(policy.Compile(in)))
	tables, err := fakeNAT{k}.Read([]nft.TableID{policy.TableID})
	if err != nil || len(tables) != 1 {
		t.Fatalf("%s: read table: %v %v", what, tables, err)
	}
	for _, s := range tables[0].Sets {
		if fams == policy.IPv4 && s.KeyType != "ipv4_addr" && s.KeyType != nft.KeyAddrPort4.Name {
			t.Errorf("%s: IPv4 pools only, but the table has set %s of %s", what, s.Name, s.KeyType)
		}
	}
	if diff := cmp.Diff(want, elemsBySet(tables[0])); diff != "" {
		t.Errorf("%s: the kernel's sets differ from a full compile's (-full +kernel):\n%s", what, diff)
	}
}

func elemsBySet(t nft.Table) map[string][]string {
	out := map[string][]string{}
	for _, s := range t.Sets {
		var es []string
		for _, e := range s.Elems {
			es = append(es, e.String())
		}
		slices.Sort(es)
		out[s.Name] = es
	}
	return out
}

// setsHolding names the sets of table inet reef with an element that
// holds a.
func setsHolding(k *fakeKernel, a netip.Addr) []string {
	tables, _ := fakeNAT{k}.Read([]nft.TableID{policy.TableID})
	var out []string
	for _, t := range tables {
		for _, s := range t.Sets {
			if slices.ContainsFunc(s.Elems, func(e nft.Elem) bool { return e.From.Compare(a) <= 0 && a.Compare(e.To) <= 0 }) {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// TestPolicyADDSeesPolicyChanges: an ADD compiles everything again when a
// policy changed since the last compile (a new object, of another
// resourceVersion: the fake kernel does not change rules, so its spec is
// the same), and not when the informer holds a new object of the same one
// (a relist); the table is a full compile's every time.
//
// On a node of one family (IPv4 pools) too: its shape holds its families
// (it fails if the relist's check compares it with a shape of both).
func TestPolicyADDSeesPolicyChanges(t *testing.T) {
	for _, fams := range []policy.Families{0, policy.IPv4} {
		t.Run(fams.String(), func(t *testing.T) { testPolicyADDSeesPolicyChanges(t, fams) })
	}
}

func testPolicyADDSeesPolicyChanges(t *testing.T, fams policy.Families) {
	st := storeWithBlock(t)
	k := newFakeKernel()
	api := &fakePolicyAPI{in: incrementalAPI()}
	p := &policyDataplane{watch: api, kernel: fakeNAT{k}, store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		families: fams, trigger: func() {}, skipped: map[string]string{}, notEnforced: map[string]bool{}}
	add := func(pod string, compiles uint64, what string) {
		t.Helper()
		ns, name, _ := strings.Cut(pod, "/")
		ep, _, err := st.Allocate(store.Endpoint{Handle: "net." + name, HostVeth: "reef" + name, PodNamespace: ns, PodName: name, State: store.EndpointReady}, testPool)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Cover(ep); err != nil {
			t.Fatal(err)
		}
		if n := p.compiles.Load(); n != compiles {
			t.Errorf("ADD of %s %s: %d full compiles in all, want %d", pod, what, n, compiles)
		}
		checkFullTable(t, k, api, st, fams, "ADD of "+pod)
	}
	add("a/db-0", 1, "first")
	relisted := api.in.Policies[0].DeepCopy()
	api.in.Policies = []*networkingv1.NetworkPolicy{relisted}
	add("a/web-0", 1, "after a relist (a new object, the same resourceVersion)")
	changed := relisted.DeepCopy()
	changed.ResourceVersion = "8"
	api.in.Policies = []*networkingv1.NetworkPolicy{changed}
	add("b/web-1", 2, "after the policy changed")
	add("b/db-1", 2, "with the policies of the last compile")
}

// storeWithBlock is a store of node n1 with one confirmed block,
// 10.244.0.0/26 of pool 10.244.0.0/24, closed when t ends.
func storeWithBlock(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: netip.MustParseAddr("192.168.10.20")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	block := netip.MustParsePrefix("10.244.0.0/26")
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: block, Pool: testPool.CIDR}}, Confirm: []netip.Prefix{block}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// testPool is storeWithBlock's pool.
var testPool = store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}

// TestPolicyCoverBeforeCommit: an ADD covers its pod while the store
// syncs the pod's record (store.AllocateThen): until the ADD settles, the
// loop's full syncs keep the pod in its sets though the store does not
// have it; once settled, the store's record keeps it there; a cover whose
// commit failed is undone (Uncover) with nothing left. Each fails if a
// full sync reads only the store.
func TestPolicyCoverBeforeCommit(t *testing.T) {
	st := storeWithBlock(t)
	k := newFakeKernel()
	api := &fakePolicyAPI{in: incrementalAPI()}
	p := &policyDataplane{watch: api, kernel: fakeNAT{k}, store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		trigger: func() {}, skipped: map[string]string{}, notEnforced: map[string]bool{}}
	// The records as the store gives them before their commit: written
	// into a second store, not into this one.
	other := storeWithBlock(t)
	record := func(name string) store.Endpoint {
		t.Helper()
		ep, _, err := other.Allocate(store.Endpoint{Handle: "net." + name, HostVeth: "reef" + name, PodNamespace: "a", PodName: name, State: store.EndpointPending}, testPool)
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	covered := func(ep store.Endpoint, what string) {
		t.Helper()
		if sets := setsHolding(k, ep.Addrs()[0]); len(sets) == 0 {
			t.Errorf("%s: %s is in no set", what, ep.Addrs()[0])
		}
	}
	db := record("db-0")
	if err := p.Cover(db); err != nil {
		t.Fatal(err)
	}
	covered(db, "covered, record not committed")
	if err := p.sync(false); err != nil {
		t.Fatal(err)
	}
	covered(db, "a full sync before the record's commit")
	if _, _, err := st.Allocate(db, testPool); err != nil { // the commit
		t.Fatal(err)
	}
	p.Settle(db)
	if err := p.sync(false); err != nil {
		t.Fatal(err)
	}
	covered(db, "a full sync once settled")
	checkFullTable(t, k, api, st, 0, "settled")

	lost := record("web-0") // its commit fails: never in st
	if err := p.Cover(lost); err != nil {
		t.Fatal(err)
	}
	covered(lost, "covered, record not committed")
	p.Uncover(lost)
	if sets := setsHolding(k, lost.Addrs()[0]); len(sets) > 0 {
		t.Errorf("a cover whose commit failed, undone: %s still in %v", lost.Addrs()[0], sets)
	}
	if err := p.sync(false); err != nil {
		t.Fatal(err)
	}
	if sets := setsHolding(k, lost.Addrs()[0]); len(sets) > 0 {
		t.Errorf("a full sync after the undone cover: %s in %v", lost.Addrs()[0], sets)
	}
	if len(p.pending) != 0 {
		t.Errorf("pending left: %v", p.pending)
	}
	checkFullTable(t, k, api, st, 0, "undone")
}

// TestWithPending: a pending endpoint is one of the node's with the
// store's, in place of a record of its handle; one whose address a
// record of another handle holds (its commit failed, and another ADD took
// the address) is not.
func TestWithPending(t *testing.T) {
	rec := func(h, ip string) store.Endpoint {
		return store.Endpoint{Handle: h, PodNamespace: "a", PodName: h, IP: netip.MustParseAddr(ip)}
	}
	stored := []store.Endpoint{rec("x", "10.0.0.1"), rec("y", "10.0.0.2")}
	got := withPending(stored, map[string]store.Endpoint{"y": rec("y", "10.0.0.2"), "z": rec("z", "10.0.0.3"), "lost": rec("lost", "10.0.0.1")})
	var names []string
	for _, ep := range got {
		names = append(names, ep.Handle+"="+ep.IP.String())
	}
	slices.Sort(names)
	if want := []string{"x=10.0.0.1", "y=10.0.0.2", "z=10.0.0.3"}; !slices.Equal(names, want) {
		t.Errorf("withPending = %v, want %v", names, want)
	}
	if len(stored) != 2 || stored[1].Handle != "y" {
		t.Errorf("withPending changed the store's list: %v", stored)
	}
}
