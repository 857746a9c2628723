package services

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// fuzzInput is Desired's input as the API encodes its objects.
type fuzzInput struct {
	Services  []*corev1.Service            `json:"services"`
	Slices    []*discoveryv1.EndpointSlice `json:"slices"`
	External  []string                     `json:"external"`
	Balancers []string                     `json:"balancers"`
	Node      string                       `json:"node"`
}

// FuzzDesired: whatever Services and EndpointSlices the API holds, Desired
// does not panic, announces only addresses inside the configured CIDRs of
// their source, never an ExternalName or headless Service's, and a Local
// one's only with a ready local endpoint of its family.
func FuzzDesired(f *testing.F) {
	ready, node := true, "n1"
	seed, err := json.Marshal(fuzzInput{
		Services: []*corev1.Service{{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalIPs: []string{"198.51.100.7", "::ffff:198.51.100.8", "bogus"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb"}}}}}},
		Slices: []*discoveryv1.EndpointSlice{{AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}, {}}}},
		External: []string{"198.51.100.0/24"}, Balancers: []string{"203.0.113.0/24", "2001:db8:7::/64"}, Node: node,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"services":[null,{"spec":{"type":"ExternalName","externalIPs":["198.51.100.1"]}},{"spec":{"clusterIP":"None","externalIPs":["198.51.100.2"]}},{"spec":{"externalIPs":["fe80::1%eth0","2001:db8:7::1"]}}],"slices":[null,{"addressType":"FQDN"}],"external":["0.0.0.0/0","2001:db8:7::/64"],"node":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var in fuzzInput
		if json.Unmarshal(data, &in) != nil {
			return
		}
		cfg := Config{Node: in.Node, ExternalIPs: prefixes(in.External), LoadBalancerIPs: prefixes(in.Balancers)}
		plan := Desired(cfg, in.Services, in.Slices)
		byKey := map[string]*corev1.Service{}
		for _, s := range in.Services {
			if s != nil {
				byKey[s.Namespace+"/"+s.Name] = s
			}
		}
		for a, rs := range plan.Announce {
			if len(rs) == 0 {
				t.Fatalf("%s announced for no Service", a)
			}
			for _, r := range rs {
				cidrs := cfg.ExternalIPs
				if r.Source == SourceLoadBalancer {
					cidrs = cfg.LoadBalancerIPs
				}
				if !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }) {
					t.Fatalf("%s announced for %s outside %v", a, r, cidrs)
				}
				if r.Policy == PolicyLocal && r.LocalEndpoints < 1 {
					t.Fatalf("%s announced for %s with no local endpoint", a, r)
				}
				if s := byKey[r.Service]; s != nil && (s.Spec.Type == corev1.ServiceTypeExternalName || s.Spec.ClusterIP == corev1.ClusterIPNone) && sameKeyOnce(in.Services, r.Service) {
					t.Fatalf("%s announced for %s, which kube-proxy does not serve", a, r)
				}
				_ = r.String()
			}
		}
		for _, s := range plan.Skipped {
			_ = s.String()
		}
		_ = plan.Addrs()
	})
}

// prefixes are the CIDRs of ss that parse, as the config has them.
func prefixes(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// sameKeyOnce says whether only one Service of svcs has key: the API
// never holds two, and a fuzzed input may.
func sameKeyOnce(svcs []*corev1.Service, key string) bool {
	n := 0
	for _, s := range svcs {
		if s != nil && s.Namespace+"/"+s.Name == key {
			n++
		}
	}
	return n == 1
}
