package routes

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/reefcni/reef/routes/internal/nl"
)

// RouteKind is what a reef route does with a packet.
type RouteKind int

const (
	// PodRoute delivers to a local pod: "ip/32 dev reefXXX scope link", or
	// "ip/128 dev reefXXX" (IPv6 routes have no scope).
	PodRoute RouteKind = iota
	// Blackhole drops traffic to an own block's unused addresses instead of
	// letting it follow the default route out of the node.
	Blackhole
	// RemoteRoute sends traffic for another node's block to that node:
	// "block via node dev uplink onlink", or, to a node in another subnet
	// without encapsulation, through the gateway of the node's own route to
	// it: "block via router dev uplink". The gateway is of the block's
	// family: the kernel has no IPv6 route through an IPv4 gateway.
	RemoteRoute
)

// Route is one route reef owns, keyed by its destination: reef writes at
// most one route per destination in the main table. IPv4 and IPv6 routes
// are alike but for the pod route's scope.
type Route struct {
	Dst  netip.Prefix
	Kind RouteKind
	Dev  string     // PodRoute, RemoteRoute
	Via  netip.Addr // RemoteRoute
	// OnLink is a RemoteRoute whose gateway is the owner itself, reached on
	// Dev whatever the subnets say.
	OnLink bool
}

func (r Route) String() string {
	switch r.Kind {
	case Blackhole:
		return fmt.Sprintf("blackhole %s proto reef", r.Dst)
	case RemoteRoute:
		if !r.OnLink {
			return fmt.Sprintf("%s via %s dev %s proto reef", r.Dst, r.Via, r.Dev)
		}
		return fmt.Sprintf("%s via %s dev %s onlink proto reef", r.Dst, r.Via, r.Dev)
	default:
		if r.Dst.Addr().Is6() {
			return fmt.Sprintf("%s dev %s proto reef", r.Dst, r.Dev)
		}
		return fmt.Sprintf("%s dev %s scope link proto reef", r.Dst, r.Dev)
	}
}

// Endpoint is a wired pod attachment as the desired state sees it.
type Endpoint struct {
	// IPs are the pod's addresses, at most one of each family (as the
	// pod's veth.Spec.IPs): each is routed to the veth, as a /32 or a /128.
	IPs      []netip.Addr
	HostVeth string // "" when a newer sandbox of the pod took the veth over
	// Netns and IfName are the pod's end of the veth pair, MTU what both
	// ends must have (0: leave them as they are).
	Netns, IfName string
	MTU           int
}

// State is the part of the kernel reef owns: its routes and its veths.
type State struct {
	Routes map[netip.Prefix]Route
	Links  map[string]bool // node-side veth names
	// MTUs are the pods' veth pairs' MTUs, by node-side veth: what the
	// kernel has on that end, or what reef wants on both ends (with the
	// pod's end named).
	MTUs map[string]PodMTU
}

// PodMTU is the MTU of a pod's veth pair. Netns and IfName name the
// pod's end; a State read from the kernel knows only the node's.
type PodMTU struct {
	HostVeth      string
	Netns, IfName string
	MTU           int
}

// RemoteBlock is another node's confirmed block, the node that owns it and
// the device that reaches it: the uplink (direct), vxlan.reef or tunl0.
// Gateway, when set, is the router of the node's own route to an owner in
// another subnet, reached without encapsulation: the route goes through
// it, not onlink to the owner.
type RemoteBlock struct {
	Block   netip.Prefix
	Node    netip.Addr
	Dev     string
	Gateway netip.Addr
}

// Hop is where the node's own routing sends packets for an address: the
// gateway (the address itself when it is on a connected subnet) and the
// device.
type Hop struct {
	Gateway netip.Addr
	Dev     string
}

// Desired computes the state reef wants from the store's endpoints, own
// confirmed blocks and other nodes' confirmed blocks, of either family,
// given which reef veths exist now: a route needs its device, and a veth
// that is gone can only come back with a new ADD. Each of a pod's
// addresses is routed to its veth. A route to another node's block is
// "block via node dev <device> onlink" whatever the device (on a tunnel
// the node address is the gateway that the tunnel's neighbour entry maps
// to the node's VTEP), or "block via gateway dev <device>" for a block
// with a Gateway.
//
// A pod's veth pair wants the endpoint's MTU, if it has one, on both ends,
// and only while the veth exists: a pass changes what ADD made, it never
// makes a veth.
func Desired(endpoints []Endpoint, ownBlocks []netip.Prefix, remote []RemoteBlock, existingLinks map[string]bool) State {
	want := State{Routes: map[netip.Prefix]Route{}, Links: map[string]bool{}, MTUs: map[string]PodMTU{}}
	for _, b := range remote {
		if b.Gateway.IsValid() {
			want.Routes[b.Block] = Route{Dst: b.Block, Kind: RemoteRoute, Dev: b.Dev, Via: b.Gateway}
		} else {
			want.Routes[b.Block] = Route{Dst: b.Block, Kind: RemoteRoute, Dev: b.Dev, Via: b.Node, OnLink: true}
		}
	}
	for _, b := range ownBlocks {
		want.Routes[b] = Route{Dst: b, Kind: Blackhole}
	}
	for _, ep := range endpoints {
		if ep.HostVeth != "" {
			want.Links[ep.HostVeth] = true
		}
		if ep.HostVeth != "" && existingLinks[ep.HostVeth] {
			for _, ip := range ep.IPs {
				dst := nl.Host(ip)
				want.Routes[dst] = Route{Dst: dst, Kind: PodRoute, Dev: ep.HostVeth}
			}
			if ep.MTU != 0 {
				want.MTUs[ep.HostVeth] = PodMTU{HostVeth: ep.HostVeth, Netns: ep.Netns, IfName: ep.IfName, MTU: ep.MTU}
			}
		}
	}
	return want
}

// PodObjects is the part of s that the pods' owner (Pods) keeps: the
// pods' /32 and /128 routes, the veths and their MTUs.
func (s State) PodObjects() State {
	out := State{Routes: map[netip.Prefix]Route{}, Links: s.Links, MTUs: s.MTUs}
	for dst, r := range s.Routes {
		if isPodObject(r) {
			out.Routes[dst] = r
		}
	}
	return out
}

// Plan is what it takes to turn the kernel's state into the desired one.
// Apply order: routes replaced first, then routes deleted, then MTUs set,
// then links deleted.
type Plan struct {
	Replace     []Route
	DeleteRoute []Route
	SetMTU      []PodMTU // both ends of each pod's veth pair
	DeleteLink  []string
}

// Empty reports whether the kernel already matches.
func (p Plan) Empty() bool {
	return len(p.Replace) == 0 && len(p.DeleteRoute) == 0 && len(p.SetMTU) == 0 && len(p.DeleteLink) == 0
}

// Diff compares the desired state with the kernel's and returns the
// operations, sorted so that plans compare and log stably. A pod's MTU is
// compared on the node's end of its veth pair, which the kernel's state
// lists; Apply sets both ends.
func Diff(want, have State) Plan {
	var p Plan
	for dst, r := range want.Routes {
		if cur, ok := have.Routes[dst]; !ok || cur != r {
			p.Replace = append(p.Replace, r)
		}
	}
	for dst, r := range have.Routes {
		if _, ok := want.Routes[dst]; !ok {
			p.DeleteRoute = append(p.DeleteRoute, r)
		}
	}
	for name, m := range want.MTUs {
		if cur, ok := have.MTUs[name]; ok && cur.MTU != m.MTU {
			p.SetMTU = append(p.SetMTU, m)
		}
	}
	for name := range have.Links {
		if !want.Links[name] {
			p.DeleteLink = append(p.DeleteLink, name)
		}
	}
	sortRoutes(p.Replace)
	sortRoutes(p.DeleteRoute)
	slices.SortFunc(p.SetMTU, func(a, b PodMTU) int { return strings.Compare(a.HostVeth, b.HostVeth) })
	sort.Strings(p.DeleteLink)
	return p
}

func sortRoutes(rs []Route) {
	sort.Slice(rs, func(i, j int) bool {
		if c := rs[i].Dst.Addr().Compare(rs[j].Dst.Addr()); c != 0 {
			return c < 0
		}
		return rs[i].Dst.Bits() < rs[j].Dst.Bits()
	})
}

// Entry is one route or node-side veth of Compare: what reef wants next to
// what the kernel has.
type Entry struct {
	Kind       string // "route" or "link"
	Object     string // the destination, or the veth's name
	State      string // EntryInSync, EntryMissing, EntryExtra, EntryDiffers
	Want, Have string // the route as `ip route` writes it, or the veth's name; "" for none
}

// The states of an Entry.
const (
	EntryInSync  = "in-sync"
	EntryMissing = "missing" // reef wants it, the kernel lacks it
	EntryExtra   = "extra"   // the kernel has it (reef's mark), reef does not want it
	EntryDiffers = "differs" // both have it, not the same
	// EntryInTheWay is a route reef wants whose place a route of another
	// protocol holds: reef does not overwrite it, so no pass repairs it
	// (the daemon sets it on a missing route: ForeignRouteError).
	EntryInTheWay = "in-the-way"
)

// Compare lists every route and veth of want and have with its state:
// what `reef routes` shows. Routes first, then links, each sorted.
func Compare(want, have State) []Entry {
	var routes, links []Entry
	for dst, w := range want.Routes {
		e := Entry{Kind: "route", Object: dst.String(), Want: w.String(), State: EntryMissing}
		if h, ok := have.Routes[dst]; ok {
			e.Have, e.State = h.String(), EntryInSync
			if h != w {
				e.State = EntryDiffers
			}
		}
		routes = append(routes, e)
	}
	for dst, h := range have.Routes {
		if _, ok := want.Routes[dst]; !ok {
			routes = append(routes, Entry{Kind: "route", Object: dst.String(), Have: h.String(), State: EntryExtra})
		}
	}
	for name := range want.Links {
		e := Entry{Kind: "link", Object: name, Want: name, State: EntryMissing}
		if have.Links[name] {
			e.Have, e.State = name, EntryInSync
		}
		links = append(links, e)
	}
	for name := range have.Links {
		if !want.Links[name] {
			links = append(links, Entry{Kind: "link", Object: name, Have: name, State: EntryExtra})
		}
	}
	byDst := func(a, b Entry) int {
		pa, ea := netip.ParsePrefix(a.Object)
		pb, eb := netip.ParsePrefix(b.Object)
		if ea == nil && eb == nil {
			if c := pa.Addr().Compare(pb.Addr()); c != 0 {
				return c
			}
			return pa.Bits() - pb.Bits()
		}
		return strings.Compare(a.Object, b.Object)
	}
	slices.SortFunc(routes, byDst)
	slices.SortFunc(links, byDst)
	return append(routes, links...)
}
