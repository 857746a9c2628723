package lbipam

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	pool4 = netip.MustParsePrefix("192.0.2.0/29")
	pool6 = netip.MustParsePrefix("2001:db8:5::/125")
	pools = []netip.Prefix{pool4, pool6}
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func svc(key string, mods ...func(*Service)) Service {
	s := Service{Key: key, UID: "uid-" + key, Ours: true, IPv4: true}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func requests(as ...string) func(*Service) { return func(s *Service) { s.Requested = addrs(as...) } }
func shows(as ...string) func(*Service)    { return func(s *Service) { s.Ingress = addrs(as...) } }
func dual(s *Service)                      { s.IPv6 = true }
func notOurs(s *Service)                   { s.Ours = false }

func owner(key string) Owner { return Owner{UID: "uid-" + key, Service: key} }

func TestAssign(t *testing.T) {
	a := netip.MustParseAddr
	for _, c := range []struct {
		name   string
		svcs   []Service
		rec    Record
		pools  []netip.Prefix
		want   Record
		rel    []string // released addresses
		status map[string][]netip.Addr
		events []string // reasons, in order
	}{{
		name:   "first free address, skipping the network address",
		svcs:   []Service{svc("default/web")},
		want:   Record{a("192.0.2.1"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.1")},
	}, {
		name:   "dual-stack gets one of each family",
		svcs:   []Service{svc("default/web", dual)},
		want:   Record{a("192.0.2.1"): owner("default/web"), a("2001:db8:5::1"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.1", "2001:db8:5::1")},
	}, {
		name: "kept, nothing to write",
		svcs: []Service{svc("default/web", shows("192.0.2.3"))},
		rec:  Record{a("192.0.2.3"): owner("default/web")},
		want: Record{a("192.0.2.3"): owner("default/web")},
	}, {
		name:   "requested address honoured",
		svcs:   []Service{svc("default/web", requests("192.0.2.5"))},
		want:   Record{a("192.0.2.5"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.5")},
	}, {
		name:   "requested address in use: refused with an event",
		svcs:   []Service{svc("default/a", shows("192.0.2.1")), svc("default/b", requests("192.0.2.1"))},
		rec:    Record{a("192.0.2.1"): owner("default/a")},
		want:   Record{a("192.0.2.1"): owner("default/a")},
		events: []string{"LoadBalancerIPInUse"},
	}, {
		name:   "requested address outside the pools: refused with an event",
		svcs:   []Service{svc("default/web", requests("198.51.100.7"))},
		want:   Record{},
		events: []string{"LoadBalancerIPNotInPool"},
	}, {
		name: "pool exhausted: an event, no address",
		svcs: []Service{svc("a/1"), svc("a/2"), svc("a/3"), svc("a/4"), svc("a/5"), svc("a/6"), svc("a/7")},
		want: Record{a("192.0.2.1"): owner("a/1"), a("192.0.2.2"): owner("a/2"), a("192.0.2.3"): owner("a/3"),
			a("192.0.2.4"): owner("a/4"), a("192.0.2.5"): owner("a/5"), a("192.0.2.6"): owner("a/6")},
		status: map[string][]netip.Addr{"a/1": addrs("192.0.2.1"), "a/2": addrs("192.0.2.2"), "a/3": addrs("192.0.2.3"),
			"a/4": addrs("192.0.2.4"), "a/5": addrs("192.0.2.5"), "a/6": addrs("192.0.2.6")},
		events: []string{"NoFreeLoadBalancerIP"},
	}, {
		name:   "a deleted Service's address is released, and not reused in the same round",
		svcs:   []Service{svc("default/new")},
		rec:    Record{a("192.0.2.1"): owner("default/gone")},
		want:   Record{a("192.0.2.1"): owner("default/gone"), a("192.0.2.2"): owner("default/new")},
		rel:    []string{"192.0.2.1"},
		status: map[string][]netip.Addr{"default/new": addrs("192.0.2.2")},
	}, {
		name:   "a changed request: the new address taken, the old one released and no longer shown",
		svcs:   []Service{svc("default/web", requests("192.0.2.4"), shows("192.0.2.1"))},
		rec:    Record{a("192.0.2.1"): owner("default/web")},
		want:   Record{a("192.0.2.1"): owner("default/web"), a("192.0.2.4"): owner("default/web")},
		rel:    []string{"192.0.2.1"},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.4")},
	}, {
		name: "a Service of another class: released, its status left to its controller",
		svcs: []Service{svc("default/web", notOurs, shows("192.0.2.1"))},
		rec:  Record{a("192.0.2.1"): owner("default/web")},
		want: Record{a("192.0.2.1"): owner("default/web")},
		rel:  []string{"192.0.2.1"},
	}, {
		name:   "a pool removed from the config: released",
		svcs:   []Service{svc("default/web", shows("192.0.2.1"))},
		rec:    Record{a("192.0.2.1"): owner("default/web")},
		pools:  []netip.Prefix{netip.MustParsePrefix("198.51.100.0/30")},
		want:   Record{a("192.0.2.1"): owner("default/web"), a("198.51.100.1"): owner("default/web")},
		rel:    []string{"192.0.2.1"},
		status: map[string][]netip.Addr{"default/web": addrs("198.51.100.1")},
	}, {
		name: "a lost record is rebuilt from the statuses",
		svcs: []Service{svc("default/a", shows("192.0.2.4")), svc("default/b", shows("192.0.2.2"))},
		want: Record{a("192.0.2.4"): owner("default/a"), a("192.0.2.2"): owner("default/b")},
	}, {
		name:   "an address another Service shows is not given out",
		svcs:   []Service{svc("default/a"), svc("other/lb", notOurs, shows("192.0.2.1"))},
		want:   Record{a("192.0.2.2"): owner("default/a")},
		status: map[string][]netip.Addr{"default/a": addrs("192.0.2.2")},
	}, {
		name:   "a request that does not parse: an event, and an address of the pool",
		svcs:   []Service{svc("default/web", func(s *Service) { s.BadRequest = `annotation reefcni.io/loadBalancerIPs: "nope" is not an IP address` })},
		want:   Record{a("192.0.2.1"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.1")},
		events: []string{"InvalidLoadBalancerIP"},
	}, {
		name:   "a /31 gives both of its addresses, after the /30 before it: the pools in order",
		svcs:   []Service{svc("a/1"), svc("a/2"), svc("a/3"), svc("a/4")},
		pools:  []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30"), netip.MustParsePrefix("198.51.100.0/31")},
		want:   Record{a("192.0.2.1"): owner("a/1"), a("192.0.2.2"): owner("a/2"), a("198.51.100.0"): owner("a/3"), a("198.51.100.1"): owner("a/4")},
		status: map[string][]netip.Addr{"a/1": addrs("192.0.2.1"), "a/2": addrs("192.0.2.2"), "a/3": addrs("198.51.100.0"), "a/4": addrs("198.51.100.1")},
	}, {
		name: "a Service's clusterIP or externalIP is not given out, nor honoured as a request",
		svcs: []Service{svc("default/kubernetes", notOurs, func(s *Service) { s.Uses = addrs("192.0.2.1") }),
			svc("default/ext", notOurs, func(s *Service) { s.Uses = addrs("192.0.2.9", "192.0.2.2") }),
			svc("default/web"), svc("default/wants", requests("192.0.2.1"))},
		want:   Record{a("192.0.2.3"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.3")},
		events: []string{"LoadBalancerIPInUse"},
	}, {
		name:   "a request of a family the Service does not have: an event, and an address of its family",
		svcs:   []Service{svc("default/web", requests("2001:db8:5::3"))},
		want:   Record{a("192.0.2.1"): owner("default/web")},
		status: map[string][]netip.Addr{"default/web": addrs("192.0.2.1")},
		events: []string{"InvalidLoadBalancerIP"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			ps := c.pools
			if ps == nil {
				ps = pools
			}
			p := Assign(c.svcs, c.rec, ps)
			if diff := cmp.Diff(c.want, p.Record, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			var rel []string
			for _, r := range p.Release {
				rel = append(rel, r.Addr.String())
			}
			if diff := cmp.Diff(c.rel, rel); diff != "" {
				t.Errorf("released (-want +got):\n%s", diff)
			}
			status := map[string][]netip.Addr{}
			for _, s := range p.Status {
				status[s.Service] = s.Ingress
			}
			if c.status == nil {
				c.status = map[string][]netip.Addr{}
			}
			if diff := cmp.Diff(c.status, status, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			var events []string
			for _, e := range p.Events {
				events = append(events, e.Reason)
				if e.Message == "" {
					t.Errorf("event %s without a message", e.Reason)
				}
			}
			if diff := cmp.Diff(c.events, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAssignNeverTwice: over random snapshots, the plan never gives one
// address to two Services, never records an address outside the pools as
// new, and never shows a Service an address the record does not give it.
func TestAssignNeverTwice(t *testing.T) {
	keys := []string{"a/1", "a/2", "a/3", "b/1", "b/2"}
	all := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8:5::1", "198.51.100.1"}
	for seed := range 5000 {
		r := uint64(seed)*0x9e3779b97f4a7c15 + 1
		next := func(n int) int { r ^= r << 13; r ^= r >> 7; r ^= r << 17; return int(r % uint64(n)) }
		var svcs []Service
		rec := Record{}
		for _, k := range keys {
			if next(4) == 0 {
				continue // gone
			}
			s := svc(k)
			s.Ours, s.IPv6 = next(5) != 0, next(2) == 0
			if next(3) == 0 {
				s.Requested = addrs(all[next(len(all))])
			}
			if next(3) == 0 {
				s.Ingress = addrs(all[next(len(all))])
			}
			svcs = append(svcs, s)
		}
		for range next(4) {
			rec[netip.MustParseAddr(all[next(len(all))])] = owner(keys[next(len(keys))])
		}
		p := Assign(svcs, rec, pools)
		for a, o := range p.Record {
			if prev, ok := rec[a]; ok && prev != o {
				t.Fatalf("seed %d: %s moved from %s to %s in one round", seed, a, prev.Service, o.Service)
			}
			if _, ok := rec[a]; !ok && !pool4.Contains(a) && !pool6.Contains(a) {
				t.Fatalf("seed %d: %s assigned outside the pools", seed, a)
			}
		}
		for _, st := range p.Status {
			for _, a := range st.Ingress {
				if o, ok := p.Record[a]; !ok || o.UID != st.UID {
					t.Fatalf("seed %d: %s is to show %s, which the record gives to %v", seed, st.Service, a, o)
				}
			}
		}
	}
}

// TestServiceFrom: which Services are ours, the families they want, and
// how requests parse, with the errors a person reads in the event.
func TestServiceFrom(t *testing.T) {
	other, ours := "example.com/other", Class
	for _, c := range []struct {
		name string
		svc  corev1.Service
		want Service
	}{{
		name: "a LoadBalancer with no class, no families yet: ours, IPv4",
		svc:  corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		want: Service{Ours: true, IPv4: true},
	}, {
		name: "reef's class, dual-stack",
		svc: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &ours,
			IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}}},
		want: Service{Ours: true, IPv4: true, IPv6: true},
	}, {
		name: "another class",
		svc:  corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &other}},
		want: Service{IPv4: true},
	}, {
		name: "a ClusterIP Service",
		svc:  corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}},
		want: Service{IPv4: true},
	}, {
		name: "requests: the annotation, then spec.loadBalancerIP; bad and second ones named",
		svc: corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RequestAnnotation: "192.0.2.7, nope,2001:db8:5::3"}},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "192.0.2.9"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}, {Hostname: "lb.example.com"}}}}},
		want: Service{Ours: true, IPv4: true, Requested: addrs("192.0.2.7", "2001:db8:5::3"), Ingress: addrs("192.0.2.7"),
			BadRequest: `annotation reefcni.io/loadBalancerIPs: "nope" is not an IP address; spec.loadBalancerIP: 192.0.2.9 is a second address of its family; only the first is used`},
	}, {
		name: "its clusterIPs and externalIPs are in use; headless's None is no address",
		svc: corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.10", "fd00:96::a"},
			ExternalIPs: []string{"192.0.2.20"}}},
		want: Service{IPv4: true, Uses: addrs("10.96.0.10", "fd00:96::a", "192.0.2.20")},
	}, {
		name: "headless",
		svc:  corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"}}},
		want: Service{IPv4: true},
	}, {
		name: "the same address in the annotation and spec.loadBalancerIP: one request, no complaint",
		svc: corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RequestAnnotation: "192.0.2.7"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: "192.0.2.7"}},
		want: Service{Ours: true, IPv4: true, Requested: addrs("192.0.2.7")},
	}} {
		t.Run(c.name, func(t *testing.T) {
			c.svc.Namespace, c.svc.Name, c.svc.UID = "default", "web", "u1"
			c.want.Key, c.want.UID = "default/web", "u1"
			if diff := cmp.Diff(c.want, serviceFrom(&c.svc), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("serviceFrom (-want +got):\n%s", diff)
			}
		})
	}
}
