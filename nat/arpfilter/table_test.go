package arpfilter

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/nat/nft"
)

var addr = netip.MustParseAddr

// TestTable: the set holds one element per pod that can have one, sorted;
// the pods Check refuses are left out.
func TestTable(t *testing.T) {
	kept := []Pod{
		{Veth: "reefbbbbbbbbbbb", IP: addr("10.244.0.6")},
		{Veth: "reef0123456789a", IP: addr("10.244.0.5")},
		{Veth: "reef0123456789a", IP: addr("10.244.0.5")}, // twice
	}
	left := []Pod{
		{Veth: "", IP: addr("10.244.0.7")},                 // no veth (taken over by a newer sandbox)
		{Veth: "reefcccccccccccc", IP: addr("10.244.0.8")}, // 16 characters: no interface has such a name
		{Veth: "reefddddddddddd", IP: addr("fd00::8")},     // not IPv4
	}
	tbl := Table(append(kept, left...))
	if want := (nft.TableID{Family: nftables.TableFamilyARP, Name: "reef"}); tbl.ID != want {
		t.Fatalf("table %s, want %s", tbl.ID, want)
	}
	if len(tbl.Sets) != 1 || tbl.Sets[0].Name != SetPodAddrs {
		t.Fatalf("sets %+v, want %s", tbl.Sets, SetPodAddrs)
	}
	want := []nft.Elem{
		{Iface: "reef0123456789a", From: addr("10.244.0.5"), To: addr("10.244.0.5")},
		{Iface: "reefbbbbbbbbbbb", From: addr("10.244.0.6"), To: addr("10.244.0.6")},
	}
	if !slices.Equal(tbl.Sets[0].Elems, want) {
		t.Errorf("pod-addrs %v, want %v", tbl.Sets[0].Elems, want)
	}
	if c := tbl.Chains[0]; c.Hook != 1 || c.Type != nftables.ChainTypeFilter {
		t.Errorf("arp chain %+v, want filter hook output (NF_ARP_OUT = 1)", c)
	}
	for _, p := range kept {
		if err := p.Check(); err != nil {
			t.Errorf("Check(%+v): %v", p, err)
		}
		if e := Edit(p); e.Table != TableID || e.Set.Name != SetPodAddrs || len(e.Elems) != 1 || e.Elems[0] != (nft.Elem{Iface: p.Veth, From: p.IP, To: p.IP}) {
			t.Errorf("Edit(%+v) = %+v", p, e)
		}
	}
	for _, p := range left {
		if p.Check() == nil {
			t.Errorf("Check(%+v) took a pod the table leaves out", p)
		}
	}
}
