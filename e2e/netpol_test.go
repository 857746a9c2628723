package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// The driver of the NetworkPolicy truth tables (netpol_cases_test.go holds
// the cases, the model and the contract this follows).

const (
	// npProbeTimeout is each probe's: a denied pair costs it, so a round
	// with any denial lasts about this long. Upstream waits 3 s; pods of a
	// lab answer in well under a millisecond.
	npProbeTimeout = time.Second
	// npPollFor is how long an expectation may take to hold after a step,
	// as upstream polls each probe for 10 s, with some room for a loaded
	// machine. Rounds are paced by poll.Until; a round with a denial
	// already takes npProbeTimeout.
	npPollFor = 15 * time.Second
	// npAppliedWait bounds the wait for the nodes to report a step's
	// policies applied; past it the probes poll anyway.
	npAppliedWait = 10 * time.Second
)

// npStack is what the pods of a truth-table lab have addresses of: the
// families, and the pools (config lines) that give them.
type npStack struct {
	families []npFamily
	pools    string // pools: of config.yaml; empty: the lab's IPv4 pool
}

// npPool6 is the IPv6 pool of the truth tables, routed directly between
// the nodes' IPv6 uplink addresses.
const npPool6 = "  - cidr: fd00:10:248::/56\n    vxlanMode: Never\n"

var (
	npStack4    = npStack{families: []npFamily{npIPv4}}
	npStack6    = npStack{families: []npFamily{npIPv6}, pools: "pools:\n" + npPool6}
	npStackDual = npStack{families: []npFamily{npIPv4, npIPv6}, pools: "pools:\n  - cidr: 10.244.0.0/16\n" + npPool6}
)

// npDualSlice are the cases TestNetpolDualStackSlice runs: an ipBlock with
// an except in each direction (the IPv6 block beside the IPv4 one), a
// podSelector peer, and a named UDP port (the address . port sets).
var npDualSlice = []string{
	npCtx + " should enforce except clause while egress access to server in CIDR block",
	npCtxReef + " should allow ingress from a CIDR block with except",
	npCtx + " should enforce policy to allow traffic from pods within server namespace based on PodSelector",
	npCtxReef + " should allow egress access on one named UDP port",
}

// npSlice are the cases TestNetpolSlice runs: one of each kind of rule the
// compiler has (default deny each way, pod and namespace selectors alone,
// together and either, expressions, ports, named ports of each protocol,
// port ranges, ipBlocks, stacked policies, a protocol the policy does not
// name) and the table's lifecycle (updated, deleted).
var npSlice = []string{
	npCtx + " should support a 'default-deny-all' policy",
	npCtx + " should enforce policy based on PodSelector and NamespaceSelector",
	npCtx + " should enforce policy based on PodSelector or NamespaceSelector",
	npCtx + " should enforce policy based on NamespaceSelector with MatchExpressions",
	npCtx + " should enforce policy based on Ports",
	npCtx + " should enforce multiple, stacked policies with overlapping podSelectors",
	npCtx + " should allow ingress access on one named port",
	npCtx + " should enforce updated policy",
	npCtx + " should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
	npCtx + " should stop enforcing policies after they are deleted",
	npCtx + " should allow egress access to server in CIDR block",
	npCtx + " should not allow access by TCP when a policy specifies only UDP",
	npCtxRange + " should enforce policy to allow ingress traffic using port range",
	npCtxReef + " should not match a named port of another protocol",
}

// npDriver runs the cases on one lab: two nodes, the model's three
// namespaces and nine pods.
type npDriver struct {
	pl     *policyLab
	env    npEnv
	pods   [npN]*lab.KubePod // by npPod.index
	noSCTP bool              // the kernel has no SCTP: SCTP expectations are skipped
	// logTables: after each case, log `nft list table inet reef` of the
	// node of x/a, as the case left it.
	logTables bool

	// policies are the NetworkPolicies the driver made and has not
	// deleted: how many each node should report once a step is applied.
	policies map[string]bool
}

// TestNetpolTruthTables runs every case of npCases against reef, one after
// another on one lab, each case a subtest named by its ID. Before each, the
// three namespaces are cleared of policies and every label is the model's.
func TestNetpolTruthTables(t *testing.T) {
	slowSuite(t)
	runNetpolTables(t, npStack4, nil)
}

// TestNetpolSlice is TestNetpolTruthTables on the cases of npSlice, for
// make test (the whole table is in make test-e2e-slow).
func TestNetpolSlice(t *testing.T) { runNetpolTables(t, npStack4, npSlice) }

// TestNetpolTruthTablesIPv6 is TestNetpolTruthTables with IPv6-only pods
// (issue 29): every probe goes to the pods' IPv6 addresses, every ipBlock
// is the IPv6 counterpart of the IPv4 case's. SCTP cases are skipped:
// reef-lab probe's SCTP is IPv4 only.
func TestNetpolTruthTablesIPv6(t *testing.T) {
	slowSuite(t)
	runNetpolTables(t, npStack6, nil)
}

// TestNetpolTruthTablesDualStack is TestNetpolTruthTables with dual-stack
// pods (issue 29): each pod's Pod object has both addresses in
// status.podIPs; every TCP and UDP expectation is probed to both addresses
// of every pod and must hold in each family; an ipBlock case has a block
// per family.
func TestNetpolTruthTablesDualStack(t *testing.T) {
	slowSuite(t)
	runNetpolTables(t, npStackDual, nil)
}

// TestNetpolDualStackSlice is TestNetpolTruthTablesDualStack on a few
// cases (npDualSlice) for make test. It logs the table each case leaves
// on x/a's node (with -v).
func TestNetpolDualStackSlice(t *testing.T) { runNetpolTables(t, npStackDual, npDualSlice) }

// runNetpolTables runs the cases whose IDs are in only (nil: every case)
// on a lab whose pods have the families of st.
func runNetpolTables(t *testing.T, st npStack, only []string) {
	cases := npCases()
	if only != nil {
		cases = slices.DeleteFunc(cases, func(c npCase) bool { return !slices.Contains(only, c.ID()) })
		if len(cases) != len(only) {
			t.Fatalf("%d of the %d cases asked for exist: %q", len(cases), len(only), only)
		}
	}
	start := time.Now()
	d := &npDriver{pl: newPolicyLabWith(t, 2, lab.NodeOptions{Extra: st.pools}, slices.Contains(st.families, npIPv6)), policies: map[string]bool{},
		logTables: only != nil && testing.Verbose()}
	d.env = npEnv{Prefix: "np-", Families: st.families, PodIPs: func(p npPod) []netip.Addr { return d.pods[p.index()].IPs }}
	d.setUp(t)
	t.Logf("lab with %d pods (%v) on %d nodes ready after %s", npN, st.families, len(d.pl.Nodes), time.Since(start).Round(time.Millisecond))

	// As upstream waits for its servers: every port answers with no policy,
	// so that a failure later is a policy's, not the lab's.
	var all []npExpectation
	for _, proto := range npProtocols {
		for _, port := range npPorts {
			all = append(all, npExpectation{npProbe{proto, port}, newReachability(true)})
		}
	}
	if !d.expect(t, "no policy", all) {
		t.Fatal("the model's pods do not all reach each other without a policy")
	}

	type took struct {
		id string
		d  time.Duration
	}
	var times []took
	casesStart := time.Now()
	for _, c := range cases {
		caseStart := time.Now()
		t.Run(c.ID(), func(t *testing.T) { d.run(t, c) })
		times = append(times, took{c.ID(), time.Since(caseStart)})
	}
	slices.SortFunc(times, func(a, b took) int { return int(b.d - a.d) })
	var slowest []string
	for _, x := range times[:min(5, len(times))] {
		slowest = append(slowest, fmt.Sprintf("%s %s", x.d.Round(10*time.Millisecond), x.id))
	}
	t.Logf("%d cases in %s (the lab and the baseline: %s); slowest:\n  %s", len(times),
		time.Since(casesStart).Round(10*time.Millisecond), casesStart.Sub(start).Round(10*time.Millisecond), strings.Join(slowest, "\n  "))
}

// setUp creates the model's namespaces and pods, the pods on both nodes by
// npNodeIndex, concurrently: each is a Pod object, an ADD through libcni,
// status.podIPs, and serve-ports in its netns.
func (d *npDriver) setUp(t *testing.T) {
	t.Helper()
	for _, sym := range npNamespaces {
		ns := d.env.Namespace(sym)
		d.pl.namespace(t, ns.Name, ns.Labels)
	}
	var wg sync.WaitGroup
	errs := make([]error, npN)
	stops := make([]func(), npN)
	for i, p := range npAllPods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := d.env.Pod(p)
			kp, err := d.pl.API.RunPod(d.pl.Nodes[npNodeIndex(p, len(d.pl.Nodes))], obj.Namespace, obj.Name, obj.Labels, obj.Spec.Containers[0].Ports)
			if err != nil {
				errs[i] = fmt.Errorf("pod %s: %w", p, err)
				return
			}
			d.pods[i] = kp
			stops[i], errs[i] = d.pl.ServePorts(kp.Netns)
		}()
	}
	wg.Wait()
	for _, stop := range stops {
		if stop != nil {
			t.Cleanup(stop)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// One address of each family, IPv4 first, and the Pod object says so
	// in status.podIPs: the peers of the other nodes come from there.
	for i, p := range npAllPods {
		kp := d.pods[i]
		var fams []npFamily
		var status []string
		for _, ip := range kp.IPs {
			fams = append(fams, npFamilyOf(ip))
		}
		for _, ip := range kp.Object.Status.PodIPs {
			status = append(status, ip.IP)
		}
		if !slices.Equal(fams, d.env.Families) || strings.Join(status, " ") != npJoin(kp.IPs) {
			t.Fatalf("pod %s got %v, status.podIPs %q; want one address of each of %v", p, kp.IPs, status, d.env.Families)
		}
	}
	t.Logf("pod x/a: %s", npJoin(d.pods[0].IPs))
}

func npJoin(ips []netip.Addr) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, " ")
}

// run runs one case: reset, then each step's actions and probes. A step
// that fails ends the case, as the later steps build on it.
func (d *npDriver) run(t *testing.T, c npCase) {
	if c.Source != "" {
		t.Logf("source: %s", c.Source)
	}
	steps := c.Steps(d.env)
	if !slices.ContainsFunc(steps, func(s npStep) bool { return len(d.matrices(s.Expect)) > 0 }) {
		if d.noSCTP {
			t.Skip("every probe of this case is SCTP, and the kernel has no SCTP")
		}
		t.Skip("every probe of this case is SCTP, and reef-lab probe's SCTP is IPv4 only")
	}
	d.reset(t)
	for i, st := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		policyChanged := false
		for _, a := range st.Do {
			if err := d.apply(ctx, a); err != nil {
				cancel()
				t.Fatalf("step %d: %s: %v", i, a, err)
			}
			policyChanged = policyChanged || a.Kind <= npDeletePolicy
		}
		cancel()
		if policyChanged {
			d.waitApplied(t)
		}
		if !d.expect(t, fmt.Sprintf("step %d (%s)", i, npDescribe(st.Do)), st.Expect) {
			d.explain(t)
			t.FailNow()
		}
	}
	if d.logTables {
		node := d.pl.Nodes[npNodeIndex(npp("x/a"), len(d.pl.Nodes))]
		out, err := d.pl.Run(node.Netns, "nft", "list", "table", "inet", "reef")
		t.Logf("%s: nft list table inet reef (%v):\n%s", node.Name, err, out)
	}
}

// npDescribe lists a step's actions for a failure message.
func npDescribe(do []npAction) string {
	var s []string
	for _, a := range do {
		s = append(s, a.String())
	}
	return strings.Join(s, "; ")
}

// reset brings the API objects back to the model (no policy in the three
// namespaces, the model's labels) and waits until every node has applied
// that: no policy, no pod isolated.
func (d *npDriver) reset(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := d.pl.Admin
	for _, sym := range npNamespaces {
		name := d.env.NS(sym)
		if err := c.NetworkingV1().NetworkPolicies(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatalf("delete the policies of %s: %v", name, err)
		}
		ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := d.env.nsLabels(sym); !maps.Equal(ns.Labels, want) {
			ns.Labels = want
			if _, err := c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restore the labels of namespace %s: %v", name, err)
			}
		}
	}
	for _, p := range npAllPods {
		pod, err := c.CoreV1().Pods(d.env.NS(p.NS)).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := npPodLabels(p); !maps.Equal(pod.Labels, want) {
			pod.Labels = want
			if _, err := c.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restore the labels of pod %s: %v", p, err)
			}
		}
	}
	clear(d.policies)
	if msg := d.waitNodes(npAppliedWait, 0, true); msg != "" {
		t.Fatalf("after deleting every policy: %s", msg)
	}
}

// apply does one action to the API objects.
func (d *npDriver) apply(ctx context.Context, a npAction) error {
	c := d.pl.Admin
	switch a.Kind {
	case npCreatePolicy, npUpdatePolicy, npDeletePolicy:
		nps := c.NetworkingV1().NetworkPolicies(a.Policy.Namespace)
		key := a.Policy.Namespace + "/" + a.Policy.Name
		switch a.Kind {
		case npCreatePolicy:
			if _, err := nps.Create(ctx, a.Policy.DeepCopy(), metav1.CreateOptions{}); err != nil {
				return err
			}
			d.policies[key] = true
		case npUpdatePolicy:
			cur, err := nps.Get(ctx, a.Policy.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p := a.Policy.DeepCopy()
			p.ResourceVersion = cur.ResourceVersion
			if _, err := nps.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err
			}
		case npDeletePolicy:
			if err := nps.Delete(ctx, a.Policy.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			delete(d.policies, key)
		}
	case npLabelNamespace:
		ns, err := c.CoreV1().Namespaces().Get(ctx, d.env.NS(a.NS), metav1.GetOptions{})
		if err != nil {
			return err
		}
		ns.Labels = npMerged(ns.Labels, a)
		_, err = c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		return err
	case npLabelPod:
		pods := c.CoreV1().Pods(d.env.NS(a.Pod.NS))
		pod, err := pods.Get(ctx, a.Pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Labels = npMerged(pod.Labels, a)
		_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
		return err
	default:
		return fmt.Errorf("unknown action %d", a.Kind)
	}
	return nil
}

func npMerged(l map[string]string, a npAction) map[string]string {
	l = maps.Clone(l)
	if l == nil {
		l = map[string]string{}
	}
	npMergeLabels(l, a.SetLabels, a.DelLabels)
	return l
}

// waitApplied waits, briefly, until every node reports as many policies as
// the driver made: compiled and applied. The first probes then rarely race
// the rules (which would cost a round); an update or a label changes no
// count, and the probes' polling covers those.
func (d *npDriver) waitApplied(t *testing.T) {
	t.Helper()
	if msg := d.waitNodes(npAppliedWait, len(d.policies), false); msg != "" {
		t.Logf("probing anyway: %s", msg)
	}
}

// waitNodes polls the nodes' status until each reports n policies (and, if
// unisolated, no pod isolated) and no apply error; it describes what it
// still misses after timeout ("" when none).
func (d *npDriver) waitNodes(timeout time.Duration, n int, unisolated bool) string {
	err := poll.Until(timeout, func() error {
		for _, node := range d.pl.Nodes {
			st, err := node.Status()
			if err != nil {
				return fmt.Errorf("%s: status: %v", node.Name, err)
			}
			p := st.GetPolicy()
			if int(p.GetPolicies()) != n || unisolated && (p.GetIsolatedIngress() != 0 || p.GetIsolatedEgress() != 0) || p.GetLastError() != "" {
				return fmt.Errorf("%s: %d policies (want %d), %d pods isolated for ingress, %d for egress; last error %q",
					node.Name, p.GetPolicies(), n, p.GetIsolatedIngress(), p.GetIsolatedEgress(), p.GetLastError())
			}
		}
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return ""
}

// expect probes the matrices of exps, all in one round, until each is as
// expected or npPollFor passes; then it reports the tables that differ and
// returns false.
func (d *npDriver) expect(t *testing.T, what string, exps []npExpectation) bool {
	t.Helper()
	var ms []npMatrix
	var obs []*npObserved
	var wrong []int
	round := 0
	err := poll.Until(npPollFor, func() error {
		round++
		ms = d.matrices(exps)
		obs, wrong = nil, nil
		if len(ms) == 0 {
			return nil
		}
		var noSCTP bool
		var err error
		if obs, noSCTP, err = d.probeRound(ms); err != nil {
			return poll.Stop(err)
		}
		if noSCTP && !d.noSCTP {
			d.noSCTP = true
			t.Log("SCTP probes skipped: " + lab.ErrNoSCTP.Error())
		}
		for k, m := range ms {
			if d.noSCTP && m.Probe.Protocol == corev1.ProtocolSCTP {
				continue
			}
			if len(m.Reach.Mismatches(obs[k])) > 0 {
				wrong = append(wrong, k)
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%d of %d matrices differ", len(wrong), len(ms))
		}
		return nil
	})
	switch {
	case err == nil:
		if round > 1 {
			t.Logf("%s: as expected after %d rounds", what, round)
		}
		return true
	case len(wrong) == 0: // the probes could not run
		t.Fatalf("%s: %v", what, err)
	}
	for _, k := range wrong {
		t.Errorf("%s: after %s (%d rounds), over %s, %s", what, npPollFor, round, ms[k].Family, ms[k].Reach.Table(ms[k].Probe, obs[k]))
	}
	return false
}

// npMatrix is an expectation probed between the pods' addresses of one
// family.
type npMatrix struct {
	npExpectation
	Family npFamily
}

// matrices are exps, each over every family of the pods, less what is not
// probed: SCTP once the kernel is known to have none, and SCTP over IPv6,
// which reef-lab probe does not speak.
func (d *npDriver) matrices(exps []npExpectation) []npMatrix {
	var ms []npMatrix
	for _, x := range exps {
		for _, f := range d.env.Families {
			if x.Probe.Protocol == corev1.ProtocolSCTP && (d.noSCTP || f != npIPv4) {
				continue
			}
			ms = append(ms, npMatrix{x, f})
		}
	}
	return ms
}

// probeRound probes every matrix once: one `reef-lab probe` per source
// pod, the nine concurrently, each with the targets of every matrix (so a
// round costs one probe timeout, not one per matrix). noSCTP: an SCTP
// probe could not run.
func (d *npDriver) probeRound(ms []npMatrix) (obs []*npObserved, noSCTP bool, err error) {
	var targets []string
	for _, m := range ms {
		for _, to := range npAllPods {
			targets = append(targets, m.Probe.Target(d.env.PodIP(to, m.Family)))
		}
	}
	results := make([][]lab.ProbeResult, npN)
	errs := make([]error, npN)
	var wg sync.WaitGroup
	for i := range npAllPods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = d.pl.Probe(d.pods[i].Netns, npProbeTimeout, targets)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	obs = make([]*npObserved, len(ms))
	for k := range obs {
		obs[k] = &npObserved{}
	}
	for i, from := range npAllPods {
		for n, r := range results[i] {
			if r.NoSCTP() {
				noSCTP = true
				continue
			}
			obs[n/npN].Observe(from, npAllPods[n%npN], r.OK)
		}
	}
	return obs, noSCTP, nil
}

// explain logs, for a failed step, what the nodes make of the policies:
// their policy status (skipped policies, the last apply error) and `reef
// policy show` of every pod.
func (d *npDriver) explain(t *testing.T) {
	t.Helper()
	for _, node := range d.pl.Nodes {
		if st, err := node.Status(); err == nil {
			t.Logf("%s: policy status: %v", node.Name, st.GetPolicy())
		}
		out, err := node.Reef("policy", "show")
		if err != nil {
			t.Logf("%s: %v", node.Name, err)
			continue
		}
		t.Logf("%s: reef policy show:\n%s", node.Name, out)
	}
}
