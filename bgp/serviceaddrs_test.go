package bgp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// A node with a mesh peer C and an external peer, and CIDRs of Service
// addresses of both families:
//
//   - the router learns the addresses SetServiceAddresses is given, each a
//     /32 next hop the node, and loses one when a later call leaves it
//     out; a call with the same set sends nothing new; the IPv6 address is
//     withheld (the node has no IPv6 address) and one outside the CIDRs is
//     refused;
//   - C gets the node's block and never a Service address;
//   - a Service address C sends the node (C, without external peers, has
//     no export statement to stop it) is not taken into the node's table:
//     never believed from a peer. (Without the import statements it is.)
func TestServiceAddressesToExternalPeersOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	cidr4, cidr6 := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:e::/64")
	_, _, a, c, router := nodeWithRouter(t, Config{ServiceAddressCIDRs: []netip.Prefix{cidr4, cidr6}}, nil)
	addrA := a.cfg.RouterID
	s7, s8, s6, outside := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("198.51.100.8"), netip.MustParseAddr("2001:db8:e::7"), netip.MustParseAddr("192.0.2.1")

	withheld, err := a.SetServiceAddresses([]netip.Addr{s7, s8, s6, outside, s7})
	if !slices.Equal(withheld, []netip.Addr{s6}) {
		t.Errorf("withheld %v, want [%s]: no IPv6 next hop", withheld, s6)
	}
	if err == nil || !strings.Contains(err.Error(), "announce Service address 192.0.2.1: outside the CIDRs of Service addresses") {
		t.Errorf("SetServiceAddresses with an address outside the CIDRs: %v", err)
	}
	if got := a.ServiceAddresses(); !slices.Equal(got, []netip.Addr{s7, s8}) {
		t.Errorf("ServiceAddresses() = %v, want [%s %s]", got, s7, s8)
	}
	ownA := netip.MustParsePrefix("10.244.7.0/26")
	if err := a.AnnounceTable(blockproto.Table{Records: []blockproto.Record{testRecord()}}, []UnicastBlock{{Block: ownA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	want := map[netip.Prefix]string{
		ownA:                     learnedLine(addrA, nodeA, nil, mustEncodeUnicast(t, nodeA)),
		netip.PrefixFrom(s7, 32): learnedLine(addrA, addrA, nil, nil),
		netip.PrefixFrom(s8, 32): learnedLine(addrA, addrA, nil, nil),
	}
	eventually(t, "the router learns A's block and both Service addresses", func() string {
		return cmp.Diff(want, routerLearned(router, bgppkt.RF_IPv4_UC))
	})

	// The same set again: nothing changes; then s7 goes.
	if _, err := a.SetServiceAddresses([]netip.Addr{s8, s7}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetServiceAddresses([]netip.Addr{s8}); err != nil {
		t.Fatal(err)
	}
	delete(want, netip.PrefixFrom(s7, 32))
	eventually(t, "the router loses the Service address withdrawn", func() string {
		return cmp.Diff(want, routerLearned(router, bgppkt.RF_IPv4_UC))
	})
	if got := a.ServiceAddresses(); !slices.Equal(got, []netip.Addr{s8}) {
		t.Errorf("ServiceAddresses() = %v, want [%s]", got, s8)
	}

	// C sends A a Service address, then a block: once the block is in,
	// the address came before it and was dropped on import.
	bad, err := unicastPath(netip.PrefixFrom(netip.MustParseAddr("198.51.100.9"), 32), c.cfg.RouterID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{bad}}); err != nil {
		t.Fatal(err)
	}
	ownC := netip.MustParsePrefix("10.244.9.0/26")
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	fromC := func() []netip.Prefix {
		var out []netip.Prefix
		_ = a.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
			for _, p := range ps {
				if p.PeerAddress == c.cfg.RouterID {
					out = append(out, n.(*bgppkt.IPAddrPrefix).Prefix)
				}
			}
		})
		return out
	}
	eventually(t, "A learns C's block", func() string {
		if got := fromC(); !slices.Contains(got, ownC) {
			return "A's paths from C: " + strings.Trim(strings.ReplaceAll(cmp.Diff([]netip.Prefix{ownC}, got, cmpOpts...), "\n", " "), " ")
		}
		return ""
	})
	if got := fromC(); !slices.Equal(got, []netip.Prefix{ownC}) {
		t.Errorf("A's paths from C: %v, want only C's block %s: a Service address was believed from a peer", got, ownC)
	}

	// C has A's block only (in unicast), which A announced after the
	// Service addresses.
	eventually(t, "C learns A's block and record only", func() string {
		counts, err := c.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if got := counts.Unicast; got != (PathCounts{Received: 1, Accepted: 1}) {
			return "C's unicast table: " + cmp.Diff(PathCounts{Received: 1, Accepted: 1}, got)
		}
		return ""
	})
	if c.Dropped() != 0 {
		t.Errorf("C dropped %d paths: A sent it what is not a block", c.Dropped())
	}
}

// A speaker without external peers announces no Service address: it has
// no export statement to keep them from the mesh.
func TestServiceAddressesNeedExternalPeers(t *testing.T) {
	sp := &Speaker{cfg: Config{ServiceAddressCIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}}
	if _, err := sp.SetServiceAddresses([]netip.Addr{netip.MustParseAddr("198.51.100.1")}); !errors.Is(err, ErrNoExternalPeers) {
		t.Errorf("SetServiceAddresses without external peers: %v, want ErrNoExternalPeers", err)
	}
}
