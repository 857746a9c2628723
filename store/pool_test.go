package store

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestPoolBlocks(t *testing.T) {
	for _, tc := range []struct {
		pool      Pool
		wantN     uint64
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
	} {
		t.Run(fmt.Sprintf("%s/blocks/%d", tc.pool.CIDR, tc.pool.BlockSize), func(t *testing.T) {
			err := tc.pool.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			n := tc.pool.numBlocks()
			first, last := tc.pool.block(0), tc.pool.block(n-1)
			if n != tc.wantN || first.String() != tc.wantFirst || last.String() != tc.wantLast {
				t.Errorf("%d blocks %s .. %s, want %d blocks %s .. %s", n, first, last, tc.wantN, tc.wantFirst, tc.wantLast)
			}
		})
	}
}

func TestFirstFreeUsesEveryAddress(t *testing.T) {
	s := openTest(t, "node-a")
	pool := Pool{CIDR: netip.MustParsePrefix("255.255.255.252/30"), BlockSize: 30}
	var got []string
	for _, h := range []string{"a", "b", "c", "d"} {
		ep, _, _, err := allocAuto(s, Endpoint{Handle: h}, pool)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ep.IP.String())
	}
	// Network and broadcast addresses of a block are pod addresses too, and
	// the top of the address space must not wrap to 0.0.0.0.
	want := []string{"255.255.255.252", "255.255.255.253", "255.255.255.254", "255.255.255.255"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("addresses = %v, want %v", got, want)
			break
		}
	}
}
