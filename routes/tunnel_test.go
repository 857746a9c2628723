package routes

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVTEPMAC(t *testing.T) {
	if got := VTEPMAC(netip.MustParseAddr("192.168.78.11")).String(); got != "0e:ee:c0:a8:4e:0b" {
		t.Errorf("VTEPMAC = %s", got)
	}
	m := VTEPMAC(netip.MustParseAddr("10.0.0.1"))
	if m[0]&0x01 != 0 || m[0]&0x02 == 0 {
		t.Errorf("VTEPMAC %s must be unicast and locally administered", m)
	}
}

func TestEncapFor(t *testing.T) {
	local := netip.MustParsePrefix("192.168.77.11/24")
	same, other := netip.MustParseAddr("192.168.77.12"), netip.MustParseAddr("192.168.78.11")
	cases := []struct {
		vxlan, ipip EncapMode
		owner       netip.Addr
		want        Encap
	}{
		{ModeNever, ModeNever, same, Direct},
		{ModeNever, ModeNever, other, Direct},
		{ModeCrossSubnet, ModeNever, same, Direct},
		{ModeCrossSubnet, ModeNever, other, VXLAN},
		{ModeAlways, ModeNever, same, VXLAN},
		{ModeAlways, ModeNever, other, VXLAN},
		{ModeNever, ModeCrossSubnet, same, Direct},
		{ModeNever, ModeCrossSubnet, other, IPIP},
		{ModeNever, ModeAlways, same, IPIP},
	}
	for _, c := range cases {
		if got := EncapFor(c.vxlan, c.ipip, local, c.owner); got != c.want {
			t.Errorf("EncapFor(vxlan %s, ipip %s, %s) = %s, want %s", c.vxlan, c.ipip, c.owner, got, c.want)
		}
	}
}

func TestDiffTunnel(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.168.78.11"), netip.MustParseAddr("192.168.78.12"), netip.MustParseAddr("192.168.78.13")
	dev := VXLANConfig{VNI: 4096, Port: 4789, Local: netip.MustParseAddr("192.168.77.11"), UplinkIdx: 2, MTU: 1450,
		MAC: "0e:ee:c0:a8:4d:0b", TunnelAddr: netip.MustParseAddr("10.244.0.0")}
	peers := func(as ...netip.Addr) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for _, x := range as {
			m[x] = true
		}
		return m
	}
	with := func(f func(*VXLANConfig)) *VXLANConfig { d := dev; f(&d); return &d }
	cases := []struct {
		name     string
		want     TunnelState
		have     TunnelState
		haveAddr bool
		plan     TunnelPlan
	}{
		{"nothing wanted, nothing there", TunnelState{}, TunnelState{}, false, TunnelPlan{}},
		{"no VXLAN pool any more", TunnelState{}, TunnelState{Device: &dev, Peers: peers(a)}, true, TunnelPlan{Delete: true}},
		{"create", TunnelState{Device: &dev, Peers: peers(b, a)}, TunnelState{}, false,
			TunnelPlan{Create: true, SetAddr: true, AddPeers: []netip.Addr{a, b}}},
		{"in line", TunnelState{Device: &dev, Peers: peers(a)}, TunnelState{Device: &dev, Peers: peers(a)}, true, TunnelPlan{}},
		{"peers added and removed", TunnelState{Device: &dev, Peers: peers(a, c)}, TunnelState{Device: &dev, Peers: peers(a, b)}, true,
			TunnelPlan{AddPeers: []netip.Addr{c}, DelPeers: []netip.Addr{b}}},
		{"MTU changed", TunnelState{Device: with(func(d *VXLANConfig) { d.MTU = 1400 })}, TunnelState{Device: &dev}, true, TunnelPlan{SetMTU: 1400}},
		{"address missing", TunnelState{Device: &dev}, TunnelState{Device: &dev}, false, TunnelPlan{SetAddr: true}},
		{"other VNI: recreate", TunnelState{Device: &dev, Peers: peers(a)}, TunnelState{Device: with(func(d *VXLANConfig) { d.VNI = 1 })}, true,
			TunnelPlan{Recreate: []string{"vni: 1 vs 4096"}, Create: true, SetAddr: true, AddPeers: []netip.Addr{a}}},
		{"learning and MAC differ", TunnelState{Device: &dev}, TunnelState{Device: with(func(d *VXLANConfig) { d.Learning = true; d.MAC = "aa:bb:cc:dd:ee:ff" })}, true,
			TunnelPlan{Recreate: []string{"learning: true vs false", "mac: aa:bb:cc:dd:ee:ff vs 0e:ee:c0:a8:4d:0b"}, Create: true, SetAddr: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DiffTunnel(tc.want, tc.have, tc.haveAddr)
			if diff := cmp.Diff(tc.plan, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("DiffTunnel (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDesiredRemoteDevices: routes to other nodes' blocks go on the device
// the encapsulation picked, tunl0 included (the IPIP dataplane cannot be
// tried on this kernel; its desired state is what is tested).
func TestDesiredRemoteDevices(t *testing.T) {
	remote := []RemoteBlock{
		{Block: netip.MustParsePrefix("10.244.1.0/26"), Node: netip.MustParseAddr("192.168.77.12"), Dev: "eth0"},
		{Block: netip.MustParsePrefix("10.244.2.0/26"), Node: netip.MustParseAddr("192.168.78.11"), Dev: VXLANDevice},
		{Block: netip.MustParsePrefix("10.244.3.0/26"), Node: netip.MustParseAddr("192.168.78.12"), Dev: IPIPDevice},
	}
	got := Desired(nil, nil, remote, nil)
	for _, r := range remote {
		want := Route{Dst: r.Block, Kind: RemoteRoute, Dev: r.Dev, Via: r.Node, OnLink: true}
		if got.Routes[r.Block] != want {
			t.Errorf("route to %s = %+v, want %+v (%s)", r.Block, got.Routes[r.Block], want, want)
		}
	}
	if s := got.Routes[remote[2].Block].String(); s != "10.244.3.0/26 via 192.168.78.12 dev tunl0 onlink proto reef" {
		t.Errorf("IPIP route renders as %q", s)
	}
}
