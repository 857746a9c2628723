package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/lab"
)

// experimentalCNPCRD is the experimental channel's ClusterNetworkPolicy
// CRD: the one with node peers and named ports (the standard channel's
// prunes them).
func experimentalCNPCRD(t *testing.T) (string, []byte) {
	t.Helper()
	std, _ := upstreamCNPCRD(t)
	path := filepath.Join(filepath.Dir(filepath.Dir(std)), "experimental", filepath.Base(std))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// addrWant is a probe from a pod to an address.
type addrWant struct {
	from  *lab.KubePod
	to    netip.Addr
	proto string
	port  int
	ok    bool
}

// expectAddrs probes every case, those of one pod in parallel, and
// describes those that differ ("" when none).
func (pl *policyLab) expectAddrs(t *testing.T, wants ...addrWant) string {
	t.Helper()
	byPod := map[*lab.KubePod][]addrWant{}
	var order []*lab.KubePod
	for _, w := range wants {
		if _, ok := byPod[w.from]; !ok {
			order = append(order, w.from)
		}
		byPod[w.from] = append(byPod[w.from], w)
	}
	var bad []string
	for _, from := range order {
		var targets []string
		for _, w := range byPod[from] {
			targets = append(targets, w.proto+":"+netip.AddrPortFrom(w.to, uint16(w.port)).String())
		}
		res, err := pl.Probe(from.Netns, time.Second, targets)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range byPod[from] {
			if res[i].OK != w.ok {
				bad = append(bad, fmt.Sprintf("%s/%s -> %s %s/%d: reached %t, want %t", from.Namespace, from.Name, w.to, w.proto, w.port, res[i].OK, w.ok))
			}
		}
	}
	return strings.Join(bad, "; ")
}

// labNode is the Node object of a lab node, as kubelet would register it
// (the lab has no kubelet): its name, labels and InternalIPs (n.Address,
// then extra, as a dual-stack node's kubelet lists both families).
func labNode(n *lab.Node, labels map[string]string, extra ...netip.Addr) *corev1.Node {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.Address.String()}}
	for _, a := range extra {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// inFamilies is wants, and with twin (an IPv4 address's IPv6 counterpart)
// each want again to the counterpart of its address, for a dual-stack lab
// where every expectation must hold in both families.
func inFamilies(twin map[netip.Addr]netip.Addr, wants ...addrWant) []addrWant {
	out := slices.Clone(wants)
	for _, w := range wants {
		if a, ok := twin[w.to]; ok {
			w.to = a
			out = append(out, w)
		}
	}
	return out
}

// TestClusterNetworkPolicyNodesNamedPorts: with the experimental channel's
// CRD, node peers stand for the Node objects' addresses, on the pod's own
// node (the input hook) as on another (forward), and follow the Nodes as
// they go and come; named ports resolve, pod by pod, on the subject's
// pods for ingress and the peers' for egress; each policy's status
// condition says whether reef enforces it as written. Real TCP and UDP
// probes; the lab's nodes serve on their own addresses, as host-network
// pods do.
func TestClusterNetworkPolicyNodesNamedPorts(t *testing.T) { testCNPNodesNamedPorts(t, false) }

// TestClusterNetworkPolicyNodesNamedPortsDualStack is
// TestClusterNetworkPolicyNodesNamedPorts with dual-stack pods and nodes
// whose Node objects list an IPv6 InternalIP too (issues 29 and 31): every
// expectation is probed to the IPv4 and the IPv6 address of its node or
// pod, in the same run, and must hold in each.
func TestClusterNetworkPolicyNodesNamedPortsDualStack(t *testing.T) {
	slowSuite(t)
	testCNPNodesNamedPorts(t, true)
}

func testCNPNodesNamedPorts(t *testing.T, dual bool) {
	var pl *policyLab
	twin := map[netip.Addr]netip.Addr{} // dual: IPv4 address -> IPv6 one
	if dual {
		pl = newPolicyLabWith(t, 2, lab.NodeOptions{Extra: npStackDual.pools}, true)
		for _, n := range pl.Nodes {
			twin[n.Address] = nodeAddr6(n)
		}
	} else {
		pl = newPolicyLab(t, 2)
	}
	nodeObject := func(n *lab.Node) *corev1.Node {
		var extra []netip.Addr
		if a, ok := twin[n.Address]; ok {
			extra = append(extra, a)
		}
		return labNode(n, map[string]string{"kubernetes.io/os": "linux"}, extra...)
	}
	expect := func(wants ...addrWant) string { return pl.expectAddrs(t, inFamilies(twin, wants...)...) }
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	x, y := map[string]string{"ns": "x"}, map[string]string{"ns": "y"}
	pl.namespace(t, "x", x)
	pl.namespace(t, "y", y)
	podTwin := func(p *lab.KubePod) *lab.KubePod {
		if dual {
			if len(p.IPs) != 2 || !p.IPs[0].Is4() || !p.IPs[1].Is6() {
				t.Fatalf("%s/%s: addresses %v, want an IPv4 and an IPv6 one", p.Namespace, p.Name, p.IPs)
			}
			twin[p.IP] = p.IPs[1]
		}
		return p
	}
	xa := podTwin(pl.pod(t, n1, "x", "a", map[string]string{"app": "a"}))
	ya := podTwin(pl.pod(t, n2, "y", "a", map[string]string{"app": "a"}))
	// y/b and y/c name port 80 and 81 "web": a named port means a
	// number per pod.
	web := func(node *lab.Node, name string, port int32) *lab.KubePod {
		p, err := pl.API.RunPod(node, "y", name, map[string]string{"app": name}, []corev1.ContainerPort{{Name: "web", ContainerPort: port, Protocol: corev1.ProtocolTCP}})
		if err != nil {
			t.Fatal(err)
		}
		stop, err := pl.ServePorts(p.Netns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return podTwin(p)
	}
	yb, yc := web(n1, "b", 80), web(n2, "c", 81)
	for _, n := range pl.Nodes {
		stop, err := pl.ServePorts(n.Netns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		if _, err := pl.Admin.CoreV1().Nodes().Create(pl.ctx(t), nodeObject(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	path, crd := experimentalCNPCRD(t)
	if err := pl.API.ApplyCRDs(path, crd); err != nil {
		t.Fatal(err)
	}
	pl.waitClusterPoliciesOn(t)

	// x may reach the nodes on TCP 80 only; y is no subject.
	nodes := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: "nodes-tcp-80-only"},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 10,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: x}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{
				{Action: cnp.ClusterNetworkPolicyRuleActionAccept, To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/os": "linux"}}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: 80}}}}},
				{Action: cnp.ClusterNetworkPolicyRuleActionDeny, To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: &metav1.LabelSelector{}}}},
			}}}
	if err := pl.API.CreateCustom(cnpGVR, "", nodes); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return expect(
			addrWant{xa, n1.Address, "tcp", 80, true}, // its own node: the input hook
			addrWant{xa, n2.Address, "tcp", 80, true}, // another node: forward
			addrWant{xa, n1.Address, "tcp", 81, false},
			addrWant{xa, n2.Address, "tcp", 81, false},
			addrWant{xa, n1.Address, "udp", 80, false},
			addrWant{xa, n2.Address, "udp", 80, false},
			addrWant{xa, ya.IP, "tcp", 81, true}, // a pod is no node
			addrWant{yb, n1.Address, "tcp", 81, true},
			addrWant{ya, n1.Address, "udp", 81, true},
		)
	})
	// n2's Node goes: its address is no peer any more; back, it is.
	if err := pl.Admin.CoreV1().Nodes().Delete(pl.ctx(t), n2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return expect(addrWant{xa, n2.Address, "tcp", 81, true}, addrWant{xa, n1.Address, "tcp", 81, false})
	})
	if _, err := pl.Admin.CoreV1().Nodes().Create(pl.ctx(t), nodeObject(n2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return expect(addrWant{xa, n2.Address, "tcp", 81, false}, addrWant{xa, n2.Address, "tcp", 80, true})
	})

	// Named ports: x may reach y's pods on their "web" only (80 on y/b,
	// 81 on y/c), and y may not reach x/a's "serve-80-udp".
	named := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 5,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: x}},
			Ingress: []cnp.ClusterNetworkPolicyIngressRule{{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
				From:      []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: y}}},
				Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "serve-80-udp"}}}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{
				{Action: cnp.ClusterNetworkPolicyRuleActionAccept,
					To:        []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: metav1.LabelSelector{MatchLabels: y}}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "web"}}},
				{Action: cnp.ClusterNetworkPolicyRuleActionDeny,
					To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: metav1.LabelSelector{MatchLabels: y}}}}},
			},
		}}
	if err := pl.API.CreateCustom(cnpGVR, "", named); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		return expect(
			addrWant{xa, yb.IP, "tcp", 80, true}, // y/b's web
			addrWant{xa, yb.IP, "tcp", 81, false},
			addrWant{xa, yc.IP, "tcp", 81, true}, // y/c's web
			addrWant{xa, yc.IP, "tcp", 80, false},
			addrWant{xa, ya.IP, "tcp", 80, false}, // y/a has no web
			addrWant{ya, xa.IP, "udp", 80, false}, // x/a's serve-80-udp
			addrWant{ya, xa.IP, "tcp", 80, true},
			addrWant{yb, xa.IP, "udp", 81, true},
		)
	})
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "ClusterNetworkPolicy on, 2 policies") || strings.Contains(out, "not enforced") {
		t.Fatalf("reef status: %v\n%s", err, out)
	}

	// What reef cannot enforce (domain names) is said on the policy's
	// status, and in reef status; what it can, too.
	domains := &cnp.ClusterNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: "ClusterNetworkPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: "domains"},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: cnp.AdminTier, Priority: 20,
			Subject: cnp.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: y}},
			Egress: []cnp.ClusterNetworkPolicyEgressRule{{Action: cnp.ClusterNetworkPolicyRuleActionAccept,
				To: []cnp.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnp.DomainName{"example.com"}}}}}}}
	if err := pl.API.CreateCustom(cnpGVR, "", domains); err != nil {
		t.Fatal(err)
	}
	condition := func(name string) string {
		var p cnp.ClusterNetworkPolicy
		if err := pl.API.GetCustom(cnpGVR, "", name, &p); err != nil {
			return err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "reef.cni/Enforced" {
				return fmt.Sprintf("%s %s gen %d/%d: %s", c.Status, c.Reason, c.ObservedGeneration, p.Generation, c.Message)
			}
		}
		return "no condition"
	}
	eventually(t, 10*time.Second, func() string {
		var bad []string
		for name, want := range map[string]string{
			"domains":           "False PartiallyEnforced gen 1/1: reef enforces this policy except: spec.egress[0].to[0].domainNames: domain name peers are not enforced by reef: this Accept rule matches nothing",
			"named":             "True Enforced gen 1/1: reef enforces this policy as written",
			"nodes-tcp-80-only": "True Enforced gen 1/1: reef enforces this policy as written",
		} {
			if got := condition(name); got != want {
				bad = append(bad, fmt.Sprintf("%s: %q, want %q", name, got, want))
			}
		}
		return strings.Join(bad, "; ")
	})
	if out, err := n1.Reef("status"); err != nil || !strings.Contains(out, "ClusterNetworkPolicy not enforced as written: domains: spec.egress[0].to[0].domainNames") ||
		strings.Contains(out, "status conditions not written") {
		t.Fatalf("reef status: %v\n%s", err, out)
	}
}
