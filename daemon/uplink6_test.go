package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
)

func TestChooseUplink6(t *testing.T) {
	pfx := netip.MustParsePrefix
	links := []LinkInfo{{Index: 1, Name: "lo"}, {Index: 2, Name: "ens18"}, {Index: 3, Name: "ens19"}}
	up := Uplink{Interface: "ens18", Index: 2, Address: netip.MustParseAddr("192.168.10.20")}
	static := unix.IFA_F_PERMANENT
	tests := []struct {
		name     string
		addrs    []Addr6Info
		defaults []RouteInfo
		want     string // address chosen
		wantAddr string // nodeAddressV6
		reason   string // substring of the reason
		wantErr  []string
	}{
		{
			name: "the uplink's global address, not its link-local",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static},
				{LinkIndex: 1, Prefix: pfx("::1/128"), Flags: static}, {LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			want: "fd77::20", reason: "fd77::20 on ens18: global IPv6 address of the uplink",
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
			want: "2001:db8::30", reason: "the first of 2 usable ones",
		},
		{
			name: "not a /128 (a VIP), then the lowest",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::1/128"), Global: true, Flags: static},
				{LinkIndex: 2, Prefix: pfx("fd77::40/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::30/64"), Global: true, Flags: static}},
			want: "fd77::30",
		},
		{
			name:  "a DHCPv6 /128 alone is taken",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("2001:db8::77/128"), Global: true}},
			want:  "2001:db8::77",
		},
		{
			name:     "configured, honoured even as a /128",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::1/128"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::40/64"), Global: true, Flags: static}},
			wantAddr: "fd77::1", want: "fd77::1", reason: "nodeAddressV6 set in the configuration",
		},
		{
			name:     "configured on another interface",
			addrs:    []Addr6Info{{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			wantAddr: "fd78::20",
			wantErr:  []string{"nodeAddressV6 fd78::20 is on interface ens19, not on the uplink ens18 (of 192.168.10.20)", "usable: fd77::20/64"},
		},
		{
			name:     "configured nowhere",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: static}},
			wantAddr: "fd77::99",
			wantErr:  []string{"nodeAddressV6 fd77::99 is not on any interface of this node (usable IPv6 addresses on the uplink ens18: fd77::20/64)"},
		},
		{
			name:     "configured, but it failed duplicate address detection",
			addrs:    []Addr6Info{{LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: unix.IFA_F_DADFAILED | unix.IFA_F_TENTATIVE}, {LinkIndex: 2, Prefix: pfx("fd77::21/64"), Global: true, Flags: static}},
			wantAddr: "fd77::20",
			wantErr:  []string{"nodeAddressV6 fd77::20 on ens18 failed duplicate address detection: another host on the link has it", "(usable: fd77::21/64)"},
		},
		{
			name: "none usable: each address and why",
			addrs: []Addr6Info{{LinkIndex: 2, Prefix: pfx("fe80::1/64"), Flags: static}, {LinkIndex: 2, Prefix: pfx("fd77::20/64"), Global: true, Flags: unix.IFA_F_TENTATIVE | static},
				{LinkIndex: 2, Prefix: pfx("fd77::21/64"), Global: true, Flags: unix.IFA_F_DADFAILED | unix.IFA_F_TENTATIVE}, {LinkIndex: 2, Prefix: pfx("fd77::22/64"), Global: true, Flags: unix.IFA_F_DEPRECATED},
				{LinkIndex: 2, Prefix: pfx("fd77::23/64"), Global: true, Flags: unix.IFA_F_TEMPORARY}},
			wantErr: []string{"the uplink ens18 has no usable IPv6 address (fe80::1/64 is link-local, fd77::20/64 is tentative (duplicate address detection has not finished), " +
				"fd77::21/64 failed duplicate address detection, fd77::22/64 is deprecated (its preferred lifetime is over), fd77::23/64 is temporary (privacy extensions))", "set nodeAddressV6"},
		},
		{
			name:     "none, the default route elsewhere",
			addrs:    []Addr6Info{{LinkIndex: 3, Prefix: pfx("fd78::20/64"), Global: true, Flags: static}},
			defaults: []RouteInfo{{LinkIndex: 3}},
			wantErr:  []string{"the uplink ens18 has no usable IPv6 address (it has no IPv6 address) (the IPv6 default route is on ens19, not on the uplink)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want netip.Addr
			if tc.wantAddr != "" {
				want = netip.MustParseAddr(tc.wantAddr)
			}
			got, err := chooseUplink6(links, tc.addrs, tc.defaults, up, want)
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
			if got.Address.String() != tc.want || !strings.Contains(got.Reason, tc.reason) || got.Prefix.Addr() != got.Address {
				t.Errorf("chose %+v, want %s with a reason containing %q", got, tc.want, tc.reason)
			}
		})
	}
}

// TestDetectUplink6 reads a namespace's IPv6 addresses with their flags:
// a tentative one (with DAD, on a link without carrier: its peer is down,
// so it stays tentative) is passed over for one added with nodad.
func TestDetectUplink6(t *testing.T) {
	testNS := netnstest.New(t)
	nsh, err := netns.GetFromPath(testNS.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
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
		got, err = DetectUplink6(up, netip.Addr{})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Uplink6{Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64"), Reason: "fd77::20 on up6-test: global IPv6 address of the uplink"}
	if diff := cmp.Diff(want, got, uplinkCmpOpts); diff != "" {
		t.Errorf("DetectUplink6 (-want +got):\n%s", diff)
	}
}

// TestDetectUplink6NotByDefaultRoute pins how a dual-stack node's IPv6
// address is found when its IPv6 default route is on another interface
// than the IPv4 uplink: the address is the uplink's (the other nodes route
// this node's IPv6 blocks `via <it> dev <their uplink> onlink`), not the
// one of the IPv6 default route's interface; with no usable address on
// the uplink, the error names the interface the IPv6 default route is on.
// (An IPv6-only node, which has no IPv4 uplink, takes the IPv6 default
// route's interface: TestChooseUplinkV6Only.)
func TestDetectUplink6NotByDefaultRoute(t *testing.T) {
	testNS := netnstest.New(t)
	nsh, err := netns.GetFromPath(testNS.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links := map[string]netlink.Link{}
	for _, name := range []string{"up6-v4", "up6-v6"} {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
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
	addAddr := func(link, cidr string) *netlink.Addr {
		t.Helper()
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		a.Flags = unix.IFA_F_NODAD
		if err := h.AddrAdd(links[link], a); err != nil {
			t.Fatalf("add %s to %s: %v", cidr, link, err)
		}
		return a
	}
	addAddr("up6-v4", "10.99.0.2/24")
	uplinkV6 := addAddr("up6-v4", "fd77::20/64")
	addAddr("up6-v6", "fd78::20/64")
	for _, r := range []struct{ link, gw string }{{"up6-v4", "10.99.0.1"}, {"up6-v6", "fd78::1"}} {
		gw := netip.MustParseAddr(r.gw)
		if err := h.RouteAdd(&netlink.Route{LinkIndex: links[r.link].Attrs().Index, Gw: gw.AsSlice(), Flags: int(netlink.FLAG_ONLINK)}); err != nil {
			t.Fatalf("default route via %s on %s: %v", r.gw, r.link, err)
		}
	}
	var up Uplink
	var got Uplink6
	var err4, err6 error
	detect := func() {
		t.Helper()
		if err := testNS.Do(func(ns.NetNS) error {
			up, err4 = DetectUplink("", netip.Addr{})
			if err4 == nil {
				got, err6 = DetectUplink6(up, netip.Addr{})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err4 != nil {
			t.Fatal(err4)
		}
	}
	detect()
	if up.Interface != "up6-v4" {
		t.Fatalf("the IPv4 uplink is %s, want up6-v4 (the IPv4 default route's)", up.Interface)
	}
	if err6 != nil || got.Address != netip.MustParseAddr("fd77::20") {
		t.Errorf("IPv6 address with the IPv6 default route on up6-v6: %+v, %v; want fd77::20 on the uplink up6-v4", got, err6)
	}

	// Without a usable address on the uplink: an error naming where the
	// IPv6 default route is, not fd78::20 taken from there.
	if err := h.AddrDel(links["up6-v4"], uplinkV6); err != nil {
		t.Fatal(err)
	}
	detect()
	if err6 == nil || !strings.Contains(err6.Error(), "the uplink up6-v4 has no usable IPv6 address") || !strings.Contains(err6.Error(), "the IPv6 default route is on up6-v6, not on the uplink") {
		t.Errorf("IPv6 address with none on the uplink: %+v, %v; want the error naming up6-v6", got, err6)
	}
}
