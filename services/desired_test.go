package services

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testCfg = Config{
	ExternalIPs:     []netip.Prefix{netip.MustParsePrefix("198.51.100.0/25"), netip.MustParsePrefix("2001:db8:e::/64")},
	LoadBalancerIPs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:1b::/64")},
	Node:            "node1",
}

// svc is a Service: type t ("" ClusterIP), policy ("" Cluster), external
// IPs and LoadBalancer ingress IPs.
func svc(name string, t corev1.ServiceType, policy corev1.ServiceExternalTrafficPolicy, externalIPs []string, ingress ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: t, ClusterIP: "10.96.0.10", ExternalTrafficPolicy: policy, ExternalIPs: externalIPs}}
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	for _, ip := range ingress {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// ep is an endpoint on node, ready or not (nil: unset).
type ep struct {
	node  string
	ready *bool
}

var yes, no = ptr(true), ptr(false)

func ptr[T any](v T) *T { return &v }

// slice is an EndpointSlice of the Service name in family at (IPv4 or
// IPv6).
func slice(name string, at discoveryv1.AddressType, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-" + string(at),
		Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: at}
	for _, e := range eps {
		var node *string
		if e.node != "" {
			node = ptr(e.node)
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.5"}, NodeName: node, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}})
	}
	return es
}

const (
	v4 = discoveryv1.AddressTypeIPv4
	v6 = discoveryv1.AddressTypeIPv6
	lb = corev1.ServiceTypeLoadBalancer
	np = corev1.ServiceTypeNodePort
	lo = corev1.ServiceExternalTrafficPolicyLocal
	cl = corev1.ServiceExternalTrafficPolicyCluster
)

func cluster(service, source string) Reason {
	return Reason{Service: "default/" + service, Source: source, Policy: PolicyCluster}
}

func localR(service, source string, n int) Reason {
	return Reason{Service: "default/" + service, Source: source, Policy: PolicyLocal, LocalEndpoints: n}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestDesired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		svcs   []*corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   map[netip.Addr][]Reason
		skip   []Skipped
	}{
		{name: "nothing"},
		{
			name: "external IP, cluster policy, no endpoints at all",
			svcs: []*corev1.Service{svc("web", "", "", []string{"198.51.100.10"})},
			want: map[netip.Addr][]Reason{addr("198.51.100.10"): {cluster("web", SourceExternalIP)}},
		},
		{
			name: "explicit Cluster on a NodePort Service, both families",
			svcs: []*corev1.Service{svc("web", np, cl, []string{"198.51.100.10", "2001:db8:e::10"})},
			want: map[netip.Addr][]Reason{addr("198.51.100.10"): {cluster("web", SourceExternalIP)}, addr("2001:db8:e::10"): {cluster("web", SourceExternalIP)}},
		},
		{
			name: "LoadBalancer ingress, cluster policy",
			svcs: []*corev1.Service{svc("lb", lb, cl, nil, "203.0.113.7", "2001:db8:1b::7")},
			want: map[netip.Addr][]Reason{addr("203.0.113.7"): {cluster("lb", SourceLoadBalancer)}, addr("2001:db8:1b::7"): {cluster("lb", SourceLoadBalancer)}},
		},
		{
			name: "ingress of a Service that is not a LoadBalancer is not served",
			svcs: []*corev1.Service{svc("was-lb", np, cl, nil, "203.0.113.7")},
		},
		{
			name: "the lists are apart: an external IP in the LoadBalancer CIDR and the other way round",
			svcs: []*corev1.Service{svc("lb", lb, cl, []string{"203.0.113.8"}, "198.51.100.9")},
			skip: []Skipped{
				{"default/lb", SourceExternalIP, "203.0.113.8", "outside bgp.serviceExternalIPs [198.51.100.0/25 2001:db8:e::/64]"},
				{"default/lb", SourceLoadBalancer, "198.51.100.9", "outside bgp.serviceLoadBalancerIPs [203.0.113.0/24 2001:db8:1b::/64]"},
			},
		},
		{
			name: "outside the CIDRs, next to one inside",
			svcs: []*corev1.Service{svc("web", "", "", []string{"198.51.100.200", "198.51.100.1"})},
			want: map[netip.Addr][]Reason{addr("198.51.100.1"): {cluster("web", SourceExternalIP)}},
			skip: []Skipped{{"default/web", SourceExternalIP, "198.51.100.200", "outside bgp.serviceExternalIPs [198.51.100.0/25 2001:db8:e::/64]"}},
		},
		{
			name:   "local policy, a ready endpoint here",
			svcs:   []*corev1.Service{svc("web", lb, lo, []string{"198.51.100.10"}, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node1", yes}, ep{"node2", yes})},
			want:   map[netip.Addr][]Reason{addr("198.51.100.10"): {localR("web", SourceExternalIP, 1)}, addr("203.0.113.7"): {localR("web", SourceLoadBalancer, 1)}},
		},
		{
			name:   "local policy, endpoints elsewhere only",
			svcs:   []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node2", yes}, ep{"node3", yes})},
		},
		{
			name:   "local policy, the endpoint here not ready",
			svcs:   []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node1", no}, ep{"node2", yes})},
		},
		{
			name:   "local policy, ready unset counts as ready",
			svcs:   []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node1", nil})},
			want:   map[netip.Addr][]Reason{addr("203.0.113.7"): {localR("web", SourceLoadBalancer, 1)}},
		},
		{
			name:   "local policy, an endpoint without a node",
			svcs:   []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"", yes})},
		},
		{
			name: "local policy, endpoints counted over several slices",
			svcs: []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node1", yes}, ep{"node1", no}),
				func() *discoveryv1.EndpointSlice { s := slice("web", v4, ep{"node1", yes}); s.Name += "-2"; return s }()},
			want: map[netip.Addr][]Reason{addr("203.0.113.7"): {localR("web", SourceLoadBalancer, 2)}},
		},
		{
			name: "local policy, per family: an IPv6 endpoint does not carry the IPv4 address",
			svcs: []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7", "2001:db8:1b::7")},
			slices: []*discoveryv1.EndpointSlice{slice("web", v6, ep{"node1", yes}), slice("web", v4, ep{"node2", yes}),
				slice("web", discoveryv1.AddressTypeFQDN, ep{"node1", yes})},
			want: map[netip.Addr][]Reason{addr("2001:db8:1b::7"): {localR("web", SourceLoadBalancer, 1)}},
		},
		{
			name: "local policy, a slice of another Service or namespace does not count",
			svcs: []*corev1.Service{svc("web", lb, lo, nil, "203.0.113.7")},
			slices: []*discoveryv1.EndpointSlice{slice("db", v4, ep{"node1", yes}),
				func() *discoveryv1.EndpointSlice {
					s := slice("web", v4, ep{"node1", yes})
					s.Namespace = "other"
					return s
				}(),
				func() *discoveryv1.EndpointSlice { s := slice("web", v4, ep{"node1", yes}); s.Labels = nil; return s }()},
		},
		{
			name: "one address, two Services: announced while either wants it",
			svcs: []*corev1.Service{svc("a", lb, lo, nil, "203.0.113.7"), svc("b", "", "", []string{"203.0.113.7"}),
				svc("c", "", "", []string{"198.51.100.3"}), svc("d", lb, lo, []string{"198.51.100.3"})},
			slices: []*discoveryv1.EndpointSlice{slice("a", v4, ep{"node1", yes})},
			want: map[netip.Addr][]Reason{
				addr("203.0.113.7"):  {localR("a", SourceLoadBalancer, 1)},
				addr("198.51.100.3"): {cluster("c", SourceExternalIP)},
			},
			skip: []Skipped{{"default/b", SourceExternalIP, "203.0.113.7", "outside bgp.serviceExternalIPs [198.51.100.0/25 2001:db8:e::/64]"}},
		},
		{
			name: "an address listed twice in one Service",
			svcs: []*corev1.Service{svc("web", "", "", []string{"198.51.100.10", "198.51.100.10"})},
			want: map[netip.Addr][]Reason{addr("198.51.100.10"): {cluster("web", SourceExternalIP)}},
		},
		{
			name: "ExternalName and headless Services are not served",
			svcs: []*corev1.Service{
				func() *corev1.Service {
					s := svc("name", corev1.ServiceTypeExternalName, "", []string{"198.51.100.10"})
					s.Spec.ClusterIP = ""
					return s
				}(),
				func() *corev1.Service {
					s := svc("headless", "", "", []string{"198.51.100.11"})
					s.Spec.ClusterIP = "None"
					return s
				}(),
			},
		},
		{
			name: "ingress by hostname, ipMode VIP and Proxy",
			svcs: []*corev1.Service{func() *corev1.Service {
				s := svc("lb", lb, "", nil)
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"},
					{IP: "203.0.113.1", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}, {IP: "203.0.113.2", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}
				return s
			}()},
			want: map[netip.Addr][]Reason{addr("203.0.113.1"): {cluster("lb", SourceLoadBalancer)}},
			skip: []Skipped{{"default/lb", SourceLoadBalancer, "203.0.113.2", "ipMode Proxy: the load balancer proxies it, kube-proxy does not take it"}},
		},
		{
			name:   "malformed addresses are skipped, never fatal",
			svcs:   []*corev1.Service{svc("bad", lb, "", []string{"nonsense", "::ffff:198.51.100.10", "fe80::1%eth0", ""}, "203.0.113.300"), nil},
			slices: []*discoveryv1.EndpointSlice{nil},
			skip: []Skipped{
				{"default/bad", SourceExternalIP, "", "not an IP address"},
				{"default/bad", SourceExternalIP, "::ffff:198.51.100.10", "an IPv4 address written as IPv6"},
				{"default/bad", SourceExternalIP, "fe80::1%eth0", "not an IP address"},
				{"default/bad", SourceExternalIP, "nonsense", "not an IP address"},
				{"default/bad", SourceLoadBalancer, "203.0.113.300", "not an IP address"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Desired(testCfg, tc.svcs, tc.slices)
			want := tc.want
			if want == nil {
				want = map[netip.Addr][]Reason{}
			}
			if diff := cmp.Diff(want, got.Announce, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("announce (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skip, got.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// A Local Service's address follows its endpoints on this node through
// their life: announced while one is ready, withdrawn when the last goes
// or turns unready, announced again when one comes; a Cluster one stays
// throughout.
func TestDesiredFollowsLocalEndpoints(t *testing.T) {
	svcs := []*corev1.Service{svc("local", lb, lo, nil, "203.0.113.7"), svc("everywhere", lb, cl, nil, "203.0.113.8")}
	steps := []struct {
		what string
		eps  []ep
		want []netip.Addr
	}{
		{"no endpoints", nil, []netip.Addr{addr("203.0.113.8")}},
		{"one here, not ready yet", []ep{{"node1", no}}, []netip.Addr{addr("203.0.113.8")}},
		{"ready", []ep{{"node1", yes}}, []netip.Addr{addr("203.0.113.7"), addr("203.0.113.8")}},
		{"a second one elsewhere", []ep{{"node1", yes}, {"node2", yes}}, []netip.Addr{addr("203.0.113.7"), addr("203.0.113.8")}},
		{"the one here unready", []ep{{"node1", no}, {"node2", yes}}, []netip.Addr{addr("203.0.113.8")}},
		{"ready again", []ep{{"node1", yes}, {"node2", yes}}, []netip.Addr{addr("203.0.113.7"), addr("203.0.113.8")}},
		{"the one here gone", []ep{{"node2", yes}}, []netip.Addr{addr("203.0.113.8")}},
		{"a new one here", []ep{{"node2", yes}, {"node1", yes}}, []netip.Addr{addr("203.0.113.7"), addr("203.0.113.8")}},
	}
	for _, s := range steps {
		var eps []*discoveryv1.EndpointSlice
		if s.eps != nil {
			eps = append(eps, slice("local", v4, s.eps...), slice("everywhere", v4, s.eps...))
		}
		if got := Desired(testCfg, svcs, eps).Addrs(); !cmp.Equal(got, s.want, cmpopts.EquateComparable(netip.Addr{})) {
			t.Errorf("%s: announce %v, want %v", s.what, got, s.want)
		}
	}
}

// Desired looks at nothing but its arguments: the same input gives the
// same plan, whatever the order of the objects.
func TestDesiredOrderFree(t *testing.T) {
	svcs := []*corev1.Service{svc("a", lb, lo, []string{"198.51.100.1"}, "203.0.113.7"), svc("b", "", "", []string{"198.51.100.1", "198.51.100.200"}),
		svc("c", lb, "", nil, "203.0.113.7", "203.0.113.9")}
	eps := []*discoveryv1.EndpointSlice{slice("a", v4, ep{"node1", yes}), slice("c", v4, ep{"node2", yes})}
	want := Desired(testCfg, svcs, eps)
	if len(want.Announce) != 3 || len(want.Announce[addr("203.0.113.7")]) != 2 {
		t.Fatalf("plan %+v: want three addresses, 203.0.113.7 for two Services", want)
	}
	for i := range 20 {
		s2, e2 := append([]*corev1.Service(nil), svcs...), append([]*discoveryv1.EndpointSlice(nil), eps...)
		// A fixed shuffle: rotate by i and swap.
		for j := range i {
			s2 = append(s2[1:], s2[0])
			if j%2 == 0 {
				e2[0], e2[1] = e2[1], e2[0]
			}
		}
		if diff := cmp.Diff(want, Desired(testCfg, s2, e2), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Fatalf("order %d (-want +got):\n%s", i, diff)
		}
	}
}

// The informers' transforms keep everything Desired reads: a plan from
// trimmed objects is the plan from the API's.
func TestTrimKeepsThePlan(t *testing.T) {
	full := svc("web", lb, lo, []string{"198.51.100.1", "198.51.100.200"}, "203.0.113.7", "2001:db8:1b::7")
	full.Annotations = map[string]string{"a": "b"}
	full.Spec.Ports = []corev1.ServicePort{{Port: 80}}
	full.Status.LoadBalancer.Ingress = append(full.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "203.0.113.9", IPMode: ptr(corev1.LoadBalancerIPModeProxy)})
	cl := svc("all", lb, "", nil, "203.0.113.8")
	eps := []*discoveryv1.EndpointSlice{slice("web", v4, ep{"node1", yes}, ep{"node1", nil}, ep{"node2", yes}), slice("web", v6, ep{"node1", no}, ep{"node1", yes})}
	eps[0].Labels["other"] = "x"
	svcs := []*corev1.Service{full, cl}
	want := Desired(testCfg, svcs, eps)
	var tsvcs []*corev1.Service
	for _, s := range svcs {
		o, _ := trimService(s)
		tsvcs = append(tsvcs, o.(*corev1.Service))
	}
	var teps []*discoveryv1.EndpointSlice
	for _, e := range eps {
		o, _ := trimSlice(e)
		teps = append(teps, o.(*discoveryv1.EndpointSlice))
	}
	got := Desired(testCfg, tsvcs, teps)
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("plan from trimmed objects (-full +trimmed):\n%s", diff)
	}
	if len(want.Announce) != 4 {
		t.Errorf("plan %+v: want 4 addresses", want.Announce)
	}
	if o, _ := trimService("tombstone"); o != "tombstone" {
		t.Errorf("trimService changed what is not a Service: %v", o)
	}
}
