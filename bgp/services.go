package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
)

// Service CIDRs (bgp.serviceClusterIPs, Calico's serviceClusterIPs) are
// announced by every node to its external peers, next hop the node (its
// IPv6 address for an IPv6 CIDR), so that a router spreads traffic to
// Service addresses over the nodes (ECMP) and kube-proxy on the node
// delivers it. They never go to the cluster's own sessions (mesh, route
// reflectors): the first statements of the external export policy reject
// them, in the unicast family only, towards every peer that is not
// external. (A reef peer that got one would count it as dropped, outside
// every pool, but GoBGP would keep it, and a reef reflector pass it on.)
// The external peer's communities are added to them as to the blocks.

// Names of the prefix sets of the service CIDRs, one per family (a GoBGP
// prefix set holds one family).
const (
	serviceSet4 = "reef-services-v4"
	serviceSet6 = "reef-services-v6"
	// serviceImportPolicy drops what a peer sends inside the sets.
	serviceImportPolicy = "reef-services-import"
)

// serviceExportStatements define the prefix sets of the service CIDRs
// (exactly) and of the CIDRs of Service addresses (every prefix inside
// them: serviceaddrs.go), install the import policy that takes none of
// them from any peer, and return the statements that keep them from every
// peer that is not external (externals: the neighbour set of the external
// peers).
func (sp *Speaker) serviceExportStatements(ctx context.Context, externals string) ([]*api.Statement, error) {
	sets := map[string][]*api.Prefix{}
	add := func(p netip.Prefix, maxBits int) {
		name := serviceSet4
		if p.Addr().Is6() {
			name = serviceSet6
		}
		sets[name] = append(sets[name], &api.Prefix{IpPrefix: p.String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: uint32(maxBits)})
	}
	for _, p := range sp.cfg.ServiceCIDRs {
		add(p, p.Bits())
	}
	for _, p := range sp.cfg.ServiceAddressCIDRs {
		add(p, p.Addr().BitLen())
	}
	var out []*api.Statement
	var imports []*api.Statement
	for _, name := range []string{serviceSet4, serviceSet6} {
		if len(sets[name]) == 0 {
			continue
		}
		// GoBGP's prefix condition takes VPN paths of the family for the
		// prefix inside them (the block protocol's records carry a
		// node's /32): the statement is for unicast only.
		afi := api.Family_AFI_IP
		if name == serviceSet6 {
			afi = api.Family_AFI_IP6
		}
		if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name, Prefixes: sets[name],
		}}); err != nil {
			return nil, fmt.Errorf("define the service CIDRs %s: %w", name, err)
		}
		out = append(out, &api.Statement{
			Name: name + "-not-to-cluster",
			Conditions: &api.Conditions{
				PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name},
				NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_INVERT, Name: externals},
				AfiSafiIn:   []*api.Family{{Afi: afi, Safi: api.Family_SAFI_UNICAST}},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		})
		for _, rt := range []api.Conditions_RouteType{api.Conditions_ROUTE_TYPE_INTERNAL, api.Conditions_ROUTE_TYPE_EXTERNAL} {
			imports = append(imports, &api.Statement{
				Name: fmt.Sprintf("%s-from-%s-peers", name, map[api.Conditions_RouteType]string{api.Conditions_ROUTE_TYPE_INTERNAL: "ibgp", api.Conditions_ROUTE_TYPE_EXTERNAL: "ebgp"}[rt]),
				Conditions: &api.Conditions{
					PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: name},
					RouteType: rt,
					AfiSafiIn: []*api.Family{{Afi: afi, Safi: api.Family_SAFI_UNICAST}},
				},
				Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
			})
		}
	}
	if err := sp.serviceImportPolicy(ctx, imports); err != nil {
		return nil, err
	}
	return out, nil
}

// serviceImportPolicy installs the statements that drop, on import, every
// path of another speaker inside the service sets: a Service address
// (or CIDR) is never believed from a peer, a router or another node, so
// that a peer cannot steer Service traffic, and a reflector never passes
// one on. GoBGP runs the global import policy on the speaker's own paths
// as well: the statements match the route types of peers' paths
// (internal, external) only, never local.
func (sp *Speaker) serviceImportPolicy(ctx context.Context, statements []*api.Statement) error {
	if len(statements) == 0 {
		return nil
	}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: serviceImportPolicy, Statements: statements}}); err != nil {
		return fmt.Errorf("add the import policy of the service sets: %w", err)
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, // "": the global RIB
		Policies: []*api.Policy{{Name: serviceImportPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign the import policy of the service sets: %w", err)
	}
	return nil
}

// serviceNextHop is the next hop of a service CIDR: the node's address of
// its family; invalid when the node has none (an IPv6 CIDR without
// NodeAddressV6).
func (cfg *Config) serviceNextHop(p netip.Prefix) netip.Addr {
	if p.Addr().Is6() {
		return cfg.NodeAddressV6
	}
	return cfg.NodeAddress
}

// announceServices originates the service CIDRs, once: they do not change
// while the daemon runs. A CIDR without a next hop of its family is left
// out, and said so.
func (sp *Speaker) announceServices() error {
	var paths []*apiutil.Path
	var cidrs []netip.Prefix
	for _, p := range sp.cfg.ServiceCIDRs {
		nh := sp.cfg.serviceNextHop(p)
		if !nh.IsValid() {
			sp.log.Warn("service CIDR not announced: the node has no IPv6 address (nodeAddressV6) to be its next hop", "cidr", p)
			continue
		}
		path, err := unicastPath(p, nh, nil) // no communities of reef's: it is no block
		if err != nil {
			return err
		}
		paths, cidrs = append(paths, path), append(cidrs, p)
	}
	var errs []error
	sp.addPaths(paths, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("announce service CIDR %s: %w", cidrs[i], err))
			return
		}
		sp.mu.Lock()
		sp.services = append(sp.services, cidrs[i])
		sp.mu.Unlock()
	})
	if len(errs) > 0 {
		return errs[0]
	}
	if len(cidrs) > 0 {
		sp.log.Info("announcing service CIDRs to external peers", "cidrs", cidrs)
	}
	return nil
}

// ServiceCIDRs are the service CIDRs in the speaker's table for its
// external peers, and those it cannot announce (no next hop of their
// family).
func (sp *Speaker) ServiceCIDRs() (announced, withheld []netip.Prefix) {
	sp.mu.Lock()
	announced = slices.Clone(sp.services)
	sp.mu.Unlock()
	for _, p := range sp.cfg.ServiceCIDRs {
		if !sp.cfg.serviceNextHop(p).IsValid() {
			withheld = append(withheld, p)
		}
	}
	return announced, withheld
}
