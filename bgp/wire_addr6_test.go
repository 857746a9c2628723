package bgp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/blockproto"
)

var nodeA6 = netip.MustParseAddr("fd77:1:2:3::a:11")

func lc(d1, d2 uint32) LargeCommunity { return LargeCommunity{testASN, d1, d2} }

func testRecord6() blockproto.Record {
	r := testRecord()
	r.Addr6 = nodeA6
	return r
}

// A record carries the node's IPv6 address as <asn>:119..122, 32 bits
// each, most significant first, and decodes back to the same record; a
// record without one carries none of the four, as an older reef sent it.
func TestRecordAddr6(t *testing.T) {
	rt := must(EncodeRecord(testASN, testRecord6()))
	want := []LargeCommunity{lc(119, 0xfd770001), lc(119+1, 0x00020003), lc(119+2, 0), lc(119+3, 0x000a0011)}
	if got := rt.Communities[len(rt.Communities)-4:]; !slices.Equal(got, want) {
		t.Errorf("the last communities of the record are %v, want %v", got, want)
	}
	got, err := decodeOne(rt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blockproto.Table{Records: []blockproto.Record{testRecord6()}}, got, cmpOpts...); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, c := range must(EncodeRecord(testASN, testRecord())).Communities {
		if c.Data1 >= lcAddr6 && c.Data1 <= lcAddr6+3 {
			t.Errorf("a record without an IPv6 address carries %v", c)
		}
	}
	if testRecord().Equal(testRecord6()) {
		t.Error("Record.Equal ignores Addr6")
	}
	for _, a := range []string{"192.168.77.11", "::ffff:192.168.77.11"} {
		r := testRecord()
		r.Addr6 = netip.MustParseAddr(a)
		if _, err := EncodeRecord(testASN, r); err == nil {
			t.Errorf("EncodeRecord with Addr6 %s: no error", a)
		}
	}
}

// A record whose IPv6 address is incomplete, of the wrong kind or a pod's
// is dropped, saying why.
func TestRecordAddr6Drops(t *testing.T) {
	base := must(EncodeRecord(testASN, testRecord6()))
	n := len(base.Communities)
	with := func(a string) VPNRoute {
		r := testRecord()
		rt := must(EncodeRecord(testASN, r))
		rt.Communities = appendAddr6(rt.Communities, testASN, netip.MustParseAddr(a))
		return rt
	}
	cases := []struct {
		name string
		lcs  []LargeCommunity
		want string
	}{
		{"three of four", slices.Clone(base.Communities[:n-1]), "3 of the 4 communities 64512:119..122:*"},
		{"one of four", append(slices.Clone(base.Communities[:n-4]), lc(120, 7)), "1 of the 4 communities"},
		{"twice, different", append(slices.Clone(base.Communities), lc(121, 5)), "community 64512:121:* twice"},
		{"link-local", with("fe80::1").Communities, "node IPv6 address fe80::1 is not a global unicast IPv6 address"},
		{"IPv4-mapped", with("::ffff:192.168.77.11").Communities, "is not a global unicast IPv6 address"},
		{"multicast", with("ff02::1").Communities, "is not a global unicast IPv6 address"},
		{"unspecified", with("::").Communities, "is not a global unicast IPv6 address"},
		{"loopback", with("::1").Communities, "is not a global unicast IPv6 address"},
		{"a pod's", with("fd00:10:244::5").Communities, "is a pod address (pool fd00:10:244::/56)"},
		{"on a claim", append(must(EncodeClaim(testASN, testClaim())).Communities, lc(119, 1)), "community 64512:119:1 does not belong on it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := base
			if tc.name == "on a claim" {
				rt = must(EncodeClaim(testASN, testClaim()))
			}
			rt.Communities = tc.lcs
			tbl, err := decodeOne(rt)
			if err == nil || !errors.Is(err, ErrNotReef) || !strings.Contains(err.Error(), tc.want) || tbl.Len() != 0 {
				t.Errorf("DecodeVPN = %v, table %+v; want ErrNotReef mentioning %q", err, tbl, tc.want)
			}
		})
	}
	// An exact repeat is redundant, as for the other communities.
	rt := base
	rt.Communities = append(slices.Clone(base.Communities), base.Communities[n-2])
	if _, err := decodeOne(rt); err != nil {
		t.Errorf("a repeated community of the address: %v", err)
	}
}

// An IPv6-only node's record carries <asn>:123:1 beside its IPv6 address,
// and decodes back to the same record; other records carry none. A value
// other than 1, or the flag without an address, drops the record.
func TestRecordIPv6Only(t *testing.T) {
	r := testRecord6()
	r.IPv6Only = true
	rt := must(EncodeRecord(testASN, r))
	if got := rt.Communities[len(rt.Communities)-1]; got != lc(123, 1) {
		t.Errorf("the last community of the record is %v, want %v", got, lc(123, 1))
	}
	got, err := decodeOne(rt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blockproto.Table{Records: []blockproto.Record{r}}, got, cmpOpts...); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if r.Equal(testRecord6()) {
		t.Error("Record.Equal ignores IPv6Only")
	}
	if slices.Contains(must(EncodeRecord(testASN, testRecord6())).Communities, lc(123, 1)) {
		t.Error("a record of a node with an IPv4 address says IPv6-only")
	}
	noAddr := testRecord()
	noAddr.IPv6Only = true
	if _, err := EncodeRecord(testASN, noAddr); err == nil {
		t.Error("EncodeRecord of an IPv6-only node without an IPv6 address: no error")
	}
	for name, lcs := range map[string][]LargeCommunity{
		"value 2":       append(slices.Clone(rt.Communities[:len(rt.Communities)-1]), lc(123, 2)),
		"no address":    append(must(EncodeRecord(testASN, testRecord())).Communities, lc(123, 1)),
		"twice, differ": append(slices.Clone(rt.Communities), lc(123, 0)),
	} {
		bad := rt
		bad.Communities = lcs
		if tbl, err := decodeOne(bad); err == nil || !errors.Is(err, ErrNotReef) || tbl.Len() != 0 {
			t.Errorf("%s: DecodeVPN = %v, table %+v; want ErrNotReef", name, err, tbl)
		}
	}
}
