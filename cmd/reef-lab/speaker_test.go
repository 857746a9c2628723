package main

import (
	"net/netip"
	"testing"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
)

// TestReefPathsPassTheImportFilter: what the speaker announces for
// bench-mesh's routes part is what a reef node accepts: one record, the
// confirmed claims and their unicast blocks, all through reef's own
// decoders.
func TestReefPathsPassTheImportFilter(t *testing.T) {
	id := netip.MustParseAddr("192.168.77.200")
	node := netip.MustParseAddr("192.168.77.11")
	pool := blockproto.Pool{CIDR: netip.MustParsePrefix("10.100.0.0/16"), BlockSize: 27}
	paths, err := reefPaths(64512, id, pool, 2000, []netip.Addr{node})
	if err != nil {
		t.Fatal(err)
	}
	pools := []bgp.Pool{{CIDR: pool.CIDR, BlockSize: pool.BlockSize}}
	var tbl blockproto.Table
	uc := 0
	for _, p := range paths {
		var lcs []bgp.LargeCommunity
		var nh netip.Addr
		for _, a := range p.Attrs {
			switch a := a.(type) {
			case *bgppkt.PathAttributeNextHop:
				nh = a.Value
			case *bgppkt.PathAttributeLargeCommunities:
				for _, v := range a.Values {
					lcs = append(lcs, bgp.LargeCommunity{ASN: v.ASN, Data1: v.LocalData1, Data2: v.LocalData2})
				}
			}
		}
		if nh != id {
			t.Fatalf("%s: next hop %s, want the speaker", p.Nlri, nh)
		}
		switch n := p.Nlri.(type) {
		case *bgppkt.LabeledVPNIPAddrPrefix:
			rd, ok := n.RD.(*bgppkt.RouteDistinguisherIPAddressAS)
			if !ok {
				t.Fatalf("%s: RD %T, want type 1", n, n.RD)
			}
			if err := bgp.DecodeVPN(64512, pools, bgp.AFIIPv4, bgp.RD{Type: 1, Addr: rd.Admin, Number: rd.Assigned}, n.Prefix, lcs, &tbl); err != nil {
				t.Fatal(err)
			}
		case *bgppkt.IPAddrPrefix:
			b, err := bgp.DecodeUnicast(64512, pools, n.Prefix, nh, lcs)
			if err != nil {
				t.Fatal(err)
			}
			if b.Owner.Addr != id {
				t.Fatalf("unicast %s owned by %s", b.Block, b.Owner)
			}
			uc++
		default:
			t.Fatalf("NLRI %T", p.Nlri)
		}
	}
	if len(tbl.Records) != 1 || len(tbl.Claims) != 2000 || uc != 2000 || len(tbl.Grants)+len(tbl.Forgets) != 0 {
		t.Fatalf("%d records, %d claims, %d unicast, %d grants, %d forgets", len(tbl.Records), len(tbl.Claims), uc, len(tbl.Grants), len(tbl.Forgets))
	}
	r := tbl.Records[0]
	if r.VoterHash != blockproto.VoterHash([]netip.Addr{node}) || len(r.Voters) != 1 || r.Voters[0] != node {
		t.Fatalf("record %+v: want the voters [%s]", r, node)
	}
	for _, c := range tbl.Claims {
		if c.State != blockproto.Confirmed || c.Owner != r.Node || c.VoterHash != r.VoterHash {
			t.Fatalf("claim %+v", c)
		}
	}
}
