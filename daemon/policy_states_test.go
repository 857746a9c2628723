package daemon

import (
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
)

// The state tests of table inet reef (NetworkPolicy): the walks of
// reconcile_states_test.go with a policy dataplane on a fake API, whose
// policies change from state to state, and the ADDs' Covers and the DELs'
// Uncovers racing the loop's policy-only sync (changed) and the pass's
// policy reconcile. After each step the fake kernel's table must be what
// a fresh full compile of the API's objects and the store's endpoints
// gives, whatever came between a sync's read of the endpoints and its
// apply (policyDataplane.covers).

// policyObjects are the walk's NetworkPolicies and ClusterNetworkPolicies
// by name: the pods of tier back accept from tier front; tier infra sends
// only to tier back and namespace other; an Admin policy denies namespace
// other into default; a Baseline one lets tier front in only from tier
// front.
func policyObjects() (map[string]*networkingv1.NetworkPolicy, map[string]*cnp.ClusterNetworkPolicy) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	np := func(name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"}, Spec: spec}
	}
	nps := map[string]*networkingv1.NetworkPolicy{
		"back-from-front": np("back-from-front", networkingv1.NetworkPolicySpec{PodSelector: *sel("tier", "back"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "front")}}}}}),
		"infra-egress": np("infra-egress", networkingv1.NetworkPolicySpec{PodSelector: *sel("tier", "infra"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{PodSelector: sel("tier", "back")}, {NamespaceSelector: sel("team", "other")}}}}}),
	}
	cnps := map[string]*cnp.ClusterNetworkPolicy{
		"deny-other": {ObjectMeta: metav1.ObjectMeta{Name: "deny-other", UID: types.UID("u1"), Generation: 1},
			Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1,
				Subject: cnp.ClusterNetworkPolicySubject{Namespaces: sel("kubernetes.io/metadata.name", "default")},
				Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
					From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("team", "other")}}}}}},
		"front-from-front": {ObjectMeta: metav1.ObjectMeta{Name: "front-from-front", UID: types.UID("u2"), Generation: 1},
			Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.BaselineTier, Priority: 1,
				Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{PodSelector: *sel("tier", "front")}},
				Ingress: []cnp.ClusterNetworkPolicyIngressRule{
					{Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Pods: &cnp.NamespacedPod{PodSelector: *sel("tier", "front")}}}},
					{Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
				}}},
	}
	return nps, cnps
}

// policySets are the policies each state of a walk has: state i has
// policySets[i%len(policySets)].
var policySets = [][]string{
	{},
	{"back-from-front"},
	{"back-from-front", "infra-egress"},
	{"deny-other"},
	{"back-from-front", "deny-other", "front-from-front"},
	{"infra-egress", "front-from-front"},
}

// podTiers are the labels of the walks' pods (statePods) in the API.
var podTiers = map[string]string{"web": "front", "app": "front", "db": "back", "cache": "back", "mq": "back", "api": "infra", "log": "infra", "dns": "infra"}

// stateAPI is the fake API of the walks: namespaces default and other;
// this node's pods, in default, with no address in the API (reef knows
// them by their endpoints); pods of other nodes of both families and
// tiers in both namespaces; no policy yet (setPolicies).
func stateAPI() *fakePolicyAPI {
	ns := func(name, team string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name, "team": team}}}
	}
	pod := func(namespace, name, tier string, ips ...string) *policy.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"tier": tier}, ResourceVersion: "1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return policy.PodFrom(p)
	}
	in := policy.Input{Namespaces: []*corev1.Namespace{ns("default", "a"), ns("other", "other")}}
	for _, name := range slices.Sorted(maps.Keys(statePods)) {
		in.Pods = append(in.Pods, pod("default", name, podTiers[name]))
	}
	in.Pods = append(in.Pods,
		pod("default", "remote-front", "front", "10.250.1.1", "fd00:250:1::1"),
		pod("default", "remote-back", "back", "10.250.1.2"),
		pod("other", "other-front", "front", "10.250.2.1", "fd00:250:2::1"),
		pod("other", "other-infra", "infra", "fd00:250:2::2"))
	return &fakePolicyAPI{in: in}
}

// setPolicies gives the API the policies names, as the informers would
// after a kubectl apply; a policy's object stays the same while it is
// there.
func (n *node) setPolicies(names []string, nps map[string]*networkingv1.NetworkPolicy, cnps map[string]*cnp.ClusterNetworkPolicy) {
	n.api.in.Policies, n.api.in.ClusterPolicies = nil, nil
	for _, name := range names {
		if p, ok := nps[name]; ok {
			n.api.in.Policies = append(n.api.in.Policies, p)
		} else {
			n.api.in.ClusterPolicies = append(n.api.in.ClusterPolicies, cnps[name])
		}
	}
}

// hookedPolicyKernel is the fake kernel as policyKernel; onRead, if set,
// runs once when table inet reef is next read: a CNI operation between
// the pass's compile and its read of the kernel.
type hookedPolicyKernel struct {
	fakeNAT
	onRead func()
}

func (k *hookedPolicyKernel) Read(ids []nft.TableID) ([]nft.Table, error) {
	if f := k.onRead; f != nil {
		k.onRead = nil
		f()
	}
	return k.fakeNAT.Read(ids)
}

var _ policyKernel = (*hookedPolicyKernel)(nil)

// newPolicyNode is a walk's node with NetworkPolicy on: the pass
// reconciles table inet reef, ADD covers its pod, DEL and the pass's
// releases uncover theirs; a DEL that fails to asks for a sync, which the
// tests count.
func newPolicyNode(t *testing.T, w walk) (*node, *hookedPolicyKernel, *int) {
	n := newWalkNode(t, w)
	n.api = stateAPI()
	pk := &hookedPolicyKernel{fakeNAT: fakeNAT{n.k}}
	triggers := new(int)
	n.pol = &policyDataplane{watch: n.api, kernel: pk, store: n.st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		trigger: func() { *triggers++ }, release: time.NewTimer(time.Hour), skipped: map[string]string{}, notEnforced: map[string]bool{}}
	n.pol.release.Stop()
	n.rec.policy, n.recs.policy = n.pol, n.pol
	return n, pk, triggers
}

// policyText is table inet reef as sorted text: its sets with their
// types and elements, its chains with their hooks, and each chain's rules
// in order, each by its comment and a digest of its expressions as the
// kernel would get them (nft.Rule.WithKey). Set comments are left out, as
// nft.Diff leaves them out.
func policyText(t nft.Table) string {
	var lines []string
	for _, s := range t.Sets {
		lines = append(lines, fmt.Sprintf("set %s %s/%d interval %v concat %v map %s/%d", s.Name, s.KeyType, s.KeyLen, s.Interval, s.Concat, s.DataType, s.DataLen))
		for _, e := range s.Elems {
			lines = append(lines, fmt.Sprintf("elem %s %s", s.Name, e))
		}
	}
	for _, c := range t.Chains {
		lines = append(lines, fmt.Sprintf("chain %s type %s hooked %v hook %v prio %v policy %v", c.Name, c.Type, c.Hooked, c.Hook, c.Priority, c.Policy))
		for i, r := range c.Rules {
			lines = append(lines, fmt.Sprintf("rule %s %03d %x %q", c.Name, i, sha256.Sum256([]byte(r.WithKey(t.ID.Family).Key)), r.Comment))
		}
	}
	return sortedText(strings.Join(lines, "\n"))
}

// policyIs fails the test unless the fake kernel's table inet reef is
// what a full compile of the API's objects and the store's endpoints
// gives at this moment.
func (n *node) policyIs(what string) {
	n.t.Helper()
	eps, err := n.st.Endpoints()
	if err != nil {
		n.t.Fatal(err)
	}
	in := n.api.in // not Input(): no hook
	in.Local = localEndpoints(eps)
	want := policyText(policy.Table(policy.Compile(in)))
	tables, err := fakeNAT{n.k}.Read([]nft.TableID{policy.TableID})
	if err != nil || len(tables) != 1 {
		n.t.Fatalf("%s: table %s: %v %v", what, policy.TableID, tables, err)
	}
	if got := policyText(tables[0]); got != want {
		n.t.Fatalf("%s: table %s differs from a full compile's (-full +kernel):\n%s", what, policy.TableID, textDiff(want, got))
	}
}

// textIn less table inet reef, which policyIs checks.
func (n *node) textLessPolicy(s nodeState) string {
	lines := strings.SplitAfter(n.textIn(s), "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool {
		return l == "table inet reef\n" || strings.HasPrefix(l, "elem inet reef ")
	}), "")
}

// policyRace is when a CNI operation of the policy walk runs: in which
// sync (the loop's policy-only one, or the pass), and at which moment of
// it: before it, after it read the endpoints and before it compiled
// (during its API read), or, in the pass, after it compiled and before it
// read the kernel.
type policyRace struct{ sync, at string }

func (r policyRace) String() string { return r.at + " the " + r.sync }

// randomRace is a random policyRace: the policy-only sync reads no
// kernel.
func randomRace(rng *rand.Rand) policyRace {
	if rng.IntN(2) == 0 {
		return policyRace{"policy-only sync", []string{"before", "compiling"}[rng.IntN(2)]}
	}
	return policyRace{"pass", []string{"before", "compiling", "reading"}[rng.IntN(3)]}
}

// TestPolicyStates walks the states of TestReconcileRacesCNI, of both
// nodes, with NetworkPolicy on and the policies changing from state to
// state (policySets). At each step, one pod's ADD and another's DEL run
// whole, each before, or in the middle of, the policy-only sync that the
// policies' change asks for or the pass that follows it (randomRace).
// After the ADDs and DELs that do not race, after the sync and after the
// pass, table inet reef must be a full compile's, nothing may ask for a
// sync (a failed Uncover does), and the rest of the kernel the state's
// text.
func TestPolicyStates(t *testing.T) {
	nps, cnps := policyObjects()
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) {
			for seed := range uint64(6) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					t.Parallel() // the walks wait on the store's fsyncs, not the CPU
					walkPolicy(t, w, seed, nps, cnps)
				})
			}
		})
	}
}

func walkPolicy(t *testing.T, w walk, seed uint64, nps map[string]*networkingv1.NetworkPolicy, cnps map[string]*cnp.ClusterNetworkPolicy) {
	rng := rand.New(rand.NewPCG(seed, 2830))
	n, pk, triggers := newPolicyNode(t, w)
	n.pass()
	n.policyIs("after the first pass")
	for step, i := range rng.Perm(len(w.states)) {
		s, pols := w.states[i], policySets[i%len(policySets)]
		n.configure(s)
		x, y := n.racers(rng, s.pods) // the racing ADD and DEL
		what := fmt.Sprintf("step %d, state %v, policies %v", step, s, pols)
		n.policyIs(what + ", after the ADDs and DELs that do not race (under the last state's policies)")

		xr, yr := randomRace(rng), randomRace(rng)
		what += fmt.Sprintf(", ADD of %q %v, DEL of %q %v", x, xr, y, yr)
		var ops []raceOp
		if x != "" {
			ops = append(ops, raceOp{xr, func() { n.addFinish(n.addStart(x)) }})
		}
		if y != "" {
			ops = append(ops, raceOp{yr, func() { n.delFinish(n.delStart(y)) }})
		}

		n.setPolicies(pols, nps, cnps)
		n.arm(pk, ops, "policy-only sync")
		n.rec.run(workPolicy) // the informers' trigger
		n.armed(pk, what, "policy-only sync")
		if n.pol.lastErr != nil {
			t.Fatalf("%s: the policy-only sync: %v", what, n.pol.lastErr)
		}
		n.policyIs(what + ", after the policy-only sync")
		n.arm(pk, ops, "pass")
		n.pass()
		n.armed(pk, what, "pass")
		n.policyIs(what + ", after the pass")
		if got, want := n.textLessPolicy(s), wantText(s); got != want {
			t.Fatalf("%s: after the pass, kernel (-want +got):\n%s", what, textDiff(want, got))
		}
		if *triggers != 0 {
			t.Fatalf("%s: %d syncs asked for: an Uncover failed", what, *triggers)
		}
	}
}

// raceOp is a CNI operation of the policy walk and when it runs.
type raceOp struct {
	r  policyRace
	op func()
}

// arm runs the operations of ops that race sync "before" it, and sets
// the hooks that run the others in it.
func (n *node) arm(pk *hookedPolicyKernel, ops []raceOp, sync string) {
	var inInput, inRead []func()
	for _, o := range ops {
		switch {
		case o.r.sync != sync:
		case o.r.at == "before":
			o.op()
		case o.r.at == "compiling":
			inInput = append(inInput, o.op)
		default:
			inRead = append(inRead, o.op)
		}
	}
	if len(inInput) > 0 {
		n.api.onInput = func() { runAll(inInput) }
	}
	if len(inRead) > 0 {
		pk.onRead = func() { runAll(inRead) }
	}
}

// armed fails the test if a hook that arm set did not run in sync.
func (n *node) armed(pk *hookedPolicyKernel, what, sync string) {
	n.t.Helper()
	if n.api.onInput != nil || pk.onRead != nil {
		n.t.Fatalf("%s: the operations meant to race the %s did not run in it", what, sync)
	}
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// TestPolicyCoversGuard: a sync that compiles outside the lock applies
// its compile only if no ADD covered and no DEL uncovered a pod since it
// read the endpoints (policyDataplane.covers); else it compiles again, up
// to outsideTries times, and then under the lock. Here an ADD, a DEL and
// another ADD each come between a sync's read of the endpoints and its
// compile, one on each try, in the policy-only sync and in the pass: the
// sync must compile a fourth time, under the lock (its API read after
// the three tries), and leave the table a full compile's.
func TestPolicyCoversGuard(t *testing.T) {
	nps, cnps := policyObjects()
	for _, sync := range []string{"policy-only sync", "pass"} {
		t.Run(sync, func(t *testing.T) {
			n, _, triggers := newPolicyNode(t, walks[0])
			n.setPolicies(policySets[4], nps, cnps)
			n.pass()
			n.moveTo([]string{"web", "db"})
			n.pass()
			n.policyIs("before")
			ops := []func(){
				func() { n.addFinish(n.addStart("cache")) },
				func() { n.delFinish(n.delStart("db")) },
				func() { n.addFinish(n.addStart("api")) },
			}
			tries, locked := 0, false
			var next func()
			next = func() {
				ops[tries]()
				tries++
				if tries < len(ops) {
					n.api.onInput = next // armed after the op: its own Cover's reads do not count
					return
				}
				n.api.onInput = func() { locked = true }
			}
			n.api.onInput = next
			if sync == "pass" {
				n.pass()
			} else {
				n.rec.run(workPolicy)
			}
			n.policyIs("after the " + sync + " that an ADD, a DEL and an ADD raced, one on each try")
			if tries != len(ops) || !locked {
				t.Fatalf("%s: %d of %d tries met an operation, compiled under the lock after them: %v", sync, tries, len(ops), locked)
			}
			n.pass()
			n.policyIs("after the next pass")
			if got, want := n.textLessPolicy(nodeState{pods: []string{"web", "cache", "api"}}), wantText(nodeState{pods: []string{"web", "cache", "api"}}); got != want {
				t.Fatalf("after the next pass, kernel (-want +got):\n%s", textDiff(want, got))
			}
			if *triggers != 0 {
				t.Fatalf("%d syncs asked for: an Uncover failed", *triggers)
			}
		})
	}
}
