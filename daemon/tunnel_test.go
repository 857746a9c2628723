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
	got, vx := n.remoteRoutes(blocks)
	want := map[string]string{"10.244.1.0/26": "eth0", "10.244.2.0/26": routes.VXLANDevice, "10.245.1.0/26": routes.IPIPDevice, "10.246.1.0/26": "eth0"}
	if len(got) != len(want) {
		t.Fatalf("routes %+v, want %d", got, len(want))
	}
	for _, r := range got {
		if want[r.Block.String()] != r.Dev {
			t.Errorf("%s on %s, want %s", r.Block, r.Dev, want[r.Block.String()])
		}
	}
	if len(vx) != 1 || !vx[other] {
		t.Errorf("VXLAN peers %v, want only %s", vx, other)
	}
	if n.vxlanPool() != netip.MustParsePrefix("10.244.0.0/16") || n.tunnelHandle() != "vxlan-tunnel-addr-a1" {
		t.Errorf("vxlan pool %s, handle %s", n.vxlanPool(), n.tunnelHandle())
	}
	if r := n.reached(other); r != "vxlan" {
		t.Errorf("reached(%s) = %q", other, r)
	}
	n.pools[0].VXLANMode = EncapNever
	if r := n.reached(other); !strings.Contains(r, "set vxlanMode: CrossSubnet") || !strings.HasPrefix(r, "direct") {
		t.Errorf("reached(%s) with Never = %q, want an explanation", other, r)
	}
	if r := n.reached(same); r != "direct" {
		t.Errorf("reached(%s) = %q", same, r)
	}
}
