package nft

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
	// addrs lets go-cmp compare netip.Addr, whose fields are unexported.
	addrs = cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })}
)

func TestElemString(t *testing.T) {
	for _, c := range []struct {
		e    Elem
		want string
	}{
		{Elem{From: addr("10.244.0.0"), To: addr("10.244.255.255")}, "10.244.0.0/16"},
		{Elem{From: addr("10.0.0.1"), To: addr("10.0.0.1")}, "10.0.0.1"},
		{Elem{From: addr("10.0.0.1"), To: addr("10.0.0.5")}, "10.0.0.1-10.0.0.5"},
		{Elem{From: addr("0.0.0.0"), To: addr("255.255.255.255")}, "0.0.0.0/0"},
		{Elem{Iface: "reef1", From: addr("10.0.0.1"), To: addr("10.0.0.1")}, `"reef1" . 10.0.0.1`},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.e, got, c.want)
		}
	}
}

// TestElemsRoundTrip encodes elements as Apply sends them and decodes them
// as Read does, including ranges that touch and one that runs to the top.
func TestElemsRoundTrip(t *testing.T) {
	ivs := Intervals([]netip.Prefix{pfx("10.244.0.0/16"), pfx("10.245.0.0/16"), pfx("255.255.255.0/24"), pfx("0.0.0.0/32")})
	s := Set{Name: "all-pools", KeyType: nftables.TypeIPAddr.Name, KeyLen: 4, Interval: true}
	raw := encodeElems(s, ivs)
	// The kernel lists them in its own order, with nft's leading end marker.
	raw = append([]nftables.SetElement{{Key: []byte{0, 0, 0, 0}, IntervalEnd: true}}, raw...)
	slices.Reverse(raw)
	got := decodeElems(&nftables.Set{Interval: true, KeyType: nftables.TypeIPAddr}, raw)
	if diff := cmp.Diff(ivs, got, addrs); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}

	ps := Set{Name: "pod-addrs", KeyType: KeyIfnameAddr4.Name, KeyLen: KeyIfnameAddr4.Bytes, Concat: true, Elems: []Elem{
		{Iface: "reef0123456789a", From: addr("10.244.0.5"), To: addr("10.244.0.5")},
		{Iface: "reefbbbbbbbbbbb", From: addr("10.244.0.6"), To: addr("10.244.0.6")},
	}}
	got = decodeElems(&nftables.Set{Concatenation: true, KeyType: KeyIfnameAddr4}, encodeElems(ps, ps.Elems))
	if diff := cmp.Diff(ps.Elems, got, addrs); diff != "" {
		t.Errorf("pod elements (-want +got):\n%s", diff)
	}
	if k := encodeElems(ps, ps.Elems[:1])[0].Key; len(k) != 20 || string(k[:16]) != "reef0123456789a\x00" {
		t.Errorf("pod key %q, want 16 bytes of NUL-padded name then 4 of address", k)
	}

	ps6 := Set{Name: "pod-addrs", KeyType: KeyIfnameAddr6.Name, KeyLen: KeyIfnameAddr6.Bytes, Concat: true, Elems: []Elem{
		{Iface: "reef0123456789a", From: addr("fd00:10:244::5"), To: addr("fd00:10:244::5")},
		{Iface: "reefbbbbbbbbbbb", From: addr("fd00:10:244::6"), To: addr("fd00:10:244::6")},
	}}
	got = decodeElems(&nftables.Set{Concatenation: true, KeyType: KeyIfnameAddr6}, encodeElems(ps6, ps6.Elems))
	if diff := cmp.Diff(ps6.Elems, got, addrs); diff != "" {
		t.Errorf("IPv6 pod elements (-want +got):\n%s", diff)
	}
	if k := encodeElems(ps6, ps6.Elems[:1])[0].Key; len(k) != 32 || string(k[:16]) != "reef0123456789a\x00" {
		t.Errorf("IPv6 pod key %q, want 16 bytes of NUL-padded name then 16 of address", k)
	}
}
