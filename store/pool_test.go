package store

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
	bolt "go.etcd.io/bbolt"
)

func TestPoolBlocks(t *testing.T) {
	for _, tc := range []struct {
		pool      Pool
		wantN     int
		wantFirst string
		wantLast  string
		wantErr   bool
	}{
		{Pool{netip.MustParsePrefix("10.244.0.0/16"), 26}, 1024, "10.244.0.0/26", "10.244.255.192/26", false},
		{Pool{netip.MustParsePrefix("10.244.0.0/24"), 24}, 1, "10.244.0.0/24", "10.244.0.0/24", false},
		{Pool{netip.MustParsePrefix("255.255.255.0/24"), 32}, 256, "255.255.255.0/32", "255.255.255.255/32", false},
		{Pool{netip.MustParsePrefix("0.0.0.0/0"), 1}, 2, "0.0.0.0/1", "128.0.0.0/1", false},
		{Pool{netip.MustParsePrefix("10.244.0.0/16"), 15}, 0, "", "", true},
		{Pool{netip.MustParsePrefix("10.244.0.0/16"), 33}, 0, "", "", true},
		{Pool{netip.MustParsePrefix("10.244.1.0/16"), 26}, 0, "", "", true},
		{Pool{netip.MustParsePrefix("::ffff:10.244.0.0/112"), 122}, 0, "", "", true},
		// IPv6: blocks of /116 to /128; a pool's first 2^32 blocks are used.
		{Pool{netip.MustParsePrefix("fd00::/120"), 122}, 4, "fd00::/122", "fd00::c0/122", false},
		{Pool{netip.MustParsePrefix("fd00:10:244::/56"), 122}, 1 << 32, "fd00:10:244::/122", "fd00:10:244::3f:ffff:ffc0/122", false},
		{Pool{netip.MustParsePrefix("fd00:10:244::/64"), 116}, 1 << 32, "fd00:10:244::/116", "fd00:10:244::fff:ffff:f000/116", false},
		{Pool{netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120"), 128}, 256,
			"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", false},
		{Pool{netip.MustParsePrefix("fd00::/64"), 115}, 0, "", "", true},
		{Pool{netip.MustParsePrefix("fd00::/64"), 129}, 0, "", "", true},
		{Pool{netip.MustParsePrefix("fd00::1/64"), 122}, 0, "", "", true},
	} {
		t.Run(fmt.Sprintf("%s/blocks/%d", tc.pool.CIDR, tc.pool.BlockSize), func(t *testing.T) {
			err := tc.pool.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			bp := blockproto.Pool{CIDR: tc.pool.CIDR, BlockSize: tc.pool.BlockSize}
			n := bp.NumBlocks()
			first, last := bp.Block(0), bp.Block(n-1)
			if n != tc.wantN || first.String() != tc.wantFirst || last.String() != tc.wantLast {
				t.Errorf("%d blocks %s .. %s, want %d blocks %s .. %s", n, first, last, tc.wantN, tc.wantFirst, tc.wantLast)
			}
			if got, want := lastAddr(last), netip.MustParsePrefix(tc.wantLast); !want.Contains(got) || got.Next().IsValid() && want.Contains(got.Next()) {
				t.Errorf("lastAddr(%s) = %s, not the block's last address", last, got)
			}
			if got, want := blockLen(first), uint64(1)<<(first.Addr().BitLen()-first.Bits()); got != want {
				t.Errorf("blockLen(%s) = %d, want %d", first, got, want)
			}
		})
	}
}

// TestFirstFreeUsesEveryAddress: network and broadcast addresses of a
// block are pod addresses too, and the top of the address space does not
// wrap to 0.0.0.0 (::).
func TestFirstFreeUsesEveryAddress(t *testing.T) {
	for _, tc := range []struct {
		pool string
		bits int
		want string
	}{
		{"255.255.255.252/30", 30, "[255.255.255.252 255.255.255.253 255.255.255.254 255.255.255.255]"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126", 126, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd " +
			"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]"},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			s := openTest(t, "node-a")
			pool := Pool{CIDR: netip.MustParsePrefix(tc.pool), BlockSize: tc.bits}
			var got []string
			for _, h := range []string{"a", "b", "c", "d"} {
				ep, _, _, err := allocAuto(s, Endpoint{Handle: h}, pool)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ep.IP.String())
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("addresses = %v, want %s", got, tc.want)
			}
			if _, _, _, err := allocAuto(s, Endpoint{Handle: "e"}, pool); err == nil {
				t.Error("a fifth address from a pool of four")
			}
		})
	}
}

// TestFamiliesInterleave allocates from an IPv4 pool and an IPv6 pool
// whose keys share the buckets' byte order (10.0.0.x is 0a 00 00 xx,
// a00::x is 0a 00 00 00 ... xx: 10.0.0.0 < a00:: < ... < a00::3 <
// 10.0.0.1), releases and allocates again: each family sees only its own
// addresses and blocks.
func TestFamiliesInterleave(t *testing.T) {
	s := openTest(t, "node-a")
	v4 := Pool{CIDR: netip.MustParsePrefix("10.0.0.0/30"), BlockSize: 30}
	v6 := Pool{CIDR: netip.MustParsePrefix("a00::/126"), BlockSize: 126}
	var got []string
	for i := range 4 {
		for _, p := range []Pool{v4, v6} {
			ep, _, _, err := allocAuto(s, Endpoint{Handle: fmt.Sprintf("%s-%d", p.CIDR.Addr(), i)}, p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ep.IP.String())
		}
	}
	want := "[10.0.0.0 a00:: 10.0.0.1 a00::1 10.0.0.2 a00::2 10.0.0.3 a00::3]"
	if fmt.Sprint(got) != want {
		t.Errorf("addresses = %v, want %s", got, want)
	}
	blocks, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].Used != 4 || blocks[1].Used != 4 || blocks[0].Size != 4 || blocks[1].Size != 4 {
		t.Errorf("blocks = %+v, want 10.0.0.0/30 and a00::/126, 4 of 4 used each", blocks)
	}
	if _, found, err := s.Release("a00::-1"); err != nil || !found {
		t.Fatalf("release a00::1: found %v, %v", found, err)
	}
	ep, _, _, err := allocAuto(s, Endpoint{Handle: "again"}, v6)
	if err != nil || ep.IP != netip.MustParseAddr("a00::1") {
		t.Errorf("after releasing a00::1 got %s, %v; want a00::1", ep.IP, err)
	}
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "full"}, v4); err == nil {
		t.Error("a fifth address from the full IPv4 pool")
	}
}

// TestBlockScanSkipsOtherFamily: the key of a00:3::/120 (0a 00 00 03,
// twelve 00, then 120) sorts before that of 10.0.0.3/32 (0a 00 00 03,
// then 32), so a scan of IPv4 blocks that stopped at the first key past
// its range by address meets the IPv6 key first and stops too early.
func TestBlockScanSkipsOtherFamily(t *testing.T) {
	s := openTest(t, "node-a")
	for _, b := range []blockproto.OwnBlock{
		{Block: netip.MustParsePrefix("10.0.0.3/32"), Pool: netip.MustParsePrefix("10.0.0.0/30")},
		{Block: netip.MustParsePrefix("a00:3::/120"), Pool: netip.MustParsePrefix("a00::/16")},
	} {
		if err := s.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{b}}); err != nil {
			t.Fatal(err)
		}
		if err := s.ApplyProtocol(blockproto.Changes{Confirm: []netip.Prefix{b.Block}}); err != nil {
			t.Fatal(err)
		}
	}
	s.db.View(func(tx *bolt.Tx) error {
		if !blockTaken(tx.Bucket(bucketBlocks), netip.MustParsePrefix("10.0.0.0/30")) {
			t.Error("10.0.0.0/30 is not taken, though 10.0.0.3/32 inside it is a block")
		}
		return nil
	})
	// The pool's block size was 32 when the node took 10.0.0.3/32.
	ep, _, err := s.Allocate(Endpoint{Handle: "h"}, Pool{CIDR: netip.MustParsePrefix("10.0.0.0/30"), BlockSize: 32})
	if err != nil || ep.IP != netip.MustParseAddr("10.0.0.3") {
		t.Errorf("Allocate from the own block 10.0.0.3/32 = %s, %v; want 10.0.0.3", ep.IP, err)
	}
}
