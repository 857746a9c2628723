package tunnel

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/vishvananda/netlink"
)

var (
	requireRoot = netnstest.RequireRoot
	netnsHandle = netnstest.Handle
	in          = netnstest.Do
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

func TestVTEPLinkLocal(t *testing.T) {
	// What the kernel gives a vxlan.reef with MAC 0e:ee:c0:a8:4e:0b
	// (`ip -6 addr show dev vxlan.reef`; TestVXLANKernel reads it back).
	if got := VTEPLinkLocal(netip.MustParseAddr("192.168.78.11")).String(); got != "fe80::cee:c0ff:fea8:4e0b" {
		t.Errorf("VTEPLinkLocal = %s", got)
	}
}

func TestDiffTunnel(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.168.78.11"), netip.MustParseAddr("192.168.78.12"), netip.MustParseAddr("192.168.78.13")
	tun, tun6 := netip.MustParseAddr("10.244.0.0"), netip.MustParseAddr("fd00:10:244::")
	old6 := netip.MustParseAddr("fd00:10:244::40")
	dev := VXLANConfig{VNI: 4096, Port: 4789, Local: netip.MustParseAddr("192.168.77.11"), UplinkIdx: 2, MTU: 1450,
		MAC: "0e:ee:c0:a8:4d:0b", TunnelAddr: tun}
	set := func(as ...netip.Addr) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for _, x := range as {
			m[x] = true
		}
		return m
	}
	with := func(f func(*VXLANConfig)) *VXLANConfig { d := dev; f(&d); return &d }
	dual := with(func(d *VXLANConfig) { d.TunnelAddr6 = tun6 })
	// On an IPv6 underlay: the local address is IPv6, peers are keyed by
	// their identities and their fdb entries point at their IPv6
	// addresses (Dst).
	over6 := &VXLANConfig{VNI: 4096, Port: 4789, Local: netip.MustParseAddr("fd77::11"), UplinkIdx: 2, MTU: 1430,
		MAC: "0e:ee:0a:ff:00:01", TunnelAddr6: tun6}
	a6, a6old, b6 := netip.MustParseAddr("fd77::12"), netip.MustParseAddr("fd77::99"), netip.MustParseAddr("fd78::13")
	dst := func(kv ...netip.Addr) map[netip.Addr]netip.Addr {
		m := map[netip.Addr]netip.Addr{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	l := func(as ...netip.Addr) []netip.Addr { return as }
	cases := []struct {
		name string
		want State
		have State
		plan Plan
	}{
		{"nothing wanted, nothing there", State{}, State{}, Plan{}},
		{"no VXLAN pool any more", State{}, State{Device: &dev, Addrs: set(tun), Peers: set(a)}, Plan{Delete: true}},
		{"create", State{Device: &dev, Peers: set(b, a)}, State{}, Plan{Create: true, AddAddrs: l(tun), AddPeers: l(a, b)}},
		{"create, both families", State{Device: dual, Peers: set(a), Peers6: set(b, a)}, State{},
			Plan{Create: true, AddAddrs: l(tun, tun6), AddPeers: l(a), AddPeers6: l(a, b)}},
		{"in line", State{Device: &dev, Peers: set(a)}, State{Device: &dev, Addrs: set(tun), Peers: set(a)}, Plan{}},
		{"in line, both families", State{Device: dual, Peers: set(a), Peers6: set(a, b)},
			State{Device: dual, Addrs: set(tun, tun6), Peers: set(a), Peers6: set(a, b)}, Plan{}},
		{"peers added and removed", State{Device: &dev, Peers: set(a, c)}, State{Device: &dev, Addrs: set(tun), Peers: set(a, b)},
			Plan{AddPeers: l(c), DelPeers: l(b)}},
		{"an IPv6 neighbour deleted by hand", State{Device: dual, Peers: set(a), Peers6: set(a, b)},
			State{Device: dual, Addrs: set(tun, tun6), Peers: set(a), Peers6: set(a)}, Plan{AddPeers6: l(b)}},
		{"a peer reached for IPv6 only, its IPv4 neighbour goes", State{Device: dual, Peers6: set(a)},
			State{Device: dual, Addrs: set(tun, tun6), Peers: set(a), Peers6: set(a)}, Plan{DelPeers: l(a)}},
		{"no IPv6 pool uses VXLAN any more: its address and neighbours go", State{Device: &dev, Peers: set(a)},
			State{Device: dual, Addrs: set(tun, tun6), Peers: set(a), Peers6: set(a, b)}, Plan{DelAddrs: l(tun6), DelPeers6: l(a, b)}},
		{"a new IPv6 tunnel address replaces an old one", State{Device: dual},
			State{Device: &dev, Addrs: set(tun, old6)}, Plan{AddAddrs: l(tun6), DelAddrs: l(old6)}},
		{"IPv6 underlay: create", State{Device: over6, Peers6: set(b, a), Dst: dst(a, a6, b, b6)}, State{},
			Plan{Create: true, AddAddrs: l(tun6), AddPeers6: l(a, b)}},
		{"in line, IPv6 underlay", State{Device: over6, Peers6: set(a, b), Dst: dst(a, a6, b, b6)},
			State{Device: over6, Addrs: set(tun6), Peers6: set(a, b), Dst: dst(a, a6, b, b6)}, Plan{}},
		{"IPv6 underlay: a peer's fdb entry points at its old IPv6 address", State{Device: over6, Peers6: set(a, b), Dst: dst(a, a6, b, b6)},
			State{Device: over6, Addrs: set(tun6), Peers6: set(a, b), Dst: dst(a, a6old, b, b6)}, Plan{AddPeers6: l(a)}},
		{"IPv6 underlay: a peer's fdb entry points at its key", State{Device: over6, Peers6: set(a), Dst: dst(a, a6)},
			State{Device: over6, Addrs: set(tun6), Peers6: set(a)}, Plan{AddPeers6: l(a)}},
		{"IPv4 underlay: a peer's fdb entry points elsewhere", State{Device: &dev, Peers: set(a)},
			State{Device: &dev, Addrs: set(tun), Peers: set(a), Dst: dst(a, b)}, Plan{AddPeers: l(a)}},
		{"IPv6 underlay: a peer gone whose fdb entry pointed elsewhere", State{Device: over6, Peers6: set(b), Dst: dst(b, b6)},
			State{Device: over6, Addrs: set(tun6), Peers6: set(a, b), Dst: dst(a, a6old, b, b6)}, Plan{DelPeers6: l(a)}},
		{"IPv6 underlay: the local address differs", State{Device: over6},
			State{Device: with(func(d *VXLANConfig) { *d = *over6; d.Local = a6 }), Addrs: set(tun6)},
			Plan{Recreate: []string{"local: fd77::12 vs fd77::11"}, Create: true, AddAddrs: l(tun6)}},
		{"stray entries, nothing else", State{Device: &dev, Peers: set(a)},
			State{Device: &dev, Addrs: set(tun), Peers: set(a), Strays: []string{"neighbour 192.168.78.99 lladdr 0e:ee:00:00:00:01"}},
			Plan{Prune: []string{"neighbour 192.168.78.99 lladdr 0e:ee:00:00:00:01"}}},
		{"half a peer's entries: a wanted node's is completed, another's pruned", State{Device: dual, Peers6: set(a)},
			State{Device: dual, Addrs: set(tun, tun6), Partial: map[netip.Addr]string{a: "fdb of a", b: "fdb of b"}},
			Plan{AddPeers6: l(a), Prune: []string{"fdb of b"}}},
		{"MTU changed", State{Device: with(func(d *VXLANConfig) { d.MTU = 1400 })}, State{Device: &dev, Addrs: set(tun)}, Plan{SetMTU: 1400}},
		{"address missing", State{Device: &dev}, State{Device: &dev}, Plan{AddAddrs: l(tun)}},
		{"no tunnel address yet, a stale one goes", State{Device: with(func(d *VXLANConfig) { d.TunnelAddr = netip.Addr{} })},
			State{Device: &dev, Addrs: set(tun)}, Plan{DelAddrs: l(tun)}},
		{"other VNI: recreate", State{Device: dual, Peers: set(a), Peers6: set(a)},
			State{Device: with(func(d *VXLANConfig) { d.VNI = 1 }), Addrs: set(tun), Peers: set(a)},
			Plan{Recreate: []string{"vni: 1 vs 4096"}, Create: true, AddAddrs: l(tun, tun6), AddPeers: l(a), AddPeers6: l(a)}},
		{"learning and MAC differ", State{Device: &dev}, State{Device: with(func(d *VXLANConfig) { d.Learning = true; d.MAC = "aa:bb:cc:dd:ee:ff" })},
			Plan{Recreate: []string{"learning: true vs false", "mac: aa:bb:cc:dd:ee:ff vs 0e:ee:c0:a8:4d:0b"}, Create: true, AddAddrs: l(tun)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.want, tc.have)
			if diff := cmp.Diff(tc.plan, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if got.Empty() != (tc.name == "nothing wanted, nothing there" || strings.HasPrefix(tc.name, "in line")) {
				t.Errorf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
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
		k := netnstest.Open(t, node, NewKernel)
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
	k := netnstest.Open(t, node, NewKernel)
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

// TestVXLANKernel brings a vxlan.reef carrying both families in line in a
// namespace of its own, with the sysctls' owner's settings before it is
// up, and reads back what the kernel made of it: the EUI-64 link-local
// that the other nodes route this node's IPv6 blocks through, the tunnel
// addresses (the IPv6 one usable at once), the permanent neighbours of
// both families and one fdb entry per node. A neighbour deleted by hand
// shows in the diff; with no IPv6 pool through VXLAN any more the IPv6
// address and neighbours go and the IPv4 ones stay.
func TestVXLANKernel(t *testing.T) {
	requireRoot(t)
	if sysctl.TunnelDevice != VXLANDevice {
		t.Fatalf("sysctl.TunnelDevice %q is not %q", sysctl.TunnelDevice, VXLANDevice)
	}
	node, k, uplink := nodeWithUplink1(t, "192.168.77.11/24")
	local := netip.MustParseAddr("192.168.77.11")
	a, b := netip.MustParseAddr("192.168.78.12"), netip.MustParseAddr("192.168.77.13")
	tun, tun6 := netip.MustParseAddr("10.244.0.0"), netip.MustParseAddr("fd00:10:244::")
	dev := &VXLANConfig{VNI: VXLANVNI, Port: VXLANPort, Local: local, UplinkIdx: uplink.Attrs().Index, MTU: 1450,
		MAC: VTEPMAC(local).String(), TunnelAddr: tun, TunnelAddr6: tun6}
	owner := sysctl.New(sysctl.Proc{})
	apply := func(want State, v6 bool) { t.Helper(); applyTunnel(t, k, node, owner, want, v6) }
	show := func(args ...string) string { return netnstest.Run(t, node, args...) }

	// Made with the node's default settings off: the owner turns IPv6 on.
	show("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv6.conf.default.addr_gen_mode=1")
	want := State{Device: dev, Peers: map[netip.Addr]bool{a: true}, Peers6: map[netip.Addr]bool{a: true, b: true}}
	apply(want, true)
	addrs := show("ip", "-6", "addr", "show", "dev", VXLANDevice)
	ll := VTEPLinkLocal(local).String()
	for _, w := range []string{"inet6 " + ll + "/64 scope link", "inet6 " + tun6.String() + "/128 scope global nodad"} {
		if !strings.Contains(addrs, w) {
			t.Errorf("vxlan.reef lacks %q:\n%s", w, addrs)
		}
	}
	if strings.Contains(addrs, tun6.String()+"/128 scope global tentative") {
		t.Errorf("the IPv6 tunnel address is tentative:\n%s", addrs)
	}
	neigh := show("ip", "neigh", "show", "dev", VXLANDevice)
	for _, w := range []string{
		a.String() + " lladdr " + VTEPMAC(a).String() + " PERMANENT",
		VTEPLinkLocal(a).String() + " lladdr " + VTEPMAC(a).String() + " PERMANENT",
		VTEPLinkLocal(b).String() + " lladdr " + VTEPMAC(b).String() + " PERMANENT",
	} {
		if !strings.Contains(neigh, w) {
			t.Errorf("vxlan.reef lacks neighbour %q:\n%s", w, neigh)
		}
	}
	if strings.Contains(neigh, b.String()+" ") {
		t.Errorf("vxlan.reef has an IPv4 neighbour for %s, reached for IPv6 only:\n%s", b, neigh)
	}
	fdb := show("bridge", "fdb", "show", "dev", VXLANDevice)
	for _, n := range []netip.Addr{a, b} {
		if strings.Count(fdb, VTEPMAC(n).String()+" dst "+n.String()) != 1 {
			t.Errorf("vxlan.reef wants one fdb entry for %s:\n%s", n, fdb)
		}
	}

	// Drift: an IPv6 neighbour deleted by hand, a stray permanent one.
	show("ip", "-6", "neigh", "del", VTEPLinkLocal(b).String(), "dev", VXLANDevice)
	show("ip", "-6", "neigh", "add", "fe80::99", "lladdr", "0e:ee:00:00:00:01", "dev", VXLANDevice, "nud", "permanent")
	have, err := k.ReadTunnel()
	if err != nil {
		t.Fatal(err)
	}
	if p := Diff(want, have); !slices.Equal(p.AddPeers6, []netip.Addr{b}) || len(p.AddPeers) != 0 {
		t.Errorf("after the IPv6 neighbour of %s went: plan %+v", b, p)
	}
	apply(want, true)
	if neigh := show("ip", "-6", "neigh", "show", "dev", VXLANDevice); strings.Contains(neigh, "fe80::99") ||
		!strings.Contains(neigh, VTEPLinkLocal(b).String()) {
		t.Errorf("after repair:\n%s", neigh)
	}

	// Strays alone, with every peer's entries in place: a permanent IPv4
	// neighbour that names no node, and an fdb entry of a node that has
	// no neighbour. They make a plan of their own, which removes them.
	show("ip", "neigh", "add", "192.168.78.99", "lladdr", "0e:ee:00:00:00:01", "dev", VXLANDevice, "nud", "permanent")
	show("bridge", "fdb", "append", VTEPMAC(netip.MustParseAddr("192.168.78.98")).String(), "dev", VXLANDevice, "dst", "192.168.78.98")
	if have, err = k.ReadTunnel(); err != nil {
		t.Fatal(err)
	}
	if p := Diff(want, have); len(p.Prune) != 2 || len(p.AddPeers)+len(p.AddPeers6)+len(p.DelPeers)+len(p.DelPeers6) != 0 {
		t.Errorf("with two stray entries alone: plan %+v, want them pruned and nothing else", p)
	}
	apply(want, true)
	if neigh := show("ip", "neigh", "show", "dev", VXLANDevice); strings.Contains(neigh, "192.168.78.99") {
		t.Errorf("the stray neighbour stayed:\n%s", neigh)
	}
	if fdb := show("bridge", "fdb", "show", "dev", VXLANDevice); strings.Contains(fdb, "192.168.78.98") {
		t.Errorf("the stray fdb entry stayed:\n%s", fdb)
	}

	// No IPv6 pool through VXLAN any more.
	v4 := *dev
	v4.TunnelAddr6 = netip.Addr{}
	apply(State{Device: &v4, Peers: map[netip.Addr]bool{a: true}}, false)
	if addrs := show("ip", "-6", "addr", "show", "dev", VXLANDevice); strings.Contains(addrs, tun6.String()) {
		t.Errorf("the IPv6 tunnel address stayed:\n%s", addrs)
	}
	if neigh := show("ip", "-6", "neigh", "show", "dev", VXLANDevice); strings.Contains(neigh, "PERMANENT") {
		t.Errorf("IPv6 neighbours stayed:\n%s", neigh)
	}
	if fdb := show("bridge", "fdb", "show", "dev", VXLANDevice); strings.Contains(fdb, b.String()) || !strings.Contains(fdb, "dst "+a.String()) {
		t.Errorf("fdb:\n%s", fdb)
	}
}

// TestVXLANKernelIPv6Underlay brings an IPv6-only node's vxlan.reef in
// line in a namespace of its own: local the node's IPv6 address, the MAC
// of its identity, IPv6 neighbours to the peers' VTEP link-locals and fdb
// entries to their IPv6 addresses. An fdb entry that points at a peer's
// old address shows in the diff and is rewritten.
func TestVXLANKernelIPv6Underlay(t *testing.T) {
	requireRoot(t)
	node, k, uplink := nodeWithUplink1(t, "fd77::11/64", "nodad")
	id, local := netip.MustParseAddr("10.255.0.1"), netip.MustParseAddr("fd77::11")
	a, b := netip.MustParseAddr("10.255.0.2"), netip.MustParseAddr("10.255.0.3")
	a6, a6new, b6 := netip.MustParseAddr("fd77::12"), netip.MustParseAddr("fd77::22"), netip.MustParseAddr("fd78::13")
	tun6 := netip.MustParseAddr("fd00:10:244::")
	dev := &VXLANConfig{VNI: VXLANVNI, Port: VXLANPort, Local: local, UplinkIdx: uplink.Attrs().Index, MTU: 1430,
		MAC: VTEPMAC(id).String(), TunnelAddr6: tun6}
	owner := sysctl.New(sysctl.Proc{})
	apply := func(want State) { t.Helper(); applyTunnel(t, k, node, owner, want, true) }
	show := func(args ...string) string { return netnstest.Run(t, node, args...) }
	want := State{Device: dev, Peers6: map[netip.Addr]bool{a: true, b: true}, Dst: map[netip.Addr]netip.Addr{a: a6, b: b6}}
	apply(want)
	if link := show("ip", "-d", "link", "show", "dev", VXLANDevice); !strings.Contains(link, "local "+local.String()) ||
		!strings.Contains(link, VTEPMAC(id).String()) || !strings.Contains(link, "mtu 1430") {
		t.Errorf("vxlan.reef:\n%s", link)
	}
	neigh := show("ip", "-6", "neigh", "show", "dev", VXLANDevice)
	for _, n := range []netip.Addr{a, b} {
		if w := VTEPLinkLocal(n).String() + " lladdr " + VTEPMAC(n).String() + " PERMANENT"; !strings.Contains(neigh, w) {
			t.Errorf("vxlan.reef lacks neighbour %q:\n%s", w, neigh)
		}
	}
	fdb := show("bridge", "fdb", "show", "dev", VXLANDevice)
	for n, d := range want.Dst {
		if strings.Count(fdb, VTEPMAC(n).String()+" dst "+d.String()) != 1 {
			t.Errorf("vxlan.reef wants one fdb entry %s dst %s:\n%s", VTEPMAC(n), d, fdb)
		}
	}

	// a's IPv6 address changes: its entry is rewritten, not doubled.
	want.Dst = map[netip.Addr]netip.Addr{a: a6new, b: b6}
	have, err := k.ReadTunnel()
	if err != nil {
		t.Fatal(err)
	}
	if p := Diff(want, have); !slices.Equal(p.AddPeers6, []netip.Addr{a}) {
		t.Errorf("after a's address changed: plan %+v", p)
	}
	apply(want)
	fdb = show("bridge", "fdb", "show", "dev", VXLANDevice)
	if strings.Contains(fdb, a6.String()+" ") || strings.Count(fdb, VTEPMAC(a).String()+" dst "+a6new.String()) != 1 {
		t.Errorf("fdb after a's address changed:\n%s", fdb)
	}
}

// applyTunnel diffs want against the kernel of node, applies the plan
// twice (every step is safe to repeat; the sysctl owner turns the device's
// IPv6 on when v6) and checks that nothing is left to do.
func applyTunnel(t *testing.T, k *Kernel, node ns.NetNS, owner *sysctl.Owner, want State, v6 bool) {
	t.Helper()
	have, err := k.ReadTunnel()
	if err != nil {
		t.Fatalf("ReadTunnel: %v", err)
	}
	plan := Diff(want, have)
	for i := range 2 {
		if err := in(t, node, func() error {
			return k.ApplyTunnel(want, plan, func(string) error { _, err := owner.Tunnel(v6); return err })
		}); err != nil {
			t.Fatalf("ApplyTunnel #%d %+v: %v", i+1, plan, err)
		}
	}
	if have, err = k.ReadTunnel(); err != nil {
		t.Fatalf("ReadTunnel: %v", err)
	}
	if p := Diff(want, have); !p.Empty() {
		t.Errorf("Diff after ApplyTunnel = %+v; want empty (kernel: %+v)", p, have)
	}
}

// nodeWithUplink1 is a throw-away node namespace whose uplink1, up, has
// the address addr (with the further arguments of ip-address(8)), and a
// Kernel in it.
func nodeWithUplink1(t *testing.T, addr ...string) (ns.NetNS, *Kernel, netlink.Link) {
	t.Helper()
	node := netnstest.New(t)
	netnstest.Run(t, node, "ip", "link", "add", "uplink1", "type", "veth", "peer", "name", "uplink1peer")
	netnstest.Run(t, node, append([]string{"ip", "addr", "add", addr[0], "dev", "uplink1"}, addr[1:]...)...)
	netnstest.Run(t, node, "ip", "link", "set", "uplink1", "up")
	uplink, err := netnsHandle(t, node.Path()).LinkByName("uplink1")
	if err != nil {
		t.Fatal(err)
	}
	return node, netnstest.Open(t, node, NewKernel), uplink
}

// TestKeeping: the sync before the routes keeps have's peers that want
// drops, with their fdb entries, and adds want's; without a device on
// either side there is nothing to keep.
func TestKeeping(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.168.10.21"), netip.MustParseAddr("192.168.10.22"), netip.MustParseAddr("fd77::23")
	dev := &VXLANConfig{VNI: VXLANVNI, Port: VXLANPort}
	have := State{Device: dev, Peers: map[netip.Addr]bool{a: true, b: true}, Peers6: map[netip.Addr]bool{b: true}, Dst: map[netip.Addr]netip.Addr{b: c}}
	want := State{Device: dev, Peers: map[netip.Addr]bool{a: true}, Peers6: map[netip.Addr]bool{c: true}}
	got, apply, kept := Keeping(want, have)
	if !apply || !kept {
		t.Error("kept nothing of b, which want drops")
	}
	if !maps.Equal(got.Peers, map[netip.Addr]bool{a: true, b: true}) || !maps.Equal(got.Peers6, map[netip.Addr]bool{b: true, c: true}) ||
		!maps.Equal(got.Dst, map[netip.Addr]netip.Addr{b: c}) {
		t.Errorf("Keeping = peers %v, peers6 %v, dst %v; want a and b, b and c, b at %s", got.Peers, got.Peers6, got.Dst, c)
	}
	if len(want.Peers) != 1 || len(want.Peers6) != 1 || want.Dst != nil {
		t.Errorf("Keeping changed want: %+v", want)
	}
	if p := Diff(got, have); len(p.DelPeers) > 0 || len(p.DelPeers6) > 0 {
		t.Errorf("the plan before the routes deletes peers: %+v", p)
	}
	if _, apply, kept := Keeping(have, have); !apply || kept {
		t.Errorf("nothing dropped: apply %v, kept %v; want true, false", apply, kept)
	}
	if _, apply, kept := Keeping(State{}, have); apply || !kept {
		t.Errorf("the device dropped: apply %v, kept %v; want false (it stays until after the routes), true", apply, kept)
	}
	if _, apply, kept := Keeping(want, State{}); !apply || kept {
		t.Errorf("no device yet: apply %v, kept %v; want true, false", apply, kept)
	}
}
