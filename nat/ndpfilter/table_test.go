package ndpfilter

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/nat/nft"
)

var addr = netip.MustParseAddr

// TestTable: the set holds one element per IPv6 pod that can have one,
// sorted; the pods Check refuses are left out.
func TestTable(t *testing.T) {
	kept := []Pod{
		{Veth: "reefbbbbbbbbbbb", IP: addr("fd00:10:244::6")},
		{Veth: "reef0123456789a", IP: addr("fd00:10:244::5")},
		{Veth: "reef0123456789a", IP: addr("fd00:10:244::5")}, // twice
	}
	left := []Pod{
		{Veth: "", IP: addr("fd00:10:244::7")},                 // no veth (taken over by a newer sandbox)
		{Veth: "reefcccccccccccc", IP: addr("fd00:10:244::8")}, // 16 characters: no interface has such a name
		{Veth: "reefddddddddddd", IP: addr("10.244.0.8")},      // IPv4: the ARP filter's
		{Veth: "reefeeeeeeeeeee", IP: addr("::ffff:10.244.0.9")},
	}
	tbl := Table(append(kept, left...))
	if want := (nft.TableID{Family: nftables.TableFamilyIPv6, Name: "reef-ndp"}); tbl.ID != want {
		t.Fatalf("table %s, want %s", tbl.ID, want)
	}
	if len(tbl.Sets) != 1 || tbl.Sets[0].Name != SetPodAddrs || tbl.Sets[0].KeyLen != 32 {
		t.Fatalf("sets %+v, want %s of 32-byte keys", tbl.Sets, SetPodAddrs)
	}
	want := []nft.Elem{
		{Iface: "reef0123456789a", From: addr("fd00:10:244::5"), To: addr("fd00:10:244::5")},
		{Iface: "reefbbbbbbbbbbb", From: addr("fd00:10:244::6"), To: addr("fd00:10:244::6")},
	}
	if !slices.Equal(tbl.Sets[0].Elems, want) {
		t.Errorf("pod-addrs %v, want %v", tbl.Sets[0].Elems, want)
	}
	if c := tbl.Chains[0]; c.Hook != *nftables.ChainHookOutput || c.Type != nftables.ChainTypeFilter {
		t.Errorf("chain %+v, want filter hook output", c)
	}
	for _, p := range kept {
		if err := p.Check(); err != nil {
			t.Errorf("Check(%+v): %v", p, err)
		}
		if e := Edit(p); e.Table != TableID || e.Set.Name != SetPodAddrs || len(e.Elems) != 1 || e.Elems[0].Iface != p.Veth {
			t.Errorf("Edit(%+v) = %+v", p, e)
		}
	}
	for _, p := range left {
		if p.Check() == nil {
			t.Errorf("Check(%+v) took a pod the table leaves out", p)
		}
	}
}
