// Package lbipam assigns LoadBalancer addresses to Services from
// bgp.serviceLoadBalancerIPs, as a cloud's load balancer controller would:
// for Services of type LoadBalancer with no loadBalancerClass or reef's
// own (Class), it writes status.loadBalancer.ingress. One reef daemon at a
// time does it, the holder of a coordination.k8s.io Lease; the Lease only
// saves work. That no address is ever given to two Services rests on the
// API server's compare-and-swap, not on the Lease or any clock (see
// docs/lbipam.md, "Why no address goes to two Services", and the spin
// model in model/):
//
//   - The record. Which address belongs to which Service (by UID) is one
//     ConfigMap; every change to it is an update conditioned on the
//     resourceVersion that was read (a compare-and-swap). An address is
//     taken in the record before any Service's status shows it.
//   - Status writes. A Service's status is written conditioned on the
//     resourceVersion of the Service that the decision read, and only
//     with addresses the record gives it.
//   - Release. An address leaves the record only once a fresh read of its
//     Service (not the informer's cache, which may lag) finds the Service
//     gone, or finds that it no longer wants the address and that its
//     status no longer shows it (reef clears it first, conditioned as
//     above).
//
// This file is the pure part: from a snapshot of the Services and the
// record, what to assign and what to release.
package lbipam

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Class is reef's loadBalancerClass. Services with no class are reef's
// too, unless the operator turns assignment off (another controller, such
// as MetalLB, assigns them).
const Class = "reefcni.io/lb"

// RequestAnnotation asks for specific addresses, one per family, comma
// separated (as MetalLB's and Calico's annotations do);
// spec.loadBalancerIP, deprecated upstream, is honoured too.
const RequestAnnotation = "reefcni.io/loadBalancerIPs"

// Service is what assignment needs of a Service.
type Service struct {
	Key  string // namespace/name
	UID  string
	Ours bool // type LoadBalancer, with no loadBalancerClass or Class
	// IPv4 and IPv6 are the families it wants an address of
	// (spec.ipFamilies).
	IPv4, IPv6 bool
	// Requested are the addresses it asks for (RequestAnnotation or
	// spec.loadBalancerIP); BadRequest says why a request did not parse.
	Requested  []netip.Addr
	BadRequest string
	Ingress    []netip.Addr // status.loadBalancer.ingress[].ip now
	// Uses are the addresses it has otherwise, spec.clusterIPs and
	// spec.externalIPs: kube-proxy serves them for it, so no Service is
	// given one (a pool inside the cluster's Service CIDR would otherwise
	// hand out the kubernetes Service's 10.96.0.1).
	Uses []netip.Addr
}

// wants says whether s may hold addr: it is ours, wants the family, and
// asks for no address of that family or for this one.
func (s Service) wants(addr netip.Addr) bool {
	if !s.Ours || addr.Is4() && !s.IPv4 || addr.Is6() && !s.IPv6 {
		return false
	}
	req, ok := s.request(addr.Is6())
	return !ok || req == addr
}

// request is the address s asks for in one family, if it asks for one.
func (s Service) request(v6 bool) (netip.Addr, bool) {
	for _, a := range s.Requested {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Owner is a record's holder of an address.
type Owner struct {
	UID     string `json:"uid"`
	Service string `json:"service"` // namespace/name, for people and for the fresh read
}

// Record is which Service holds each address.
type Record map[netip.Addr]Owner

// Plan is one round's decision.
type Plan struct {
	// Record is the record with this round's assignments (and adoptions)
	// added; releases are not in it yet (see Release).
	Record Record
	// Release are entries the snapshot says to free. Each is confirmed
	// with a fresh read of its Service before it leaves the record, and
	// its address is not given to another Service in this round.
	Release []Release
	// Status are the Services whose status should show other addresses:
	// the record's for each of ours.
	Status []Ingress
	// Events say why a Service got no address, or not the one it asked
	// for.
	Events []Event
}

// Release is an entry to free, and why.
type Release struct {
	Addr  netip.Addr
	Owner Owner
	Why   string
}

// Ingress is the ingress a Service's status should show.
type Ingress struct {
	Service string
	UID     string
	Ingress []netip.Addr
}

// Event is a Warning event for a Service.
type Event struct {
	Service, UID    string
	Reason, Message string
}

// Assign decides a round: which entries of rec the Services no longer
// back (to release once confirmed), which of ours get an address, and what
// each of ours should show. Services are taken in key order, so that two
// daemons deciding from one snapshot decide alike; addresses in pool order,
// then ascending.
func Assign(svcs []Service, rec Record, pools []netip.Prefix) Plan {
	a := newAssigner(svcs, rec, pools)
	a.releases(rec)
	for _, s := range a.svcs {
		if s.Ours {
			a.assign(s)
		}
	}
	a.statuses()
	return a.p
}

// assigner holds one round of Assign: the Services in key order, the
// plan as it grows, who shows which address and who uses which.
type assigner struct {
	svcs    []Service
	pools   []netip.Prefix
	byUID   map[string]Service
	shownBy map[netip.Addr][]string // address -> UIDs whose status shows it
	usedBy  map[netip.Addr][]string // address -> UIDs whose clusterIPs or externalIPs have it
	p       Plan
}

func newAssigner(svcs []Service, rec Record, pools []netip.Prefix) *assigner {
	a := &assigner{
		svcs:    slices.SortedFunc(slices.Values(svcs), func(a, b Service) int { return cmp.Compare(a.Key, b.Key) }),
		pools:   pools,
		byUID:   map[string]Service{},
		shownBy: map[netip.Addr][]string{},
		usedBy:  map[netip.Addr][]string{},
		p:       Plan{Record: maps.Clone(rec)},
	}
	for _, s := range a.svcs {
		a.byUID[s.UID] = s
		for _, addr := range s.Ingress {
			a.shownBy[addr] = append(a.shownBy[addr], s.UID)
		}
		for _, addr := range s.Uses {
			a.usedBy[addr] = append(a.usedBy[addr], s.UID)
		}
	}
	if a.p.Record == nil {
		a.p.Record = Record{}
	}
	return a
}

func (a *assigner) inPools(addr netip.Addr) bool {
	return slices.ContainsFunc(a.pools, func(pf netip.Prefix) bool { return pf.Contains(addr) })
}

// taken: in the record (to be released or not), a Service's clusterIP or
// externalIP (uid's own too), or shown by a Service other than uid.
func (a *assigner) taken(addr netip.Addr, uid string) bool {
	if _, ok := a.p.Record[addr]; ok {
		return true
	}
	if len(a.usedBy[addr]) > 0 {
		return true
	}
	return slices.ContainsFunc(a.shownBy[addr], func(u string) bool { return u != uid })
}

// releases plans the release of the entries of rec outside the pools or
// that no Service backs any more.
func (a *assigner) releases(rec Record) {
	for _, addr := range slices.SortedFunc(maps.Keys(rec), netip.Addr.Compare) {
		o := rec[addr]
		s, ok := a.byUID[o.UID]
		switch {
		case !a.inPools(addr):
			a.p.Release = append(a.p.Release, Release{addr, o, "outside bgp.serviceLoadBalancerIPs"})
		case !ok:
			a.p.Release = append(a.p.Release, Release{addr, o, "the Service is gone"})
		case !s.wants(addr):
			a.p.Release = append(a.p.Release, Release{addr, o, "the Service no longer wants it"})
		}
	}
}

// held says whether s holds an address of the family that it wants.
func (a *assigner) held(s Service, v6 bool) bool {
	for addr, o := range a.p.Record {
		if o.UID == s.UID && addr.Is6() == v6 && s.wants(addr) && a.inPools(addr) {
			return true
		}
	}
	return false
}

// assign gives our Service s an address of each family it asks for and
// does not hold yet.
func (a *assigner) assign(s Service) {
	if s.BadRequest != "" {
		a.p.Events = append(a.p.Events, Event{s.Key, s.UID, "InvalidLoadBalancerIP", s.BadRequest})
	}
	for _, req := range s.Requested {
		if req.Is4() && !s.IPv4 || req.Is6() && !s.IPv6 {
			a.p.Events = append(a.p.Events, Event{s.Key, s.UID, "InvalidLoadBalancerIP",
				fmt.Sprintf("requested address %s is of a family the Service does not have (spec.ipFamilies %s); ignored", req, families(s))})
		}
	}
	for _, v6 := range []bool{false, true} {
		if v6 && !s.IPv6 || !v6 && !s.IPv4 || a.held(s, v6) {
			continue
		}
		a.assignFamily(s, v6)
	}
}

// families names the families of s as spec.ipFamilies does.
func families(s Service) string {
	var out []string
	if s.IPv4 {
		out = append(out, "IPv4")
	}
	if s.IPv6 {
		out = append(out, "IPv6")
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// assignFamily gives s an address of one family: the one its status shows,
// the one it requests, or the first free one.
func (a *assigner) assignFamily(s Service, v6 bool) {
	// Adopt what its status already shows (a record lost or
	// recreated): the status is reef's earlier decision.
	if addr, ok := adoptable(s, v6, a.inPools, a.taken); ok {
		a.p.Record[addr] = Owner{s.UID, s.Key}
		return
	}
	if req, ok := s.request(v6); ok {
		switch {
		case !a.inPools(req):
			a.p.Events = append(a.p.Events, Event{s.Key, s.UID, "LoadBalancerIPNotInPool",
				fmt.Sprintf("requested address %s is outside bgp.serviceLoadBalancerIPs (%s)", req, joinPrefixes(a.pools))})
		case a.taken(req, s.UID):
			a.p.Events = append(a.p.Events, Event{s.Key, s.UID, "LoadBalancerIPInUse",
				fmt.Sprintf("requested address %s is in use by %s", req, a.holder(req))})
		default:
			a.p.Record[req] = Owner{s.UID, s.Key}
		}
		return
	}
	if addr, ok := firstFree(a.pools, v6, func(addr netip.Addr) bool { return a.taken(addr, s.UID) }); ok {
		a.p.Record[addr] = Owner{s.UID, s.Key}
		return
	}
	family := "IPv4"
	if v6 {
		family = "IPv6"
	}
	a.p.Events = append(a.p.Events, Event{s.Key, s.UID, "NoFreeLoadBalancerIP",
		fmt.Sprintf("no free %s address in bgp.serviceLoadBalancerIPs (%s)", family, joinPrefixes(a.pools))})
}

// statuses plans the status of each of our Services whose shown addresses
// differ from what it holds once the releases are done.
func (a *assigner) statuses() {
	released := map[netip.Addr]bool{}
	for _, r := range a.p.Release {
		released[r.Addr] = true
	}
	for _, s := range a.svcs {
		if !s.Ours {
			continue
		}
		var want []netip.Addr
		for addr, o := range a.p.Record {
			if o.UID == s.UID && !released[addr] {
				want = append(want, addr)
			}
		}
		slices.SortFunc(want, netip.Addr.Compare)
		if !slices.Equal(want, sortedAddrs(s.Ingress)) {
			a.p.Status = append(a.p.Status, Ingress{s.Key, s.UID, want})
		}
	}
}

// adoptable is an address of the family that s's status shows and that
// it may hold, which no one else holds or shows.
func adoptable(s Service, v6 bool, inPools func(netip.Addr) bool, taken func(netip.Addr, string) bool) (netip.Addr, bool) {
	for _, a := range sortedAddrs(s.Ingress) {
		if a.Is6() == v6 && inPools(a) && s.wants(a) && !taken(a, s.UID) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// firstFree is the first address of the family in pools that is not
// taken. The first address of a prefix (and the last of an IPv4 one), the
// network and broadcast addresses, are skipped when the prefix has more
// than two (a /31 or /127 gives both):
// some clients and routers treat them specially.
func firstFree(pools []netip.Prefix, v6 bool, taken func(netip.Addr) bool) (netip.Addr, bool) {
	for _, pf := range pools {
		if pf.Addr().Is6() != v6 {
			continue
		}
		pf = pf.Masked()
		first, last := pf.Addr(), lastAddr(pf)
		if pf.Bits() < pf.Addr().BitLen()-1 {
			first = first.Next()
			if !v6 {
				last = last.Prev()
			}
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			if !taken(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// lastAddr is the last address of a masked prefix.
func lastAddr(pf netip.Prefix) netip.Addr {
	b := pf.Addr().AsSlice()
	for i := pf.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// holder names who holds, uses or shows addr, for an event.
func (a *assigner) holder(addr netip.Addr) string {
	if o, ok := a.p.Record[addr]; ok {
		return "Service " + o.Service
	}
	var names []string
	for _, uid := range a.usedBy[addr] {
		names = append(names, "Service "+a.byUID[uid].Key+" (its clusterIP or externalIP)")
	}
	for _, uid := range a.shownBy[addr] {
		names = append(names, "Service "+a.byUID[uid].Key)
	}
	return strings.Join(names, ", ")
}

func sortedAddrs(as []netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
