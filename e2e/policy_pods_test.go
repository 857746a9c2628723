package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/reefcni/reef/internal/lab"
)

// sidecarPod runs a pod whose named port "proxy-http" (TCP 80) is a
// sidecar's, an init container with restartPolicy Always; its container
// names no port. serve-ports answers on 80 and 81 in it, as in every pod.
func (pl *policyLab) sidecarPod(t *testing.T, node *lab.Node, ns, name string, labels map[string]string) *lab.KubePod {
	t.Helper()
	always := corev1.ContainerRestartPolicyAlways
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node.Name, AutomountServiceAccountToken: new(bool),
			InitContainers: []corev1.Container{{Name: "proxy", Image: "reef-lab/serve-ports", RestartPolicy: &always,
				Ports: []corev1.ContainerPort{{Name: "proxy-http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}},
			Containers: []corev1.Container{{Name: "app", Image: "reef-lab/serve-ports"}}}}
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
	obj.Status.Phase = corev1.PodRunning
	obj.Status.PodIP = p.IP.String()
	obj.Status.PodIPs = []corev1.PodIP{{IP: p.IP.String()}}
	if obj, err = pl.Admin.CoreV1().Pods(ns).UpdateStatus(pl.ctx(t), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop, err := pl.ServePorts(p.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &lab.KubePod{Pod: p, Object: obj}
}

// TestPolicyNamedPortOfSidecar: a named port that only a sidecar (an
// init container with restartPolicy Always) defines is the pod's, for
// NetworkPolicy as for a Service's targetPort: an ingress rule on it
// allows the sidecar's port on the selected pod (node2), and an egress
// rule on it allows that port of the peer (node1, the pod remote).
func TestPolicyNamedPortOfSidecar(t *testing.T) {
	pl := newPolicyLab(t, 2)
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	pl.namespace(t, "x", map[string]string{"ns": "x"})
	xa := pl.sidecarPod(t, n2, "x", "a", map[string]string{"app": "a"})
	xb := pl.pod(t, n1, "x", "b", map[string]string{"app": "b"})
	xc := pl.pod(t, n1, "x", "c", map[string]string{"app": "c"})

	tcp := corev1.ProtocolTCP
	port := intstr.FromString("proxy-http")
	ports := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}
	ingress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a-proxy-only"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}}}
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "b-to-proxy-only"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: ports}}}}
	for _, p := range []*networkingv1.NetworkPolicy{ingress, egress} {
		if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// c -> a 81 denied only once the ingress policy is in node2's table,
	// b -> c 80 only once the egress policy is in node1's.
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t,
			probeWant{xc, xa, "tcp", 80, true}, probeWant{xc, xa, "tcp", 81, false},
			probeWant{xb, xa, "tcp", 80, true}, probeWant{xb, xa, "tcp", 81, false},
			probeWant{xb, xc, "tcp", 80, false})
	})
}

// TestPolicyAddressReusedAfterDel: a pod's sandbox is gone (its DEL ran)
// while its Pod object still says Running with its address, as between
// kubelet's StopPodSandbox and its next status write. A new pod of the
// same node given that address (the lowest free) must not inherit the
// old pod's place in the peer sets of that node: x/target (node1) and
// x/target2 (node2) allow TCP 80 from app=trusted only. Other nodes know
// pods by their status: once the old pod's object is being deleted (its
// deletionTimestamp set, as kubelet's DEL comes after it), its address
// is the new pod's on node2 too. And the old pod's UDP flow, established
// in node1's conntrack, is not the new pod's: the DEL deleted its entries.
func TestPolicyAddressReusedAfterDel(t *testing.T) {
	pl := newPolicyLab(t, 2)
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	pl.namespace(t, "x", map[string]string{"ns": "x"})
	target := pl.pod(t, n1, "x", "target", map[string]string{"app": "target"})
	target2 := pl.pod(t, n2, "x", "target2", map[string]string{"app": "target"})
	trusted := pl.pod(t, n1, "x", "trusted", map[string]string{"app": "trusted"})
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port, port81 := intstr.FromInt32(80), intstr.FromInt32(81)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "target-from-trusted"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trusted"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}, {Protocol: &udp, Port: &port81}}}}}}
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{trusted, target, "tcp", 80, true}, probeWant{trusted, target, "tcp", 81, false},
			probeWant{trusted, target2, "tcp", 80, true}, probeWant{trusted, target2, "tcp", 81, false})
	})
	// A UDP flow the rule allows, from a port of x/trusted's: established
	// in node1's conntrack.
	flow := "udp:" + target.IP.String() + ":81"
	const sport = 40081
	if r, err := pl.ProbeUDPFrom(trusted.Netns, time.Second, sport, flow); err != nil || !r.OK {
		t.Fatalf("x/trusted -> %s from port %d: %v %+v, want answered", flow, sport, err, r)
	}

	// The sandbox goes; the object stays, Running, with its address.
	if err := trusted.Del(); err != nil {
		t.Fatal(err)
	}
	intruder := pl.pod(t, n1, "x", "intruder", map[string]string{"app": "intruder"})
	if intruder.IP != trusted.IP {
		t.Fatalf("x/intruder got %s, not x/trusted's %s: the lab no longer reuses the lowest free address", intruder.IP, trusted.IP)
	}
	// The ADD's own cover has compiled x/intruder in: probe at once.
	if msg := pl.expect(t, probeWant{intruder, target, "tcp", 80, false}, probeWant{intruder, target, "udp", 81, false}); msg != "" {
		t.Errorf("right after the ADD: %s", msg)
	}
	// x/trusted's flow, from its port, is not x/intruder's: the DEL
	// deleted x/trusted's conntrack entries.
	if r, err := pl.ProbeUDPFrom(intruder.Netns, time.Second, sport, flow); err != nil || r.OK {
		t.Errorf("x/intruder -> %s from x/trusted's port %d: %v %+v, want denied (x/trusted's conntrack entry let it through)", flow, sport, err, r)
	}
	// x/trusted's object is deleted gracefully: no kubelet confirms it,
	// so it stays, with its deletionTimestamp.
	grace := int64(300)
	if err := pl.Admin.CoreV1().Pods("x").Delete(pl.ctx(t), "trusted", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	// A full compile on both nodes after that: another policy (UDP 81 to
	// app=target from anyone) is in each node's table once x/intruder
	// reaches UDP 81 there.
	open81 := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "target-udp-81"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port81}}}}}}
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), open81, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return pl.expect(t, probeWant{intruder, target, "udp", 81, true}, probeWant{intruder, target2, "udp", 81, true})
	})
	if msg := pl.expect(t, probeWant{intruder, target, "tcp", 80, false}, probeWant{intruder, target2, "tcp", 80, false}); msg != "" {
		t.Errorf("after a full compile: %s", msg)
	}
}

// TestPolicyHostPort: a pod's hostPort meets its NetworkPolicy as its own
// port does. reef's DNAT comes before the forward hook, so the policy sees
// the pod's address and its containerPort (80) and the client's address:
// y/client (node1) reaches x/web at node1's TCP 8080 only while a rule
// allows it on 80 (by the name http) from its namespace, and a rule on
// the hostPort's number (8080) allows nothing. A pod of another node
// reaches node1's address masqueraded to its own node's (natOutgoing: the
// node is outside the pools), which a namespace peer does not name.
// node1 itself always reaches it (its traffic takes the output hook, as
// kubelet's).
func TestPolicyHostPort(t *testing.T) {
	slowSuite(t)
	pl := newPolicyLab(t, 2)
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	pl.namespace(t, "x", map[string]string{"ns": "x"})
	pl.namespace(t, "y", map[string]string{"ns": "y"})
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: n1.Name, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "server", Image: "reef-lab/serve-ports",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}}}}}
	obj, err := pl.Admin.CoreV1().Pods("x").Create(pl.ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web, err := n1.NewPodNetns("x", "web")
	if err != nil {
		t.Fatal(err)
	}
	web.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}}
	if err := web.Add(); err != nil {
		t.Fatal(err)
	}
	obj.Status.Phase, obj.Status.PodIP, obj.Status.PodIPs = corev1.PodRunning, web.IP.String(), []corev1.PodIP{{IP: web.IP.String()}}
	if _, err := pl.Admin.CoreV1().Pods("x").UpdateStatus(pl.ctx(t), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop, err := pl.ServePorts(web.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	client := pl.pod(t, n1, "y", "client", map[string]string{"app": "client"})
	client2 := pl.pod(t, n2, "y", "client2", map[string]string{"app": "client"})
	hostPort := "tcp:" + n1.Address.String() + ":8080"
	reached := func(netns string) bool {
		t.Helper()
		res, err := pl.Probe(netns, time.Second, []string{hostPort})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].OK
	}
	if !reached(client.Netns) || !reached(client2.Netns) {
		t.Fatalf("y/client, y/client2 -> %s without policy: not reached", hostPort)
	}

	tcp := corev1.ProtocolTCP
	p8080 := intstr.FromInt32(8080)
	onHostPort := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web-from-y-8080"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p8080}}}}}}
	if _, err := pl.Admin.NetworkingV1().NetworkPolicies("x").Create(pl.ctx(t), onHostPort, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		if reached(client.Netns) {
			return "y/client -> " + hostPort + " reached under a rule on port 8080 only"
		}
		return ""
	})
	if !reached(n1.Netns) {
		t.Errorf("node1 -> %s under the policy: not reached", hostPort)
	}
	onPodPort := onHostPort.DeepCopy()
	onPodPort.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: new(intstr.FromString("http"))}}
	pl.updatePolicy(t, onPodPort)
	eventually(t, 10*time.Second, func() string {
		if !reached(client.Netns) {
			return "y/client -> " + hostPort + " not reached under a rule on the named port http (80)"
		}
		return ""
	})
	if reached(client2.Netns) {
		t.Errorf("y/client2 (node2) -> %s reached: its packets should come masqueraded to node2's address", hostPort)
	}
}
