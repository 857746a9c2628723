package daemon

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/reefcni/reef/internal/netnstest"
)

var uplinkCmpOpts = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

func TestChooseUplink(t *testing.T) {
	pfx := netip.MustParsePrefix
	// A typical node: lo, the uplink ens18, docker0, a veth, reef's vxlan device.
	links := []LinkInfo{
		{Index: 1, Name: "lo", Kind: "loopback", Up: true, MTU: 65536},
		{Index: 2, Name: "ens18", Kind: "device", Up: true, MTU: 1500},
		{Index: 3, Name: "docker0", Kind: "bridge", Up: true, MTU: 1500},
		{Index: 4, Name: "veth1a2b", Kind: "veth", Up: true, MTU: 1500},
		{Index: 5, Name: "vxlan.reef", Kind: "vxlan", Up: true, MTU: 1450},
		{Index: 6, Name: "ens19", Kind: "device", Up: true, MTU: 9000},
		{Index: 7, Name: "br0", Kind: "bridge", Up: true, MTU: 1500},
		{Index: 8, Name: "ens20", Kind: "device", Up: false, MTU: 1500},
	}
	addrs := []AddrInfo{
		{LinkIndex: 1, Prefix: pfx("127.0.0.1/8")},
		{LinkIndex: 2, Prefix: pfx("192.168.10.20/24"), Global: true},
		{LinkIndex: 2, Prefix: pfx("192.168.10.50/32"), Global: true},                  // kube-vip VIP
		{LinkIndex: 2, Prefix: pfx("192.168.10.21/24"), Global: true, Secondary: true}, // keepalived
		{LinkIndex: 3, Prefix: pfx("172.17.0.1/16"), Global: true},
		{LinkIndex: 4, Prefix: pfx("169.254.1.1/16")},
		{LinkIndex: 5, Prefix: pfx("10.244.1.0/32"), Global: true},
		{LinkIndex: 6, Prefix: pfx("10.0.0.5/32"), Global: true},
		{LinkIndex: 6, Prefix: pfx("10.0.0.6/24"), Global: true, Secondary: true},
		{LinkIndex: 7, Prefix: pfx("192.168.20.5/24"), Global: true},
		{LinkIndex: 8, Prefix: pfx("192.168.30.5/24"), Global: true},
	}
	ens18 := Uplink{Interface: "ens18", Index: 2, Address: netip.MustParseAddr("192.168.10.20"), Prefix: pfx("192.168.10.20/24"), MTU: 1500}

	tests := []struct {
		name      string
		links     []LinkInfo
		addrs     []AddrInfo
		defaults  []RouteInfo
		wantIface string
		wantAddr  string
		want      Uplink
		wantErr   string // substring
	}{
		{
			name:     "default route",
			defaults: []RouteInfo{{LinkIndex: 2, Priority: 100}},
			want:     withReason(ens18, "192.168.10.20 on ens18: interface of the default route (metric 100)"),
		},
		{
			name:     "lowest metric wins",
			defaults: []RouteInfo{{LinkIndex: 7, Priority: 600}, {LinkIndex: 2, Priority: 100}},
			want:     withReason(ens18, "192.168.10.20 on ens18: interface of the default route (metric 100)"),
		},
		{
			name:     "default route over a bridge is taken",
			defaults: []RouteInfo{{LinkIndex: 7, Priority: 0}},
			want: Uplink{Interface: "br0", Index: 7, Address: netip.MustParseAddr("192.168.20.5"), Prefix: pfx("192.168.20.5/24"), MTU: 1500,
				Reason: "192.168.20.5 on br0: interface of the default route (metric 0); it is a bridge"},
		},
		{
			name:     "default route to an unknown link is ignored",
			defaults: []RouteInfo{{LinkIndex: 99, Priority: 0}, {LinkIndex: 2, Priority: 100}},
			want:     withReason(ens18, "192.168.10.20 on ens18: interface of the default route (metric 100)"),
		},
		{
			name:     "default route interface with only a /32 and a secondary",
			defaults: []RouteInfo{{LinkIndex: 6, Priority: 100}},
			wantErr:  "the IPv4 default route (metric 100) is on ens19, which has no usable IPv4 address (10.0.0.5/32 is a /32 (a VIP?), 10.0.0.6/24 is secondary); set nodeAddress or interface in reef's config file (--config; /etc/reef/config.yaml by default)",
		},
		{
			name: "no default route: first usable interface, skipping lo, bridges, veths, reef devices and down links",
			want: withReason(ens18, "192.168.10.20 on ens18: first interface with a usable IPv4 address (there is no IPv4 default route)"),
		},
		{
			name:  "no default route, links given out of order",
			links: []LinkInfo{links[7], links[6], links[5], links[1], links[0]},
			want:  withReason(ens18, "192.168.10.20 on ens18: first interface with a usable IPv4 address (there is no IPv4 default route)"),
		},
		{
			name:    "no default route and only bridges",
			links:   []LinkInfo{links[0], links[2], links[6]},
			wantErr: "no IPv4 default route and no usable interface; set nodeAddress or interface in reef's config file (--config; /etc/reef/config.yaml by default)",
		},
		{
			name:    "reef-named device is skipped",
			links:   []LinkInfo{{Index: 2, Name: "reef0", Kind: "dummy", Up: true}},
			wantErr: "no IPv4 default route and no usable interface",
		},
		{
			name:     "nodeAddress picks its interface over the default route",
			defaults: []RouteInfo{{LinkIndex: 2, Priority: 100}},
			wantAddr: "192.168.20.5",
			want: Uplink{Interface: "br0", Index: 7, Address: netip.MustParseAddr("192.168.20.5"), Prefix: pfx("192.168.20.5/24"), MTU: 1500,
				Reason: "192.168.20.5 on br0: nodeAddress set in the configuration; it is a bridge"},
		},
		{
			name:     "nodeAddress may be a /32",
			wantAddr: "10.0.0.5",
			want: Uplink{Interface: "ens19", Index: 6, Address: netip.MustParseAddr("10.0.0.5"), Prefix: pfx("10.0.0.5/32"), MTU: 9000,
				Reason: "10.0.0.5 on ens19: nodeAddress set in the configuration"},
		},
		{
			name:      "nodeAddress and interface agree",
			wantAddr:  "192.168.10.20",
			wantIface: "ens18",
			want:      withReason(ens18, "192.168.10.20 on ens18: nodeAddress set in the configuration"),
		},
		{
			name:     "nodeAddress on a down interface",
			wantAddr: "192.168.30.5",
			want: Uplink{Interface: "ens20", Index: 8, Address: netip.MustParseAddr("192.168.30.5"), Prefix: pfx("192.168.30.5/24"), MTU: 1500,
				Reason: "192.168.30.5 on ens20: nodeAddress set in the configuration; it is down"},
		},
		{
			name:      "nodeAddress and interface disagree",
			wantAddr:  "192.168.10.20",
			wantIface: "ens19",
			wantErr:   "nodeAddress 192.168.10.20 is on interface ens18, but interface is set to ens19",
		},
		{
			name:     "nodeAddress not on the node",
			wantAddr: "192.168.10.99",
			wantErr:  "nodeAddress 192.168.10.99 is not on any interface of this node (usable addresses: 192.168.10.20 on ens18, 172.17.0.1 on docker0, 192.168.20.5 on br0, 192.168.30.5 on ens20)",
		},
		{
			name:      "interface",
			defaults:  []RouteInfo{{LinkIndex: 7, Priority: 0}},
			wantIface: "ens18",
			want:      withReason(ens18, "192.168.10.20 on ens18: interface set in the configuration"),
		},
		{
			name:      "interface missing",
			wantIface: "eth0",
			wantErr:   "interface eth0 does not exist",
		},
		{
			name:      "interface without usable address",
			wantIface: "ens19",
			wantErr:   "interface ens19 has no usable IPv4 address (10.0.0.5/32 is a /32 (a VIP?), 10.0.0.6/24 is secondary)",
		},
		{
			name:      "interface without any address",
			links:     []LinkInfo{{Index: 2, Name: "ens18", Kind: "device", Up: true}},
			addrs:     []AddrInfo{},
			wantIface: "ens18",
			wantErr:   "interface ens18 has no usable IPv4 address (it has no IPv4 address)",
		},
		{
			name:    "nothing at all",
			links:   []LinkInfo{},
			addrs:   []AddrInfo{},
			wantErr: "no IPv4 default route and no usable interface",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, a := links, addrs
			if tt.links != nil {
				l = tt.links
			}
			if tt.addrs != nil {
				a = tt.addrs
			}
			var want netip.Addr
			if tt.wantAddr != "" {
				want = netip.MustParseAddr(tt.wantAddr)
			}
			got, err := chooseUplink(l, a, tt.defaults, tt.wantIface, want)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("chooseUplink() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("chooseUplink() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, uplinkCmpOpts); diff != "" {
				t.Errorf("chooseUplink() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func withReason(u Uplink, reason string) Uplink {
	u.Reason = reason
	return u
}

// TestDetectUplink runs DetectUplink against the kernel, in a network
// namespace of its own so that the host's is never touched.
func TestDetectUplink(t *testing.T) {
	testNS := netnstest.New(t)
	// in runs the code under test in the test namespace, on a locked
	// thread of its own (ns.Do): uplinkReadKernel and DetectUplink read
	// the namespace of their caller.
	in := func(f func()) {
		t.Helper()
		if err := testNS.Do(func(ns.NetNS) error { f(); return nil }); err != nil {
			t.Fatalf("enter the test netns: %v", err)
		}
	}
	nsh, err := netns.GetFromPath(testNS.Path())
	if err != nil {
		t.Fatalf("open the test netns: %v", err)
	}
	defer nsh.Close()

	// A handle bound to the test namespace, so that setting up can never
	// reach the host's even if the thread were elsewhere.
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatalf("netlink handle in test netns: %v", err)
	}
	defer h.Close()

	// mustAddLink adds the first of alts the kernel supports and sets it up.
	mustAddLink := func(alts ...netlink.Link) netlink.Link {
		t.Helper()
		name := alts[0].Attrs().Name
		var err error
		for _, l := range alts {
			if err = h.LinkAdd(l); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("add link %s: %v", name, err)
		}
		got, err := h.LinkByName(name)
		if err != nil {
			t.Fatalf("get link %s: %v", name, err)
		}
		if err := h.LinkSetUp(got); err != nil {
			t.Fatalf("set link %s up: %v", name, err)
		}
		return got
	}
	mustAddAddr := func(l netlink.Link, cidr string) {
		t.Helper()
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddrAdd(l, a); err != nil {
			t.Fatalf("add address %s to %s: %v", cidr, l.Attrs().Name, err)
		}
	}

	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatalf("get lo: %v", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatalf("set lo up: %v", err)
	}
	// Created first so it has a lower index than dummy0 and the fallback
	// scan has to skip it.
	br := mustAddLink(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-test"}})
	mustAddAddr(br, "10.97.0.1/24")
	veth := mustAddLink(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-up", MTU: 1400}, PeerName: "veth-peer"})
	peer, err := h.LinkByName("veth-peer")
	if err != nil {
		t.Fatalf("get veth-peer: %v", err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		t.Fatalf("set veth-peer up: %v", err)
	}
	mustAddAddr(veth, "10.99.1.1/32") // a VIP, listed first on purpose
	mustAddAddr(veth, "10.99.0.2/24") // primary
	mustAddAddr(veth, "10.99.0.3/24") // same subnet: secondary
	// A plain device for the fallback scan: a dummy, or where the kernel
	// lacks that, a macvlan.
	dummy := mustAddLink(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "plain-test"}},
		&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "plain-test", ParentIndex: peer.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE})
	mustAddAddr(dummy, "10.98.0.2/24")

	route := &netlink.Route{LinkIndex: veth.Attrs().Index, Gw: net.ParseIP("10.99.0.1"), Priority: 100}
	if err := h.RouteAdd(route); err != nil {
		t.Fatalf("add default route via 10.99.0.1: %v", err)
	}

	// The conversion from netlink: flags, scopes and the default route.
	var links []LinkInfo
	var addrs []AddrInfo
	var defaults []RouteInfo
	in(func() { links, addrs, defaults, err = uplinkReadKernel() })
	if err != nil {
		t.Fatalf("uplinkReadKernel() error = %v", err)
	}
	vi := veth.Attrs().Index
	if i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Index == vi }); i < 0 || links[i].Kind != "veth" || !links[i].Up {
		t.Errorf("links = %+v, want veth-up as an up veth", links)
	}
	wantAddrs := []AddrInfo{
		{LinkIndex: vi, Prefix: netip.MustParsePrefix("10.99.1.1/32"), Global: true},
		{LinkIndex: vi, Prefix: netip.MustParsePrefix("10.99.0.2/24"), Global: true},
		{LinkIndex: vi, Prefix: netip.MustParsePrefix("10.99.0.3/24"), Global: true, Secondary: true},
	}
	gotAddrs := slices.DeleteFunc(slices.Clone(addrs), func(a AddrInfo) bool { return a.LinkIndex != vi })
	if diff := cmp.Diff(wantAddrs, gotAddrs, uplinkCmpOpts); diff != "" {
		t.Errorf("addresses of veth-up mismatch (-want +got):\n%s", diff)
	}
	if i := slices.IndexFunc(addrs, func(a AddrInfo) bool { return a.Prefix.Addr().IsLoopback() }); i < 0 || addrs[i].Global {
		t.Errorf("addresses = %+v, want 127.0.0.1 of host scope", addrs)
	}
	if diff := cmp.Diff([]RouteInfo{{LinkIndex: vi, Priority: 100}}, defaults); diff != "" {
		t.Errorf("default routes mismatch (-want +got):\n%s", diff)
	}

	vethUplink := Uplink{Interface: "veth-up", Index: veth.Attrs().Index, MTU: 1400,
		Address: netip.MustParseAddr("10.99.0.2"), Prefix: netip.MustParsePrefix("10.99.0.2/24"),
		Reason: "10.99.0.2 on veth-up: interface of the default route (metric 100)"}
	check := func(name, wantIface string, wantAddr netip.Addr, want Uplink) {
		t.Helper()
		var got Uplink
		var err error
		in(func() { got, err = DetectUplink(wantIface, wantAddr) })
		if err != nil {
			t.Errorf("%s: DetectUplink() error = %v", name, err)
			return
		}
		if diff := cmp.Diff(want, got, uplinkCmpOpts); diff != "" {
			t.Errorf("%s: DetectUplink() mismatch (-want +got):\n%s", name, diff)
		}
	}
	check("default route", "", netip.Addr{}, vethUplink)
	check("nodeAddress /32", "", netip.MustParseAddr("10.99.1.1"), Uplink{Interface: "veth-up", Index: veth.Attrs().Index, MTU: 1400,
		Address: netip.MustParseAddr("10.99.1.1"), Prefix: netip.MustParsePrefix("10.99.1.1/32"),
		Reason: "10.99.1.1 on veth-up: nodeAddress set in the configuration"})
	dummyUplink := Uplink{Interface: "plain-test", Index: dummy.Attrs().Index, MTU: dummy.Attrs().MTU,
		Address: netip.MustParseAddr("10.98.0.2"), Prefix: netip.MustParsePrefix("10.98.0.2/24")}
	check("interface", "plain-test", netip.Addr{}, withReason(dummyUplink, "10.98.0.2 on plain-test: interface set in the configuration"))

	if err := h.RouteDel(route); err != nil {
		t.Fatalf("delete default route: %v", err)
	}
	check("fallback skips the bridge and the veth", "", netip.Addr{},
		withReason(dummyUplink, "10.98.0.2 on plain-test: first interface with a usable IPv4 address (there is no IPv4 default route)"))
}
