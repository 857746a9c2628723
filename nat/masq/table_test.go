package masq

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/nat/nft"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func TestTable(t *testing.T) {
	tbl := Table(IPv4, []Pool{
		{CIDR: pfx("10.244.0.0/16"), NATOutgoing: true},
		{CIDR: pfx("10.245.0.0/24"), NATOutgoing: false},
		{CIDR: pfx("10.244.3.0/24"), NATOutgoing: true}, // inside the first
		{CIDR: pfx("10.246.0.7/16"), NATOutgoing: true}, // not masked
		{CIDR: pfx("fd00::/64"), NATOutgoing: true},     // an IPv6 pool has no place in table ip reef
	})
	if want := (nft.TableID{Family: nftables.TableFamilyIPv4, Name: "reef"}); tbl.ID != want {
		t.Fatalf("table %s, want %s", tbl.ID, want)
	}
	if len(tbl.Sets) != 2 || tbl.Sets[0].Name != SetAllPools || tbl.Sets[1].Name != SetMasqPools {
		t.Fatalf("sets %+v, want %s and %s", tbl.Sets, SetAllPools, SetMasqPools)
	}
	r := func(from, to string) nft.Elem { return nft.Elem{From: addr(from), To: addr(to)} }
	if want := []nft.Elem{r("10.244.0.0", "10.244.255.255"), r("10.245.0.0", "10.245.0.255"), r("10.246.0.0", "10.246.255.255")}; !slices.Equal(tbl.Sets[0].Elems, want) {
		t.Errorf("all-pools %v, want %v", tbl.Sets[0].Elems, want)
	}
	if want := []nft.Elem{r("10.244.0.0", "10.244.255.255"), r("10.246.0.0", "10.246.255.255")}; !slices.Equal(tbl.Sets[1].Elems, want) {
		t.Errorf("masq-pools %v, want %v", tbl.Sets[1].Elems, want)
	}
	if c := tbl.Chains[0]; c.Priority != 110 || c.Hook != *nftables.ChainHookPostrouting || c.Type != nftables.ChainTypeNAT {
		t.Errorf("postrouting chain %+v, want nat hook postrouting priority srcnat+10", c)
	}
}
