package daemon

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

func TestRemoteRoutesPerPoolMode(t *testing.T) {
	n := netInfo{node: "a1", uplink: Uplink{Interface: "eth0", Address: netip.MustParseAddr("192.168.77.11"), Prefix: netip.MustParsePrefix("192.168.77.11/24")},
		pools: []PoolConfig{
			{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever},
			{CIDR: netip.MustParsePrefix("10.245.0.0/16"), BlockSize: 26, VXLANMode: EncapNever, IPIPMode: EncapAlways},
			{CIDR: netip.MustParsePrefix("10.246.0.0/16"), BlockSize: 26, VXLANMode: EncapNever, IPIPMode: EncapNever},
		}}
	same, other := netip.MustParseAddr("192.168.77.12"), netip.MustParseAddr("192.168.78.11")
	blk := func(cidr, pool string, owner netip.Addr, st store.BlockState) store.Block {
		return store.Block{CIDR: netip.MustParsePrefix(cidr), Pool: netip.MustParsePrefix(pool), OwnerAddr: owner, State: st}
	}
	blocks := []store.Block{
		blk("10.244.1.0/26", "10.244.0.0/16", same, store.BlockRemote),
		blk("10.244.2.0/26", "10.244.0.0/16", other, store.BlockRemote),
		blk("10.245.1.0/26", "10.245.0.0/16", same, store.BlockRemote),
		blk("10.246.1.0/26", "10.246.0.0/16", other, store.BlockRemote),
		blk("10.244.3.0/26", "10.244.0.0/16", other, store.BlockLost), // own, not remote
		blk("10.244.4.0/26", "10.244.0.0/16", netip.Addr{}, store.BlockConfirmed),
	}
	// 10.246.1.0/26 is routed (pool Never, owner in another subnet): only
	// with the node's route to its owner does it get one, through the
	// router.
	if got := n.routedOwners(blocks); len(got) != 1 || got[0] != other {
		t.Errorf("routedOwners = %v, want [%s]", got, other)
	}
	router := netip.MustParseAddr("192.168.77.254")
	for _, hops := range []map[netip.Addr]routes.Hop{nil, {other: {Gateway: router, Dev: "eth0"}}} {
		got, vx := n.remoteRoutes(blocks, hops)
		want := map[string]string{"10.244.1.0/26": "eth0", "10.244.2.0/26": tunnel.VXLANDevice, "10.245.1.0/26": tunnel.IPIPDevice}
		if hops != nil {
			want["10.246.1.0/26"] = "eth0 via " + router.String()
		}
		if len(got) != len(want) {
			t.Fatalf("hops %v: routes %+v, want %d", hops, got, len(want))
		}
		for _, r := range got {
			dev := r.Dev
			if r.Gateway.IsValid() {
				dev += " via " + r.Gateway.String()
			}
			if want[r.Block.String()] != dev {
				t.Errorf("%s on %s, want %s", r.Block, dev, want[r.Block.String()])
			}
		}
		if len(vx.v4) != 1 || !vx.v4[other] || len(vx.v6) != 0 {
			t.Errorf("VXLAN peers %v, want only %s", vx, other)
		}
	}
	if n.vxlanPool() != netip.MustParsePrefix("10.244.0.0/16") || n.tunnelHandle() != "vxlan-tunnel-addr-a1" {
		t.Errorf("vxlan pool %s, handle %s", n.vxlanPool(), n.tunnelHandle())
	}
	if r := n.reached(other, nil, false); r != "vxlan" {
		t.Errorf("reached(%s) = %q", other, r)
	}
	n.pools[0].VXLANMode = EncapNever
	if r := n.reached(other, nil, false); !strings.Contains(r, "set vxlanMode: CrossSubnet") || !strings.HasPrefix(r, "direct") {
		t.Errorf("reached(%s) with Never = %q, want an explanation", other, r)
	}
	if r := n.reached(other, nil, true); !strings.HasPrefix(r, "routed") {
		t.Errorf("reached(%s) with Never and an external peer up = %q, want routed", other, r)
	}
	if r := n.reached(same, nil, true); r != "direct" {
		t.Errorf("reached(%s) = %q", same, r)
	}
}

// reef status's REACHED says how each peer's blocks are reached, for
// both families: over IPv6 where the owner's IPv6 address is the next hop
// or the tunnel's destination, and per pool where pools differ. An
// IPv6-only peer beside a node with an IPv4 address has no IPv4 blocks:
// only the IPv6 pools count (it said "vxlan" from the first pool, IPv4
// with vxlanMode Always, though its blocks were routed directly over IPv6).
func TestReachedFamilies(t *testing.T) {
	mp, ma, mpp := netip.MustParsePrefix, netip.MustParseAddr, func(cidr string, vx EncapMode) PoolConfig {
		return PoolConfig{CIDR: netip.MustParsePrefix(cidr), VXLANMode: vx, IPIPMode: EncapNever}
	}
	up4 := Uplink{Interface: "eth0", Address: ma("192.168.77.11"), Prefix: mp("192.168.77.11/24")}
	up6 := Uplink6{Address: ma("fd77::11"), Prefix: mp("fd77::11/64")}
	v6only := func(pools ...PoolConfig) netInfo {
		return netInfo{uplink: Uplink{Interface: "eth0"}, uplink6: up6, identity: ma("10.255.0.11"), v6only: true, pools: pools}
	}
	dual := func(pools ...PoolConfig) netInfo { return netInfo{uplink: up4, uplink6: up6, pools: pools} }
	peer6, far6, peer4 := ma("fd77::12"), ma("fd78::12"), ma("192.168.77.12")
	// blk: a block of the owner at addr (IPv4) and addr6 in pool.
	blk := func(pool string, addr, addr6 netip.Addr, only bool) store.Block {
		p := mp(pool)
		return store.Block{CIDR: netip.PrefixFrom(p.Addr(), p.Bits()+8), Pool: p, OwnerAddr: addr, OwnerAddr6: addr6, OwnerIPv6Only: only, State: store.BlockRemote}
	}
	id := ma("10.255.0.12")
	for _, tc := range []struct {
		name   string
		n      netInfo
		peer   netip.Addr
		blocks []store.Block
		want   string
	}{
		{"IPv6-only, Never", v6only(mpp("fd00:10:247::/56", EncapNever)), peer6,
			[]store.Block{blk("fd00:10:247::/56", id, peer6, true)}, "direct over IPv6"},
		{"IPv6-only, Never, no blocks yet", v6only(mpp("fd00:10:247::/56", EncapNever)), peer6, nil, "direct over IPv6"},
		{"IPv6-only, Always", v6only(mpp("fd00:10:247::/56", EncapAlways)), peer6,
			[]store.Block{blk("fd00:10:247::/56", id, peer6, true)}, "vxlan over IPv6"},
		{"IPv6-only, CrossSubnet, same subnet", v6only(mpp("fd00:10:247::/56", EncapCrossSubnet)), peer6, nil, "direct over IPv6"},
		{"IPv6-only, CrossSubnet, across", v6only(mpp("fd00:10:247::/56", EncapCrossSubnet)), far6,
			[]store.Block{blk("fd00:10:247::/56", id, far6, true)}, "vxlan over IPv6"},
		{"mixed: IPv6-only peer, IPv4 pool Always first", dual(mpp("10.244.0.0/16", EncapAlways), mpp("fd00:10:244::/56", EncapCrossSubnet)), peer6,
			[]store.Block{blk("fd00:10:244::/56", id, peer6, true)}, "direct over IPv6"},
		{"mixed, no blocks yet", dual(mpp("10.244.0.0/16", EncapAlways), mpp("fd00:10:244::/56", EncapNever)), peer6, nil, "direct over IPv6"},
		{"mixed, IPv6 pool Always", dual(mpp("10.244.0.0/16", EncapNever), mpp("fd00:10:244::/56", EncapAlways)), peer6,
			[]store.Block{blk("fd00:10:244::/56", id, peer6, true)}, "not at all: pool fd00:10:244::/56 has vxlanMode Always, and VXLAN between nodes whose underlays differ in family is not built (docs/design.md, \"VXLAN over an IPv6 underlay\")"},
		{"dual-stack peer", dual(mpp("10.244.0.0/16", EncapCrossSubnet), mpp("fd00:10:244::/56", EncapNever)), peer4,
			[]store.Block{blk("10.244.0.0/16", peer4, peer6, false), blk("fd00:10:244::/56", peer4, peer6, false)},
			"10.244.0.0/16: direct; fd00:10:244::/56: direct over IPv6"},
		{"dual-stack peer, no blocks yet: the first pool of each family", dual(mpp("10.244.0.0/16", EncapAlways), mpp("10.245.0.0/16", EncapNever), mpp("fd00:10:244::/56", EncapAlways)), peer4, nil,
			"vxlan"},
		{"dual-stack peer, IPv6 block without its IPv6 address", dual(mpp("fd00:10:244::/56", EncapNever)), peer4,
			[]store.Block{blk("fd00:10:244::/56", peer4, netip.Addr{}, false)},
			"not at all: its record gives no IPv6 address to route pool fd00:10:244::/56's blocks through (nodeAddressV6, docs/bgp.md)"},
		{"only the pools of its blocks", dual(mpp("10.244.0.0/16", EncapAlways), mpp("10.245.0.0/16", EncapNever)), peer4,
			[]store.Block{blk("10.245.0.0/16", peer4, netip.Addr{}, false), blk("10.244.0.0/16", ma("192.168.77.13"), netip.Addr{}, false)}, "direct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.n.reached(tc.peer, tc.blocks, false); got != tc.want {
				t.Errorf("reached(%s) = %q, want %q", tc.peer, got, tc.want)
			}
		})
	}
}

// What vxlan.reef must be is computed from the node and the tunnel address
// the store holds, without the kernel or the store.
func TestDesiredVXLAN(t *testing.T) {
	up := Uplink{Interface: "eth0", Index: 7, MTU: 1500, Address: netip.MustParseAddr("192.168.77.11"), Prefix: netip.MustParsePrefix("192.168.77.11/24")}
	pool := func(vx EncapMode) []PoolConfig {
		return []PoolConfig{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, VXLANMode: vx, IPIPMode: EncapNever}}
	}
	peers := vxPeers{v4: map[netip.Addr]bool{netip.MustParseAddr("192.168.78.11"): true}}
	addr := netip.MustParseAddr("10.244.0.1")

	got := netInfo{uplink: up, pools: pool(EncapCrossSubnet)}.desiredVXLAN(peers, tunnelAddrs{vxlan: addr})
	d := got.Device
	if d == nil || d.VNI != tunnel.VXLANVNI || d.Port != tunnel.VXLANPort || d.Local != up.Address || d.UplinkIdx != 7 ||
		d.MTU != 1450 || d.TunnelAddr != addr || d.TunnelAddr6.IsValid() || d.MAC != tunnel.VTEPMAC(up.Address).String() || len(got.Peers) != 1 {
		t.Errorf("CrossSubnet: %+v, device %+v", got, d)
	}
	if got := (netInfo{uplink: up, pools: pool(EncapAlways)}).desiredVXLAN(peers, tunnelAddrs{}); got.Device == nil || got.Device.TunnelAddr.IsValid() {
		t.Errorf("no tunnel address yet: %+v", got.Device)
	}
	if got := (netInfo{uplink: up, pools: pool(EncapNever)}).desiredVXLAN(peers, tunnelAddrs{vxlan: addr}); got.Device != nil || got.Peers != nil {
		t.Errorf("no pool uses VXLAN: want no device and no peers, got %+v", got)
	}
}

// What tunl0 must be is computed from the node and the tunnel address the
// store holds: nothing while no pool uses IPIP.
func TestDesiredIPIP(t *testing.T) {
	up := Uplink{Interface: "eth0", Index: 7, MTU: 1500, Address: netip.MustParseAddr("192.168.77.11"), Prefix: netip.MustParsePrefix("192.168.77.11/24")}
	pool := func(ipip EncapMode) []PoolConfig {
		return []PoolConfig{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, VXLANMode: EncapNever, IPIPMode: ipip}}
	}
	addr := netip.MustParseAddr("10.244.0.1")
	for _, mode := range []EncapMode{EncapCrossSubnet, EncapAlways} {
		got := netInfo{uplink: up, pools: pool(mode)}.desiredIPIP(addr)
		if got == nil || *got != (tunnel.IPIPConfig{MTU: 1480, TunnelAddr: addr}) {
			t.Errorf("%s: %+v, want MTU 1480 and %s", mode, got, addr)
		}
	}
	if got := (netInfo{uplink: up, pools: pool(EncapAlways)}).desiredIPIP(netip.Addr{}); got == nil || got.TunnelAddr.IsValid() {
		t.Errorf("no tunnel address yet: %+v", got)
	}
	if got := (netInfo{uplink: up, pools: pool(EncapNever)}).desiredIPIP(addr); got != nil {
		t.Errorf("no pool uses IPIP: want nothing, got %+v", got)
	}
}

// IPv6 blocks through vxlan.reef (issue 29): the IPv4 underlay decides the
// encapsulation, as for IPv4 (CrossSubnet on the owner's IPv4 address),
// and the route goes via the owner's VTEP link-local, which needs no IPv6
// address of the owner; the device carries both families, with a
// neighbour of each family per node reached, and the IPv6 tunnel address.
func TestVXLAN6(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	pool4, pool6 := pfx("10.244.0.0/16"), pfx("fd00:10:244::/56")
	up := Uplink{Interface: "eth0", Index: 7, MTU: 1500, Address: addr("192.168.77.11"), Prefix: pfx("192.168.77.11/24")}
	same, other := addr("192.168.77.12"), addr("192.168.78.11")
	blocks := []store.Block{
		{CIDR: pfx("fd00:10:244::40/122"), Pool: pool6, OwnerAddr: same, OwnerAddr6: addr("fd77::12"), State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::80/122"), Pool: pool6, OwnerAddr: other, State: store.BlockRemote}, // no IPv6 address
		{CIDR: pfx("10.244.1.0/26"), Pool: pool4, OwnerAddr: same, State: store.BlockRemote},
		{CIDR: pfx("10.244.2.0/26"), Pool: pool4, OwnerAddr: other, State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::/122"), Pool: pool6, State: store.BlockConfirmed},
	}
	ll := tunnel.VTEPLinkLocal
	cases := []struct {
		name       string
		mode4      EncapMode // "": no IPv4 pool
		mode6      EncapMode
		routes     []string // as the kernel gets them
		peers      vxPeers
		unrouted   bool // an error for the IPv6 owner without an address
		device, v6 bool
	}{
		{"dual-stack, CrossSubnet: the other subnet's blocks of both families through the tunnel", EncapCrossSubnet, EncapCrossSubnet, []string{
			"fd00:10:244::40/122 via fd77::12 dev eth0 onlink proto reef",
			"fd00:10:244::80/122 via " + ll(other).String() + " dev vxlan.reef proto reef",
			"10.244.1.0/26 via 192.168.77.12 dev eth0 onlink proto reef",
			"10.244.2.0/26 via 192.168.78.11 dev vxlan.reef onlink proto reef",
		}, vxPeers{v4: set(other), v6: set(other)}, false, true, true},
		{"dual-stack, IPv6 Always, IPv4 Never", EncapNever, EncapAlways, []string{
			"fd00:10:244::40/122 via " + ll(same).String() + " dev vxlan.reef proto reef",
			"fd00:10:244::80/122 via " + ll(other).String() + " dev vxlan.reef proto reef",
			"10.244.1.0/26 via 192.168.77.12 dev eth0 onlink proto reef",
			// 10.244.2.0/26 is routed: with the node's route to its owner only
		}, vxPeers{v4: set(), v6: set(same, other)}, false, true, true},
		{"IPv6 only, CrossSubnet", "", EncapCrossSubnet, []string{
			"fd00:10:244::40/122 via fd77::12 dev eth0 onlink proto reef",
			"fd00:10:244::80/122 via " + ll(other).String() + " dev vxlan.reef proto reef",
		}, vxPeers{v4: set(), v6: set(other)}, false, true, true},
		{"IPv6 Never: the owner without an IPv6 address gets no route, and an error", EncapCrossSubnet, EncapNever, []string{
			"fd00:10:244::40/122 via fd77::12 dev eth0 onlink proto reef",
			"10.244.1.0/26 via 192.168.77.12 dev eth0 onlink proto reef",
			"10.244.2.0/26 via 192.168.78.11 dev vxlan.reef onlink proto reef",
		}, vxPeers{v4: set(other), v6: set()}, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := netInfo{node: "a1", uplink: up, uplink6: Uplink6{Address: addr("fd77::11"), Prefix: pfx("fd77::11/64")},
				pools: []PoolConfig{{CIDR: pool6, BlockSize: 122, VXLANMode: tc.mode6, IPIPMode: EncapNever}}}
			bs := blocks
			if tc.mode4 != "" {
				n.pools = append(n.pools, PoolConfig{CIDR: pool4, BlockSize: 26, VXLANMode: tc.mode4, IPIPMode: EncapNever})
			} else {
				bs = []store.Block{blocks[0], blocks[1], blocks[4]}
			}
			remote, peers := n.remoteRoutes(bs, nil)
			var got []string
			for _, r := range routes.Desired(nil, nil, remote, nil).Routes {
				got = append(got, r.String())
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.routes))
			if !slices.Equal(got, want) {
				t.Errorf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !peers.equal(tc.peers) {
				t.Errorf("VXLAN peers %+v, want %+v", peers, tc.peers)
			}
			if err := n.unrouted6(bs, func(netip.Addr) bool { return false }); (err != nil) != tc.unrouted {
				t.Errorf("unrouted6 = %v, want an error: %v", err, tc.unrouted)
			}
			tun, tun6 := addr("10.244.0.0"), addr("fd00:10:244::")
			st := n.desiredVXLAN(peers, tunnelAddrs{vxlan: tun, vxlan6: tun6})
			if (st.Device != nil) != tc.device || n.vxlanPool6().IsValid() != tc.v6 {
				t.Fatalf("device %+v, IPv6 VXLAN pool %s; want a device: %v, carrying IPv6: %v", st.Device, n.vxlanPool6(), tc.device, tc.v6)
			}
			if !maps.Equal(st.Peers, tc.peers.v4) || !maps.Equal(st.Peers6, tc.peers.v6) || st.Device.TunnelAddr6 != tun6 || st.Device.MTU != 1450 {
				t.Errorf("desiredVXLAN = %+v, device %+v", st, st.Device)
			}
		})
	}
	if h := (netInfo{node: "a1"}).tunnelHandle6(); h != "vxlan-v6-tunnel-addr-a1" {
		t.Errorf("IPv6 tunnel handle %q", h)
	}
}

func set(as ...netip.Addr) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, a := range as {
		m[a] = true
	}
	return m
}

// The pods' MTU leaves room for VXLAN's 50 bytes (an outer IPv4 header)
// whatever the family of the pool that may use it: IPv6 only, dual-stack,
// or an IPv6 pool routed directly beside an IPv4 one through VXLAN; on an
// IPv6 underlay (an IPv6-only node), for 70 (an outer IPv6 header).
func TestDeriveMTUFamilies(t *testing.T) {
	v4 := func(vx EncapMode) PoolConfig {
		return PoolConfig{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, VXLANMode: vx, IPIPMode: EncapNever}
	}
	v6 := func(vx EncapMode) PoolConfig {
		return PoolConfig{CIDR: netip.MustParsePrefix("fd00:10:244::/56"), BlockSize: 122, VXLANMode: vx, IPIPMode: EncapNever}
	}
	cases := []struct {
		name      string
		pools     []PoolConfig
		underlay6 bool
		want      int
	}{
		{"IPv6 underlay, CrossSubnet", []PoolConfig{v6(EncapCrossSubnet)}, true, 1430},
		{"IPv6 underlay, Always", []PoolConfig{v6(EncapAlways)}, true, 1430},
		{"IPv6 underlay, Never", []PoolConfig{v6(EncapNever)}, true, 1500},
		{"IPv6 only, CrossSubnet", []PoolConfig{v6(EncapCrossSubnet)}, false, 1450},
		{"IPv6 only, Always", []PoolConfig{v6(EncapAlways)}, false, 1450},
		{"IPv6 only, Never", []PoolConfig{v6(EncapNever)}, false, 1500},
		{"dual-stack, both CrossSubnet", []PoolConfig{v4(EncapCrossSubnet), v6(EncapCrossSubnet)}, false, 1450},
		{"dual-stack, IPv6 through VXLAN only", []PoolConfig{v4(EncapNever), v6(EncapAlways)}, false, 1450},
		{"dual-stack, IPv4 through VXLAN only", []PoolConfig{v4(EncapAlways), v6(EncapNever)}, false, 1450},
		{"dual-stack, neither", []PoolConfig{v4(EncapNever), v6(EncapNever)}, false, 1500},
	}
	for _, c := range cases {
		if got := DeriveMTU(Config{Pools: c.pools}, 1500, c.underlay6); got != c.want {
			t.Errorf("%s: DeriveMTU = %d, want %d", c.name, got, c.want)
		}
	}
}
