package routes

import (
	"errors"
	"maps"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/reefcni/reef/internal/netnstest"
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

func TestDiffIPIP(t *testing.T) {
	tun, old, op := netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("10.244.0.9"), netip.MustParseAddr("192.0.2.7")
	want := &IPIPConfig{MTU: 1480, TunnelAddr: tun}
	addrs := func(kv ...any) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(netip.Addr)] = kv[i+1].(bool)
		}
		return m
	}
	inLine := IPIPState{Present: true, Up: true, MTU: 1480, Addrs: addrs(tun, true, op, false)}
	with := func(f func(*IPIPState)) IPIPState { s := inLine; s.Addrs = maps.Clone(s.Addrs); f(&s); return s }
	cases := []struct {
		name string
		want *IPIPConfig
		have IPIPState
		plan IPIPPlan
		err  error
	}{
		{"no IPIP pool, no module", nil, IPIPState{}, IPIPPlan{}, nil},
		{"IPIP pool, no module", want, IPIPState{}, IPIPPlan{}, ErrNoIPIP},
		{"as the module made it", want, IPIPState{Present: true, MTU: 1480, Addrs: addrs()}, IPIPPlan{AddAddr: tun, SetUp: true}, nil},
		{"in line", want, inLine, IPIPPlan{}, nil},
		{"MTU differs", want, with(func(s *IPIPState) { s.MTU = 1500 }), IPIPPlan{SetMTU: 1480}, nil},
		{"down", want, with(func(s *IPIPState) { s.Up = false }), IPIPPlan{SetUp: true}, nil},
		{"tunnel address there without reef's label", want, with(func(s *IPIPState) { s.Addrs[tun] = false }), IPIPPlan{}, nil},
		{"no tunnel address yet", &IPIPConfig{MTU: 1480}, with(func(s *IPIPState) { delete(s.Addrs, tun) }), IPIPPlan{}, nil},
		{"an old tunnel address of reef's goes, after the new one is added", want,
			with(func(s *IPIPState) { delete(s.Addrs, tun); s.Addrs[old] = true }), IPIPPlan{AddAddr: tun, DelAddrs: []netip.Addr{old}}, nil},
		{"no IPIP pool any more: only reef's addresses go", nil,
			with(func(s *IPIPState) { s.Addrs[old] = true; s.MTU = 1500; s.Up = false }), IPIPPlan{DelAddrs: []netip.Addr{tun, old}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DiffIPIP(tc.want, tc.have)
			if !errors.Is(err, tc.err) {
				t.Fatalf("DiffIPIP error = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.plan, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("DiffIPIP (-want +got):\n%s", diff)
			}
			if got.Empty() != (tc.plan.SetMTU == 0 && !tc.plan.AddAddr.IsValid() && len(tc.plan.DelAddrs) == 0 && !tc.plan.SetUp) {
				t.Errorf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

// TestIPIPKernel brings the kernel's own tunl0 in line, in a namespace of
// its own. Without the ipip module (this lab's kernel) there is no tunl0
// to try; TestIPIPStandIn then runs the same calls on a stand-in.
func TestIPIPKernel(t *testing.T) {
	requireRoot(t)
	node := netnstest.New(t)
	if _, err := netnsHandle(t, node.Path()).LinkByName(IPIPDevice); err != nil {
		var k *Kernel
		if err := in(t, node, func() (err error) { k, err = NewKernel(); return err }); err != nil {
			t.Fatalf("NewKernel: %v", err)
		}
		defer k.Close()
		if have, err := k.ReadIPIP(); err != nil || have.Present {
			t.Errorf("ReadIPIP without tunl0 = %+v, %v; want absent, nil", have, err)
		}
		if err := k.ApplyIPIP(IPIPPlan{SetUp: true}); !errors.Is(err, ErrNoIPIP) {
			t.Errorf("ApplyIPIP without tunl0 = %v, want ErrNoIPIP", err)
		}
		t.Skip("skipping the IPIP kernel test: this kernel has no ipip module (no tunl0 in a new network namespace); " +
			"DiffIPIP, the daemon's state tests and TestIPIPStandIn (a stand-in named tunl0) cover it")
	}
	ipipCycle(t, node)
}

// TestIPIPStandIn runs ReadIPIP and ApplyIPIP on a stand-in named tunl0
// where the kernel has no ipip module: one end of a veth pair (this lab's
// kernel has no dummy module either). The netlink calls (MTU, up, the
// labelled addresses) are the same on the real device.
func TestIPIPStandIn(t *testing.T) {
	requireRoot(t)
	node := netnstest.New(t)
	if _, err := netnsHandle(t, node.Path()).LinkByName(IPIPDevice); err == nil {
		t.Skip("skipping the stand-in: this kernel has the ipip module, and TestIPIPKernel runs on the real tunl0")
	}
	netnstest.Run(t, node, "ip", "link", "add", IPIPDevice, "type", "veth", "peer", "name", "tunl0peer")
	ipipCycle(t, node)
}

// ipipCycle brings node's tunl0, down and with an operator's address and
// a stale one of reef's, in line with a desired tunl0, then with none.
func ipipCycle(t *testing.T, node ns.NetNS) {
	t.Helper()
	netnstest.Run(t, node, "ip", "link", "set", IPIPDevice, "down")
	netnstest.Run(t, node, "ip", "addr", "add", "192.0.2.7/32", "dev", IPIPDevice)
	netnstest.Run(t, node, "ip", "addr", "add", "10.244.9.9/32", "dev", IPIPDevice, "label", IPIPLabel)
	var k *Kernel
	if err := in(t, node, func() (err error) { k, err = NewKernel(); return err }); err != nil {
		t.Fatalf("NewKernel: %v", err)
	}
	defer k.Close()
	read := func() IPIPState {
		t.Helper()
		st, err := k.ReadIPIP()
		if err != nil {
			t.Fatalf("ReadIPIP: %v", err)
		}
		return st
	}
	op, stale, tun := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("10.244.9.9"), netip.MustParseAddr("10.244.1.1")
	have := read()
	if !have.Present || have.Up || !maps.Equal(have.Addrs, map[netip.Addr]bool{op: false, stale: true}) {
		t.Fatalf("ReadIPIP = %+v, want present, down, %s not reef's and %s reef's", have, op, stale)
	}
	want := &IPIPConfig{MTU: 1400, TunnelAddr: tun}
	plan, err := DiffIPIP(want, have)
	if err != nil {
		t.Fatal(err)
	}
	wantPlan := IPIPPlan{SetMTU: 1400, AddAddr: tun, DelAddrs: []netip.Addr{stale}, SetUp: true}
	if diff := cmp.Diff(wantPlan, plan, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Fatalf("DiffIPIP (-want +got):\n%s", diff)
	}
	for i := range 2 { // every step is safe to repeat
		if err := k.ApplyIPIP(plan); err != nil {
			t.Fatalf("ApplyIPIP #%d: %v", i+1, err)
		}
	}
	have = read()
	if !have.Up || have.MTU != 1400 || !maps.Equal(have.Addrs, map[netip.Addr]bool{op: false, tun: true}) {
		t.Errorf("after ApplyIPIP: %+v, want up, MTU 1400, %s not reef's and %s reef's", have, op, tun)
	}
	if p, err := DiffIPIP(want, have); err != nil || !p.Empty() {
		t.Errorf("DiffIPIP after ApplyIPIP = %+v, %v; want empty", p, err)
	}

	// No pool uses IPIP any more: reef's address goes, the rest stays.
	// A delete naming the operator's address finds no address with reef's
	// label, and the kernel keeps it.
	if plan, err = DiffIPIP(nil, have); err != nil {
		t.Fatal(err)
	}
	plan.DelAddrs = append(plan.DelAddrs, op)
	if err := k.ApplyIPIP(plan); err != nil {
		t.Fatalf("ApplyIPIP without IPIP: %v", err)
	}
	have = read()
	if !have.Up || have.MTU != 1400 || !maps.Equal(have.Addrs, map[netip.Addr]bool{op: false}) {
		t.Errorf("after ApplyIPIP without IPIP: %+v, want up, MTU 1400, only %s", have, op)
	}
}
