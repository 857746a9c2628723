// Package services decides which Service addresses this node announces
// to its routers (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs,
// docs/bgp.md "Services"), from the Services and EndpointSlices of the
// Kubernetes API, and watches the API for them. Desired is the decision,
// a pure function; the daemon diffs its result against what the BGP
// speaker originates.
package services

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Config is what Desired needs besides the objects.
type Config struct {
	// ExternalIPs are bgp.serviceExternalIPs: a Service's spec.externalIPs
	// inside them are announced.
	ExternalIPs []netip.Prefix
	// LoadBalancerIPs are bgp.serviceLoadBalancerIPs: a LoadBalancer
	// Service's status.loadBalancer.ingress[].ip inside them are announced.
	LoadBalancerIPs []netip.Prefix
	// Node is this node's name in the API (kubernetes.nodeName): an
	// endpoint is local when its nodeName is this.
	Node string
}

// Where an address comes from in its Service.
const (
	SourceExternalIP   = "externalIP"   // spec.externalIPs
	SourceLoadBalancer = "loadBalancer" // status.loadBalancer.ingress[].ip
)

// Why a node announces an address: the Service's externalTrafficPolicy.
const (
	// PolicyCluster: every node announces it; kube-proxy on the node that
	// gets a packet forwards it to a backend anywhere.
	PolicyCluster = "cluster"
	// PolicyLocal: only nodes with a ready endpoint of the Service
	// announce it, so that the client's address reaches the pod.
	PolicyLocal = "local"
)

// Reason is one Service behind an announced address.
type Reason struct {
	Service string // namespace/name
	Source  string // SourceExternalIP or SourceLoadBalancer
	Policy  string // PolicyCluster or PolicyLocal
	// LocalEndpoints counts the Service's ready endpoints on this node of
	// the address's family (PolicyLocal: at least 1).
	LocalEndpoints int
}

// String is the reason as `reef status` prints it.
func (r Reason) String() string {
	if r.Policy == PolicyLocal {
		return fmt.Sprintf("%s %s, policy Local: %d ready endpoint(s) on this node", r.Service, r.Source, r.LocalEndpoints)
	}
	return fmt.Sprintf("%s %s, policy Cluster", r.Service, r.Source)
}

// Skipped is a Service address that is not announced for a reason the
// operator may want to know: it lies outside the configured CIDRs, or it
// is not an address. (A Local Service without a ready endpoint on this
// node is no news: it is announced by the nodes that have one.)
type Skipped struct {
	Service string
	Source  string
	Address string // as the API has it
	Why     string
}

func (s Skipped) String() string {
	return fmt.Sprintf("%s %s %s: %s", s.Service, s.Source, s.Address, s.Why)
}

// Plan is what Desired decides: the addresses to announce, each with the
// Services behind it (sorted by Service, then source), and the addresses
// left out.
type Plan struct {
	Announce map[netip.Addr][]Reason
	Skipped  []Skipped
}

// Addrs are the addresses to announce, sorted.
func (p Plan) Addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(p.Announce))
	for a := range p.Announce {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Desired decides which Service addresses this node announces:
//
//   - spec.externalIPs of every Service inside cfg.ExternalIPs, and
//     status.loadBalancer.ingress[].ip of a LoadBalancer Service inside
//     cfg.LoadBalancerIPs (an ingress with ipMode Proxy is left out: its
//     traffic goes to the load balancer's proxy, and kube-proxy does not
//     take it on the nodes);
//   - with externalTrafficPolicy Local only when the node has a ready
//     endpoint of the Service in an EndpointSlice of the address's family
//     (kube-proxy of that family delivers from those); with Cluster (or
//     none) always.
//
// Services kube-proxy does not serve are left out: ExternalName and
// headless ones (clusterIP None); an address announced for them would
// lead nowhere. An endpoint whose conditions.ready is unset counts as
// ready, as the API says consumers should take it and kube-proxy does; a
// terminating endpoint is not ready. Malformed input (an address that does
// not parse, an IPv4 address written as IPv6) is skipped, never fatal.
func Desired(cfg Config, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) Plan {
	plan := Plan{Announce: map[netip.Addr][]Reason{}}
	local := localEndpoints(cfg.Node, svcs, eps)
	for _, s := range svcs {
		if s == nil || s.Spec.Type == corev1.ServiceTypeExternalName || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		plan.service(cfg, s, local[s.Namespace+"/"+s.Name])
	}
	plan.sort()
	return plan
}

// localEndpoints is the ready endpoints on node of each Service, by
// family, counted only for Local Services (the rest do not need them).
func localEndpoints(node string, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) map[string]map[bool]int {
	local := map[string]map[bool]int{} // namespace/name -> is6 -> count
	for _, s := range svcs {
		if s != nil && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			local[s.Namespace+"/"+s.Name] = map[bool]int{}
		}
	}
	for _, es := range eps {
		if es == nil {
			continue
		}
		name := es.Labels[discoveryv1.LabelServiceName]
		counts, ok := local[es.Namespace+"/"+name]
		if name == "" || !ok {
			continue
		}
		var is6 bool
		switch es.AddressType {
		case discoveryv1.AddressTypeIPv4:
		case discoveryv1.AddressTypeIPv6:
			is6 = true
		default:
			continue // FQDN: kube-proxy serves no such slice
		}
		for _, e := range es.Endpoints {
			if e.NodeName != nil && *e.NodeName == node && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				counts[is6]++
			}
		}
	}
	return local
}

// service adds the addresses of one Service that kube-proxy serves;
// local is its ready local endpoints by family.
func (plan *Plan) service(cfg Config, s *corev1.Service, local map[bool]int) {
	key := s.Namespace + "/" + s.Name
	policy := PolicyCluster
	if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		policy = PolicyLocal
	}
	consider := func(source, text string, cidrs []netip.Prefix, key4 string) {
		plan.consider(Reason{Service: key, Source: source, Policy: policy}, text, cidrs, key4, local)
	}
	for _, ip := range s.Spec.ExternalIPs {
		consider(SourceExternalIP, ip, cfg.ExternalIPs, "serviceExternalIPs")
	}
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return
	}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue // a hostname: nothing to route
		}
		if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
			plan.Skipped = append(plan.Skipped, Skipped{key, SourceLoadBalancer, ing.IP, "ipMode Proxy: the load balancer proxies it, kube-proxy does not take it"})
			continue
		}
		consider(SourceLoadBalancer, ing.IP, cfg.LoadBalancerIPs, "serviceLoadBalancerIPs")
	}
}

// consider announces the address text for r when it parses, lies inside
// cidrs (bgp.key4) and, with policy Local, has a local endpoint of its
// family; otherwise it records why it is skipped, or leaves it out.
func (plan *Plan) consider(r Reason, text string, cidrs []netip.Prefix, key4 string, local map[bool]int) {
	a, err := netip.ParseAddr(text)
	switch {
	case err != nil || a.Zone() != "":
		plan.Skipped = append(plan.Skipped, Skipped{r.Service, r.Source, text, "not an IP address"})
		return
	case a.Is4In6():
		plan.Skipped = append(plan.Skipped, Skipped{r.Service, r.Source, text, "an IPv4 address written as IPv6"})
		return
	case !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }):
		plan.Skipped = append(plan.Skipped, Skipped{r.Service, r.Source, text, "outside bgp." + key4 + " " + fmt.Sprint(cidrs)})
		return
	}
	if r.Policy == PolicyLocal {
		r.LocalEndpoints = local[a.Is6()]
		if r.LocalEndpoints == 0 {
			return
		}
	}
	if !slices.Contains(plan.Announce[a], r) {
		plan.Announce[a] = append(plan.Announce[a], r)
	}
}

// sort puts each address's reasons and the skipped addresses in order.
func (plan *Plan) sort() {
	for _, rs := range plan.Announce {
		slices.SortFunc(rs, func(a, b Reason) int {
			return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Source, b.Source))
		})
	}
	slices.SortFunc(plan.Skipped, func(a, b Skipped) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Address, b.Address))
	})
}
