package main

// bench-policy's ClusterNetworkPolicy step (issue 31, "What must be
// shown"): with 1,000 pods, 500 NetworkPolicies and 50
// ClusterNetworkPolicies (Admin and Baseline tiers) in the API,
//
//   - a NetworkPolicy change and a ClusterNetworkPolicy change enforced,
//     timed from the API write to the first probe packet decided the new
//     way (bench_policy_probe.go), half of the changes to deny and half to
//     allow;
//   - a pod's ADD on node1 (policy on, all of it loaded) alternating with
//     ADDs on node3 (policy off);
//   - node1's memory, settled.
//
// The upstream CRD (standard channel) is installed in the lab's API as an
// operator would; the step's extra NetworkPolicies and the cluster
// policies are deleted after it, so the scale step measures what it
// always has.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

var cnpGVR = cnp.SchemeGroupVersion.WithResource("clusternetworkpolicies")

const (
	// probeEvery and probeTimeout are the change figures' probe: its
	// resolution, and how long an unanswered attempt waits to count as
	// denied: less than the kernel's first SYN retransmission (1 s), so
	// that every outcome is the first SYN's. (With a second's, a SYN
	// dropped just before a change to allow had its retransmission let
	// through, and counted as allowed before the change was.)
	probeEvery   = 5 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
	// probeSettle is how long the new outcome must hold, every attempt,
	// before a change counts as enforced.
	probeSettle = 300 * time.Millisecond
	probePort   = 8080
)

// undoStack is cleanups to run in reverse order, as defers would, at the
// end of a step split into functions.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

func (u undoStack) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// clusterStep loads the step's NetworkPolicies (to npTotal, in the
// background's namespaces) and cluster policies, then measures.
func (b *policyBench) clusterStep(npTotal, clusters, changes, adds int) error {
	var undo undoStack
	defer undo.run()
	r := &b.report
	dyn, err := b.loadClusterStep(npTotal, clusters, &undo)
	if err != nil {
		return err
	}
	r.clusterWhat = fmt.Sprintf("1,000 pods, %d NetworkPolicies and %d ClusterNetworkPolicies in the API", npTotal, clusters)

	policyProgress("%d ADDs per mode with all of it loaded", adds)
	if r.addFullOn, r.addFullOff, err = b.adds(adds, true); err != nil {
		return err
	}

	policyProgress("%d NetworkPolicy changes and %d ClusterNetworkPolicy changes, each enforced as a probe sees it", changes, changes)
	prober, err := b.api.RunPod(b.on[0], "bench", "prober", map[string]string{"role": "prober"}, nil)
	if err != nil {
		return err
	}
	undo.push(func() { b.api.DeletePod(prober); prober.Remove() })
	npTarget, err := b.probeTarget("np-target", &undo)
	if err != nil {
		return err
	}
	cnpTarget, err := b.probeTarget("cnp-target", &undo)
	if err != nil {
		return err
	}
	if err := b.npChanges(prober, npTarget, changes, &undo); err != nil {
		return err
	}
	if err := b.cnpChanges(dyn, prober, cnpTarget, changes, &undo); err != nil {
		return err
	}

	policyProgress("memory with all of it loaded")
	r.clusterMem, err = b.settledMemory(npTotal, clusters, &r.clusterMemSeries)
	return err
}

// loadClusterStep installs the upstream CRD, creates NetworkPolicies to
// npTotal and the cluster policies (undo deletes them) and waits until
// node1 has them.
func (b *policyBench) loadClusterStep(npTotal, clusters int, undo *undoStack) (*dynamic.DynamicClient, error) {
	wd, _ := os.Getwd()
	path, crd, err := lab.ClusterPolicyCRD(b.ctx, os.Getenv("GO"), wd, "standard")
	if err != nil {
		return nil, err
	}
	b.report.crd = "the upstream CRD (network-policy-api, standard channel)"
	if err := b.api.ApplyCRDs(path, crd); err != nil {
		return nil, err
	}
	cfg := b.api.AdminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	extra := npTotal - b.policies
	bgNS := b.bgNamespaces
	policyProgress("ClusterNetworkPolicy step: %d more NetworkPolicies (%d in all) and %d ClusterNetworkPolicies", extra, npTotal, clusters)
	if err := parallel(extra, func(i int) error {
		ns := bgNS[i%len(bgNS)]
		_, err := b.c.NetworkingV1().NetworkPolicies(ns).Create(b.ctx, benchNetpol(ns, fmt.Sprintf("more-%d", i), map[string]string{"app": fmt.Sprintf("app-%d", (i*7)%100)}, i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := parallel(clusters, func(i int) error { return createCustom(b.ctx, dyn, benchClusterPolicy(i, clusters)) }); err != nil {
		return nil, err
	}
	undo.push(func() {
		parallel(extra, func(i int) error {
			return b.c.NetworkingV1().NetworkPolicies(bgNS[i%len(bgNS)]).Delete(b.ctx, fmt.Sprintf("more-%d", i), metav1.DeleteOptions{})
		})
		parallel(clusters, func(i int) error {
			return dyn.Resource(cnpGVR).Delete(b.ctx, benchClusterPolicy(i, clusters).Name, metav1.DeleteOptions{})
		})
	})
	return dyn, b.waitLoaded(npTotal, clusters)
}

// probeTarget runs a pod named and labelled role name on node2 that
// listens on probePort; undo removes it.
func (b *policyBench) probeTarget(name string, undo *undoStack) (*lab.KubePod, error) {
	p, err := b.api.RunPod(b.on[1], "bench", name, map[string]string{"role": name}, []corev1.ContainerPort{{Name: "http", ContainerPort: probePort}})
	if err != nil {
		return nil, err
	}
	srv, err := b.l.ListenTCP(p.Netns, netip.AddrPortFrom(p.IP, probePort))
	if err != nil {
		return nil, err
	}
	undo.push(func() { srv.Close(); b.api.DeletePod(p); p.Remove() })
	return p, nil
}

// npChanges measures the NetworkPolicy change: the port of its one
// ingress rule, 8080 (the target's, allowed) or 8081 (denied). undo
// deletes the policy.
func (b *policyBench) npChanges(prober, target *lab.KubePod, changes int, undo *undoStack) error {
	npRule := func(allow bool) []byte {
		port := probePort + 1
		if allow {
			port = probePort
		}
		tcp := corev1.ProtocolTCP
		p := intstr.FromInt32(int32(port))
		data, _ := json.Marshal(map[string]any{"spec": map[string]any{"ingress": []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "prober"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}}}}})
		return data
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "np-measured"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "np-target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := json.Unmarshal(npRule(true), np); err != nil {
		return err
	}
	if _, err := b.c.NetworkingV1().NetworkPolicies("bench").Create(b.ctx, np, metav1.CreateOptions{}); err != nil {
		return err
	}
	undo.push(func() { b.c.NetworkingV1().NetworkPolicies("bench").Delete(b.ctx, np.Name, metav1.DeleteOptions{}) })
	r := &b.report
	var err error
	if r.npChange, r.npFlaps, r.npProbes, err = b.changes(prober, target, changes, func(allow bool) error {
		_, err := b.c.NetworkingV1().NetworkPolicies("bench").Patch(b.ctx, np.Name, types.MergePatchType, npRule(allow), metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("NetworkPolicy changes: %w", err)
	}
	return nil
}

// cnpChanges measures the ClusterNetworkPolicy change: the action of an
// Admin rule on the prober's traffic to the target, Accept or Deny (the
// target has no NetworkPolicy: Accept and no rule decide the same). undo
// deletes the policy.
func (b *policyBench) cnpChanges(dyn *dynamic.DynamicClient, prober, target *lab.KubePod, changes int, undo *undoStack) error {
	benchNS := map[string]string{"kubernetes.io/metadata.name": "bench"}
	cnpRule := func(allow bool) []cnp.ClusterNetworkPolicyIngressRule {
		action := cnp.ClusterNetworkPolicyRuleActionDeny
		if allow {
			action = cnp.ClusterNetworkPolicyRuleActionAccept
		}
		return []cnp.ClusterNetworkPolicyIngressRule{{Name: "prober", Action: action,
			From:      []cnp.ClusterNetworkPolicyIngressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: metav1.LabelSelector{MatchLabels: benchNS}, PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "prober"}}}}},
			Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: probePort}}}}}}
	}
	measured := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: "cnp-measured"},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 40,
			Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: metav1.LabelSelector{MatchLabels: benchNS}, PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "cnp-target"}}}},
			Ingress: cnpRule(true)}}
	if err := createCustom(b.ctx, dyn, measured); err != nil {
		return err
	}
	undo.push(func() { dyn.Resource(cnpGVR).Delete(b.ctx, measured.Name, metav1.DeleteOptions{}) })
	r := &b.report
	var err error
	if r.cnpChange, r.cnpFlaps, r.cnpProbes, err = b.changes(prober, target, changes, func(allow bool) error {
		data, _ := json.Marshal(map[string]any{"spec": map[string]any{"ingress": cnpRule(allow)}})
		_, err := dyn.Resource(cnpGVR).Patch(b.ctx, measured.Name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("ClusterNetworkPolicy changes: %w", err)
	}
	return nil
}

// waitLoaded waits until node1's status counts the policies and cluster
// policies, and its table has been applied since.
func (b *policyBench) waitLoaded(policies, clusters int) error {
	err := poll.Until(3*time.Minute, func() error {
		st, err := b.on[0].Status()
		if err != nil {
			return err
		}
		if p := st.GetPolicy(); p.GetPolicies() < int32(policies) || p.GetClusterPolicyCount() < int32(clusters) {
			return fmt.Errorf("it sees %d and %d", p.GetPolicies(), p.GetClusterPolicyCount())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node1 did not see %d policies and %d cluster policies: %w", policies, clusters, err)
	}
	return nil
}

// changes times n changes of one policy, alternately to deny and to allow
// the prober's attempts at target, each from the API write to the first
// attempt decided the new way (for good). The policy allows to begin with.
func (b *policyBench) changes(client, target *lab.KubePod, n int, change func(allow bool) error) (out []time.Duration, flaps int, probes string, err error) {
	p := startProber(client.Netns, netip.AddrPortFrom(target.IP, probePort), probeEvery, probeTimeout)
	defer func() {
		if serr := p.Stop(); serr != nil && err == nil {
			err = serr
		}
		got, bad, last := p.counts()
		probes = fmt.Sprintf("%d attempts", got)
		if bad > 0 {
			probes += fmt.Sprintf(", %d neither connected nor unanswered (last: %s)", bad, last)
		}
	}()
	// The prober stamps its attempts: how soon it is asked does not
	// change the figure.
	wait := func(t0 time.Time, allow bool) (took time.Duration, flapped bool, err error) {
		err = poll.Until(30*time.Second, func() error {
			at, f, ok := p.decided(t0, allow, probeSettle)
			if !ok {
				return fmt.Errorf("the probe's attempts did not settle on allow=%t", allow)
			}
			took, flapped = at.Sub(t0), f
			return nil
		})
		return took, flapped, err
	}
	if _, _, err := wait(time.Now(), true); err != nil {
		return nil, 0, "", fmt.Errorf("before the first change: %w", err)
	}
	for i := range n {
		allow := i%2 == 1
		t0 := time.Now()
		if err := change(allow); err != nil {
			return nil, 0, "", err
		}
		d, flapped, err := wait(t0, allow)
		if err != nil {
			return nil, 0, "", fmt.Errorf("change %d: %w", i, err)
		}
		if flapped {
			flaps++
			fmt.Fprintf(os.Stderr, "bench-policy: %s change %d (allow=%t) flapped: %s\n", target.Name, i, allow, p.runs(t0, t0.Add(d+probeSettle)))
		}
		out = append(out, d)
	}
	return out, flaps, "", nil
}

func createCustom(ctx context.Context, dyn dynamic.Interface, c *cnp.ClusterNetworkPolicy) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(cnpGVR.GroupVersion().String())
	u.SetKind("ClusterNetworkPolicy")
	_, err = dyn.Resource(cnpGVR).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// benchClusterPolicy is the background's i-th of n cluster policies: the
// first half in the Admin tier, the rest Baseline, of the shapes platform
// teams write. Two select every namespace (kube-dns allowed, the metadata
// address denied: egress the lab's pods never send); the others select
// the background's namespaces by team, so none decides the lab's own
// traffic.
func benchClusterPolicy(i, n int) *cnp.ClusterNetworkPolicy {
	tcp := func(port int32) []cnp.ClusterNetworkPolicyProtocol {
		return []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: port}}}}
	}
	team := func(j int) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", j%10)}}
	}
	c := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}}
	admin := i < n/2
	switch {
	case i == 0:
		c.Name = "allow-kube-dns"
		c.Spec = cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 1,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Name: "dns", Action: cnp.ClusterNetworkPolicyRuleActionAccept,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{
					NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
					PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}}}},
				Protocols: []cnp.ClusterNetworkPolicyProtocol{
					{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Number: 53}}},
					{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: 53}}}}}}}
	case i == 1:
		c.Name = "deny-metadata"
		c.Spec = cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 2,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Name: "metadata", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"169.254.169.254/32"}}}}}}
	case admin:
		// A team's databases: its own app reaches them, its neighbour's
		// namespaces are handed to NetworkPolicy, everyone else is denied
		// their ports; no egress to another team's service network.
		c.Name = fmt.Sprintf("admin-db-%d", i)
		c.Spec = cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: int32(10 + i),
			Subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(i),
				PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}}}}}},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{
				{Name: "own-app", Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: tcp(5432),
					From: []cnp.ClusterNetworkPolicyIngressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(i), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}}}}},
				{Name: "neighbour", Action: cnp.ClusterNetworkPolicyRuleActionPass, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: team(i + 1)}}},
				{Name: "db-ports", Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 5000, End: 6999}}}}}},
			},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Name: "other-services", Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{cnp.CIDR(fmt.Sprintf("10.96.%d.0/24", i)), "192.0.2.0/24"}}}}}}
	default:
		// A team's default: its own namespaces and the monitoring
		// namespace in, nothing else; egress to its caches only.
		j := i - n/2
		c.Name = fmt.Sprintf("baseline-team-%d", j)
		c.Spec = cnp.ClusterNetworkPolicySpec{Tier: cnp.BaselineTier, Priority: int32(j),
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: team(j)},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{
				{Name: "same-team", Action: cnp.ClusterNetworkPolicyRuleActionAccept, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: team(j)}}},
				{Name: "monitoring", Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: tcp(9090),
					From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}},
				{Name: "default-deny", Action: cnp.ClusterNetworkPolicyRuleActionDeny, From: []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
			},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{
				{Name: "caches", Action: cnp.ClusterNetworkPolicyRuleActionAccept, Protocols: tcp(6379),
					To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *team(j), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "cache"}}}}}},
				{Name: "private", Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"10.0.0.0/8", "172.16.0.0/12"}}}},
			}}
	}
	return c
}
