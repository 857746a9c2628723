package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// The CIDRs of the Service address tests: the nodes announce Services'
// externalIPs inside svcExternalCIDR and LoadBalancer ingress addresses
// inside svcLBCIDR. The router takes every /32 of wider ranges
// (svcRouterExternal, svcRouterLB), so that an address outside the
// nodes' CIDRs that a node announced would show at the router.
var (
	svcExternalCIDR   = netip.MustParsePrefix("192.0.2.0/25")
	svcLBCIDR         = netip.MustParsePrefix("10.200.0.0/24")
	svcRouterExternal = netip.MustParsePrefix("192.0.2.0/24")
	svcRouterLB       = netip.MustParsePrefix("10.200.0.0/23")
	// IPv6, in the dual-stack variant.
	svcExternalCIDR6   = netip.MustParsePrefix("2001:db8:5e::/64")
	svcLBCIDR6         = netip.MustParsePrefix("2001:db8:1b::/64")
	svcRouterExternal6 = netip.MustParsePrefix("2001:db8:5e::/48")
	svcRouterLB6       = netip.MustParsePrefix("2001:db8:1b::/48")
)

// Service addresses (docs/bgp.md, "Services"): the ToR lab's three nodes
// (a1, a2, b1) with bgp.serviceExternalIPs and bgp.serviceLoadBalancerIPs
// and the lab's Kubernetes API (reef's RBAC, a kubeconfig by `reef
// kubeconfig`), the router running BIRD 2 (TestServiceAddressesBird) or
// FRR (TestServiceAddressesFRR) with multipath. Services and
// EndpointSlices are made through the API as a controller would (there is
// none); the LoadBalancer addresses are written to status as another load
// balancer controller would (bgp.assignLoadBalancerIPs: false: reef's own
// assignment is TestLoadBalancerIPAM's, and TestKubernetesServiceAddresses
// has both):
//
//   - externalTrafficPolicy Cluster (an externalIP, a LoadBalancer
//     address): the router has a path from each node and one ECMP route;
//   - Local: only the node with a ready endpoint announces it; the
//     endpoint turned unready, the address is withdrawn; a ready endpoint
//     on another node, that node announces it;
//   - an externalIP and a LoadBalancer address outside the nodes' CIDRs
//     (but inside what the router takes) are never announced;
//   - reef status and the metrics name the addresses and why; no node
//     dropped a path (nothing went over the mesh);
//
// The FRR variant, in the slow suite to keep make test short, is also
// dual-stack: an IPv6 pool, the nodes' IPv6 addresses, IPv6 CIDRs in both
// lists; an IPv6 Cluster external IP comes from every node, next hop its
// IPv6 address, and an IPv6 Local LoadBalancer address only from the node
// with a ready endpoint in an IPv6 EndpointSlice (an IPv4 slice's endpoint
// on another node does not count). It also stops the API: the nodes say so
// and keep announcing the last known set; with it back, a Service deleted
// is withdrawn.
func TestServiceAddressesBird(t *testing.T) { testServiceAddresses(t, "bird", false) }

func TestServiceAddressesFRR(t *testing.T) { slowSuite(t); testServiceAddresses(t, "frr", true) }

func testServiceAddresses(t *testing.T, kind string, dualAndAPIAway bool) {
	l := newLab(t)
	k, kubeconfig, err := l.StartKubeAPIForReef()
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
	extra, lists := torPool, fmt.Sprintf("  serviceExternalIPs: [%s]\n  serviceLoadBalancerIPs: [%s]\n", svcExternalCIDR, svcLBCIDR)
	pools := append(slices.Clone(lab.DefaultToRPools), lab.ToRPool{CIDR: svcRouterExternal, BlockSize: 32}, lab.ToRPool{CIDR: svcRouterLB, BlockSize: 32})
	if dualAndAPIAway {
		extra += "  - cidr: " + torPool6.CIDR.String() + "\n    vxlanMode: Never\n"
		lists = fmt.Sprintf("  serviceExternalIPs: [%s, '%s']\n  serviceLoadBalancerIPs: [%s, '%s']\n", svcExternalCIDR, svcExternalCIDR6, svcLBCIDR, svcLBCIDR6)
		pools = append(pools, torPool6, lab.ToRPool{CIDR: svcRouterExternal6, BlockSize: 128}, lab.ToRPool{CIDR: svcRouterLB6, BlockSize: 128})
	}
	lists += "  assignLoadBalancerIPs: false\n"
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: extra + "kubernetes:\n  kubeconfig: " + kubeconfig + "\n", RouterASN: lab.RouterASN, BGPExtra: lists})
	if err != nil {
		t.Fatal(err)
	}
	if dualAndAPIAway {
		if err := l.AddCrossIPv6(nodes); err != nil {
			t.Fatal(err)
		}
	}
	tor := startToR(t, l, kind, nodes, pools, "")
	if err := tor.Multipath(); err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	admin, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const ns = "svc"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// First the addresses that must never show: once the others are at
	// the router, these had their chance.
	mkService(t, ctx, admin, ns, "outside", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, []string{"192.0.2.200"}, "10.200.1.5")
	extCluster := mkService(t, ctx, admin, ns, "ext-cluster", corev1.ServiceTypeClusterIP, "", []string{"192.0.2.10"}, "")
	lbCluster := mkService(t, ctx, admin, ns, "lb-cluster", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, nil, "10.200.0.10")
	extLocal := mkService(t, ctx, admin, ns, "ext-local", corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal, []string{"192.0.2.11"}, "")
	lbLocal := mkService(t, ctx, admin, ns, "lb-local", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, nil, "10.200.0.11")
	mkSlice(t, ctx, admin, ns, "ext-local", svcEndpoint{a1.Name, true})
	mkSlice(t, ctx, admin, ns, "lb-local", svcEndpoint{a2.Name, true}, svcEndpoint{b1.Name, false})

	var all []netip.Addr
	for _, n := range nodes {
		all = append(all, n.Address)
	}
	slices.SortFunc(all, netip.Addr.Compare)
	want := map[netip.Addr][]netip.Addr{extCluster: all, lbCluster: all, extLocal: {a1.Address}, lbLocal: {a2.Address}}
	if dualAndAPIAway {
		ext6 := mkService(t, ctx, admin, ns, "ext6-cluster", corev1.ServiceTypeClusterIP, "", []string{"2001:db8:5e::10"}, "")
		lb6 := mkService(t, ctx, admin, ns, "lb6-local", corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, nil, "2001:db8:1b::11")
		mkSlice(t, ctx, admin, ns, "lb6-local", svcEndpoint{a1.Name, true}) // IPv4: does not carry the IPv6 address
		es := sliceOf(ns, "lb6-local", []svcEndpoint{{b1.Name, true}})
		es.Name, es.AddressType, es.Endpoints[0].Addresses = "lb6-local-v6", discoveryv1.AddressTypeIPv6, []string{"fd00:10:246::5"}
		if _, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var all6 []netip.Addr
		for _, n := range nodes {
			all6 = append(all6, lab.CrossAddress6(n.Address))
		}
		slices.SortFunc(all6, netip.Addr.Compare)
		want[ext6], want[lb6] = all6, []netip.Addr{lab.CrossAddress6(b1.Address)}
	}
	routerHas(t, tor, want)
	// The router's kernel route follows its BGP table (zebra, BIRD's
	// kernel protocol) a moment later.
	eventually(t, 20*time.Second, func() string { return routerECMP(t, l, netip.PrefixFrom(lbCluster, 32), all) })
	for _, p := range []string{"192.0.2.200", "10.200.1.5"} {
		if hops, err := tor.NextHops(netip.PrefixFrom(netip.MustParseAddr(p), 32)); err != nil || len(hops) > 0 {
			t.Errorf("the router's paths to %s, outside the nodes' CIDRs: %v (%v), want none", p, hops, err)
		}
	}

	// What a1 says of it.
	st := mustStatus(t, a1)
	var lines []string
	for _, s := range st.GetServiceAddresses() {
		lines = append(lines, fmt.Sprintf("%s %s %s %s %d", s.GetAddress(), s.GetService(), s.GetSource(), s.GetReason(), s.GetLocalEndpoints()))
	}
	slices.Sort(lines)
	wantLines := []string{"10.200.0.10 svc/lb-cluster loadBalancer cluster 0", "192.0.2.10 svc/ext-cluster externalIP cluster 0", "192.0.2.11 svc/ext-local externalIP local 1"}
	if dualAndAPIAway {
		wantLines = append(wantLines, "2001:db8:5e::10 svc/ext6-cluster externalIP cluster 0")
	}
	if !slices.Equal(lines, wantLines) {
		t.Errorf("a1's status: Service addresses %q, want %q", lines, wantLines)
	}
	if sk := strings.Join(st.GetServiceAddressesSkipped(), "\n"); !strings.Contains(sk, "svc/outside externalIP 192.0.2.200: outside bgp.serviceExternalIPs") ||
		!strings.Contains(sk, "svc/outside loadBalancer 10.200.1.5: outside bgp.serviceLoadBalancerIPs") {
		t.Errorf("a1's status does not say why the outside addresses are not announced: %q", sk)
	}
	text, err := a1.Reef("status")
	if err != nil || !slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
		return strings.Join(strings.Fields(line), " ") == "192.0.2.11 svc/ext-local externalIP externalTrafficPolicy Local: 1 ready endpoint(s) on this node"
	}) {
		t.Errorf("a1: reef status does not list the Local Service address (err %v):\n%s", err, text)
	}
	if v := scrapeIn(t, a1, `reef_bgp_service_address_announced{address="192.0.2.11",reason="local",service="svc/ext-local",source="externalIP"}`); v != "1" {
		t.Errorf("a1: reef_bgp_service_address_announced of 192.0.2.11 is %q, want 1", v)
	}
	for _, n := range nodes {
		st := mustStatus(t, n)
		if st.GetBgpDropped() != 0 {
			t.Errorf("%s dropped %d paths from its peers: a Service address went over the mesh?", n.Name, st.GetBgpDropped())
		}
	}

	// Local follows the endpoints: a2's turns unready (withdrawn), b1's
	// turns ready (b1 announces it), a new one on a1 (a1 too).
	setSlice(t, ctx, admin, ns, "lb-local", svcEndpoint{a2.Name, false}, svcEndpoint{b1.Name, false})
	want[lbLocal] = nil
	routerHas(t, tor, want)
	setSlice(t, ctx, admin, ns, "lb-local", svcEndpoint{a2.Name, false}, svcEndpoint{b1.Name, true})
	want[lbLocal] = []netip.Addr{b1.Address}
	routerHas(t, tor, want)
	setSlice(t, ctx, admin, ns, "lb-local", svcEndpoint{a2.Name, false}, svcEndpoint{b1.Name, true}, svcEndpoint{a1.Name, true})
	want[lbLocal] = []netip.Addr{a1.Address, b1.Address}
	routerHas(t, tor, want)
	if dualAndAPIAway {
		serviceAPIAway(t, k, tor, nodes, want)
	}
	// The Service deleted: withdrawn everywhere.
	if err := admin.CoreV1().Services(ns).Delete(ctx, "ext-cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want[extCluster] = nil
	routerHas(t, tor, want)
	for _, n := range nodes {
		if !strings.Contains(n.Log(), "Service address announced") {
			t.Errorf("%s does not log the Service addresses it announces", n.Name)
		}
	}
}

// serviceAPIAway stops the API: the nodes see the watch fail and keep
// announcing what they announced; then starts it again.
func serviceAPIAway(t *testing.T, k *lab.KubeAPI, tor lab.ToR, nodes []*lab.Node, want map[netip.Addr][]netip.Addr) {
	t.Helper()
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 30*time.Second, func() string {
		for _, n := range nodes {
			if w := mustStatus(t, n).GetServiceAddressesWatch(); !strings.HasPrefix(w, "failing since") {
				return fmt.Sprintf("%s's watch of Services with the API stopped: %q", n.Name, w)
			}
		}
		return ""
	})
	t.Logf("the nodes saw the API gone after %s", time.Since(start).Round(time.Millisecond))
	routerHas(t, tor, want)
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
}

// routerECMP is "" if the router's kernel route to exactly prefix is one
// ECMP route with a next hop via each of hops (the ToR's multipath: BIRD's
// merge paths, FRR's maximum-paths through zebra), else what the route is.
func routerECMP(t *testing.T, l *lab.Lab, prefix netip.Prefix, hops []netip.Addr) string {
	t.Helper()
	out := run(t, l, l.Prefix+"-xr", "ip", "-4", "route", "show", "exact", prefix.String())
	for _, a := range hops {
		if !strings.Contains(out, "nexthop via "+a.String()+" ") {
			return fmt.Sprintf("the router's kernel route to %s: %q, want an ECMP route with a next hop via each node %v", prefix, strings.TrimSpace(out), hops)
		}
	}
	return ""
}

// routerHas waits until the router's paths to each address (a /32, a
// /128) come from exactly the next hops listed (none: no path).
func routerHas(t *testing.T, tor lab.ToR, want map[netip.Addr][]netip.Addr) {
	t.Helper()
	eventually(t, 20*time.Second, func() string {
		var wrong []string
		for a, nodes := range want {
			hops, err := tor.NextHops(netip.PrefixFrom(a, a.BitLen()))
			if err != nil {
				return err.Error()
			}
			if !slices.Equal(hops, nodes) {
				wrong = append(wrong, fmt.Sprintf("%s via %v, want via %v", a, hops, nodes))
			}
		}
		slices.Sort(wrong)
		if len(wrong) > 0 {
			return "the router's paths: " + strings.Join(wrong, "; ")
		}
		return ""
	})
}

// mkService makes a Service without a selector (its EndpointSlices are
// the test's) with externalIPs and, if ingress is set, that address in
// its LoadBalancer status; it returns the address the test watches (the
// ingress, else the first external IP).
func mkService(t *testing.T, ctx context.Context, c *kubernetes.Clientset, ns, name string, typ corev1.ServiceType, policy corev1.ServiceExternalTrafficPolicy, externalIPs []string, ingress string) netip.Addr {
	t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Type: typ, ExternalTrafficPolicy: policy, ExternalIPs: externalIPs,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
	}}
	s, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
	if ingress == "" {
		return netip.MustParseAddr(externalIPs[0])
	}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set the LoadBalancer status of %s/%s: %v", ns, name, err)
	}
	return netip.MustParseAddr(ingress)
}

// svcEndpoint is an endpoint of a test's EndpointSlice: its node, and
// whether it is ready.
type svcEndpoint struct {
	node  string
	ready bool
}

func sliceOf(ns, service string, eps []svcEndpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "reef-e2e"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(80)), Protocol: ptrTo(corev1.ProtocolTCP)}},
	}
	for i, e := range eps {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.250.%d", i+1)},
			NodeName: ptrTo(e.node), Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(e.ready)}})
	}
	return es
}

func mkSlice(t *testing.T, ctx context.Context, c *kubernetes.Clientset, ns, service string, eps ...svcEndpoint) {
	t.Helper()
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceOf(ns, service, eps), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the EndpointSlice of %s/%s: %v", ns, service, err)
	}
}

func setSlice(t *testing.T, ctx context.Context, c *kubernetes.Clientset, ns, service string, eps ...svcEndpoint) {
	t.Helper()
	cur, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, service+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es := sliceOf(ns, service, eps)
	es.ResourceVersion = cur.ResourceVersion
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the EndpointSlice of %s/%s: %v", ns, service, err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestKubernetesServiceAddresses: a LoadBalancer address reaches a pod
// from a client behind the router, through kube-proxy, in the lab's real
// cluster (two workers with kubelet, kube-proxy and reef) with the ToR
// (BIRD 2 in TestKubernetesServiceAddresses, FRR in
// TestKubernetesServiceAddressesFRR; multipath) as every node's external
// peer and the laptop behind it. Services made through kubectl with selectors, so the cluster's
// EndpointSlice controller writes the slices from the pods' readiness,
// and reef itself assigns the LoadBalancer addresses (docs/lbipam.md):
// the Services ask for theirs with reefcni.io/loadBalancerIPs, and the
// test only reads the status reef wrote:
//
//   - Cluster, backends on both nodes: the router has both nodes' paths,
//     and the laptop gets an answer;
//   - the same backends through the Service's ClusterIP (the nodes
//     announce the cluster's Service range, bgp.serviceClusterIPs) and
//     through an external IP of another Service (bgp.serviceExternalIPs):
//     the router has both nodes' paths to the range and to the address
//     (and one ECMP route to the range in its kernel: routerECMP), and the
//     laptop gets an answer from each;
//   - Local, a backend on the first node only: only that node announces
//     it, and the pod sees the laptop's own address (no SNAT);
//   - that backend deleted: the address is withdrawn.
func TestKubernetesServiceAddresses(t *testing.T) {
	slowSuite(t)
	testKubernetesServiceAddresses(t, "bird")
}

func TestKubernetesServiceAddressesFRR(t *testing.T) {
	slowSuite(t)
	testKubernetesServiceAddresses(t, "frr")
}

func testKubernetesServiceAddresses(t *testing.T, kind string) {
	l := newLab(t)
	if _, err := l.AddCrossRouter(); err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, l, lab.ClusterOptions{Nodes: 2,
		BGPExtra: fmt.Sprintf("  externalPeers:\n    - address: %s\n      asn: %d\n  serviceLoadBalancerIPs: [%s]\n  serviceClusterIPs: [%s]\n  serviceExternalIPs: [%s]\n",
			lab.RouterA, lab.RouterASN, svcLBCIDR, lab.KubeServiceRange, svcExternalCIDR)})
	var nodes []*lab.Node
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Node)
	}
	tor := startToR(t, l, kind, nodes, append(slices.Clone(lab.DefaultToRPools), lab.ToRPool{CIDR: svcRouterLB, BlockSize: 32},
		lab.ToRPool{CIDR: lab.KubeServiceRange, BlockSize: lab.KubeServiceRange.Bits()}, lab.ToRPool{CIDR: svcRouterExternal, BlockSize: 32}), "")
	if err := tor.Multipath(); err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	first := c.Nodes[0]
	extIP := netip.MustParseAddr("192.0.2.20") // inside svcExternalCIDR
	manifest := webPods(c.Nodes) + fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: local-%[1]s, namespace: default, labels: {app: local}}
spec:
  nodeName: %[1]s
  containers:
  - name: web
    image: %[2]s
    args: [netexec, --http-port=8080]
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}}
---
apiVersion: v1
kind: Service
metadata: {name: lb-cluster, namespace: default, annotations: {reefcni.io/loadBalancerIPs: "10.200.0.20"}}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: lb-local, namespace: default, annotations: {reefcni.io/loadBalancerIPs: "10.200.0.21"}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: local}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ext-cluster, namespace: default}
spec:
  selector: {app: web}
  externalIPs: [%[3]s]
  ports: [{port: 80, targetPort: 8080}]
`, first.Name, k8simages.Agnhost, extIP)
	file := filepath.Join(l.Dir, "lb.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("apply", "-f", file); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s"); err != nil {
		out, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
		t.Fatalf("%v\n%s", err, out)
	}
	admin, err := c.API.Admin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	lbCluster, lbLocal := netip.MustParseAddr("10.200.0.20"), netip.MustParseAddr("10.200.0.21")
	for name, ip := range map[string]netip.Addr{"lb-cluster": lbCluster, "lb-local": lbLocal} {
		eventually(t, 30*time.Second, func() string {
			s, err := admin.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if in := s.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != ip.String() {
				return fmt.Sprintf("Service %s: reef assigned %v, want the requested %s", name, in, ip)
			}
			return ""
		})
	}
	var all []netip.Addr
	for _, n := range nodes {
		all = append(all, n.Address)
	}
	slices.SortFunc(all, netip.Addr.Compare)
	want := map[netip.Addr][]netip.Addr{lbCluster: all, lbLocal: {first.Address}, extIP: all}
	routerHas(t, tor, want)
	// The Service range: one route over both nodes, in the router's kernel
	// too.
	eventually(t, 20*time.Second, func() string {
		hops, err := tor.NextHops(lab.KubeServiceRange)
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(hops, all) {
			return fmt.Sprintf("the router's paths to %s: via %v, want via %v", lab.KubeServiceRange, hops, all)
		}
		return routerECMP(t, l, lab.KubeServiceRange, all)
	})
	t.Logf("the router's kernel route: %s", strings.Join(strings.Fields(run(t, l, l.Prefix+"-xr", "ip", "-4", "route", "show", "exact", lab.KubeServiceRange.String())), " "))
	svc, err := admin.CoreV1().Services("default").Get(ctx, "lb-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !lab.KubeServiceRange.Contains(clusterIP) {
		t.Fatalf("lb-cluster's ClusterIP %q: want an address of %s (%v)", svc.Spec.ClusterIP, lab.KubeServiceRange, err)
	}

	// From the laptop, through the router and kube-proxy.
	get := func(ip netip.Addr, path string) (string, error) {
		out, err := l.Run(laptop, "curl", "-sS", "--max-time", "5", "http://"+ip.String()+path)
		return strings.TrimSpace(string(out)), err
	}
	eventually(t, 30*time.Second, func() string {
		for what, ip := range map[string]netip.Addr{"LoadBalancer, Cluster": lbCluster, "ClusterIP": clusterIP, "external IP": extIP} {
			if got, err := get(ip, "/hostname"); err != nil || !strings.HasPrefix(got, "web-") {
				return fmt.Sprintf("laptop -> %s (%s): %q, %v", ip, what, got, err)
			}
		}
		got, err := get(lbLocal, "/clientip")
		if err != nil || !strings.HasPrefix(got, lab.LaptopAddr.String()+":") {
			return fmt.Sprintf("laptop -> %s (Local) /clientip: %q, %v; want the laptop's own address %s", lbLocal, got, err, lab.LaptopAddr)
		}
		return ""
	})
	t.Logf("the laptop reached the web pods at %s (LoadBalancer), %s (ClusterIP) and %s (external IP)", lbCluster, clusterIP, extIP)
	got, _ := get(lbLocal, "/clientip")
	t.Logf("the Local backend sees the client as %s", got)

	// The Local backend gone: its node withdraws the address.
	if _, err := c.Kubectl("delete", "pod", "local-"+first.Name, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	want[lbLocal] = nil
	routerHas(t, tor, want)
}
