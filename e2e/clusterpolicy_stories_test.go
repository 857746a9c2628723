package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/policy"
)

// The platform team's three stories of issue 31, as ClusterNetworkPolicies
// an operator writes: docs/policy.md shows these same documents
// (TestClusterNetworkPolicyStoriesDocumented checks it), and
// TestClusterNetworkPolicyStories applies them to the lab.
const (
	storyMonitoring = `apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: monitoring-only-prometheus
spec:
  tier: Admin
  priority: 10
  subject:
    namespaces:
      matchLabels:
        kubernetes.io/metadata.name: monitoring
  ingress:
  - name: prometheus
    action: Accept
    from:
    - pods:
        namespaceSelector:
          matchLabels:
            kubernetes.io/metadata.name: monitoring
        podSelector:
          matchLabels:
            app.kubernetes.io/name: prometheus
  - name: everyone-else
    action: Deny
    from:
    - namespaces: {}
`
	storyKubeDNS = `apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: every-namespace-reaches-kube-dns
spec:
  tier: Admin
  priority: 5
  subject:
    namespaces: {}
  egress:
  - name: kube-dns
    action: Accept
    to:
    - pods:
        namespaceSelector:
          matchLabels:
            kubernetes.io/metadata.name: kube-system
        podSelector:
          matchLabels:
            k8s-app: kube-dns
    protocols:
    - udp:
        destinationPort:
          number: 53
    - tcp:
        destinationPort:
          number: 53
`
	storyMetadata = `apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: deny-metadata-address
spec:
  tier: Admin
  priority: 1
  subject:
    namespaces: {}
  egress:
  - name: metadata
    action: Deny
    to:
    - networks:
      - 169.254.169.254/32
`
)

// metadataAddr is the cloud metadata address the third story denies.
var metadataAddr = netip.MustParseAddr("169.254.169.254")

// TestClusterNetworkPolicyStoriesDocumented: docs/policy.md shows the
// stories' policies exactly as the lab test applies them.
func TestClusterNetworkPolicyStoriesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{storyMonitoring, storyKubeDNS, storyMetadata} {
		if !strings.Contains(string(doc), "```yaml\n"+s+"```\n") {
			t.Errorf("docs/policy.md lacks this ClusterNetworkPolicy as a yaml block:\n%s", s)
		}
		var p cnp.ClusterNetworkPolicy
		if err := yaml.UnmarshalStrict([]byte(s), &p); err != nil {
			t.Errorf("%v:\n%s", err, s)
		}
	}
}

// storyPolicy is one of the stories' documents as the API's type.
func storyPolicy(t *testing.T, doc string) *cnp.ClusterNetworkPolicy {
	t.Helper()
	var p cnp.ClusterNetworkPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatalf("%v:\n%s", err, doc)
	}
	return &p
}

// storyProbe is a probe from a lab namespace (a pod's, or a node's own)
// to an address.
type storyProbe struct {
	from, netns string // a name for messages; where the probe runs
	to          netip.Addr
	proto       string
	port        int
	ok          bool
}

// storiesLab is the stories' cluster: two nodes; the monitoring
// namespace (Prometheus and Alertmanager, and Grafana, the neighbour
// that is not Prometheus), kube-system's kube-dns, a namespace "shop"
// whose owner default-denies egress, a namespace "blog" with no policy;
// and a stand-in for the cloud's metadata server at 169.254.169.254.
type storiesLab struct {
	*policyLab
	prometheus, alertmanager, grafana, dns, shop, blog *lab.KubePod
}

// src names a pod as a probe's source.
func src(p *lab.KubePod) (string, string) { return p.Namespace + "/" + p.Name, p.Netns }

func (s *storiesLab) probe(from *lab.KubePod, to netip.Addr, proto string, port int, ok bool) storyProbe {
	name, netns := src(from)
	return storyProbe{name, netns, to, proto, port, ok}
}

func (s *storiesLab) nodeProbe(n *lab.Node, to netip.Addr, proto string, port int, ok bool) storyProbe {
	return storyProbe{"node " + n.Name, n.Netns, to, proto, port, ok}
}

// expect runs every probe, those of all sources at once (a denied one
// waits out its timeout), and describes those that differ ("" when none).
func (s *storiesLab) expect(t *testing.T, ps ...storyProbe) string {
	t.Helper()
	bySrc := map[string][]storyProbe{}
	var order []string
	for _, p := range ps {
		if _, ok := bySrc[p.netns]; !ok {
			order = append(order, p.netns)
		}
		bySrc[p.netns] = append(bySrc[p.netns], p)
	}
	bad := make([][]string, len(order))
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, netns := range order {
		wg.Go(func() {
			var targets []string
			for _, p := range bySrc[netns] {
				targets = append(targets, p.proto+":"+netip.AddrPortFrom(p.to, uint16(p.port)).String())
			}
			res, err := s.Probe(netns, time.Second, targets)
			if err != nil {
				errs[i] = err
				return
			}
			for j, p := range bySrc[netns] {
				if res[j].OK != p.ok {
					bad[i] = append(bad[i], fmt.Sprintf("%s -> %s %s/%d: reached %t, want %t (%s)", p.from, s.name(p.to), p.proto, p.port, res[j].OK, p.ok, res[j].Err))
				}
			}
		})
	}
	wg.Wait()
	var out []string
	for i := range order {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		out = append(out, bad[i]...)
	}
	return strings.Join(out, "; ")
}

// name is a probe target's name for messages.
func (s *storiesLab) name(a netip.Addr) string {
	for _, p := range []*lab.KubePod{s.prometheus, s.alertmanager, s.grafana, s.dns, s.shop, s.blog} {
		if p.IP == a {
			return p.Namespace + "/" + p.Name
		}
	}
	if a == metadataAddr {
		return "metadata " + a.String()
	}
	return a.String()
}

// newStoriesLab starts the stories' lab, with the upstream CRD installed
// and no policy yet.
func newStoriesLab(t *testing.T) *storiesLab {
	t.Helper()
	s := &storiesLab{policyLab: newPolicyLab(t, 2)}
	n1, n2 := s.Nodes[0], s.Nodes[1]
	// The CRD first: the nodes find it within their next discovery
	// (every 5 s) while the pods are made.
	path, crd := upstreamCNPCRD(t)
	if err := s.API.ApplyCRDs(path, crd); err != nil {
		t.Fatal(err)
	}
	// kube-system is the API server's; every namespace's
	// kubernetes.io/metadata.name label too.
	for _, ns := range []string{"monitoring", "shop", "blog"} {
		s.namespace(t, ns, nil)
	}
	name := func(n string) map[string]string { return map[string]string{"app.kubernetes.io/name": n} }
	s.prometheus = s.pod(t, n1, "monitoring", "prometheus", name("prometheus"))
	s.grafana = s.pod(t, n1, "monitoring", "grafana", name("grafana"))
	s.alertmanager = s.pod(t, n2, "monitoring", "alertmanager", name("alertmanager"))
	s.shop = s.pod(t, n1, "shop", "web", map[string]string{"app": "web"})
	s.blog = s.pod(t, n2, "blog", "app", map[string]string{"app": "blog"})
	// kube-dns: the model's ports and DNS's, UDP and TCP 53.
	ports := append(servedPorts(), corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP})
	dns, err := s.API.RunPod(n2, "kube-system", "coredns", map[string]string{"k8s-app": "kube-dns"}, ports)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := s.ServePortsOn(dns.Netns, "--tcp", "53,80,81", "--udp", "53,80,81")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.dns = dns
	s.addMetadataServer(t)

	s.waitClusterPoliciesOn(t)
	return s
}

// addMetadataServer makes a lab namespace stand in for the cloud's
// metadata server: 169.254.169.254 on a link to the lab's switch, serving
// TCP and UDP 80 and 81, and each node routes the address to it over
// its uplink (routes inside the lab's namespaces only). Pods reach it
// through their node, masqueraded to the node's address (natOutgoing),
// which the stand-in routes back on the switch.
func (s *storiesLab) addMetadataServer(t *testing.T) {
	t.Helper()
	netns := s.Prefix + "-md"
	if err := s.AddNetns(netns); err != nil {
		t.Fatal(err)
	}
	peer := s.Prefix + "md"
	if len(peer) > 15 {
		peer = peer[len(peer)-15:]
	}
	for _, step := range []struct {
		netns string
		args  []string
	}{
		{netns, []string{"link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", lab.NetnsPath(s.Switch)}},
		{netns, []string{"addr", "add", netip.PrefixFrom(metadataAddr, 32).String(), "dev", "eth0"}},
		{netns, []string{"link", "set", "eth0", "up"}},
		{netns, []string{"route", "add", lab.Underlay.String(), "dev", "eth0"}},
		{s.Switch, []string{"link", "set", peer, "master", "br0", "up"}},
	} {
		if err := s.IP(step.netns, step.args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range s.Nodes {
		if err := s.IP(n.Netns, "route", "replace", netip.PrefixFrom(metadataAddr, 32).String(), "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	stop, err := s.ServePorts(netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// applyStories creates the namespace owners' NetworkPolicies (monitoring
// allows ingress from every namespace, shop default-denies egress) and
// checks what they do alone; then the platform team's three
// ClusterNetworkPolicies.
func (s *storiesLab) applyStories(t *testing.T) {
	t.Helper()
	all := &metav1.LabelSelector{}
	owners := []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "allow-from-everywhere"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: all}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default-deny-egress"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}},
	}
	for _, np := range owners {
		if _, err := s.Admin.NetworkingV1().NetworkPolicies(np.Namespace).Create(s.ctx(t), np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() string {
		return s.expect(t,
			s.probe(s.shop, s.dns.IP, "udp", 53, false), // the owner's default deny, alone
			s.probe(s.shop, s.dns.IP, "tcp", 53, false),
			s.probe(s.shop, metadataAddr, "tcp", 80, false),
			s.probe(s.blog, s.alertmanager.IP, "tcp", 80, true), // the owner's allow, alone
			s.probe(s.grafana, s.alertmanager.IP, "udp", 80, true),
		)
	})
	for _, doc := range []string{storyMonitoring, storyKubeDNS, storyMetadata} {
		p := storyPolicy(t, doc)
		if err := s.API.CreateCustom(cnpGVR, "", p); err != nil {
			t.Fatalf("create ClusterNetworkPolicy %s: %v", p.Name, err)
		}
	}
}

// enforced is what the three stories say, probe by probe: each is checked
// the other way before the policies (storiesBefore), or is a control
// that shows the pod or the listener works.
func (s *storiesLab) enforced() []storyProbe {
	n1, n2 := s.Nodes[0], s.Nodes[1]
	ps := []storyProbe{
		// Nothing reaches monitoring except Prometheus, whatever the
		// monitoring namespace's own NetworkPolicy allows.
		s.probe(s.prometheus, s.alertmanager.IP, "tcp", 80, true),
		s.probe(s.prometheus, s.alertmanager.IP, "udp", 81, true),
		s.probe(s.grafana, s.alertmanager.IP, "tcp", 80, false), // the neighbour in monitoring
		s.probe(s.grafana, s.alertmanager.IP, "udp", 80, false),
		s.probe(s.alertmanager, s.grafana.IP, "tcp", 81, false),
		s.probe(s.blog, s.alertmanager.IP, "tcp", 80, false), // another namespace
		s.probe(s.blog, s.prometheus.IP, "udp", 80, false),
		s.probe(s.dns, s.grafana.IP, "tcp", 80, false),
		s.probe(s.prometheus, s.blog.IP, "tcp", 80, true),   // monitoring's egress is its own
		s.nodeProbe(n2, s.alertmanager.IP, "tcp", 80, true), // the node (kubelet's probes) is no namespace
		// Every namespace reaches kube-dns on UDP and TCP 53, shop
		// despite its default deny of egress (Admin Accept comes first).
		s.probe(s.shop, s.dns.IP, "udp", 53, true),
		s.probe(s.shop, s.dns.IP, "tcp", 53, true),
		s.probe(s.shop, s.dns.IP, "tcp", 80, false), // only DNS: the default deny still decides the rest
		s.probe(s.shop, s.blog.IP, "tcp", 80, false),
		s.probe(s.blog, s.dns.IP, "udp", 53, true),
		s.probe(s.grafana, s.dns.IP, "tcp", 53, true),
		s.probe(s.alertmanager, s.dns.IP, "udp", 53, true),
		// The metadata address, from every pod on both nodes; the
		// nodes themselves still reach the stand-in.
		s.nodeProbe(n1, metadataAddr, "tcp", 80, true),
		s.nodeProbe(n2, metadataAddr, "udp", 80, true),
	}
	for _, p := range []*lab.KubePod{s.prometheus, s.grafana, s.alertmanager, s.shop, s.blog, s.dns} {
		ps = append(ps, s.probe(p, metadataAddr, "tcp", 80, false), s.probe(p, metadataAddr, "udp", 80, false))
	}
	return ps
}

// storiesBefore is what the lab does with no policy at all: every probe
// of enforced reaches its target.
func (s *storiesLab) storiesBefore() []storyProbe {
	var ps []storyProbe
	for _, p := range s.enforced() {
		p.ok = true
		ps = append(ps, p)
	}
	return ps
}

// TestClusterNetworkPolicyStories: issue 31's three stories, written as a
// platform team writes them (docs/policy.md, "Three stories"), on two
// nodes with real TCP and UDP probes. "Nothing reaches the monitoring
// namespace except Prometheus": Prometheus reaches Alertmanager on the
// other node; Grafana (its neighbour in monitoring) and pods of other
// namespaces do not, though monitoring's own NetworkPolicy allows every
// namespace. "Every namespace may reach kube-dns": UDP and TCP 53, from
// shop too, whose NetworkPolicy default-denies egress. "Deny the metadata
// address everywhere": a stand-in at 169.254.169.254, reached from every
// pod before, from none after, on both nodes. Every probe is checked the
// other way before the policies. Then a pod created under the policies is
// covered from its first packet after its ADD returns.
func TestClusterNetworkPolicyStories(t *testing.T) {
	s := newStoriesLab(t)
	if msg := s.expect(t, s.storiesBefore()...); msg != "" {
		t.Fatalf("without any policy: %s", msg)
	}
	s.applyStories(t)
	eventually(t, 10*time.Second, func() string { return s.expect(t, s.enforced()...) })
	s.explained(t)
	s.newPods(t)
}

// explained checks reef policy show for the stories' subjects.
func (s *storiesLab) explained(t *testing.T) {
	t.Helper()
	n1, n2 := s.Nodes[0], s.Nodes[1]
	showSteps(t, n2, "monitoring/alertmanager", "ingress",
		"Admin 10 monitoring-only-prometheus ingress[0] prometheus: Accept from pods app.kubernetes.io/name=prometheus in namespaces kubernetes.io/metadata.name=monitoring",
		"Admin 10 monitoring-only-prometheus ingress[1] everyone-else: Deny from every pod in namespaces (all)",
		"NetworkPolicy: monitoring/allow-from-everywhere (rules below)",
		"otherwise: "+policy.OtherwiseIsolated)
	showSteps(t, n1, "shop/web", "egress",
		"Admin 1 deny-metadata-address egress[0] metadata: Deny to networks 169.254.169.254/32",
		"Admin 5 every-namespace-reaches-kube-dns egress[0] kube-dns: Accept to pods k8s-app=kube-dns in namespaces kubernetes.io/metadata.name=kube-system",
		"NetworkPolicy: shop/default-deny-egress (rules below)",
		"otherwise: "+policy.OtherwiseIsolated)
}

// newPods: pods created under the stories' policies are decided by them
// from the first packet after their ADD returns, probed once, no retry:
// a new blog pod's first datagram to the metadata address is denied while
// kube-dns answers it; a new pod of monitoring is denied from blog and
// reached by Prometheus.
func (s *storiesLab) newPods(t *testing.T) {
	t.Helper()
	n1, n2 := s.Nodes[0], s.Nodes[1]
	late, err := s.API.RunPod(n2, "blog", "late", map[string]string{"app": "blog"}, servedPorts())
	if err != nil {
		t.Fatal(err)
	}
	name, netns := src(late)
	if msg := s.expect(t, storyProbe{name, netns, metadataAddr, "udp", 80, false}, storyProbe{name, netns, s.dns.IP, "udp", 53, true}); msg != "" {
		t.Fatalf("a new pod's first packets, right after its ADD: %s", msg)
	}
	exporter, err := s.API.RunPod(n1, "monitoring", "node-exporter", map[string]string{"app.kubernetes.io/name": "node-exporter"}, servedPorts())
	if err != nil {
		t.Fatal(err)
	}
	stop, err := s.ServePorts(exporter.Netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if msg := s.expect(t, s.probe(s.blog, exporter.IP, "tcp", 80, false), s.probe(s.prometheus, exporter.IP, "tcp", 80, true),
		storyProbe{name, netns, exporter.IP, "udp", 80, false}); msg != "" {
		t.Fatalf("a new monitoring pod, right after its ADD: %s", msg)
	}
}

// TestClusterNetworkPolicyStoriesAPIAway: while the API server is away
// (the lab's kube-apiserver stopped), the stories' enforcement stays as
// last known, also across a restart of reef on a node (node2:
// Alertmanager, kube-dns, blog), and when the API comes back. Every probe
// is checked the other way before the policies.
func TestClusterNetworkPolicyStoriesAPIAway(t *testing.T) {
	slowSuite(t)
	s := newStoriesLab(t)
	if msg := s.expect(t, s.storiesBefore()...); msg != "" {
		t.Fatalf("without any policy: %s", msg)
	}
	s.applyStories(t)
	eventually(t, 10*time.Second, func() string { return s.expect(t, s.enforced()...) })
	n2 := s.Nodes[1]

	if err := s.API.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		for _, n := range s.Nodes {
			st, err := n.Status()
			if err != nil {
				return err.Error()
			}
			if st.GetPolicy().GetApiReachable() {
				return n.Name + ": status still says the API is reachable"
			}
		}
		return ""
	})
	if msg := s.expect(t, s.enforced()...); msg != "" {
		t.Fatalf("API away: %s", msg)
	}
	if err := n2.Restart(); err != nil {
		t.Fatal(err)
	}
	if msg := s.expect(t, s.enforced()...); msg != "" {
		t.Fatalf("API away, reef restarted on %s: %s", n2.Name, msg)
	}
	if out, err := n2.Reef("status"); err != nil || !strings.Contains(out, "UNREACHABLE since") {
		t.Fatalf("reef status on %s with the API away: %v\n%s", n2.Name, err, out)
	}

	if err := s.API.Start(); err != nil {
		t.Fatal(err)
	}
	// Enforced all the while the API comes back: the restarted node's
	// informers list while its discovery of the CRD is still open, and
	// must not take that for "no cluster policies". Probed until every
	// node is synced with cluster policies on, and once more after.
	for i, ready := 0, 0; ready < 2; i++ {
		if msg := s.expect(t, s.enforced()...); msg != "" {
			t.Fatalf("API coming back (round %d): %s", i, msg)
		}
		status := ""
		for _, n := range s.Nodes {
			st, err := n.Status()
			if err != nil {
				status = err.Error()
				break
			}
			if p := st.GetPolicy(); !p.GetSynced() || !p.GetApiReachable() || p.GetClusterPolicies() != "on" {
				status = fmt.Sprintf("%s: policy status after the API came back: %+v", n.Name, p)
				break
			}
		}
		switch {
		case status == "":
			ready++
		case i > 60:
			t.Fatal(status)
		}
	}
}
