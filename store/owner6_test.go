package store

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/reefcni/reef/blockproto"
)

// TestBlockOwnerAddrs6: the IPv6 address an owner's record gives is kept
// with its remote blocks, across a restart and a remember of the same
// incarnation, and so is whether the owner is IPv6-only; a new
// incarnation's blocks start without either, and own blocks never get one.
func TestBlockOwnerAddrs6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	own := claimConfirmed(t, s, protoPool)
	var others []netip.Prefix
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
		if b != own {
			others = append(others, b)
		}
	}
	blkB, blkC := others[0], others[1]
	apply(t, s, blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: blkB, Pool: protoPool.CIDR, Owner: nodeB}, {Block: blkC, Pool: protoPool.CIDR, Owner: nodeC}}})
	b6, c6 := netip.MustParseAddr("fd77::3"), netip.MustParseAddr("fd77::4")
	self := blockproto.Node{Addr: protoSelf}
	self.Inc, _ = s.Incarnation()
	if err := s.SetBlockOwnerAddrs6(map[blockproto.Node]Owner6{nodeB: {b6, true}, {Addr: protoPeerC, Inc: 0xcc}: {c6, true}, self: {c6, true}}); err != nil {
		t.Fatal(err)
	}
	want := map[netip.Prefix]netip.Addr{own: {}, blkB: b6, blkC: {}}
	check := func(when string) {
		t.Helper()
		for _, b := range blockList(t, s) {
			if b.OwnerAddr6 != want[b.CIDR] || b.OwnerIPv6Only != want[b.CIDR].IsValid() {
				t.Errorf("%s: block %s of %s has IPv6 address %v, IPv6-only %v; want %v", when, b.CIDR, b.OwnerAddr, b.OwnerAddr6, b.OwnerIPv6Only, want[b.CIDR])
			}
		}
	}
	check("set")
	s.Close()
	s = openProtoAt(t, path)
	defer func() { s.Close() }()
	check("reopened")
	apply(t, s, blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: blkB, Pool: protoPool.CIDR, Owner: nodeB}}})
	check("remembered again")
	apply(t, s, blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: blkB, Pool: protoPool.CIDR, Owner: blockproto.Node{Addr: protoPeerB, Inc: 0xbb}}}})
	want[blkB] = netip.Addr{}
	check("a new incarnation")
}
