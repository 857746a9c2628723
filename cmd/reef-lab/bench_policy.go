package main

// bench-policy: NetworkPolicy's cost (BENCHMARKS.md, "## NetworkPolicy"),
// each figure next to its reference in the same run:
//
//   - a policy created -> enforced on every node (its chain in both nodes'
//     table inet reef, seen through netlink), with the background the issue
//     names (1,000 pods and 100 policies in the API);
//   - a pod's CNI ADD through libcni on a node with policy on and 100
//     policies in place, alternating with ADDs on a node with policy off;
//   - the daemon's memory with 5,000 pods, 500 namespaces and 500 policies in
//     the API, next to the same daemon idle and a daemon with policy off;
//   - pod-to-pod TCP throughput (iperf3) across nodes with both pods
//     isolated by policies that allow the flow, alternating with the same
//     pods selected by none;
//   - with 1,000 pods, 500 policies and 50 ClusterNetworkPolicies, a
//     NetworkPolicy and a ClusterNetworkPolicy change enforced as a probe
//     sees it, the ADD, and the memory (bench_policy_cluster.go).
//
// The API's pods beyond the nodes' own are objects only, scheduled to
// nodes the lab does not run (nodeName elsewhere-N) with an address in
// status: what a node sees of the rest of a cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/policy"
)

type policyBench struct {
	ctx    context.Context
	l      *lab.Lab
	api    *lab.KubeAPI
	c      *kubernetes.Clientset
	on     []*lab.Node // node1, node2: policy on, meshed
	off    *lab.Node   // node3: policy off, alone
	seq    int
	remote int // pods made by background, for their addresses
	// policies and bgNamespaces are background's so far.
	policies     int
	bgNamespaces []string
	report       policyReport
}

type policyReport struct {
	command, loadStart, loadEnd string
	began                       time.Time
	took                        time.Duration
	enforce                     []time.Duration // policy created -> chain on both nodes
	enforceBG                   string          // the background when measured
	addOn0, addOn, addOff       []time.Duration
	idleOn, idleOff, loadedOn   lab.Memory
	loadedWhat                  string
	tputOn, tputOff             []float64 // Gbit/s
	tputErr                     string
	memSeries                   []string // node1's memory while it settles after the scale step

	// The ClusterNetworkPolicy step (bench_policy_cluster.go).
	crd, clusterWhat      string
	clusters              int
	addFullOn, addFullOff []time.Duration
	npChange, cnpChange   []time.Duration // API write -> first probe decided the new way
	npFlaps, cnpFlaps     int
	npProbes, cnpProbes   string
	clusterMem            lab.Memory
	clusterMemSeries      []string
}

func benchPolicy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-policy", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## NetworkPolicy" section`)
	adds := fs.Int("adds", 40, "ADDs per mode")
	creates := fs.Int("creates", 20, "policies created one by one for the enforcement figure")
	changes := fs.Int("changes", 30, "changes of each kind (NetworkPolicy, ClusterNetworkPolicy) for the probe-timed figures")
	clusters := fs.Int("cluster-policies", 50, "ClusterNetworkPolicies in the ClusterNetworkPolicy step")
	only := fs.String("only", "", `run only this step after the background ("cluster": the ClusterNetworkPolicy step), to iterate; not with --out`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" && *only != "cluster" {
		return fmt.Errorf("bench-policy: --only %q: the only step is cluster", *only)
	}
	if *only != "" && *out != "" {
		return errors.New("bench-policy: --only leaves figures out of the section: not with --out")
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return errors.New("bench-policy: iperf3 not found (apt-get install iperf3, or make bench)")
	}
	b := &policyBench{ctx: ctx}
	b.report.clusters = *clusters
	b.report.began, b.report.loadStart, b.report.command = time.Now(), tputLoad(), benchCommand("reef-lab bench-policy", args)
	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer l.Close()
	b.l = l
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-policy: "+format+"\n", a...) }
	progress("starting the API and two nodes with policy on, one with policy off")
	quiet := lab.NodeOptions{ReconcileInterval: 30 * time.Second}
	if b.api, b.on, err = l.StartPolicyMesh(2, quiet); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	if err := lab.WaitConverged(b.on, 30*time.Second); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	if b.off, err = l.AddNode("node3", quiet); err != nil {
		return err
	}
	if err := b.off.Start(); err != nil {
		return err
	}
	cfg := b.api.AdminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	if b.c, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	// Idle: both policy-on nodes have listed the API (their informers
	// synced), the state the idle figure is of.
	if err := poll.Until(30*time.Second, func() error {
		for _, n := range b.on {
			st, err := n.Status()
			if err != nil {
				return err
			}
			if !st.GetPolicy().GetSynced() {
				return fmt.Errorf("%s has not listed the API yet: %s", n.Name, st.GetPolicy().GetApiError())
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	// A second of idle after that, as bench's idle figure: the
	// measurement, not a wait.
	time.Sleep(time.Second)
	if b.report.idleOn, err = b.on[0].Memory(); err != nil {
		return err
	}
	if b.report.idleOff, err = b.off.Memory(); err != nil {
		return err
	}

	progress("%d ADDs per mode with no policy", *adds)
	if err := b.namespace("bench", nil); err != nil {
		return err
	}
	if b.report.addOn0, _, err = b.adds(*adds, false); err != nil {
		return err
	}
	progress("background: 1,000 pods in 50 namespaces and 100 policies")
	if err := b.background(1000, 50, 100); err != nil {
		return err
	}
	if *only == "" {
		progress("%d ADDs per mode with 100 policies", *adds)
		if b.report.addOn, b.report.addOff, err = b.adds(*adds, true); err != nil {
			return err
		}
		progress("%d policies created one by one", *creates)
		b.report.enforceBG = "1,000 pods and 100 policies in the API"
		if b.report.enforce, err = b.enforcement(*creates); err != nil {
			return err
		}
		progress("throughput, isolated and allowed vs not isolated")
		b.throughput()
	}
	if err := b.clusterStep(500, *clusters, *changes, *adds); err != nil {
		return fmt.Errorf("bench-policy: ClusterNetworkPolicy step: %w", err)
	}
	if *only == "" {
		progress("scale: 5,000 pods, 500 namespaces, 500 policies")
		if err := b.background(4000, 450, 400); err != nil {
			return err
		}
		if b.report.loadedOn, err = b.settledMemory(500, 0, &b.report.memSeries); err != nil {
			return err
		}
		b.report.loadedWhat = "5,000 pods, 500 namespaces and 500 policies in the API"
	}
	b.report.took, b.report.loadEnd = time.Since(b.report.began), tputLoad()
	md := b.report.markdown()
	fmt.Print(md)
	if *out != "" {
		return lab.WriteSection(*out, md)
	}
	return nil
}

func (b *policyBench) namespace(name string, labels map[string]string) error {
	_, err := b.c.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	return err
}

// parallel runs f(0..n-1) on 16 workers and returns the first error.
func parallel(n int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// background adds pods (objects with an address, on nodes the lab does
// not run) in new namespaces, and policies selecting them by label.
func (b *policyBench) background(pods, namespaces, policies int) error {
	base := b.seq
	b.seq += namespaces
	if err := parallel(namespaces, func(i int) error {
		return b.namespace(fmt.Sprintf("bg-%d", base+i), map[string]string{"team": fmt.Sprintf("t%d", (base+i)%10)})
	}); err != nil {
		return err
	}
	for i := range namespaces {
		b.bgNamespaces = append(b.bgNamespaces, fmt.Sprintf("bg-%d", base+i))
	}
	b.policies += policies
	start := b.remote
	if err := parallel(pods, func(i int) error {
		n := start + i
		ns := fmt.Sprintf("bg-%d", base+i%namespaces)
		ip := netip.AddrFrom4([4]byte{10, 250, byte(n >> 8), byte(n)})
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", n),
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", n%100), "tier": []string{"web", "db", "cache"}[n%3]}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("elsewhere-%d", n%50), Containers: []corev1.Container{{Name: "c", Image: "x",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
		p, err := b.c.CoreV1().Pods(ns).Create(b.ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ip.String()}}
		_, err = b.c.CoreV1().Pods(ns).UpdateStatus(b.ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	b.remote += pods
	return parallel(policies, func(i int) error {
		ns := fmt.Sprintf("bg-%d", base+i%namespaces)
		pol := benchNetpol(ns, fmt.Sprintf("pol-%d", i), map[string]string{"app": fmt.Sprintf("app-%d", i%100)}, i)
		_, err := b.c.NetworkingV1().NetworkPolicies(ns).Create(b.ctx, pol, metav1.CreateOptions{})
		return err
	})
}

// benchNetpol is a policy of the usual shape: ingress from a tier of the
// team's namespaces on a port and a named port, egress to an ipBlock.
func benchNetpol(ns, name string, sel map[string]string, i int) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port, named := intstr.FromInt32(int32(8000+i%100)), intstr.FromString("http")
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", i%10)}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}, {Protocol: &tcp, Port: &named}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.250.0.0/16", Except: []string{fmt.Sprintf("10.250.%d.0/24", i%200)}}}},
			}},
		}}
}

// adds times ADDs through libcni on node1 (policy on) and, if withOff,
// on node3 (policy off), alternating; every pod's object is created
// before the timed ADD, as kubelet's is long before its sandbox.
func (b *policyBench) adds(n int, withOff bool) (on, off []time.Duration, err error) {
	var pods []*lab.Pod
	defer func() {
		for _, p := range pods {
			p.Del()
			p.Remove()
		}
	}()
	var objs []string
	for i := range n {
		name := fmt.Sprintf("add-%d-%d", b.seq, i)
		objs = append(objs, name)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%100)}},
			Spec: corev1.PodSpec{NodeName: b.on[0].Name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if _, err := b.c.CoreV1().Pods("bench").Create(b.ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	b.seq++
	// The objects a second before their sandboxes, as kubelet's are long
	// before: the scenario, not a wait. reef shows no count of the pods its
	// informer holds to wait for; an ADD whose pod it has not seen yet
	// waits for it (podWait), and the figure would show that.
	time.Sleep(time.Second)
	for i := range n {
		p, err := b.on[0].NewPodNetns("bench", objs[i])
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, p)
		t0 := time.Now()
		if err := p.Add(); err != nil {
			return nil, nil, err
		}
		on = append(on, time.Since(t0))
		if !withOff {
			continue
		}
		q, err := b.off.NewPodNetns("bench", objs[i])
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, q)
		t0 = time.Now()
		if err := q.Add(); err != nil {
			return nil, nil, err
		}
		off = append(off, time.Since(t0))
	}
	return on, off, nil
}

// enforcement creates policies one at a time, each selecting a pod on
// each node, and times Create -> its chain in both nodes' table; each is
// deleted before the next.
func (b *policyBench) enforcement(n int) ([]time.Duration, error) {
	var targets []*lab.KubePod
	for i, node := range b.on {
		p, err := b.api.RunPod(node, "bench", fmt.Sprintf("target-%d", i), map[string]string{"role": "target"}, nil)
		if err != nil {
			return nil, err
		}
		targets = append(targets, p)
	}
	defer func() {
		for _, p := range targets {
			b.api.DeletePod(p)
			p.Remove()
		}
	}()
	conns := make([]*nftables.Conn, len(b.on))
	for i, node := range b.on {
		f, err := os.Open(lab.NetnsPath(node.Netns))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if conns[i], err = nftables.New(nftables.WithNetNSFd(int(f.Fd()))); err != nil {
			return nil, err
		}
	}
	hasChain := func(c *nftables.Conn, name string) bool {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name == policy.TableID.Name && ch.Name == name })
	}
	var out []time.Duration
	for i := range n {
		name := fmt.Sprintf("measured-%d", i)
		chain := "in.bench." + name
		pol := benchNetpol("bench", name, map[string]string{"role": "target"}, i)
		t0 := time.Now()
		if _, err := b.c.NetworkingV1().NetworkPolicies("bench").Create(b.ctx, pol, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var worst time.Duration
		failed := false
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Asked every millisecond: the time to the chain is
				// measured by the call that sees it.
				err := poll.Every(time.Millisecond, 30*time.Second, func() error {
					if !hasChain(c, chain) {
						return errors.New("no chain")
					}
					return nil
				})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = true
					return
				}
				worst = max(worst, time.Since(t0))
			}()
		}
		wg.Wait()
		if failed {
			return nil, fmt.Errorf("policy %s not enforced on every node after 30s", name)
		}
		out = append(out, worst)
		if err := b.c.NetworkingV1().NetworkPolicies("bench").Delete(b.ctx, name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		for _, c := range conns {
			if err := poll.Until(30*time.Second, func() error {
				if hasChain(c, chain) {
					return fmt.Errorf("chain %s still in table inet reef after its policy's deletion", chain)
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// throughput runs iperf3 from a pod on node1 to a pod on node2, in turn
// with no policy selecting them and with an egress policy on the client
// and an ingress policy on the server that allow the flow.
func (b *policyBench) throughput() {
	fail := func(err error) { b.report.tputErr = err.Error() }
	cli, err := b.api.RunPod(b.on[0], "bench", "iperf-client", map[string]string{"role": "iperf-client"}, nil)
	if err != nil {
		fail(err)
		return
	}
	srv, err := b.api.RunPod(b.on[1], "bench", "iperf-server", map[string]string{"role": "iperf-server"}, nil)
	if err != nil {
		fail(err)
		return
	}
	stop, err := b.l.Spawn(srv.Netns, "iperf3-server.log", "iperf3", "-s", "-B", srv.IP.String())
	if err != nil {
		fail(err)
		return
	}
	defer stop()
	if err := poll.Until(5*time.Second, func() error {
		out, _ := b.l.Run(srv.Netns, "ss", "-Htln", "sport", "= :5201")
		if !strings.Contains(out, net.JoinHostPort(srv.IP.String(), "5201")) {
			return fmt.Errorf("iperf3 server on %s not listening", srv.IP)
		}
		return nil
	}); err != nil {
		fail(err)
		return
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(5201)
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "iperf-egress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-server"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
	ingress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "iperf-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
	// isolated is whether the client is isolated for egress on its node
	// and the server for ingress on its own.
	isolated := func() (bool, bool, error) {
		view := func(n *lab.Node, pod string) (policy.PodView, error) {
			var views []policy.PodView
			out, err := n.Reef("policy", "show", pod, "-o", "json")
			if err != nil {
				return policy.PodView{}, err
			}
			if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != 1 {
				return policy.PodView{}, fmt.Errorf("reef policy show %s on %s: %v: %s", pod, n.Name, err, out)
			}
			return views[0], nil
		}
		c, err := view(b.on[0], "bench/iperf-client")
		if err != nil {
			return false, false, err
		}
		s, err := view(b.on[1], "bench/iperf-server")
		return c.IsolatedEgress, s.IsolatedIngress, err
	}
	for round := range 3 {
		for _, on := range []bool{false, true} {
			if on {
				for _, p := range []*networkingv1.NetworkPolicy{egress, ingress} {
					if _, err := b.c.NetworkingV1().NetworkPolicies("bench").Create(b.ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
						fail(err)
						return
					}
				}
			}
			if err := poll.Until(10*time.Second, func() error {
				egress, ingress, err := isolated()
				if err != nil {
					return err
				}
				if egress != on || ingress != on {
					return fmt.Errorf("the client isolated for egress: %t, the server for ingress: %t", egress, ingress)
				}
				return nil
			}); err != nil {
				fail(fmt.Errorf("round %d: isolation never became %t: %w", round, on, err))
				return
			}
			out, err := b.l.Run(cli.Netns, "iperf3", "-c", srv.IP.String(), "-t", "5", "-J")
			if err != nil {
				fail(fmt.Errorf("iperf3: %w", err))
				return
			}
			var res struct {
				End struct {
					SumReceived struct {
						Bps float64 `json:"bits_per_second"`
					} `json:"sum_received"`
				} `json:"end"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.End.SumReceived.Bps == 0 {
				fail(fmt.Errorf("iperf3 output: %v: %s", err, tputFirstLine(out)))
				return
			}
			if on {
				b.report.tputOn = append(b.report.tputOn, res.End.SumReceived.Bps/1e9)
				for _, p := range []*networkingv1.NetworkPolicy{egress, ingress} {
					if err := b.c.NetworkingV1().NetworkPolicies("bench").Delete(b.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
						fail(err)
						return
					}
				}
			} else {
				b.report.tputOff = append(b.report.tputOff, res.End.SumReceived.Bps/1e9)
			}
		}
	}
}

// settledMemory waits until node1 has seen the given number of policies
// and cluster policies, then a minute more, and reads its memory; series
// gets the samples on the way.
func (b *policyBench) settledMemory(policies, clusters int, series *[]string) (lab.Memory, error) {
	if err := b.waitLoaded(policies, clusters); err != nil {
		return lab.Memory{}, err
	}
	// The RSS of a daemon that has just compiled a burst of changes holds
	// freed heap the runtime returns to the kernel over the next minute
	// (its background scavenger); the figure is the settled one, after a
	// minute, with the samples on the way in the report.
	var m lab.Memory
	var waited time.Duration
	for _, at := range []time.Duration{5 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second} {
		time.Sleep(at - waited) // samples at set times: the measurement, not a wait
		waited = at
		var err error
		if m, err = b.on[0].Memory(); err != nil {
			return m, err
		}
		*series = append(*series, fmt.Sprintf("%s (RSS %s) after %s", meshMiB(m.Anon), meshMiB(m.RSS), at))
	}
	return m, nil
}
