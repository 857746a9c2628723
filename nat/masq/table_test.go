package masq

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func TestTable(t *testing.T) {
	tbl := Table([]Pool{
		{CIDR: pfx("10.244.0.0/16"), NATOutgoing: true},
		{CIDR: pfx("10.245.0.0/24"), NATOutgoing: false},
		{CIDR: pfx("10.244.3.0/24"), NATOutgoing: true}, // inside the first
		{CIDR: pfx("10.246.0.7/16"), NATOutgoing: true}, // not masked
		{CIDR: pfx("fd00:10:244::/56"), NATOutgoing: true},
		{CIDR: pfx("fd00:10:245::/64"), NATOutgoing: false},
	})
	if want := (nft.TableID{Family: nftables.TableFamilyINet, Name: "reef-nat"}); tbl.ID != want {
		t.Fatalf("table %s, want %s", tbl.ID, want)
	}
	var names []string
	sets := map[string][]nft.Elem{}
	for _, s := range tbl.Sets {
		names = append(names, s.Name)
		sets[s.Name] = s.Elems
	}
	if want := []string{"all-pools4", "all-pools6", "masq-pools4", "masq-pools6"}; !slices.Equal(names, want) {
		t.Fatalf("sets %v, want %v (sorted, as the kernel lists them)", names, want)
	}
	r := func(from, to string) nft.Elem { return nft.Elem{From: addr(from), To: addr(to)} }
	for _, c := range []struct {
		set  string
		want []nft.Elem
	}{
		{SetAllPools4, []nft.Elem{r("10.244.0.0", "10.244.255.255"), r("10.245.0.0", "10.245.0.255"), r("10.246.0.0", "10.246.255.255")}},
		{SetMasqPools4, []nft.Elem{r("10.244.0.0", "10.244.255.255"), r("10.246.0.0", "10.246.255.255")}},
		{SetAllPools6, []nft.Elem{r("fd00:10:244::", "fd00:10:244:ff:ffff:ffff:ffff:ffff"), r("fd00:10:245::", "fd00:10:245::ffff:ffff:ffff:ffff")}},
		{SetMasqPools6, []nft.Elem{r("fd00:10:244::", "fd00:10:244:ff:ffff:ffff:ffff:ffff")}},
	} {
		if !slices.Equal(sets[c.set], c.want) {
			t.Errorf("%s %v, want %v", c.set, sets[c.set], c.want)
		}
	}
	if len(tbl.Chains) != 1 {
		t.Fatalf("chains %+v, want postrouting alone", tbl.Chains)
	}
	c := tbl.Chains[0]
	if c.Priority != 110 || c.Hook != *nftables.ChainHookPostrouting || c.Type != nftables.ChainTypeNAT {
		t.Errorf("postrouting chain %+v, want nat hook postrouting priority srcnat+10", c)
	}
	// One rule per family, each guarded by its family (the addresses are
	// at other offsets in the other) and looking up its family's sets.
	if len(c.Rules) != 2 {
		t.Fatalf("%d rules, want one per family", len(c.Rules))
	}
	for i, want := range []struct {
		nfproto    byte
		masq, all  string
		addrLength uint32
	}{{unix.NFPROTO_IPV4, SetMasqPools4, SetAllPools4, 4}, {unix.NFPROTO_IPV6, SetMasqPools6, SetAllPools6, 16}} {
		ex := c.Rules[i].Exprs
		if m, ok := ex[0].(*expr.Meta); !ok || m.Key != expr.MetaKeyNFPROTO {
			t.Errorf("rule %d starts with %#v, want meta nfproto", i+1, ex[0])
		}
		if cmp, ok := ex[1].(*expr.Cmp); !ok || !slices.Equal(cmp.Data, []byte{want.nfproto}) {
			t.Errorf("rule %d compares %#v, want nfproto %d", i+1, ex[1], want.nfproto)
		}
		var lookups []string
		for _, e := range ex {
			switch e := e.(type) {
			case *expr.Lookup:
				lookups = append(lookups, e.SetName)
			case *expr.Payload:
				if e.Len != want.addrLength {
					t.Errorf("rule %d loads %d bytes of address, want %d", i+1, e.Len, want.addrLength)
				}
			}
		}
		if !slices.Equal(lookups, []string{want.masq, want.all}) {
			t.Errorf("rule %d looks up %v, want %s then %s", i+1, lookups, want.masq, want.all)
		}
	}
}

// TestTableNoPools: without pools of a family the table keeps its shape,
// its sets empty, so that an IPv6 pool added later adds elements, not sets
// or rules.
func TestTableNoPools(t *testing.T) {
	empty, v4 := Table(nil), Table([]Pool{{CIDR: pfx("10.244.0.0/16"), NATOutgoing: true}})
	if plan := nft.Diff([]nft.Table{v4}, []nft.Table{empty}); len(plan.Changes) != 2 || plan.Changes[0].Kind != nft.AddElems || plan.Changes[1].Kind != nft.AddElems {
		t.Errorf("from no pools to one: %+v, want two AddElems", plan.Changes)
	}
}
