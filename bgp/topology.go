package bgp

import (
	"context"
	"fmt"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"
)

// This file holds who the neighbours are to the speaker (the mesh, route
// reflectors and their clients, routers) and the policies that keep the
// route reflectors from reflecting each other's clients' paths.

// The names of the policies of a route reflector (acceptOwnPathsOnly).
const (
	reflectorSet       = "reef-other-reflectors"
	reflectorSet4      = "reef-other-reflectors-ipv4"
	reflectorPolicy    = "reef-reflector-import"
	reflectorExpPolicy = "reef-reflector-export"
)

// acceptOwnPathsOnly makes a route reflector and the other reflectors
// (reflectors, its configured peers) exchange only the paths each
// originates, not those each reflects from its clients. Every client
// peers with every reflector, so a reflector has each client's paths
// first hand and loses nothing by it. Without it, GoBGP v4.8.0 freezes
// replaced paths: a reflector prefers the other reflector's copy of a
// client's path (lower router ID; GoBGP does not compare CLUSTER_LIST
// lengths), and when its best path moves from a client's to a
// non-client's it sends the non-client no withdrawal of what it sent
// before (BgpServer.filterpath, "iBGP handling"). Two reflectors then hold
// each other's copy as best, and a client's later update or withdrawal of
// that NLRI goes nowhere: in the lab, grants that changed their grantee
// never reached the claimants, and TestRouteReflectors, without these
// policies, keeps a withdrawn claim and block on both reflectors for good.
// Two policies on the global RIB:
//
//   - export: to the other reflectors, only the paths this reflector
//     originates (route type local); a client's path is not sent to them.
//     This needs nothing but the other reflectors' addresses, of either
//     family.
//   - import: from the other reflectors at IPv4 addresses, only the paths
//     whose next hop is the sender itself (its identity, or that
//     IPv4-mapped in VPN-IPv6), for a reflector that reflects anyway (BIRD
//     or FRR beside reef). A reflector at an IPv6 address is named by an
//     identity this one learns only from its paths (docs/design.md,
//     "IPv6-only nodes"), so its paths cannot be told apart by next hop
//     before they are taken; the export policy of a reef reflector at an
//     IPv6 address is what keeps its clients' paths away.
func (sp *Speaker) acceptOwnPathsOnly(ctx context.Context, reflectors []netip.Addr) error {
	var others, others4, nextHops []string
	for _, a := range reflectors {
		if sp.cfg.self(a) {
			continue
		}
		others = append(others, netip.PrefixFrom(a, a.BitLen()).String())
		if a.Is4() {
			others4 = append(others4, netip.PrefixFrom(a, 32).String())
			// A VPN-IPv6 path's next hop is the router ID IPv4-mapped
			// (vpnPath), which an IPv4 prefix does not contain.
			nextHops = append(nextHops, netip.PrefixFrom(a, 32).String(), netip.PrefixFrom(netip.AddrFrom16(a.As16()), 128).String())
		}
	}
	if len(others) == 0 {
		return nil
	}
	for name, list := range map[string][]string{reflectorSet: others, reflectorSet4: others4} {
		if len(list) == 0 {
			continue
		}
		if err := sp.s.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: name, List: list,
		}}); err != nil {
			return fmt.Errorf("define the other route reflectors %v: %w", list, err)
		}
	}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: reflectorExpPolicy, Statements: []*api.Statement{{
		Name:       reflectorExpPolicy + "-reflected",
		Conditions: &api.Conditions{NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: reflectorSet}, RouteType: api.Conditions_ROUTE_TYPE_INTERNAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("add the route reflector's export policy: %w", err)
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT, // "": the global RIB
		Policies: []*api.Policy{{Name: reflectorExpPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign the route reflector's export policy: %w", err)
	}
	if len(others4) == 0 {
		return nil
	}
	fromOthers := &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: reflectorSet4}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: reflectorPolicy, Statements: []*api.Statement{
		{
			Name:       reflectorPolicy + "-own",
			Conditions: &api.Conditions{NeighborSet: fromOthers, NextHopInList: nextHops},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		},
		{
			Name:       reflectorPolicy + "-reflected",
			Conditions: &api.Conditions{NeighborSet: fromOthers},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		},
	}}}); err != nil {
		return fmt.Errorf("add the route reflector's import policy: %w", err)
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, // "": the global RIB
		Policies: []*api.Policy{{Name: reflectorPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign the route reflector's import policy: %w", err)
	}
	return nil
}

// configured are the neighbours the speaker dials: Peers, or on a route
// reflector client RouteReflectors (the config never sets both).
func (cfg *Config) configured() []netip.Addr {
	return append(append([]netip.Addr(nil), cfg.Peers...), cfg.RouteReflectors...)
}

// PeerType is the part a neighbour plays in the node's BGP topology.
type PeerType string

// The peer types.
const (
	PeerMesh      PeerType = "mesh"      // a node of the full mesh
	PeerReflector PeerType = "reflector" // a route reflector: this node's, or, on a reflector, another one
	PeerClient    PeerType = "client"    // a route reflector client of this node
	PeerExternal  PeerType = "external"  // a router (bgp.externalPeers)
)

// peerType is what a neighbour is to this speaker: on a client, every
// configured neighbour is a reflector; on a reflector, the configured ones
// are the other reflectors and the dynamic ones its clients.
func (cfg *Config) peerType(addr netip.Addr, dynamic bool) PeerType {
	if _, ok := cfg.external(addr); ok && !dynamic {
		return PeerExternal
	}
	switch {
	case len(cfg.RouteReflectors) > 0:
		return PeerReflector
	case cfg.RouteReflector && dynamic:
		return PeerClient
	case cfg.RouteReflector:
		return PeerReflector
	}
	return PeerMesh
}
