package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/policy"
)

// policyLab is a lab with its Kubernetes API, reef's RBAC applied from
// the package's file, a node kubeconfig made by `reef kubeconfig` as
// docs/policy.md says, and n meshed nodes that read the API through it.
type policyLab struct {
	*lab.Lab
	API   *lab.KubeAPI
	Admin *kubernetes.Clientset
	Nodes []*lab.Node
}

func newPolicyLab(t *testing.T, n int) *policyLab {
	t.Helper()
	return newPolicyLabWith(t, n, lab.NodeOptions{}, false)
}

// newPolicyLabWith is newPolicyLab with opts (pools in opts.Extra); with
// ipv6, each node has its IPv6 address on its uplink (addNodeAddrs6)
// before its daemon starts, as an IPv6 pool routed directly needs.
func newPolicyLabWith(t *testing.T, n int, opts lab.NodeOptions, ipv6 bool) *policyLab {
	t.Helper()
	return newPolicyLabAPI(t, n, opts, ipv6, lab.KubeAPIOptions{})
}

// newPolicyLabAPI is newPolicyLabWith with the API's options.
func newPolicyLabAPI(t *testing.T, n int, opts lab.NodeOptions, ipv6 bool, api lab.KubeAPIOptions) *policyLab {
	t.Helper()
	l := newLab(t)
	k, nodes, err := l.AddPolicyMeshWith(n, opts, api)
	if k != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("kube-apiserver log:\n%s", k.LogTail(20))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if ipv6 {
		addNodeAddrs6(t, nodes...)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	// An ADD before a daemon's informers have synced is "try again
	// later" (kubelet retries; the lab's RunPod does not).
	for _, n := range nodes {
		eventually(t, 30*time.Second, func() string {
			st, err := n.Status()
			if err != nil {
				return err.Error()
			}
			if !st.GetPolicy().GetSynced() {
				return n.Name + ": policy informers not synced"
			}
			return ""
		})
	}
	c, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	return &policyLab{Lab: l, API: k, Admin: c, Nodes: nodes}
}

func (pl *policyLab) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (pl *policyLab) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if _, err := pl.Admin.CoreV1().Namespaces().Create(pl.ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// servedPorts are the containerPorts of every test pod: what serve-ports
// listens on, named as in the upstream Netpol suite.
func servedPorts() []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		for _, port := range []int32{80, 81} {
			out = append(out, corev1.ContainerPort{Name: fmt.Sprintf("serve-%d-%s", port, strings.ToLower(string(proto))), ContainerPort: port, Protocol: proto})
		}
	}
	return out
}

// pod runs a pod with serve-ports in it.
func (pl *policyLab) pod(t *testing.T, node *lab.Node, ns, name string, labels map[string]string) *lab.KubePod {
	t.Helper()
	p, err := pl.API.RunPod(node, ns, name, labels, servedPorts())
	if err != nil {
		t.Fatal(err)
	}
	stop, err := pl.ServePorts(p.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return p
}

// podNoStatus is pod without what RunPod does after the ADD (status.podIPs
// written): the API's object, the ADD through libcni, the ports served.
func (pl *policyLab) podNoStatus(t *testing.T, node *lab.Node, ns, name string, labels map[string]string) *lab.KubePod {
	t.Helper()
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "server", Image: "reef-lab/serve-ports", Ports: servedPorts()}}}}
	obj, err := pl.Admin.CoreV1().Pods(ns).Create(pl.ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := node.NewPodNetns(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Add(); err != nil {
		t.Fatal(err)
	}
	stop, err := pl.ServePorts(p.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &lab.KubePod{Pod: p, Object: obj}
}

// reach probes from one pod to another on proto:port and reports whether
// it answered.
func (pl *policyLab) reach(t *testing.T, from, to *lab.KubePod, proto string, port int) bool {
	t.Helper()
	res, err := pl.Probe(from.Netns, time.Second, []string{fmt.Sprintf("%s:%s:%d", proto, to.IP, port)})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].OK
}

type probeWant struct {
	from, to *lab.KubePod
	proto    string
	port     int
	ok       bool
}

// expect probes every case and describes those that differ ("" when none).
func (pl *policyLab) expect(t *testing.T, wants ...probeWant) string {
	t.Helper()
	var bad []string
	for _, w := range wants {
		if got := pl.reach(t, w.from, w.to, w.proto, w.port); got != w.ok {
			bad = append(bad, fmt.Sprintf("%s/%s -> %s/%s %s/%d: reached %t, want %t", w.from.Namespace, w.from.Name, w.to.Namespace, w.to.Name, w.proto, w.port, got, w.ok))
		}
	}
	return strings.Join(bad, "; ")
}

func ingressFromNamespace(ns, name string, podLabels, nsLabels map[string]string, port int32) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt32(port)
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: podLabels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: nsLabels}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
			}},
		}}
}

// updatePolicy replaces a policy with p, as kubectl apply does.
func (pl *policyLab) updatePolicy(t *testing.T, p *networkingv1.NetworkPolicy) {
	t.Helper()
	cur, err := pl.Admin.NetworkingV1().NetworkPolicies(p.Namespace).Get(pl.ctx(t), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p = p.DeepCopy()
	p.ResourceVersion = cur.ResourceVersion
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies(p.Namespace).Update(pl.ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyLifecycle: the example (ingress to app a of x only from
// namespace y, TCP 80) through the real API and two nodes; a pod created
// after the policy is covered from its first packet; drift is repaired;
// with the API stopped the rules stay, also across a daemon restart, and
// ADD says "try again later" (and /readyz 503) until the caches sync;
// deleting the policy opens everything again.
func TestPolicyLifecycle(t *testing.T) {
	pl := newPolicyLab(t, 2)
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	pl.namespace(t, "x", map[string]string{"ns": "x"})
	pl.namespace(t, "y", map[string]string{"ns": "y"})
	xa := pl.pod(t, n1, "x", "a", map[string]string{"app": "a"})
	xb := pl.pod(t, n2, "x", "b", map[string]string{"app": "b"})
	ya := pl.pod(t, n2, "y", "a", map[string]string{"app": "a"})

	st, err := n1.Status()
	if err != nil {
		t.Fatal(err)
	}
	if p := st.GetPolicy(); p == nil || !p.GetSynced() || !p.GetApiReachable() {
		t.Fatalf("status policy: %+v, want on, synced, reachable", p)
	}
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "policy:     on, 0 NetworkPolicies") || !strings.Contains(out, "reachable") {
		t.Fatalf("reef status: %v\n%s", err, out)
	}
	if msg := pl.expect(t, probeWant{xb, xa, "tcp", 80, true}, probeWant{ya, xa, "tcp", 80, true}, probeWant{ya, xa, "udp", 81, true}); msg != "" {
		t.Fatalf("without policy: %s", msg)
	}

	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t),
		ingressFromNamespace("x", "allow-from-y", map[string]string{"app": "a"}, map[string]string{"ns": "y"}, 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	enforced := []probeWant{
		{ya, xa, "tcp", 80, true}, {xb, xa, "tcp", 80, false}, {ya, xa, "tcp", 81, false}, {ya, xa, "udp", 80, false},
		{xa, xb, "tcp", 80, true}, // x/a is isolated for ingress only
	}
	eventually(t, 10*time.Second, func() string { return pl.expect(t, enforced...) })
	// Its own node reaches the isolated pod on any port (kubelet's
	// probes), and the pod its node.
	for _, target := range []string{fmt.Sprintf("tcp:%s:81", xa.IP), fmt.Sprintf("udp:%s:80", xa.IP)} {
		res, err := pl.Probe(n1.Netns, time.Second, []string{target})
		if err != nil || !res[0].OK {
			t.Fatalf("node1 -> x/a %s under the policy: %v %+v, want reached", target, err, res)
		}
	}
	if _, err := xa.Ping(n1.Address); err != nil {
		t.Fatalf("x/a -> its node under the policy: %v", err)
	}
	// Isolated for egress too (no egress rule: every destination denied),
	// x/a still reaches its node and its node it: that traffic never
	// crosses the forward hook (docs/policy.md).
	denyEgress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-egress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), denyEgress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{xa, xb, "tcp", 80, false}, probeWant{xa, ya, "udp", 81, false})
	})
	if _, err := xa.Ping(n1.Address); err != nil {
		t.Errorf("x/a -> its node, isolated for egress: %v", err)
	}
	if res, err := pl.Probe(n1.Netns, time.Second, []string{fmt.Sprintf("tcp:%s:81", xa.IP)}); err != nil || !res[0].OK {
		t.Errorf("node1 -> x/a tcp 81, x/a isolated for both directions: %v %+v, want reached", err, res)
	}
	if err := pl.Admin.NetworkingV1().NetworkPolicies("x").Delete(pl.ctx(t), "deny-egress", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string { return pl.expect(t, probeWant{xa, xb, "tcp", 80, true}) })

	out := run(t, pl.Lab, n1.Netns, filepath.Join(binDir, "reef"), "policy", "show", "x/a", "--socket", n1.Socket, "-o", "json")
	var views []policy.PodView
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		t.Fatalf("reef policy show -o json: %v: %s", err, out)
	}
	if len(views) != 1 || !views[0].IsolatedIngress || views[0].IsolatedEgress || len(views[0].Policies) != 1 ||
		views[0].Policies[0].Name != "x/allow-from-y" || strings.Join(views[0].Policies[0].Ingress[0].Ports, ",") != "TCP/80" ||
		strings.Join(views[0].Policies[0].Ingress[0].Addresses, ",") != ya.IP.String() {
		t.Fatalf("reef policy show x/a: %s", out)
	}

	// A pod the policy selects, created now: denied from its first packet,
	// probed the moment its ADD returned (kubelet has not written its
	// status; the ADD read the informer's pod).
	p, err := pl.API.RunPod(n1, "x", "a2", map[string]string{"app": "a"}, servedPorts())
	if err != nil {
		t.Fatal(err)
	}
	stop, err := pl.ServePorts(p.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if msg := pl.expect(t, probeWant{xb, p, "tcp", 80, false}, probeWant{ya, p, "tcp", 80, true}); msg != "" {
		t.Fatalf("new pod x/a2 right after its ADD: %s", msg)
	}
	// The same with no status written after the ADD: RunPod writes it at
	// once, and the loop's sync on that event covers the pod too. Here
	// nothing but the ADD's own cover can deny the first packet
	// (docs/policy.md, "No start window").
	a3 := pl.podNoStatus(t, n1, "x", "a3", map[string]string{"app": "a"})
	if msg := pl.expect(t, probeWant{xb, a3, "tcp", 80, false}, probeWant{ya, a3, "tcp", 80, true}); msg != "" {
		t.Fatalf("new pod x/a3 right after its ADD, no status written: %s", msg)
	}

	// Drift: the table deleted by hand is back within an interval.
	run(t, pl.Lab, n1.Netns, "nft", "delete", "table", "inet", "reef")
	eventually(t, 10*time.Second, func() string {
		if _, err := pl.Run(n1.Netns, "nft", "list", "table", "inet", "reef"); err != nil {
			return "table inet reef not recreated"
		}
		return pl.expect(t, probeWant{xb, xa, "tcp", 80, false})
	})

	// The API stops: rules stay, status says since when.
	if err := pl.API.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		st, err := n1.Status()
		if err != nil {
			return err.Error()
		}
		if st.GetPolicy().GetApiReachable() {
			return "status still says the API is reachable"
		}
		return ""
	})
	if msg := pl.expect(t, enforced...); msg != "" {
		t.Fatalf("API down: %s", msg)
	}
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "UNREACHABLE since") || !strings.Contains(out, "enforcing the policies last known") {
		t.Fatalf("reef status with the API down: %v\n%s", err, out)
	}
	// A restart without the API keeps the table; ADD waits for the API.
	if err := n1.Restart(); err != nil {
		t.Fatal(err)
	}
	if msg := pl.expect(t, enforced...); msg != "" {
		t.Fatalf("daemon restarted while the API is down: %s", msg)
	}
	if _, err := pl.Run(n1.Netns, "nft", "list", "table", "inet", "reef"); err != nil {
		t.Fatalf("table inet reef gone after a restart without the API: %v", err)
	}
	blocked, err := n1.NewPod("x", "late")
	if err == nil || !strings.Contains(err.Error(), "try again later") {
		t.Fatalf("ADD while the API is down and the caches never synced: %v, want try again later", err)
	}
	blocked.Remove()
	if code, body := readyz(t, n1); code != 503 || !strings.Contains(body, "not read NetworkPolicy") {
		t.Errorf("/readyz while every ADD answers try again later: %d %q, want 503 saying why", code, body)
	}

	if err := pl.API.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		st, err := n1.Status()
		if err != nil {
			return err.Error()
		}
		if p := st.GetPolicy(); !p.GetSynced() || !p.GetApiReachable() {
			return fmt.Sprintf("policy status after the API came back: %+v", p)
		}
		return ""
	})
	if code, body := readyz(t, n1); code != 200 {
		t.Errorf("/readyz once the caches synced: %d %q", code, body)
	}
	if msg := pl.expect(t, enforced...); msg != "" {
		t.Fatalf("API back: %s", msg)
	}

	// An update that keeps a connection allowed keeps it: iperf3 from y/a
	// to x/a on 5201 runs across a change of the table's shape (a port
	// more, a port less, a rule more), every second of it moving data;
	// the port the update took away is closed after it.
	pol := ingressFromNamespace("x", "allow-from-y", map[string]string{"app": "a"}, map[string]string{"ns": "y"}, 80)
	iperf := intstr.FromInt32(5201)
	tcp := corev1.ProtocolTCP
	pol.Spec.Ingress[0].Ports = append(pol.Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &iperf})
	pl.updatePolicy(t, pol)
	stopSrv, err := pl.Spawn(xa.Netns, "iperf3-xa.log", "iperf3", "-s", "-B", xa.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer stopSrv()
	eventually(t, 10*time.Second, func() string {
		if out, err := pl.Run(ya.Netns, "iperf3", "-c", xa.IP.String(), "-t", "1", "--connect-timeout", "1000"); err != nil {
			return "y/a cannot reach x/a's iperf3 on 5201: " + out
		}
		return ""
	})
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := pl.Run(ya.Netns, "iperf3", "-c", xa.IP.String(), "-t", "6", "-i", "1", "-J", "-b", "200M")
		done <- result{out, err}
	}()
	// The update lands two seconds into the six of the connection: the
	// scenario, not a wait for the daemon.
	time.Sleep(2 * time.Second)
	pol.Spec.Ingress[0].Ports = pol.Spec.Ingress[0].Ports[1:] // TCP 80 goes
	pol.Spec.Ingress = append(pol.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &iperf}}})
	pl.updatePolicy(t, pol)
	res := <-done
	if res.err != nil {
		t.Fatalf("iperf3 across the policy update: %v: %s", res.err, res.out)
	}
	var ip struct {
		Intervals []struct {
			Sum struct {
				Bytes int64 `json:"bytes"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal([]byte(res.out), &ip); err != nil || len(ip.Intervals) < 6 {
		t.Fatalf("iperf3 -J: %v: %s", err, res.out)
	}
	for i, iv := range ip.Intervals {
		if iv.Sum.Bytes == 0 {
			t.Errorf("second %d of the connection moved no data: the update broke an allowed connection", i+1)
		}
	}
	eventually(t, 10*time.Second, func() string { return pl.expect(t, probeWant{ya, xa, "tcp", 80, false}) })

	// Deleting the policy opens everything again.
	if err := pl.Admin.NetworkingV1().NetworkPolicies("x").Delete(pl.ctx(t), "allow-from-y", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{xb, xa, "tcp", 80, true}, probeWant{ya, xa, "udp", 80, true}, probeWant{xb, p, "tcp", 81, true})
	})
}

// readyz is a node's /readyz answer, on the lab's metrics address.
func readyz(t *testing.T, n *lab.Node) (int, string) {
	t.Helper()
	resp, err := lab.HTTPClientIn(n.Netns).Get("http://127.0.0.1:9099/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
