package routes

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestRouteString(t *testing.T) {
	for _, tt := range []struct {
		r    Route
		want string
	}{
		{podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), "10.244.1.5/32 dev reefaaaaaaaaaaa scope link proto reef"},
		{podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa"), "fd00:10:244::5/128 dev reefaaaaaaaaaaa proto reef"},
		{hole("10.244.1.0/26"), "blackhole 10.244.1.0/26 proto reef"},
		{hole("fd00:10:244::/122"), "blackhole fd00:10:244::/122 proto reef"},
		{Route{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: tunnel.VXLANDevice, Via: netip.MustParseAddr("2001:db8::12"), OnLink: true},
			"fd00:10:244::40/122 via 2001:db8::12 dev vxlan.reef onlink proto reef"},
		{Route{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("fe80::1")},
			"fd00:10:244::40/122 via fe80::1 dev eth0 proto reef"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v renders as %q, want %q", tt.r, got, tt.want)
		}
	}
}

// Read's reading of a kernel route, for shapes a namespace cannot easily
// hold: the kernel reports IPv6 routes without a scope, a gateway of
// another family as RTA_VIA, and IPv4 addresses in either of net.IP's
// forms.
func TestRouteOf(t *testing.T) {
	names := map[int]string{1: "lo", 2: "eth0", 3: "reefaaaaaaaaaaa", 4: tunnel.VXLANDevice}
	ipnet := func(s string) *net.IPNet { return nl.IPNet(pfx(s)) }
	ip := func(s string) net.IP { return netip.MustParseAddr(s).AsSlice() }
	remote := func(dst, dev, via string, onlink bool) Route {
		return Route{Dst: pfx(dst), Kind: RemoteRoute, Dev: dev, Via: netip.MustParseAddr(via), OnLink: onlink}
	}
	for _, tt := range []struct {
		name string
		r    netlink.Route
		want Route
		skip bool
	}{
		{"IPv4 pod route", netlink.Route{Dst: ipnet("10.244.1.5/32"), LinkIndex: 3, Scope: netlink.SCOPE_LINK, Type: unix.RTN_UNICAST},
			podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), false},
		{"IPv4 in 16 bytes", netlink.Route{Dst: &net.IPNet{IP: net.ParseIP("10.244.1.5"), Mask: net.CIDRMask(32, 32)}, LinkIndex: 3, Scope: netlink.SCOPE_LINK},
			podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), false},
		{"IPv4 device route of scope global: not a shape reef writes", netlink.Route{Dst: ipnet("10.244.6.0/26"), LinkIndex: 2, Type: unix.RTN_UNICAST},
			podRt("10.244.6.0/26", "?eth0"), false},
		{"IPv6 pod route: no scope", netlink.Route{Dst: ipnet("fd00:10:244::5/128"), LinkIndex: 3, Type: unix.RTN_UNICAST},
			podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa"), false},
		{"IPv6 blackhole on lo", netlink.Route{Dst: ipnet("fd00:10:244::/122"), LinkIndex: 1, Type: unix.RTN_BLACKHOLE},
			hole("fd00:10:244::/122"), false},
		{"IPv6 unreachable: not reef's shape", netlink.Route{Dst: ipnet("fd00:10:244::/122"), LinkIndex: 1, Type: unix.RTN_UNREACHABLE},
			podRt("fd00:10:244::/122", "?lo"), false},
		{"IPv6 onlink to the owner", netlink.Route{Dst: ipnet("fd00:10:244::40/122"), LinkIndex: 4, Gw: ip("2001:db8::12"), Flags: unix.RTNH_F_ONLINK, Type: unix.RTN_UNICAST},
			remote("fd00:10:244::40/122", tunnel.VXLANDevice, "2001:db8::12", true), false},
		{"IPv6 through a link-local router", netlink.Route{Dst: ipnet("fd00:10:244::40/122"), LinkIndex: 2, Gw: ip("fe80::1"), Type: unix.RTN_UNICAST},
			remote("fd00:10:244::40/122", "eth0", "fe80::1", false), false},
		{"IPv6 with an IPv4-mapped gateway stays IPv6", netlink.Route{Dst: ipnet("fd00:10:244::40/122"), LinkIndex: 2, Gw: net.ParseIP("::ffff:192.0.2.1"), Type: unix.RTN_UNICAST},
			remote("fd00:10:244::40/122", "eth0", "::ffff:192.0.2.1", false), false},
		{"IPv6 through a gateway of another family (RTA_VIA): not reef's shape",
			netlink.Route{Dst: ipnet("fd00:10:244::40/122"), LinkIndex: 2, Via: &netlink.Via{AddrFamily: unix.AF_INET, Addr: ip("192.0.2.1")}, Type: unix.RTN_UNICAST},
			podRt("fd00:10:244::40/122", "?eth0"), false},
		{"IPv6 multipath: not reef's shape", netlink.Route{Dst: ipnet("fd00:10:244::40/122"), MultiPath: []*netlink.NexthopInfo{{LinkIndex: 2}}, Type: unix.RTN_UNICAST},
			podRt("fd00:10:244::40/122", "?"), false},
		{"no destination", netlink.Route{LinkIndex: 2}, Route{}, true},
	} {
		got, ok := routeOf(tt.r, names)
		if ok == tt.skip {
			t.Errorf("%s: routeOf ok = %v", tt.name, ok)
			continue
		}
		if diff := cmp.Diff(tt.want, got, stateCmpOpts); diff != "" {
			t.Errorf("%s: routeOf (-want +got):\n%s", tt.name, diff)
		}
	}
}
