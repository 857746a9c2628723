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

// npDriver runs the cases on one lab: two nodes, the model's three
// namespaces and nine pods.
type npDriver struct {
	pl     *policyLab
	env    npEnv
	pods   [npN]*lab.KubePod // by npPod.index
	noSCTP bool              // the kernel has no SCTP: SCTP expectations are skipped

	// policies are the NetworkPolicies the driver made and has not
	// deleted: how many each node should report once a step is applied.
	policies map[string]bool
}

// TestNetpolTruthTables runs every case of npCases against reef, one after
// another on one lab, each case a subtest named by its ID. Before each, the
// three namespaces are cleared of policies and every label is the model's.
func TestNetpolTruthTables(t *testing.T) {
	start := time.Now()
	d := &npDriver{pl: newPolicyLab(t, 2), policies: map[string]bool{}}
	d.env = npEnv{Prefix: "np-", PodIP: func(p npPod) netip.Addr { return d.pods[p.index()].IP }}
	d.setUp(t)
	t.Logf("lab with %d pods on %d nodes ready after %s", npN, len(d.pl.Nodes), time.Since(start).Round(time.Millisecond))

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
	for _, c := range npCases() {
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
}

// run runs one case: reset, then each step's actions and probes. A step
// that fails ends the case, as the later steps build on it.
func (d *npDriver) run(t *testing.T, c npCase) {
	if c.Source != "" {
		t.Logf("source: %s", c.Source)
	}
	steps := c.Steps(d.env)
	if d.noSCTP && !slices.ContainsFunc(steps, func(s npStep) bool { return len(d.withoutSCTP(s.Expect)) > 0 }) {
		t.Skip("every probe of this case is SCTP, and the kernel has no SCTP")
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
	var obs []*npObserved
	var wrong []int
	round := 0
	err := poll.Until(npPollFor, func() error {
		round++
		exps = d.withoutSCTP(exps)
		obs, wrong = nil, nil
		if len(exps) == 0 {
			return nil
		}
		var noSCTP bool
		var err error
		if obs, noSCTP, err = d.probeRound(exps); err != nil {
			return poll.Stop(err)
		}
		if noSCTP && !d.noSCTP {
			d.noSCTP = true
			t.Log("SCTP probes skipped: " + lab.ErrNoSCTP.Error())
		}
		for k, x := range exps {
			if d.noSCTP && x.Probe.Protocol == corev1.ProtocolSCTP {
				continue
			}
			if len(x.Reach.Mismatches(obs[k])) > 0 {
				wrong = append(wrong, k)
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%d of %d matrices differ", len(wrong), len(exps))
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
		t.Errorf("%s: after %s (%d rounds), %s", what, npPollFor, round, exps[k].Reach.Table(exps[k].Probe, obs[k]))
	}
	return false
}

// withoutSCTP drops the SCTP expectations once the kernel is known to have
// no SCTP.
func (d *npDriver) withoutSCTP(exps []npExpectation) []npExpectation {
	if !d.noSCTP {
		return exps
	}
	return slices.DeleteFunc(slices.Clone(exps), func(x npExpectation) bool { return x.Probe.Protocol == corev1.ProtocolSCTP })
}

// probeRound probes every expectation's matrix once: one `reef-lab probe`
// per source pod, the nine concurrently, each with the targets of every
// expectation (so a round costs one probe timeout, not one per
// expectation). noSCTP: an SCTP probe could not run.
func (d *npDriver) probeRound(exps []npExpectation) (obs []*npObserved, noSCTP bool, err error) {
	var targets []string
	for _, x := range exps {
		for _, to := range npAllPods {
			targets = append(targets, x.Probe.Target(d.env.PodIP(to)))
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
	obs = make([]*npObserved, len(exps))
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
