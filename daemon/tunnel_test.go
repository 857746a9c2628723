package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/routes"
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
		want := map[string]string{"10.244.1.0/26": "eth0", "10.244.2.0/26": routes.VXLANDevice, "10.245.1.0/26": routes.IPIPDevice}
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
		if len(vx) != 1 || !vx[other] {
			t.Errorf("VXLAN peers %v, want only %s", vx, other)
		}
	}
	if n.vxlanPool() != netip.MustParsePrefix("10.244.0.0/16") || n.tunnelHandle() != "vxlan-tunnel-addr-a1" {
		t.Errorf("vxlan pool %s, handle %s", n.vxlanPool(), n.tunnelHandle())
	}
	if r := n.reached(other, false); r != "vxlan" {
		t.Errorf("reached(%s) = %q", other, r)
	}
	n.pools[0].VXLANMode = EncapNever
	if r := n.reached(other, false); !strings.Contains(r, "set vxlanMode: CrossSubnet") || !strings.HasPrefix(r, "direct") {
		t.Errorf("reached(%s) with Never = %q, want an explanation", other, r)
	}
	if r := n.reached(other, true); !strings.HasPrefix(r, "routed") {
		t.Errorf("reached(%s) with Never and an external peer up = %q, want routed", other, r)
	}
	if r := n.reached(same, true); r != "direct" {
		t.Errorf("reached(%s) = %q", same, r)
	}
}

// What vxlan.reef must be is computed from the node and the tunnel address
// the store holds, without the kernel or the store.
func TestDesiredVXLAN(t *testing.T) {
	up := Uplink{Interface: "eth0", Index: 7, MTU: 1500, Address: netip.MustParseAddr("192.168.77.11"), Prefix: netip.MustParsePrefix("192.168.77.11/24")}
	pool := func(vx EncapMode) []PoolConfig {
		return []PoolConfig{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26, VXLANMode: vx, IPIPMode: EncapNever}}
	}
	peers := map[netip.Addr]bool{netip.MustParseAddr("192.168.78.11"): true}
	addr := netip.MustParseAddr("10.244.0.1")

	got := netInfo{uplink: up, pools: pool(EncapCrossSubnet)}.desiredVXLAN(peers, addr)
	d := got.Device
	if d == nil || d.VNI != routes.VXLANVNI || d.Port != routes.VXLANPort || d.Local != up.Address || d.UplinkIdx != 7 ||
		d.MTU != 1450 || d.TunnelAddr != addr || d.MAC != routes.VTEPMAC(up.Address).String() || len(got.Peers) != 1 {
		t.Errorf("CrossSubnet: %+v, device %+v", got, d)
	}
	if got := (netInfo{uplink: up, pools: pool(EncapAlways)}).desiredVXLAN(peers, netip.Addr{}); got.Device == nil || got.Device.TunnelAddr.IsValid() {
		t.Errorf("no tunnel address yet: %+v", got.Device)
	}
	if got := (netInfo{uplink: up, pools: pool(EncapNever)}).desiredVXLAN(peers, addr); got.Device != nil || got.Peers != nil {
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
		if got == nil || *got != (routes.IPIPConfig{MTU: 1480, TunnelAddr: addr}) {
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
