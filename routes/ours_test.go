package routes

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/veth"
)

// TestForeignRouteInTheWay: a route that is not reef's at the destination
// and metric of one reef wants (an operator's static route to an address
// of reef's pools, a routing daemon's) is never overwritten, neither by a
// pass (Apply) nor by ADD (Pods.Up's /32): each reports a
// ForeignRouteError, and the route stays as it was. Where the place is
// reef's own, it is replaced as before.
func TestForeignRouteInTheWay(t *testing.T) {
	node, nodeH, ip := nodeWithOther(t)
	ip("-6", "addr", "add", "2001:db8::1/64", "dev", "other0", "nodad")
	// Not reef's: a static route to a block, a BIRD route to another
	// block, a static IPv6 route to a block, and a static /32.
	ip("route", "add", "10.244.1.0/26", "via", "192.0.2.9", "dev", "other0", "proto", "static")
	ip("route", "add", "10.244.2.0/26", "via", "192.0.2.9", "dev", "other0", "proto", "bird")
	ip("-6", "route", "add", "fd00:10:244::/122", "via", "2001:db8::9", "dev", "other0", "proto", "static")
	ip("route", "add", "10.244.3.7/32", "dev", "other0", "proto", "static")
	// reef's own, in the place of another shape: replaced.
	ip("route", "add", "blackhole", "10.244.4.0/26", "proto", "238")
	before := routeStrings(t, nodeH, &netlink.Route{}, 0)

	k := netnstest.Open(t, node, NewKernel)
	via := netip.MustParseAddr("192.0.2.2")
	plan := Plan{Replace: []Route{
		hole("10.244.1.0/26"),
		{Dst: pfx("10.244.2.0/26"), Kind: RemoteRoute, Dev: "other0", Via: via, OnLink: true},
		hole("fd00:10:244::/122"),
		podRt("10.244.3.7/32", "other0"),
		{Dst: pfx("10.244.4.0/26"), Kind: RemoteRoute, Dev: "other0", Via: via},
	}}
	err := k.Apply(plan)
	var foreign *ForeignRouteError
	if !errors.As(err, &foreign) {
		t.Fatalf("Apply over routes that are not reef's = %v, want a ForeignRouteError", err)
	}
	for _, dst := range []string{"10.244.1.0/26", "10.244.2.0/26", "fd00:10:244::/122", "10.244.3.7/32"} {
		if !strings.Contains(err.Error(), "a route to "+dst+" that is not reef's") {
			t.Errorf("Apply's error does not name %s:\n%v", dst, err)
		}
	}
	after := routeStrings(t, nodeH, &netlink.Route{}, 0)
	want := []string{}
	for _, r := range before {
		if r != "blackhole 10.244.4.0/26 proto 238" {
			want = append(want, r)
		}
	}
	want = append(want, "10.244.4.0/26 via 192.0.2.2 dev other0 proto 238")
	sort.Strings(want)
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("routes after Apply (-want +got): the foreign ones must stay, reef's blackhole become its route:\n%s", diff)
	}

	r6, err := nodeH.RouteListFiltered(unix.AF_INET6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var six []string
	for _, r := range r6 {
		if r.Dst != nil && r.Dst.String() == "fd00:10:244::/122" {
			six = append(six, fmt.Sprintf("%s via %s proto %d", r.Dst, r.Gw, r.Protocol))
		}
	}
	if diff := cmp.Diff([]string{"fd00:10:244::/122 via 2001:db8::9 proto 4"}, six); diff != "" {
		t.Errorf("IPv6 routes to fd00:10:244::/122 after Apply (-want +got):\n%s", diff)
	}

	// ADD of a pod whose /32 an operator's route holds: refused, nothing left.
	pod := netnstest.New(t)
	err = in(t, node, func() error {
		_, err := cniPods(sysctl.New(sysctl.Proc{})).Up(veth.Spec{Netns: pod.Path(), IfName: "eth0", HostVeth: "reeff1", IPs: []netip.Addr{netip.MustParseAddr("10.244.3.7")}, MTU: 1500})
		return err
	})
	if !errors.As(err, &foreign) {
		t.Errorf("Up of 10.244.3.7 over a static /32 = %v, want a ForeignRouteError", err)
	}
	if diff := cmp.Diff(after, routeStrings(t, nodeH, &netlink.Route{}, 0)); diff != "" {
		t.Errorf("routes after the refused Up (-want +got):\n%s", diff)
	}
	if _, err := nodeH.LinkByName("reeff1"); err == nil {
		t.Errorf("the refused Up left its veth reeff1")
	}
}

// TestInTheWay: Kernel.InTheWay names the protocol of a route that is not
// reef's at the destination and metric of one reef would write (IPv4's
// none, IPv6's 1024), and nothing for reef's own route, for a foreign
// route at another metric, or for no route at all.
func TestInTheWay(t *testing.T) {
	node, _, ip := nodeWithOther(t)
	ip("-6", "addr", "add", "2001:db8::1/64", "dev", "other0", "nodad")
	ip("route", "add", "10.244.1.0/26", "via", "192.0.2.9", "dev", "other0", "proto", "static")
	ip("route", "add", "10.244.2.7/32", "dev", "other0", "proto", "bird")
	ip("route", "add", "10.244.3.0/26", "via", "192.0.2.9", "dev", "other0", "proto", "static", "metric", "100")
	ip("route", "add", "blackhole", "10.244.4.0/26", "proto", "238")
	ip("-6", "route", "add", "fd00:10:244::/122", "via", "2001:db8::9", "dev", "other0", "proto", "boot")
	ip("-6", "route", "add", "fd00:10:244::40/122", "via", "2001:db8::9", "dev", "other0", "proto", "static", "metric", "100")
	k := netnstest.Open(t, node, NewKernel)
	for dst, want := range map[string]string{
		"10.244.1.0/26":       "static",
		"10.244.2.7/32":       "bird",
		"10.244.3.0/26":       "", // another metric: beside reef's, not in its place
		"10.244.4.0/26":       "", // reef's own
		"10.244.5.0/26":       "",
		"fd00:10:244::/122":   "boot",
		"fd00:10:244::40/122": "",
		"fd00:10:244::80/122": "",
	} {
		err := k.InTheWay(pfx(dst))
		var foreign *ForeignRouteError
		switch {
		case want == "" && err != nil:
			t.Errorf("InTheWay(%s) = %v, want nil", dst, err)
		case want != "" && !errors.As(err, &foreign):
			t.Errorf("InTheWay(%s) = %v, want a ForeignRouteError of proto %s", dst, err, want)
		case want != "" && foreign.Protocol.String() != want:
			t.Errorf("InTheWay(%s): proto %s, want %s", dst, foreign.Protocol, want)
		}
	}
}
