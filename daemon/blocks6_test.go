package daemon

import (
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// Another node's IPv6 block goes `via <owner's IPv6 address> dev <uplink>
// onlink` when the owner is on the uplink's IPv6 subnet, through the
// node's own route to the owner when it is not, and nowhere, with an
// error naming the node, while its record gave no IPv6 address; its
// IPv4 blocks beside are routed as ever.
func TestRemoteRoutesIPv6(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	pool6 := pfx("fd00:10:244::/56")
	n := netInfo{node: "a1", uplink: Uplink{Interface: "eth0", Address: addr("192.168.77.11"), Prefix: pfx("192.168.77.11/24")},
		uplink6: Uplink6{Address: addr("fd77::11"), Prefix: pfx("fd77::11/64")},
		pools: []PoolConfig{{CIDR: pool6, BlockSize: 122, VXLANMode: EncapNever, IPIPMode: EncapNever},
			{CIDR: pfx("10.244.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet}}}
	b4, c4, d4 := addr("192.168.77.12"), addr("192.168.77.13"), addr("192.168.77.14")
	b6, c6 := addr("fd77::12"), addr("fd78::13")
	blocks := []store.Block{
		{CIDR: pfx("fd00:10:244::40/122"), Pool: pool6, OwnerAddr: b4, OwnerAddr6: b6, State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::80/122"), Pool: pool6, OwnerAddr: c4, OwnerAddr6: c6, State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::c0/122"), Pool: pool6, OwnerAddr: d4, Owner: "node-d", State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::100/122"), Pool: pool6, OwnerAddr: d4, Owner: "node-d", State: store.BlockRemote},
		{CIDR: pfx("fd00:10:244::/122"), Pool: pool6, State: store.BlockConfirmed},
		{CIDR: pfx("10.244.1.0/26"), Pool: pfx("10.244.0.0/16"), OwnerAddr: b4, OwnerAddr6: b6, State: store.BlockRemote},
	}
	if got := n.routedOwners(blocks); len(got) != 1 || got[0] != c6 {
		t.Errorf("routedOwners = %v, want [%s] (outside fd77::/64)", got, c6)
	}
	router := addr("fe80::1")
	got, vx := n.remoteRoutes(blocks, map[netip.Addr]routes.Hop{c6: {Gateway: router, Dev: "eth0"}})
	want := map[netip.Prefix]routes.RemoteBlock{
		pfx("fd00:10:244::40/122"): {Block: pfx("fd00:10:244::40/122"), Node: b6, Dev: "eth0"},
		pfx("fd00:10:244::80/122"): {Block: pfx("fd00:10:244::80/122"), Node: c6, Dev: "eth0", Gateway: router},
		pfx("10.244.1.0/26"):       {Block: pfx("10.244.1.0/26"), Node: b4, Dev: "eth0"},
	}
	if len(got) != len(want) || len(vx.v4) != 0 || len(vx.v6) != 0 {
		t.Fatalf("routes %+v, VXLAN peers %v; want %d routes, no VXLAN peer", got, vx, len(want))
	}
	for _, r := range got {
		if want[r.Block] != r {
			t.Errorf("route %+v, want %+v", r, want[r.Block])
		}
	}
	// As the kernel gets it: onlink through the owner's IPv6 address.
	st := routes.Desired(nil, nil, got, nil)
	if r := st.Routes[pfx("fd00:10:244::40/122")]; r.Via != b6 || !r.OnLink || r.Dev != "eth0" || r.Kind != routes.RemoteRoute {
		t.Errorf("desired route %+v, want via %s dev eth0 onlink", r, b6)
	}
	none := func(netip.Addr) bool { return false }
	err := n.unrouted6(blocks, none)
	if err == nil || strings.Count(err.Error(), "node-d") != 1 || !strings.Contains(err.Error(), "IPv6 blocks of node node-d (192.168.77.14) get no route") {
		t.Errorf("unrouted6 = %v, want one error naming node-d", err)
	}
	if err := n.unrouted6(blocks[:2], none); err != nil {
		t.Errorf("unrouted6 with every owner's address known = %v", err)
	}
	// node-d's record not learned yet: its blocks wait for it, unreported.
	if err := n.unrouted6(blocks, func(a netip.Addr) bool { return a == d4 }); err != nil {
		t.Errorf("unrouted6 with node-d's record awaited = %v, want nil", err)
	}
}

// awaitingRecords: the owners of remote IPv6 blocks without a stored IPv6
// address whose records the table does not hold, or holds in copies that
// disagree; not one whose record is there (with or without an address),
// nor one the store has an address for, nor an IPv4 block's owner.
func TestAwaitingRecords(t *testing.T) {
	addr := netip.MustParseAddr
	n := testNodes(5)
	b, c, d, e, f := n[0], n[1], n[2], n[3], n[4]
	blk := remoteBlock6
	blocks := []store.Block{
		blk("fd00::40/122", b, ""),                                      // no record: awaited
		blk("fd00::80/122", c, ""),                                      // a record without an address: unroutable, not awaited
		blk("fd00::c0/122", d, ""),                                      // copies disagree: awaited
		blk("fd00::100/122", e, "fd77::15"),                             // stored address: routed
		blk("10.244.1.0/26", f, ""),                                     // IPv4: nothing to wait for
		blk("fd00::140/122", blockproto.Node{Addr: c.Addr, Inc: 9}, ""), // another incarnation of c, without a record: awaited
	}
	table := blockproto.Table{Records: []blockproto.Record{
		{Node: c}, {Node: d, Addr6: addr("fd77::14")}, {Node: d, Addr6: addr("fd77::24")},
	}}
	got := awaitingRecords(table, blocks)
	want := map[netip.Addr]bool{b.Addr: true, d.Addr: true, c.Addr: true}
	if len(got) != len(want) || !got[b.Addr] || !got[d.Addr] || !got[c.Addr] {
		t.Errorf("awaitingRecords = %v, want %v", got, want)
	}
	if got := awaitingRecords(table, blocks[1:2]); len(got) != 0 {
		t.Errorf("awaitingRecords of an owner whose record gives no address = %v, want none", got)
	}
}

// ownerAddrs6: what the records give, for the remote blocks of the very
// incarnation, where the store has another; disagreeing copies and a
// record without an address change nothing.
func TestOwnerAddrs6(t *testing.T) {
	addr := netip.MustParseAddr
	n := testNodes(3)
	b, c, d := n[0], n[1], n[2]
	blk := func(cidr string, n blockproto.Node, a6 string, st store.BlockState) store.Block {
		bl := remoteBlock6(cidr, n, a6)
		bl.State = st
		return bl
	}
	blocks := []store.Block{
		blk("fd00::40/122", b, "", store.BlockRemote),
		blk("fd00::80/122", c, "fd77::13", store.BlockRemote),
		blk("fd00::c0/122", d, "fd77::34", store.BlockRemote),                              // neither copy below: only the disagreement keeps it
		blk("fd00::100/122", blockproto.Node{Addr: b.Addr, Inc: 9}, "", store.BlockRemote), // an older incarnation of b
	}
	table := blockproto.Table{Records: []blockproto.Record{
		{Node: b, Addr6: addr("fd77::12")},
		{Node: c, Addr6: addr("fd77::13")},                                     // as stored
		{Node: d, Addr6: addr("fd77::24")}, {Node: d, Addr6: addr("fd77::14")}, // copies disagree
	}}
	got := ownerAddrs6(table, blocks)
	if len(got) != 1 || got[b] != (store.Owner6{Addr: addr("fd77::12")}) {
		t.Errorf("ownerAddrs6 = %v, want only %s: fd77::12", got, b)
	}
	// c's record now says it is IPv6-only: that changes.
	got = ownerAddrs6(blockproto.Table{Records: []blockproto.Record{{Node: c, Addr6: addr("fd77::13"), IPv6Only: true}}}, blocks)
	if len(got) != 1 || got[c] != (store.Owner6{Addr: addr("fd77::13"), IPv6Only: true}) {
		t.Errorf("ownerAddrs6 of an IPv6-only record = %v, want only %s: fd77::13, IPv6-only", got, c)
	}
	// A record without an address (the owner's IPv6 pool gone from its
	// config during a rolling change) leaves the stored one.
	got = ownerAddrs6(blockproto.Table{Records: []blockproto.Record{{Node: c}}}, blocks)
	if len(got) != 0 {
		t.Errorf("ownerAddrs6 of a record without an address = %v, want nothing changed", got)
	}
}

// The CLI's view of a block names its owner's IPv6 address: a remote
// block's from the store (the owner's record), an own IPv6 block's the
// node's own, which the store does not keep; an IPv4 block gets none.
func TestBlockProtoAddr6(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	me := addr("fd77::11")
	for _, c := range []struct {
		b    store.Block
		want string
	}{
		{store.Block{CIDR: pfx("fd00:10:244::/122"), State: store.BlockConfirmed}, "fd77::11"},
		{store.Block{CIDR: pfx("fd00:10:244::40/122"), State: store.BlockRemote, OwnerAddr6: addr("fd77::12")}, "fd77::12"},
		{store.Block{CIDR: pfx("fd00:10:244::80/122"), State: store.BlockRemote}, ""},
		{store.Block{CIDR: pfx("10.244.0.0/26"), State: store.BlockConfirmed}, ""},
	} {
		if got := blockProto(c.b, me).GetOwnerAddressV6(); got != c.want {
			t.Errorf("%s (%s): owner's IPv6 address %q, want %q", c.b.CIDR, c.b.State, got, c.want)
		}
	}
}

// A pool whose cidr or blockSize changed while the store has blocks of it
// is refused at start, naming both; the same pool passes, and a pool gone
// with no overlap beside it is retired.
func TestRetiredPoolsRefuseChangedPool(t *testing.T) {
	pfx := netip.MustParsePrefix
	old := pfx("10.244.0.0/16")
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: netip.MustParseAddr("192.168.10.20")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: pfx("10.244.0.0/26"), Pool: old}}, Confirm: []netip.Prefix{pfx("10.244.0.0/26")}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		pools   []store.Pool
		err     string // "" for none
		retired []store.Pool
	}{
		{[]store.Pool{{CIDR: old, BlockSize: 26}}, "", nil},
		{[]store.Pool{{CIDR: pfx("10.244.0.0/15"), BlockSize: 26}}, "pool 10.244.0.0/15 overlaps pool 10.244.0.0/16, of which the store has blocks (10.244.0.0/26)", nil},
		{[]store.Pool{{CIDR: pfx("10.244.0.0/17"), BlockSize: 26}}, "pool 10.244.0.0/17 overlaps pool 10.244.0.0/16", nil},
		{[]store.Pool{{CIDR: old, BlockSize: 28}}, "pool 10.244.0.0/16: blockSize 28, but the store has blocks of it of size /26", nil},
		{[]store.Pool{{CIDR: pfx("10.245.0.0/16"), BlockSize: 26}}, "", []store.Pool{{CIDR: old, BlockSize: 26}}},
	} {
		got, err := retiredPools(c.pools, st, log)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("pools %v: %v", c.pools, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("pools %v: error %v, want one with %q", c.pools, err, c.err)
		case c.err == "" && !slices.Equal(got, c.retired):
			t.Errorf("pools %v: retired %v, want %v", c.pools, got, c.retired)
		}
	}
}

// remoteBlock6 is another node's block cidr, owned by n, with the IPv6
// address a6 ("": none) the store has for n.
func remoteBlock6(cidr string, n blockproto.Node, a6 string) store.Block {
	bl := store.Block{CIDR: netip.MustParsePrefix(cidr), OwnerAddr: n.Addr, OwnerInc: n.Inc, State: store.BlockRemote}
	if a6 != "" {
		bl.OwnerAddr6 = netip.MustParseAddr(a6)
	}
	return bl
}

// testNodes is count nodes of the tests' lab subnet: 192.168.77.12 on,
// incarnations 1 on.
func testNodes(count int) []blockproto.Node {
	nodes := make([]blockproto.Node, count)
	a := netip.MustParseAddr("192.168.77.12")
	for i := range nodes {
		nodes[i] = blockproto.Node{Addr: a, Inc: uint32(i + 1)}
		a = a.Next()
	}
	return nodes
}

// TestChangedPoolNamesTheLine: the refusal of a changed pool names the
// file, the line and the key that changed, as every config error does.
func TestChangedPoolNamesTheLine(t *testing.T) {
	pfx := netip.MustParsePrefix
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: netip.MustParseAddr("192.168.10.20")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: pfx("10.244.0.0/26"), Pool: pfx("10.244.0.0/16")}}, Confirm: []netip.Prefix{pfx("10.244.0.0/26")}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct{ yaml, want string }{
		{"nodeName: n1\npools:\n- cidr: 10.244.0.0/16\n  blockSize: 28\n",
			`config /etc/reef/config.yaml: line 4: pools[0].blockSize: value 28, but the store has blocks of it of size /26 (10.244.0.0/26)`},
		{"nodeName: n1\npools:\n- cidr: 10.9.0.0/16\n- cidr: 10.244.0.0/17\n",
			`config /etc/reef/config.yaml: line 4: pools[1].cidr: value "10.244.0.0/17" overlaps pool 10.244.0.0/16, of which the store has blocks`},
	} {
		cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, err = configRetiredPools(cfg, storePools(cfg.Pools), st, log)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: configRetiredPools() = %v, want an error that says %q", c.yaml, err, c.want)
		}
	}
}
