package blockproto

import (
	"cmp"
	"net/netip"
	"testing"
)

// cmpPrefix orders as the general comparison does, IPv4 and IPv6 alike.
func TestCmpPrefixOrder(t *testing.T) {
	ps := []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/26"), netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("10.244.0.64/26"),
		netip.MustParsePrefix("10.244.255.192/26"), netip.MustParsePrefix("9.255.255.255/32"), netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("255.255.255.255/32"), netip.MustParsePrefix("fd00::/64"),
		netip.MustParsePrefix("::/0"), netip.MustParsePrefix("fd00::40/122"), netip.MustParsePrefix("::ffff:10.244.0.0/122"),
	}
	general := func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	}
	for _, a := range ps {
		for _, b := range ps {
			if got, want := cmpPrefix(a, b), general(a, b); got != want {
				t.Errorf("cmpPrefix(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
}
