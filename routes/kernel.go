package routes

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/reefcni/reef/routes/veth"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel reads and writes reef's part of the current network namespace.
type Kernel struct {
	h netlinksafe.Handle
}

// NewKernel opens a netlink handle (nl.NewHandle) in the caller's
// network namespace.
func NewKernel() (*Kernel, error) {
	h, err := nl.NewHandle()
	if err != nil {
		return nil, err
	}
	return &Kernel{h: h}, nil
}

// Close releases the netlink handle.
func (k *Kernel) Close() { k.h.Close() }

// Read returns reef's routes of both families in the main table (by
// protocol number) and its veths (by name prefix) with their MTUs.
// Nothing without those marks is returned.
func (k *Kernel) Read() (State, error) {
	st := State{Routes: map[netip.Prefix]Route{}, Links: map[string]bool{}, MTUs: map[string]PodMTU{}}
	links, err := k.h.LinkList()
	if err != nil {
		return st, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		if linkname.Ours(a.Name) && l.Type() == "veth" {
			st.Links[a.Name] = true
			st.MTUs[a.Name] = PodMTU{HostVeth: a.Name, MTU: a.MTU}
		}
	}
	filter := &netlink.Route{Protocol: Protocol, Table: unix.RT_TABLE_MAIN}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := k.h.RouteListFiltered(family, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if err != nil {
			return st, fmt.Errorf("list %s routes proto %d: %w", familyName(family), Protocol, err)
		}
		for _, r := range rs {
			if rt, ok := routeOf(r, names); ok {
				st.Routes[rt.Dst] = rt
			}
		}
	}
	return st, nil
}

func familyName(family int) string {
	if family == unix.AF_INET6 {
		return "IPv6"
	}
	return "IPv4"
}

// routeOf is a kernel route of reef's as a Route.
func routeOf(r netlink.Route, names map[int]string) (Route, bool) {
	dst, ok := nl.Prefix(r.Dst)
	if !ok {
		return Route{}, false
	}
	v6 := dst.Addr().Is6()
	switch {
	case r.Type == unix.RTN_BLACKHOLE:
		return Route{Dst: dst, Kind: Blackhole}, true
	case r.Gw == nil && r.Scope == netlink.SCOPE_LINK,
		// IPv6 routes have no scope: a unicast route to a device alone.
		v6 && r.Gw == nil && r.Via == nil && r.Type == unix.RTN_UNICAST && len(r.MultiPath) == 0:
		return Route{Dst: dst, Kind: PodRoute, Dev: names[r.LinkIndex]}, true
	case r.Gw != nil && len(r.MultiPath) == 0:
		via, _ := nl.Addr(r.Gw, v6)
		return Route{Dst: dst, Kind: RemoteRoute, Dev: names[r.LinkIndex], Via: via, OnLink: r.Flags&unix.RTNH_F_ONLINK != 0}, true
	default:
		// Ours by protocol but of a shape this version does not write:
		// record it with an impossible device so Diff replaces or deletes it.
		return Route{Dst: dst, Kind: PodRoute, Dev: "?" + names[r.LinkIndex]}, true
	}
}

// Apply carries out a plan. It goes on after a failed step so that one bad
// object does not hold back the rest, and returns every failure. It takes
// no lock: the routes of blocks are their owner's (Blocks) alone, and a
// plan with pods' objects comes from their owner (Pods), which applies
// each under the object's lock.
func (k *Kernel) Apply(p Plan) error {
	var errs []error
	// Each device is looked up once per plan: the routes of a pass mostly
	// share one (the uplink), and a lookup is a netlink request of its own.
	links := map[string]int{}
	for _, r := range p.Replace {
		if err := k.replace(r, links); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range p.DeleteRoute {
		if err := k.deleteRoute(r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range p.SetMTU {
		if err := k.setPodMTU(m); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range p.DeleteLink {
		if err := veth.Delete(k.h, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// vanished says whether err is the kernel's "no such device": a pod's
// veth that was there when the pass read the kernel went away since, with
// its netns (a sandbox removed without a DEL). Nothing is routed on a veth
// that does not exist (Desired), so a pass has nothing to write for it;
// the next pass finds the record's netns gone and releases it.
func vanished(err error) bool {
	var nf netlink.LinkNotFoundError
	return err != nil && (errors.As(err, &nf) || errors.Is(err, unix.ENODEV))
}

// setPodMTU gives both ends of a pod's veth pair m.MTU, each only if it
// differs. The pod's end is found first, so that a pod whose netns is gone
// is left as it is (the pass that finds it gone twice releases it), as is
// a pair that vanished since the pass read the kernel.
func (k *Kernel) setPodMTU(m PodMTU) error {
	podNS, err := veth.OpenNetns(m.Netns)
	if errors.Is(err, veth.ErrNetnsGone) {
		return nil // the pass that finds it gone twice releases the pod
	}
	if err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", m.MTU, m.IfName, err)
	}
	defer podNS.Close()
	h, err := nl.NewHandleAt(podNS)
	if err != nil {
		return fmt.Errorf("netlink handle in netns %s: %w", m.Netns, err)
	}
	defer h.Close()
	pl, err := h.LinkByName(m.IfName)
	if err != nil {
		return fmt.Errorf("set MTU %d on %s in netns %s: %w", m.MTU, m.IfName, m.Netns, err)
	}
	l, err := k.h.LinkByName(m.HostVeth)
	if vanished(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", m.MTU, m.HostVeth, err)
	}
	if l.Attrs().MTU != m.MTU {
		if err := k.h.LinkSetMTU(l, m.MTU); err != nil {
			return fmt.Errorf("set MTU %d on %s: %w", m.MTU, m.HostVeth, err)
		}
	}
	if pl.Attrs().MTU != m.MTU {
		if err := h.LinkSetMTU(pl, m.MTU); err != nil {
			return fmt.Errorf("set MTU %d on %s in netns %s: %w", m.MTU, m.IfName, m.Netns, err)
		}
	}
	return nil
}

// Without is p less what busy names: the plan a pass logs. Pods asks
// again, under each object's lock.
func (p Plan) Without(busy Busy) Plan {
	keep := func(r Route) bool { return !isPodObject(r) || !busy.Addr(r.Dst.Addr()) && !busy.Link(r.Dev) }
	var out Plan
	for _, r := range p.Replace {
		if keep(r) {
			out.Replace = append(out.Replace, r)
		}
	}
	for _, r := range p.DeleteRoute {
		if keep(r) {
			out.DeleteRoute = append(out.DeleteRoute, r)
		}
	}
	for _, m := range p.SetMTU {
		if !busy.Link(m.HostVeth) {
			out.SetMTU = append(out.SetMTU, m)
		}
	}
	for _, l := range p.DeleteLink {
		if !busy.Link(l) {
			out.DeleteLink = append(out.DeleteLink, l)
		}
	}
	return out
}

// isPodObject says whether r is a pod's /32 or /128 (not a block's route).
func isPodObject(r Route) bool { return r.Kind == PodRoute && r.Dst.IsSingleIP() }

func (k *Kernel) deleteRoute(r Route) error {
	// Scope "nowhere" matches a route of any scope; the protocol makes
	// sure the kernel deletes only a route of ours.
	nr := &netlink.Route{Dst: nl.IPNet(r.Dst), Protocol: Protocol, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_NOWHERE}
	if r.Kind == Blackhole {
		nr.Type = unix.RTN_BLACKHOLE
	}
	if err := k.h.RouteDel(nr); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	return nil
}

// linkIndex is the index of the device named dev, from links or looked up
// (and kept in links).
func (k *Kernel) linkIndex(dev string, links map[string]int) (int, error) {
	if i, ok := links[dev]; ok {
		return i, nil
	}
	l, err := k.h.LinkByName(dev)
	if err != nil {
		return 0, err
	}
	links[dev] = l.Attrs().Index
	return l.Attrs().Index, nil
}

func (k *Kernel) replace(r Route, links map[string]int) error {
	switch r.Kind {
	case Blackhole:
		nr := &netlink.Route{Dst: nl.IPNet(r.Dst), Type: unix.RTN_BLACKHOLE, Protocol: Protocol, Table: unix.RT_TABLE_MAIN}
		if err := nl.WriteRoute(k.h, nr); err != nil {
			return fmt.Errorf("replace route %s: %w", r, err)
		}
	case RemoteRoute:
		if r.Via.Is4() != r.Dst.Addr().Is4() {
			return fmt.Errorf("replace route %s: a gateway of another family than the block's", r)
		}
		idx, err := k.linkIndex(r.Dev, links)
		if err != nil {
			return fmt.Errorf("replace route %s: %w", r, err)
		}
		nr := &netlink.Route{Dst: nl.IPNet(r.Dst), Gw: r.Via.AsSlice(), LinkIndex: idx,
			Protocol: Protocol, Table: unix.RT_TABLE_MAIN}
		if r.OnLink {
			nr.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := nl.WriteRoute(k.h, nr); err != nil {
			return fmt.Errorf("replace route %s: %w", r, err)
		}
	case PodRoute:
		if strings.HasPrefix(r.Dev, "?") {
			return fmt.Errorf("replace route %s: no device", r)
		}
		idx, err := k.linkIndex(r.Dev, links)
		if vanished(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replace route %s: %w", r, err)
		}
		if err := nl.WriteRoute(k.h, veth.NodeRoute(r.Dst.Addr(), idx)); vanished(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("replace route %s: %w", r, err)
		}
	}
	return nil
}

// InTheWay says whether a route of another protocol holds the place of a
// route of reef's to dst: a *ForeignRouteError, which reef does not
// overwrite (nl.WriteRoute), nil when none does. `reef routes` and `reef
// ipam check` ask it for each route reef wants and the kernel lacks.
func (k *Kernel) InTheWay(dst netip.Prefix) error { return nl.InTheWay(k.h, dst) }

// NodeAddrState is what HasAddr finds of the node's address on its uplink.
type NodeAddrState int

const (
	AddrPresent NodeAddrState = iota
	AddrGone
	// AddrDuplicate: the address is there but failed duplicate address
	// detection (IPv6): another host on the link has it, and the kernel
	// neither sends from it nor answers for it.
	AddrDuplicate
)

// ErrLinkGone is LinkIndex's error for a name no link has.
var ErrLinkGone = errors.New("no link of that name")

// LinkIndex returns the index of the link called name now: a link
// deleted and created again under the same name (a bond or VLAN a network
// manager rebuilt) has a new one. An error wrapping ErrLinkGone says there
// is none.
func (k *Kernel) LinkIndex(name string) (int, error) {
	l, err := k.h.LinkByName(name)
	if vanished(err) {
		return 0, fmt.Errorf("link %s: %w", name, ErrLinkGone)
	}
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	return l.Attrs().Index, nil
}

// HasAddr says whether the link of index has addr among its addresses, of
// any scope or flag (tentative, deprecated), unless it failed duplicate
// address detection: the node's address as reef chose it at start.
func (k *Kernel) HasAddr(index int, addr netip.Addr) (NodeAddrState, error) {
	family := unix.AF_INET
	if addr.Is6() {
		family = unix.AF_INET6
	}
	l, err := k.h.LinkByIndex(index)
	if err != nil {
		return AddrGone, fmt.Errorf("link %d: %w", index, err)
	}
	as, err := k.h.AddrList(l, family)
	if err != nil {
		return AddrGone, fmt.Errorf("list the addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); !ok || ip.Unmap() != addr.Unmap() {
			continue
		}
		if a.Flags&unix.IFA_F_DADFAILED != 0 {
			return AddrDuplicate, nil
		}
		return AddrPresent, nil
	}
	return AddrGone, nil
}

// HopTo asks the kernel where the node's own routing sends packets for
// addr (as `ip route get`): a route to another node's address is the
// operator's, and reef only reads it.
func (k *Kernel) HopTo(addr netip.Addr) (Hop, error) {
	rs, err := k.h.RouteGet(addr.AsSlice())
	if err != nil {
		return Hop{}, fmt.Errorf("route to %s: %w", addr, err)
	}
	if len(rs) == 0 || rs[0].Type != unix.RTN_UNICAST {
		return Hop{}, fmt.Errorf("route to %s: none that forwards", addr)
	}
	l, err := k.h.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		return Hop{}, fmt.Errorf("route to %s: device %d: %w", addr, rs[0].LinkIndex, err)
	}
	h := Hop{Gateway: addr, Dev: l.Attrs().Name}
	if gw, ok := nl.Addr(rs[0].Gw, addr.Is6()); ok && rs[0].Gw != nil {
		h.Gateway = gw
	}
	return h, nil
}
