// Package nl is what routes, routes/veth, routes/tunnel and routes/tc
// share of netlink: their handles, of NETLINK_ROUTE alone (handle.go),
// reef's route protocol and its exclusive write of a route (ours.go),
// and the conversions between netlink's addresses and net/netip's
// (addr.go).
package nl

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Protocol is reef's rtnetlink protocol number (routes.Protocol).
// packaging/rt_protos.d names it "reef" so that `ip route` prints "proto
// reef"; the kernel needs no name.
const Protocol = 238

// ForeignRouteError says a route of another owner (a protocol other than
// reef's: static, BIRD, the kernel's) holds the place in the main table
// that a route of reef's would take: the same destination and metric.
// reef leaves it alone and reports it; the operator decides whose it is.
type ForeignRouteError struct {
	Dst      netip.Prefix
	Protocol netlink.RouteProtocol
}

func (e *ForeignRouteError) Error() string {
	return fmt.Sprintf("a route to %s that is not reef's (proto %s) is in the way; reef does not overwrite it: delete it if %s belongs to reef's pools",
		e.Dst, e.Protocol, e.Dst)
}

// WriteRoute puts nr (a route of reef's protocol in the main table) in
// the kernel: added where the place is free, replacing only a route of
// reef's own. RTM_NEWROUTE with NLM_F_REPLACE replaces whatever route has
// the same destination and metric, whoever wrote it; so reef adds
// exclusively first, and on EEXIST looks at who has the place.
func WriteRoute(h netlinksafe.Handle, nr *netlink.Route) error {
	err := h.RouteAdd(nr)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	if err := foreignAt(h, nr); err != nil {
		return err
	}
	return h.RouteReplace(nr)
}

// InTheWay is the ForeignRouteError of a route of another protocol that
// holds the place in the main table of a route of reef's to dst (its
// destination, at the metric reef writes), nil when none does, or the
// error of the read.
func InTheWay(h netlinksafe.Handle, dst netip.Prefix) error {
	return foreignAt(h, &netlink.Route{Dst: IPNet(dst), Table: unix.RT_TABLE_MAIN})
}

// foreignAt is a ForeignRouteError when a route at nr's destination and
// metric in nr's table is not reef's, nil when it is.
func foreignAt(h netlinksafe.Handle, nr *netlink.Route) error {
	family := unix.AF_INET
	if nr.Dst.IP.To4() == nil {
		family = unix.AF_INET6
	}
	table := nr.Table
	if table == 0 {
		table = unix.RT_TABLE_MAIN // what the kernel writes a route without one to
	}
	rs, err := h.RouteListFiltered(family, &netlink.Route{Dst: nr.Dst, Table: table}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes to %s: %w", nr.Dst, err)
	}
	for _, r := range rs {
		if metric(r) == metric(*nr) && r.Protocol != Protocol {
			dst, _ := Prefix(nr.Dst)
			return &ForeignRouteError{Dst: dst, Protocol: r.Protocol}
		}
	}
	return nil
}

// metric is a route's metric as the kernel keys it: an IPv6 route written
// with none has 1024.
func metric(r netlink.Route) int {
	if r.Priority == 0 && r.Dst != nil && r.Dst.IP.To4() == nil {
		return 1024
	}
	return r.Priority
}
