package daemon

import (
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

func TestChooseUplink6(t *testing.T) {
	pfx := netip.MustParsePrefix
	links := []LinkInfo{{Index: 1, Name: "lo", Kind: "loopback", Up: true}, {Index: 2, Name: "ens18", Kind: "device", Up: true, MTU: 1500},
		{Index: 3, Name: "ens19", Kind: "device", Up: true, MTU: 1400}, {Index: 4, Name: "docker0", Kind: "bridge", Up: true}}
	up := Uplink{Interface: "ens18", Index: 2, Address: netip.MustParseAddr("192.168.10.20")}
	static := unix.IFA_F_PERMANENT
	on18 := []RouteInfo{{LinkIndex: 2, Priority: 1024}}
	tests := []struct {
		name     string
		addrs    []Addr6Info
		defaults []RouteInfo
		iface    string // interface
		want     string // address chosen
		wantIf   string // its interface; "" is ens18
		wantAddr string // nodeAddressV6
		reason   string // substring of the reason
		wantErr  []string
	}{
		{
			name: "the uplink's global address, not its link-local",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static},
				{LinkIndex: 1, Prefix: pfx("::1/128"), Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: on18,
			want:     "fd77::20", reason: "fd77::20 on ens18: interface of the IPv6 default route (metric 1024)",
		},
		{
			name: "static before SLAAC, temporary, deprecated and tentative never",
			addrs: []Addr6Info{
				{LinkIndex: 2, Prefix: pfx("2001:db8::1111/64"), Global: true, Flags: unix.IFA_F_TEMPORARY},
				{LinkIndex: 2, Prefix: pfx("2001:db8::5/64"), Global: true, Flags: unix.IFA_F_MANAGETEMPADDR}, // SLAAC, and lower than the static one
				{LinkIndex: 2, Prefix: pfx("2001:db8::30/64"), Global: true, Flags: static},
				{LinkIndex: 2, Prefix: pfx("2001:db8::1/64"), Global: true, Flags: static | unix.IFA_F_DEPRECATED},
				{LinkIndex: 2, Prefix: pfx("2001:db8::2/64"), Global: true, Flags: static | unix.IFA_F_TENTATIVE},
			},
			defaults: on18,
			want:     "2001:db8::30", reason: "the first of 2 usable ones",
		},
		{
			name: "not a /128 (a VIP), then the lowest",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::1/128"), Global: true, Flags: static},
				{LinkIndex: 2, Prefix: pfx("fd77::40/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::30/64"), Global: true, Flags: static}},
			defaults: on18,
			want:     "fd77::30",
		},
		{
			name:     "a DHCPv6 /128 alone is taken",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("2001:db8::77/128"), Global: true}},
			defaults: on18,
			want:     "2001:db8::77",
		},
		{
			name:     "the IPv6 default route on another interface: that interface",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3, Priority: 1024}},
			want:     "fd78::20", wantIf: "ens19", reason: "fd78::20 on ens19: interface of the IPv6 default route (metric 1024)",
		},
		{
			name:     "two IPv6 default routes: the lowest metric",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 2, Priority: 1024}, {LinkIndex: 3, Priority: 100}},
			want:     "fd78::20", wantIf: "ens19",
		},
		{
			name:     "interface set: the uplink of both families, whatever the IPv6 default route",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3}},
			iface:    "ens18",
			want:     "fd77::20", reason: "fd77::20 on ens18: interface set in the configuration",
		},
		{
			name:     "interface set without a usable address: an error, not the IPv6 default route's",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3}},
			iface:    "ens18",
			wantErr:  []string{"interface ens18 has no usable IPv6 address (fe80::1/64 is link-local); add one, or set nodeAddressV6 or another interface"},
		},
		{
			name:  "no IPv6 default route: the IPv4 uplink",
			addrs: []Addr6Info{{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			want:  "fd77::20", reason: "fd77::20 on ens18: the IPv4 uplink (there is no IPv6 default route)",
		},
		{
			name: "no IPv6 default route, none on the IPv4 uplink: the first plausible interface, never a bridge",
			addrs: []Addr6Info{{LinkIndex: 4, Prefix: pfx("fd79::1/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static},
				{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			want: "fd78::20", wantIf: "ens19", reason: "first interface with a usable IPv6 address (there is no IPv6 default route)",
		},
		{
			name:    "no IPv6 default route, nothing usable",
			addrs:   []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 4, Prefix: pfx("fd79::1/64"), Global: true, Flags: static}},
			wantErr: []string{"no IPv6 default route and no interface with a usable IPv6 address", "set nodeAddressV6 or interface"},
		},
		{
			name:     "configured, honoured even as a /128",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::1/128"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::40/64"), Global: true, Flags: static}},
			wantAddr: "fd77::1", want: "fd77::1", reason: "nodeAddressV6 set in the configuration",
		},
		{
			name:     "configured on another interface than the IPv6 default route's: its interface, as nodeAddress",
			addrs:    []Addr6Info{{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			defaults: on18,
			wantAddr: "fd78::20", want: "fd78::20", wantIf: "ens19", reason: "fd78::20 on ens19: nodeAddressV6 set in the configuration",
		},
		{
			name:     "configured on another interface than interface",
			addrs:    []Addr6Info{{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			iface:    "ens18",
			wantAddr: "fd78::20",
			wantErr:  []string{"nodeAddressV6 fd78::20 is on interface ens19, but interface is set to ens18 (the uplink of both families); make them agree or leave one out"},
		},
		{
			name:     "configured nowhere",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			wantAddr: "fd77::99",
			wantErr:  []string{"nodeAddressV6 fd77::99 is not on any interface of this node (usable IPv6 addresses: fd77::20 on ens18)"},
		},
		{
			name:     "configured, but it failed duplicate address detection",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: unix.IFA_F_DADFAILED | unix.IFA_F_TENTATIVE}, {LinkIndex: 2, Prefix: pfx("fd77::21/64"), Global: true, Flags: static}},
			wantAddr: "fd77::20",
			wantErr:  []string{"nodeAddressV6 fd77::20 on ens18 failed duplicate address detection: another host on the link has it", "(usable: fd77::21/64)"},
		},
		{
			name: "none usable on the IPv6 default route's interface: each address and why",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: unix.IFA_F_TENTATIVE | static},
				{LinkIndex: 2, Prefix: pfx("fd77::21/64"), Global: true, Flags: unix.IFA_F_DADFAILED | unix.IFA_F_TENTATIVE}, {LinkIndex: 2, Prefix: pfx("fd77::22/64"), Global: true, Flags: unix.IFA_F_DEPRECATED},
				{LinkIndex: 2, Prefix: pfx("fd77::23/64"), Global: true, Flags: unix.IFA_F_TEMPORARY}},
			defaults: on18,
			wantErr: []string{"the IPv6 default route (metric 1024) is on ens18, which has no usable IPv6 address (fe80::1/64 is link-local, fd77::20/64 is tentative (duplicate address detection has not finished), " +
				"fd77::21/64 failed duplicate address detection, fd77::22/64 is deprecated (its preferred lifetime is over), fd77::23/64 is temporary (privacy extensions))", "set nodeAddressV6 or interface"},
		},
		{
			name:     "the IPv6 default route on an interface with a link-local only: the IPv4 uplink's address, as releases before chose",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}, {LinkIndex: 3, Prefix: pfx("fe80::2/64"), Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3, Priority: 1024}},
			want:     "fd77::20",
			reason:   "the IPv4 uplink: the IPv6 default route (metric 1024) is on ens19, which has no usable IPv6 address",
		},
		{
			name:     "the IPv6 default route on an interface with a link-local only, none on the IPv4 uplink: an error naming it",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 3, Prefix: pfx("fe80::2/64"), Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3, Priority: 1024}},
			wantErr:  []string{"the IPv6 default route (metric 1024) is on ens19, which has no usable IPv6 address (fe80::2/64 is link-local); add one, or set nodeAddressV6 or interface"},
		},
		{
			name:     "the IPv6 default route on another interface, the IPv4 uplink has one too: the default route's, and the reason names the old choice",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3, Priority: 1024}},
			want:     "fd78::20",
			wantIf:   "ens19",
			reason:   "the IPv4 uplink ens18 has a usable IPv6 address too, which releases before 2026-12 chose: set nodeAddressV6 to keep that one over an upgrade",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want netip.Addr
			if tc.wantAddr != "" {
				want = netip.MustParseAddr(tc.wantAddr)
			}
			got, err := chooseUplink6(links, tc.addrs, tc.defaults, up, tc.iface, want)
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantIf := tc.wantIf
			if wantIf == "" {
				wantIf = "ens18"
			}
			if got.Address.String() != tc.want || got.Interface != wantIf || !strings.Contains(got.Reason, tc.reason) || got.Prefix.Addr() != got.Address {
				t.Errorf("chose %+v, want %s on %s with a reason containing %q", got, tc.want, wantIf, tc.reason)
			}
			if l := links[slices.IndexFunc(links, func(l LinkInfo) bool { return l.Name == wantIf })]; got.Index != l.Index || got.MTU != l.MTU {
				t.Errorf("chose index %d MTU %d, want %s's %d and %d", got.Index, got.MTU, wantIf, l.Index, l.MTU)
			}
		})
	}
}

// TestDetectUplink6 reads a namespace's IPv6 addresses with their flags:
// a tentative one (with DAD, on a link without carrier: its peer is down,
// so it stays tentative) is passed over for one added with nodad.
func TestDetectUplink6(t *testing.T) {
	// Not vethPairsIn: it sets both ends up, and with its carrier the
	// link ends DAD within a second or two, up6-peer set down again or
	// not (the link was ready once).
	testNS := netnstest.New(t)
	h := netnstest.Handle(t, testNS.Path())
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up6-test"}, PeerName: "up6-peer"}); err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName("up6-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	idx := l.Attrs().Index
	for _, a := range []struct {
		cidr  string
		flags int
	}{{"fd77::10/64", 0}, {"fd77::20/64", unix.IFA_F_NODAD}} {
		addr, err := netlink.ParseAddr(a.cidr)
		if err != nil {
			t.Fatal(err)
		}
		addr.Flags = a.flags
		if err := h.AddrAdd(l, addr); err != nil {
			t.Fatalf("add %s: %v", a.cidr, err)
		}
	}
	up := Uplink{Interface: "up6-test", Index: idx, Address: netip.MustParseAddr("10.99.0.2")}
	var got Uplink6
	err = testNS.Do(func(ns.NetNS) error {
		got, err = DetectUplink6(up, "", netip.Addr{})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Uplink6{Interface: "up6-test", Index: idx, MTU: l.Attrs().MTU, Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64"),
		Reason: "fd77::20 on up6-test: the IPv4 uplink (there is no IPv6 default route)"}
	if diff := cmp.Diff(want, got, uplinkCmpOpts); diff != "" {
		t.Errorf("DetectUplink6 (-want +got):\n%s", diff)
	}
}

// TestDetectUplink6ByDefaultRoute: a dual-stack node's IPv6 uplink, read
// from a namespace whose IPv4 default route is on up6-v4 and whose IPv6
// default route is on up6-v4, on up6-v6, nowhere, or on up6-v6 with only a
// link-local address there. The IPv6 uplink is the interface of the IPv6
// default route, as the IPv4 uplink is the IPv4 one's; without one, the
// IPv4 uplink; an IPv6 default route on an interface without a usable
// address gives the IPv4 uplink's, as releases before this rule chose (an
// error naming it when the IPv4 uplink has none either: TestChooseUplink6).
func TestDetectUplink6ByDefaultRoute(t *testing.T) {
	for _, tc := range []struct {
		name      string
		default6  string // interface of the IPv6 default route, "": none
		v6Global  bool   // up6-v6 has fd78::20/64 (else only its link-local)
		wantIface string
		wantAddr  string
		wantErr   []string
	}{
		{name: "on the IPv4 uplink", default6: "up6-v4", v6Global: true, wantIface: "up6-v4", wantAddr: "fd77::20"},
		{name: "on another interface", default6: "up6-v6", v6Global: true, wantIface: "up6-v6", wantAddr: "fd78::20"},
		{name: "none", v6Global: true, wantIface: "up6-v4", wantAddr: "fd77::20"},
		{name: "only link-local there", default6: "up6-v6", wantIface: "up6-v4", wantAddr: "fd77::20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testNS, h, links := vethPairsIn(t, map[string]int{"up6-v4": 1500, "up6-v6": 1400})
			addAddr := func(link, cidr string) {
				t.Helper()
				a, err := netlink.ParseAddr(cidr)
				if err != nil {
					t.Fatal(err)
				}
				a.Flags = unix.IFA_F_NODAD
				if err := h.AddrAdd(links[link], a); err != nil {
					t.Fatalf("add %s to %s: %v", cidr, link, err)
				}
			}
			addAddr("up6-v4", "10.99.0.2/24")
			addAddr("up6-v4", "fd77::20/64")
			// A link-local of its own, not the kernel's, which comes
			// when the link has carrier, after a while.
			addAddr("up6-v6", "fe80::2/64")
			if tc.v6Global {
				addAddr("up6-v6", "fd78::20/64")
			}
			routes := []struct{ link, gw string }{{"up6-v4", "10.99.0.1"}}
			if tc.default6 != "" {
				routes = append(routes, struct{ link, gw string }{tc.default6, "fe80::1"})
			}
			for _, r := range routes {
				gw := netip.MustParseAddr(r.gw)
				if err := h.RouteAdd(&netlink.Route{LinkIndex: links[r.link].Attrs().Index, Gw: gw.AsSlice(), Flags: int(netlink.FLAG_ONLINK)}); err != nil {
					t.Fatalf("default route via %s on %s: %v", r.gw, r.link, err)
				}
			}
			var up Uplink
			var got Uplink6
			var err4, err6 error
			if err := testNS.Do(func(ns.NetNS) error {
				up, err4 = DetectUplink("", netip.Addr{})
				if err4 == nil {
					got, err6 = DetectUplink6(up, "", netip.Addr{})
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err4 != nil || up.Interface != "up6-v4" {
				t.Fatalf("the IPv4 uplink is %s (%v), want up6-v4 (the IPv4 default route's)", up.Interface, err4)
			}
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err6 == nil || !strings.Contains(err6.Error(), w) {
						t.Errorf("IPv6 uplink %+v, error %v; want an error containing %q", got, err6, w)
					}
				}
				return
			}
			if err6 != nil {
				t.Fatal(err6)
			}
			l := links[tc.wantIface]
			if got.Interface != tc.wantIface || got.Index != l.Attrs().Index || got.MTU != l.Attrs().MTU || got.Address != netip.MustParseAddr(tc.wantAddr) {
				t.Errorf("IPv6 uplink %+v, want %s on %s (index %d, MTU %d)", got, tc.wantAddr, tc.wantIface, l.Attrs().Index, l.Attrs().MTU)
			}
		})
	}
}

// TestUplink6Routes: with the IPv6 uplink on eth1 beside the IPv4 uplink
// eth0, another node's IPv6 block goes `via <its IPv6 address> dev eth1
// onlink` when that address is in eth1's IPv6 subnet, else through the
// node's own route to it (routed: the subnet compared is eth1's); an owner
// in another IPv4 subnet is reached through VXLAN over the IPv4 underlay
// (CrossSubnet on a dual-stack node compares the IPv4 addresses), and IPv4
// blocks stay on eth0; the pods' MTU is the smaller of the two uplinks' unless every
// IPv6 pool is vxlanMode Always or mtu is set.
func TestUplink6Routes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	pool4, pool6 := pfx("10.244.0.0/16"), pfx("fd00:10:244::/56")
	up := Uplink{Interface: "eth0", Index: 2, MTU: 1500, Address: addr("192.168.77.11"), Prefix: pfx("192.168.77.11/24")}
	up6 := Uplink6{Interface: "eth1", Index: 3, MTU: 1400, Address: addr("fd79::11"), Prefix: pfx("fd79::11/64")}
	same, other, routed := addr("192.168.77.12"), addr("192.168.78.13"), addr("192.168.77.14")
	blocks := []store.Block{
		{CIDR: pfx("fd00:10:244::40/122"), Pool: pool6, OwnerAddr: same, OwnerAddr6: addr("fd79::12"), State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::80/122"), Pool: pool6, OwnerAddr: other, OwnerAddr6: addr("fd80::13"), State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::c0/122"), Pool: pool6, OwnerAddr: routed, OwnerAddr6: addr("fd80::14"), State: store.BlockRemote},
		{CIDR: pfx("10.244.1.0/26"), Pool: pool4, OwnerAddr: same, State: store.BlockRemote},
	}
	n := netInfo{node: "a1", uplink: up, uplink6: up6, pools: []PoolConfig{{CIDR: pool6, BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever},
		{CIDR: pool4, BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever}}}
	if owners := n.routedOwners(blocks); !slices.Equal(owners, []netip.Addr{addr("fd80::14")}) {
		t.Errorf("routed owners %v, want fd80::14 alone", owners)
	}
	remote, _ := n.remoteRoutes(blocks, map[netip.Addr]routes.Hop{addr("fd80::14"): {Dev: "eth1", Gateway: addr("fd79::1")}})
	var got []string
	for _, r := range routes.Desired(nil, nil, remote, nil).Routes {
		got = append(got, r.String())
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values([]string{
		"fd00:10:244::40/122 via fd79::12 dev eth1 onlink proto reef",
		"fd00:10:244::80/122 via " + tunnel.VTEPLinkLocal(other).String() + " dev vxlan.reef proto reef",
		"fd00:10:244::c0/122 via fd79::1 dev eth1 proto reef",
		"10.244.1.0/26 via 192.168.77.12 dev eth0 onlink proto reef",
	}))
	if !slices.Equal(got, want) {
		t.Errorf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if i, i6 := interfaces(up, up6); i != "eth0" || i6 != "eth1" {
		t.Errorf("reef status interface %q, interface6 %q; want eth0, eth1", i, i6)
	}
	if i, i6 := interfaces(up, Uplink6{Interface: "eth0"}); i != "eth0" || i6 != "" {
		t.Errorf("reef status with one uplink: interface %q, interface6 %q; want eth0, none", i, i6)
	}
	if i, i6 := interfaces(Uplink{}, Uplink6{Interface: "eth0"}); i != "eth0" || i6 != "" {
		t.Errorf("reef status on an IPv6-only node: interface %q, interface6 %q; want eth0, none", i, i6)
	}

	cfg := Config{Pools: []PoolConfig{{CIDR: pool6, VXLANMode: EncapNever}}}
	for _, tc := range []struct {
		name string
		cfg  Config
		up6  Uplink6
		want int
	}{
		{"direct IPv6 pool: eth1's", cfg, up6, 1400},
		{"one uplink", cfg, Uplink6{Interface: "eth0", Index: 2, MTU: 1500}, 1450},
		{"vxlanMode Always: over the IPv4 uplink", Config{Pools: []PoolConfig{{CIDR: pool6, VXLANMode: EncapAlways}}}, up6, 1450},
		{"mtu set", Config{MTU: 1450, Pools: cfg.Pools}, up6, 1450},
		{"IPv6 uplink larger", cfg, Uplink6{Interface: "eth1", Index: 3, MTU: 9000}, 1450},
	} {
		if got := mtu6(tc.cfg, up, tc.up6, 1450); got != tc.want {
			t.Errorf("%s: pod MTU %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestNodeAddress6Needed: the rule for a node whose IPv6 default route is
// on an interface with only a link-local address, or that has no IPv6
// default route and no usable IPv6 address at all: as for IPv4, there is
// no node IPv6 address, and that stops the daemon only where something
// needs one: an IPv6 pool routed directly beside peers, an IPv6 peer, or
// nodeAddressV6 set. Alone, or with every IPv6 pool vxlanMode Always, the
// daemon starts without.
func TestNodeAddress6Needed(t *testing.T) {
	testNS, h, links := vethPairsIn(t, map[string]int{"na6-v4": 0, "na6-v6": 0})
	for _, a := range []struct{ link, cidr string }{{"na6-v4", "10.99.0.2/24"}, {"na6-v6", "fe80::2/64"}} {
		addr, err := netlink.ParseAddr(a.cidr)
		if err != nil {
			t.Fatal(err)
		}
		addr.Flags = unix.IFA_F_NODAD
		if err := h.AddrAdd(links[a.link], addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: links["na6-v4"].Attrs().Index, Gw: netip.MustParseAddr("10.99.0.1").AsSlice()}); err != nil {
		t.Fatal(err)
	}
	route6 := &netlink.Route{LinkIndex: links["na6-v6"].Attrs().Index, Gw: netip.MustParseAddr("fe80::1").AsSlice()}
	const (
		never  = "pools: [{cidr: 10.244.0.0/16}, {cidr: 'fd00:10::/56', vxlanMode: Never}]\n"
		always = "pools: [{cidr: 10.244.0.0/16}, {cidr: 'fd00:10::/56', vxlanMode: Always}]\n"
		peers  = "bgp: {peers: [10.99.0.3], voters: [10.99.0.2]}\n"
	)
	for _, route := range []bool{true, false} {
		if route {
			if err := h.RouteAdd(route6); err != nil {
				t.Fatal(err)
			}
		} else if err := h.RouteDel(route6); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, yaml, wantErr string }{
			{"IPv4 pool only", peers, ""},
			{"alone", never, ""},
			{"vxlanMode Always beside peers", always + peers, ""},
			{"routed directly beside peers", never + peers, "node IPv6 address: "},
			{"an IPv6 peer", always + "bgp: {peers: ['fd77::3'], voters: [10.99.0.2]}\n", "bgp.peers: has IPv6 address fd77::3, but this node has no IPv6 address"},
			{"an IPv6 router", always + "bgp: {externalPeers: [{address: 'fd77::fe', asn: 65000}]}\n", "is an IPv6 address, but this node has no IPv6 address for the session"},
			{"nodeAddressV6 set", "nodeAddressV6: 'fd77::2'\n" + always, "nodeAddressV6 fd77::2 is not on any interface of this node"},
		} {
			name := tc.name + ", no IPv6 default route"
			wantErr := tc.wantErr
			if route {
				name = tc.name + ", the IPv6 default route on a link-local only"
				if wantErr == "node IPv6 address: " {
					wantErr += "the IPv6 default route (metric 1024) is on na6-v6, which has no usable IPv6 address (" // the kernel's own link-local may come first
				}
			} else if wantErr == "node IPv6 address: " {
				wantErr += "no IPv6 default route and no interface with a usable IPv6 address"
			}
			t.Run(name, func(t *testing.T) {
				cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(tc.yaml))
				if err != nil {
					t.Fatal(err)
				}
				var up6 Uplink6
				if err := testNS.Do(func(ns.NetNS) error {
					_, _, up6, _, err = nodeAddresses(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				switch {
				case wantErr == "" && (err != nil || up6.Address.IsValid()):
					t.Errorf("IPv6 uplink %+v, error %v; want none, no error", up6, err)
				case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
					t.Errorf("error %v, want one containing %q", err, wantErr)
				}
			})
		}
	}
}

// vethPairsIn makes a network namespace with a veth pair per name of
// mtus (the other end name+"p"; MTU 0: the kernel's), made in the order
// of their names, every end up, and returns the namespace, a netlink
// handle in it (closed with the test) and the links by name.
func vethPairsIn(t *testing.T, mtus map[string]int) (ns.NetNS, *netlink.Handle, map[string]netlink.Link) {
	t.Helper()
	testNS := netnstest.New(t)
	h := netnstest.Handle(t, testNS.Path()).Handle
	links := map[string]netlink.Link{}
	for _, name := range slices.Sorted(maps.Keys(mtus)) { // in the order of their names: the fallback takes the first
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtus[name]}, PeerName: name + "p"}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{name, name + "p"} {
			l, err := h.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			links[n] = l
		}
	}
	return testNS, h, links
}
