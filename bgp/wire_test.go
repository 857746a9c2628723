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

var (
	// Two pools of each family, with different block sizes.
	testPools = []Pool{{netip.MustParsePrefix("10.244.0.0/16"), 26}, {netip.MustParsePrefix("10.250.0.0/24"), 28},
		{netip.MustParsePrefix("fd00:10:244::/56"), 122}, {netip.MustParsePrefix("fd00:10:250::/120"), 124}}
	nodeA  = netip.MustParseAddr("192.168.77.11")
	nodeB  = netip.MustParseAddr("192.168.77.12")
	nodeC  = netip.MustParseAddr("192.168.77.13")
	block  = netip.MustParsePrefix("10.244.3.64/26")
	block6 = netip.MustParsePrefix("fd00:10:244::40/122")
)

const testASN = 64512

// cmpOpts compare netip values by ==, as go-cmp cannot see inside them.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func testRecord() blockproto.Record {
	return blockproto.Record{Node: blockproto.Node{Addr: nodeA, Inc: 0xdeadbeef}, Born: 1_790_000_000,
		VoterHash: 0x01020304, Voters: []netip.Addr{nodeA, nodeB, nodeC}}
}

func testClaim() blockproto.Claim {
	return blockproto.Claim{Block: block, Owner: blockproto.Node{Addr: nodeA, Inc: 7}, State: blockproto.Pending, VoterHash: 0x01020304}
}

func testGrant() blockproto.Grant {
	return blockproto.Grant{Block: block, Voter: blockproto.Node{Addr: nodeB, Inc: 8}, To: blockproto.Node{Addr: nodeA, Inc: 7}, VoterHash: 0x01020304}
}

func testClaim6() blockproto.Claim {
	c := testClaim()
	c.Block = block6
	return c
}

func testGrant6() blockproto.Grant {
	g := testGrant()
	g.Block = block6
	return g
}

func testForget() blockproto.Forget {
	return blockproto.Forget{Node: blockproto.Node{Addr: nodeC, Inc: 0xc0a84d0d}}
}

func must(rt VPNRoute, err error) VPNRoute {
	if err != nil {
		panic(err)
	}
	return rt
}

// decodeOne decodes rt as it comes in the family it goes in.
func decodeOne(rt VPNRoute) (blockproto.Table, error) { return decodeIn(rt.AFI(), rt) }

func decodeIn(afi AFI, rt VPNRoute) (blockproto.Table, error) {
	var t blockproto.Table
	err := DecodeVPN(testASN, testPools, afi, rt.RD, rt.Prefix, rt.Communities, &t)
	return t, err
}

func TestVPNRoundTrip(t *testing.T) {
	rec := testRecord()
	unsorted := rec
	unsorted.Voters = []netip.Addr{nodeC, nodeA, nodeB, nodeA} // goes out normalised
	noVoters := rec
	noVoters.Voters = nil
	withPreds := rec
	withPreds.Predecessors = []uint32{3, 0xfeedface}
	// Grants of the second pool of each family.
	grant28, grant124 := testGrant(), testGrant()
	grant28.Block, grant124.Block = netip.MustParsePrefix("10.250.0.240/28"), netip.MustParsePrefix("fd00:10:250::f0/124")
	type roundTrip struct {
		name   string
		route  VPNRoute
		afi    AFI
		rd     string
		prefix string
		want   blockproto.Table
	}
	seen := blockproto.Seen{Node: testForget().Node}
	seen6 := blockproto.Seen{Node: seen.Node, Addr6: netip.MustParseAddr("2001:db8:77::13")}
	cases := []roundTrip{
		{"record", must(EncodeRecord(testASN, rec)), AFIIPv4, "192.168.77.11:1", "192.168.77.11/32", blockproto.Table{Records: []blockproto.Record{rec}}},
		{"record, voters unsorted", must(EncodeRecord(testASN, unsorted)), AFIIPv4, "192.168.77.11:1", "192.168.77.11/32", blockproto.Table{Records: []blockproto.Record{rec}}},
		{"record, no voters", must(EncodeRecord(testASN, noVoters)), AFIIPv4, "192.168.77.11:1", "192.168.77.11/32", blockproto.Table{Records: []blockproto.Record{noVoters}}},
		{"grant", must(EncodeGrant(testASN, testGrant())), AFIIPv4, "192.168.77.12:3", "10.244.3.64/26", blockproto.Table{Grants: []blockproto.Grant{testGrant()}}},
		{"grant, IPv6", must(EncodeGrant(testASN, testGrant6())), AFIIPv6, "192.168.77.12:3", "fd00:10:244::40/122", blockproto.Table{Grants: []blockproto.Grant{testGrant6()}}},
		{"grant of a /28 block", must(EncodeGrant(testASN, grant28)), AFIIPv4, "192.168.77.12:3", "10.250.0.240/28", blockproto.Table{Grants: []blockproto.Grant{grant28}}},
		{"grant of a /124 block", must(EncodeGrant(testASN, grant124)), AFIIPv6, "192.168.77.12:3", "fd00:10:250::f0/124", blockproto.Table{Grants: []blockproto.Grant{grant124}}},
		{"forget", must(EncodeForget(testASN, testForget())), AFIIPv4, "192.168.77.13:4", "192.168.77.13/32", blockproto.Table{Forgets: []blockproto.Forget{testForget()}}},
		{"record with earlier incarnations", must(EncodeRecord(testASN, withPreds)), AFIIPv4, "192.168.77.11:1", "192.168.77.11/32", blockproto.Table{Records: []blockproto.Record{withPreds}}},
		{"seen", must(EncodeSeen(testASN, seen)), AFIIPv4, "192.168.77.13:5", "192.168.77.13/32", blockproto.Table{Seen: []blockproto.Seen{seen}}},
		{"seen, with the IPv6 address its record announced", must(EncodeSeen(testASN, seen6)), AFIIPv4, "192.168.77.13:5", "192.168.77.13/32", blockproto.Table{Seen: []blockproto.Seen{seen6}}},
	}
	for _, st := range []blockproto.ClaimState{blockproto.Pending, blockproto.Confirmed, blockproto.Released} {
		c, c6 := testClaim(), testClaim6()
		c.State, c6.State = st, st
		cases = append(cases,
			roundTrip{"claim " + st.String(), must(EncodeClaim(testASN, c)), AFIIPv4, "192.168.77.11:2", "10.244.3.64/26", blockproto.Table{Claims: []blockproto.Claim{c}}},
			roundTrip{"claim " + st.String() + ", IPv6", must(EncodeClaim(testASN, c6)), AFIIPv6, "192.168.77.11:2", "fd00:10:244::40/122", blockproto.Table{Claims: []blockproto.Claim{c6}}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.route.RD.String(); got != tc.rd {
				t.Errorf("RD %s, want %s", got, tc.rd)
			}
			if got := tc.route.Prefix.String(); got != tc.prefix {
				t.Errorf("prefix %s, want %s", got, tc.prefix)
			}
			if got := tc.route.AFI(); got != tc.afi {
				t.Errorf("family %s, want %s", got, tc.afi)
			}
			got, err := decodeOne(tc.route)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// The exact communities of each kind: the contract with other reef
// versions.
func TestVPNCommunities(t *testing.T) {
	lc := func(d1, d2 uint32) LargeCommunity { return LargeCommunity{testASN, d1, d2} }
	cases := []struct {
		name string
		rt   VPNRoute
		want []LargeCommunity
	}{
		{"record", must(EncodeRecord(testASN, testRecord())), []LargeCommunity{lc(100, 0), lc(110, 1), lc(111, 0xdeadbeef), lc(112, 0x01020304), lc(113, 1_790_000_000),
			lc(114, addrUint(nodeA)), lc(114, addrUint(nodeB)), lc(114, addrUint(nodeC))}},
		{"claim", must(EncodeClaim(testASN, testClaim())), []LargeCommunity{lc(100, 0), lc(110, 2), lc(111, 7), lc(112, 0x01020304), lc(115, 1)}},
		{"grant", must(EncodeGrant(testASN, testGrant())), []LargeCommunity{lc(100, 0), lc(110, 3), lc(111, 8), lc(112, 0x01020304), lc(116, addrUint(nodeA)), lc(117, 7)}},
		// An IPv6 block changes the prefix and the family, nothing else.
		{"claim, IPv6", must(EncodeClaim(testASN, testClaim6())), []LargeCommunity{lc(100, 0), lc(110, 2), lc(111, 7), lc(112, 0x01020304), lc(115, 1)}},
		{"grant, IPv6", must(EncodeGrant(testASN, testGrant6())), []LargeCommunity{lc(100, 0), lc(110, 3), lc(111, 8), lc(112, 0x01020304), lc(116, addrUint(nodeA)), lc(117, 7)}},
		{"forget", must(EncodeForget(testASN, testForget())), []LargeCommunity{lc(100, 0), lc(110, 4), lc(111, 0xc0a84d0d)}},
		{"seen", must(EncodeSeen(testASN, blockproto.Seen{Node: testForget().Node})), []LargeCommunity{lc(100, 0), lc(110, 5), lc(111, 0xc0a84d0d)}},
		{"seen, with an IPv6 address", must(EncodeSeen(testASN, blockproto.Seen{Node: testForget().Node, Addr6: netip.MustParseAddr("fd76:6e::c")})),
			[]LargeCommunity{lc(100, 0), lc(110, 5), lc(111, 0xc0a84d0d), lc(119, 0xfd76006e), lc(120, 0), lc(121, 0), lc(122, 12)}},
		{"record with earlier incarnations", must(EncodeRecord(testASN, blockproto.Record{Node: blockproto.Node{Addr: nodeA, Inc: 9}, Born: 1, VoterHash: 2, Predecessors: []uint32{3, 4}})),
			[]LargeCommunity{lc(100, 0), lc(110, 1), lc(111, 9), lc(112, 2), lc(113, 1), lc(118, 3), lc(118, 4)}},
	}
	for _, tc := range cases {
		if !slices.Equal(tc.rt.Communities, tc.want) {
			t.Errorf("%s: communities %v, want %v", tc.name, tc.rt.Communities, tc.want)
		}
	}
	for _, b := range []netip.Prefix{block, block6} {
		if got, want := EncodeUnicast(testASN, UnicastBlock{Block: b, Owner: blockproto.Node{Addr: nodeA, Inc: 7}}), []LargeCommunity{lc(100, 0), lc(111, 7)}; !slices.Equal(got, want) {
			t.Errorf("unicast %s: communities %v, want %v", b, got, want)
		}
	}
}

func TestEncodeRefusesIPv6(t *testing.T) {
	v6 := netip.MustParseAddr("2001:db8::1")
	r := testRecord()
	r.Node.Addr = v6
	g := testGrant()
	g.To.Addr = v6
	r2 := testRecord()
	r2.Voters = append(r2.Voters, v6)
	for name, err := range map[string]error{
		"record":       second(EncodeRecord(testASN, r)),
		"record voter": second(EncodeRecord(testASN, r2)),
		"grantee":      second(EncodeGrant(testASN, g)),
	} {
		if err == nil {
			t.Errorf("%s: encoded an IPv6 node address", name)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Mutations of the communities of a good route.
func without(lcs []LargeCommunity, d1 uint32) []LargeCommunity {
	return slices.DeleteFunc(slices.Clone(lcs), func(lc LargeCommunity) bool { return lc.ASN == testASN && lc.Data1 == d1 })
}

func with(lcs []LargeCommunity, extra ...LargeCommunity) []LargeCommunity {
	return append(slices.Clone(lcs), extra...)
}

func set(lcs []LargeCommunity, d1, d2 uint32) []LargeCommunity {
	return with(without(lcs, d1), LargeCommunity{testASN, d1, d2})
}

func TestDecodeVPNDrops(t *testing.T) {
	rec := must(EncodeRecord(testASN, testRecord()))
	claim := must(EncodeClaim(testASN, testClaim()))
	grant := must(EncodeGrant(testASN, testGrant()))
	forget := must(EncodeForget(testASN, testForget()))
	seen := must(EncodeSeen(testASN, blockproto.Seen{Node: testForget().Node}))
	claim6 := must(EncodeClaim(testASN, testClaim6()))
	grant6 := must(EncodeGrant(testASN, testGrant6()))
	route := func(base VPNRoute, f func(*VPNRoute)) VPNRoute {
		base.Communities = slices.Clone(base.Communities)
		f(&base)
		return base
	}
	lcs := func(base VPNRoute, lcs []LargeCommunity) VPNRoute {
		return route(base, func(r *VPNRoute) { r.Communities = lcs })
	}
	prefix := func(base VPNRoute, p string) VPNRoute {
		return route(base, func(r *VPNRoute) { r.Prefix = netip.MustParsePrefix(p) })
	}
	rdAddr := func(base VPNRoute, a string) VPNRoute {
		return route(base, func(r *VPNRoute) { r.RD.Addr = netip.MustParseAddr(a) })
	}
	other := func(base VPNRoute) []LargeCommunity {
		var out []LargeCommunity
		for _, lc := range base.Communities {
			out = append(out, LargeCommunity{65000, lc.Data1, lc.Data2})
		}
		return out
	}
	pod := addrUint(netip.MustParseAddr("10.244.9.9"))
	cases := []struct {
		name  string
		route VPNRoute
		want  string
	}{
		// The route distinguisher.
		{"RD type 0", route(claim, func(r *VPNRoute) { r.RD = RD{Type: 0} }), "RD type 0:10.244.3.64/26: route distinguisher of type 0, not 1"},
		{"RD type 2", route(claim, func(r *VPNRoute) { r.RD = RD{Type: 2} }), "of type 2, not 1"},
		{"RD number 0", route(claim, func(r *VPNRoute) { r.RD.Number = 0 }), "192.168.77.11:0:10.244.3.64/26: route distinguisher number 0 is not a reef kind"},
		{"RD number 6", route(claim, func(r *VPNRoute) { r.RD.Number = 6 }), "number 6 is not a reef kind"},
		{"seen with a voter hash", route(seen, func(r *VPNRoute) { r.Communities = append(r.Communities, LargeCommunity{testASN, 112, 1}) }), "community 64512:112:1 does not belong on it"},
		{"seen of a /31", prefix(seen, "192.168.77.12/31"), "a seen incarnation's prefix must be a /32"},
		{"seen prefix and incarnation differ", prefix(seen, "192.168.77.14/32"), "names incarnation c0a84d0e by its prefix but c0a84d0d by its community"},
		{"record names itself as earlier", route(rec, func(r *VPNRoute) { r.Communities = append(r.Communities, LargeCommunity{testASN, 118, 0xdeadbeef}) }), "names its own incarnation deadbeef as an earlier one"},
		{"RD address unspecified", rdAddr(claim, "0.0.0.0"), "node 0.0.0.0 is not a unicast IPv4 address"},
		{"RD address loopback", rdAddr(claim, "127.0.0.1"), "node 127.0.0.1 is not a unicast IPv4 address"},
		{"RD address multicast", rdAddr(grant, "224.0.0.5"), "node 224.0.0.5 is not a unicast"},
		{"RD address broadcast", rdAddr(forget, "255.255.255.255"), "node 255.255.255.255 is not a unicast"},
		{"RD address a pod's", rdAddr(claim, "10.244.9.9"), "node 10.244.9.9 is a pod address (pool 10.244.0.0/16)"},

		// Communities common to all.
		{"no reef community", lcs(claim, without(claim.Communities, lcMarker)), "no reef community 64512:100:0"},
		{"reef community not 0", lcs(claim, set(claim.Communities, lcMarker, 1)), "reef community is 64512:100:1"},
		{"only another AS's communities", lcs(claim, other(claim)), "no reef community"},
		{"no kind", lcs(grant, without(grant.Communities, lcKind)), "community 64512:110:* missing"},
		{"kind not the RD's", lcs(claim, set(claim.Communities, lcKind, 3)), "kind community 64512:110:3 does not match the RD's 2 (claim)"},
		{"kind twice", lcs(claim, with(claim.Communities, LargeCommunity{testASN, lcKind, 3})), "community 64512:110:* twice, with 2 and 3"},
		{"incarnation twice", lcs(forget, with(forget.Communities, LargeCommunity{testASN, lcInc, 1})), "64512:111:* twice"},
		{"an old claim's community", lcs(claim, with(claim.Communities, LargeCommunity{testASN, 103, 1})), "community 64512:103:1 does not belong on it"},
		{"an unknown reef community", lcs(grant, with(grant.Communities, LargeCommunity{testASN, 199, 1})), "64512:199:1 does not belong"},

		// Records.
		{"record without incarnation", lcs(rec, without(rec.Communities, lcInc)), "64512:111:* missing"},
		{"record without voter hash", lcs(rec, without(rec.Communities, lcVoterHash)), "64512:112:* missing"},
		{"record without birth", lcs(rec, without(rec.Communities, lcBorn)), "64512:113:* missing"},
		{"record born twice", lcs(rec, with(rec.Communities, LargeCommunity{testASN, lcBorn, 1})), "64512:113:* twice"},
		{"record with a claim state", lcs(rec, with(rec.Communities, LargeCommunity{testASN, lcState, 1})), "64512:115:1 does not belong"},
		{"record of another address", prefix(rec, "192.168.77.12/32"), "a record's prefix must be 192.168.77.11/32"},
		{"record not a /32", prefix(rec, "192.168.77.0/24"), "a record's prefix must be 192.168.77.11/32"},
		{"record with a pod voter", lcs(rec, with(rec.Communities, LargeCommunity{testASN, lcVoter, pod})), "voter 10.244.9.9 is a pod address"},
		{"record with voter 0.0.0.0", lcs(rec, with(rec.Communities, LargeCommunity{testASN, lcVoter, 0})), "voter 0.0.0.0 is not a unicast"},

		// Claims.
		{"claim without incarnation", lcs(claim, without(claim.Communities, lcInc)), "64512:111:* missing"},
		{"claim without voter hash", lcs(claim, without(claim.Communities, lcVoterHash)), "64512:112:* missing"},
		{"claim without state", lcs(claim, without(claim.Communities, lcState)), "64512:115:* missing"},
		{"claim state 0", lcs(claim, set(claim.Communities, lcState, 0)), "unknown claim state 0"},
		{"claim state 4", lcs(claim, set(claim.Communities, lcState, 4)), "unknown claim state 4"},
		{"claim state 257", lcs(claim, set(claim.Communities, lcState, 257)), "unknown claim state 257"},
		{"claim with a voter", lcs(claim, with(claim.Communities, LargeCommunity{testASN, lcVoter, addrUint(nodeB)})), "64512:114:"},
		{"claim with a grantee", lcs(claim, with(claim.Communities, LargeCommunity{testASN, lcGrantee, addrUint(nodeB)})), "64512:116:"},
		{"claim of the default route", prefix(claim, "0.0.0.0/0"), "0.0.0.0/0: outside every pool"},
		{"claim of a node address", prefix(claim, "192.168.77.12/32"), "outside every pool"},
		{"claim outside the pools", prefix(claim, "10.99.0.0/26"), "outside every pool"},
		{"claim of a /32 inside a block", prefix(claim, "10.244.3.70/32"), "inside pool 10.244.0.0/16 but not a /26 block"},
		{"claim of the whole pool", prefix(claim, "10.244.0.0/16"), "not a /26 block"},
		{"claim of the wrong block size", prefix(claim, "10.250.0.0/26"), "not a /28 block"},
		{"claim with host bits", prefix(claim, "10.244.3.65/26"), "host bits set"},
		{"claim of IPv6 outside the pools", prefix(claim, "2001:db8::/64"), "outside every pool"},

		// Grants.
		{"grant without incarnation", lcs(grant, without(grant.Communities, lcInc)), "64512:111:* missing"},
		{"grant without voter hash", lcs(grant, without(grant.Communities, lcVoterHash)), "64512:112:* missing"},
		{"grant without grantee", lcs(grant, without(grant.Communities, lcGrantee)), "64512:116:* missing"},
		{"grant without grantee incarnation", lcs(grant, without(grant.Communities, lcGranteeInc)), "64512:117:* missing"},
		{"grant to two", lcs(grant, with(grant.Communities, LargeCommunity{testASN, lcGrantee, addrUint(nodeC)})), "64512:116:* twice"},
		{"grant with a birth", lcs(grant, with(grant.Communities, LargeCommunity{testASN, lcBorn, 1})), "64512:113:1 does not belong"},
		{"grant to a pod address", lcs(grant, set(grant.Communities, lcGrantee, pod)), "grantee 10.244.9.9 is a pod address"},
		{"grant to 0.0.0.0", lcs(grant, set(grant.Communities, lcGrantee, 0)), "grantee 0.0.0.0 is not a unicast"},
		{"grant outside the pools", prefix(grant, "10.99.0.0/26"), "outside every pool"},
		{"grant of the wrong block size", prefix(grant, "10.244.3.0/24"), "not a /26 block"},

		// Forgets.
		{"forget without incarnation", lcs(forget, without(forget.Communities, lcInc)), "64512:111:* missing"},
		{"forget with a voter hash", lcs(forget, with(forget.Communities, LargeCommunity{testASN, lcVoterHash, 1})), "64512:112:1 does not belong"},
		{"forget not a /32", prefix(forget, "192.168.77.0/24"), "a forget's prefix must be a /32"},
		{"forget of another incarnation", prefix(forget, "192.168.77.14/32"), "forgets incarnation c0a84d0e by its prefix but c0a84d0d by its community"},
	}
	// The families: each path comes in the family named.
	familyCases := []struct {
		name  string
		afi   AFI
		route VPNRoute
		want  string
	}{
		// IPv6 blocks: VPN-IPv6, an IPv6 pool, that pool's block size.
		{"IPv6 claim of the default route", AFIIPv6, prefix(claim6, "::/0"), "::/0: outside every pool"},
		{"IPv6 claim outside the pools", AFIIPv6, prefix(claim6, "fd00:10:245::/122"), "outside every pool"},
		{"IPv6 claim of a /128 inside a block", AFIIPv6, prefix(claim6, "fd00:10:244::41/128"), "inside pool fd00:10:244::/56 but not a /122 block"},
		{"IPv6 claim of a /120", AFIIPv6, prefix(claim6, "fd00:10:244::/120"), "not a /122 block"},
		{"IPv6 claim of the whole pool", AFIIPv6, prefix(claim6, "fd00:10:244::/56"), "not a /122 block"},
		{"IPv6 claim of the other pool's block size", AFIIPv6, prefix(claim6, "fd00:10:250::/122"), "inside pool fd00:10:250::/120 but not a /124 block"},
		{"IPv6 claim with an IPv4 pool's block size", AFIIPv6, prefix(claim6, "fd00:10:244::/26"), "outside every pool"},
		{"IPv6 claim with host bits", AFIIPv6, prefix(claim6, "fd00:10:244::41/122"), "host bits set"},
		// The protocol uses the first 2^32 blocks of the /56; the last of them is fd00:10:244::3f:ffff:ffc0/122.
		{"IPv6 claim past the blocks the protocol uses", AFIIPv6, prefix(claim6, "fd00:10:244:ff::/122"),
			"past the 4294967296 blocks of pool fd00:10:244::/56 the protocol uses (the last is fd00:10:244::3f:ffff:ffc0/122)"},
		{"IPv6 claim of the next block after them", AFIIPv6, prefix(claim6, "fd00:10:244::40:0:0/122"), "past the 4294967296 blocks"},
		{"IPv6 grant outside the pools", AFIIPv6, prefix(grant6, "2001:db8::40/122"), "outside every pool"},
		{"IPv6 grant of the wrong block size", AFIIPv6, prefix(grant6, "fd00:10:244::/64"), "not a /122 block"},
		{"IPv6 grant to a pod address", AFIIPv6, lcs(grant6, set(grant6.Communities, lcGrantee, pod)), "grantee 10.244.9.9 is a pod address"},
		{"IPv6 claim by an IPv6 RD address", AFIIPv6, rdAddr(claim6, "fd00::1"), "node fd00::1 is not a unicast IPv4 address"},
		{"IPv4-mapped claim", AFIIPv6, prefix(claim6, "::ffff:10.244.3.64/122"), "IPv4-mapped prefix in VPN-IPv6"},
		{"IPv4-mapped grant", AFIIPv6, prefix(grant6, "::ffff:10.244.3.64/122"), "IPv4-mapped prefix in VPN-IPv6"},
		{"IPv4-mapped claim in VPN-IPv4", AFIIPv4, prefix(claim6, "::ffff:10.244.3.64/122"), "IPv4-mapped prefix in VPN-IPv4"},

		// Each family carries its own.
		{"IPv4 claim in VPN-IPv6", AFIIPv6, claim, "prefix of the other family in VPN-IPv6"},
		{"IPv4 grant in VPN-IPv6", AFIIPv6, grant, "prefix of the other family in VPN-IPv6"},
		{"IPv6 claim in VPN-IPv4", AFIIPv4, claim6, "prefix of the other family in VPN-IPv4"},
		{"IPv6 grant in VPN-IPv4", AFIIPv4, grant6, "prefix of the other family in VPN-IPv4"},
		{"record in VPN-IPv6", AFIIPv6, rec, "prefix of the other family in VPN-IPv6"},
		{"record of an IPv6 /128 in VPN-IPv6", AFIIPv6, prefix(rec, "fd00::1/128"), "a record travels in VPN-IPv4, not VPN-IPv6"},
		{"forget of an IPv6 /128 in VPN-IPv6", AFIIPv6, prefix(forget, "::c0a8:4d0d/128"), "a forget travels in VPN-IPv4, not VPN-IPv6"},
		{"seen of an IPv6 /128 in VPN-IPv6", AFIIPv6, prefix(seen, "::c0a8:4d0d/128"), "a seen travels in VPN-IPv4, not VPN-IPv6"},
		{"claim in AFI 3", 3, claim, "AFI 3 is not a family of reef's"},
		{"claim in AFI 0", 0, claim, "AFI 0 is not a family of reef's"},
	}
	check := func(t *testing.T, afi AFI, route VPNRoute, want string) {
		t.Helper()
		got, err := decodeIn(afi, route)
		if err == nil || !errors.Is(err, ErrNotReef) || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeVPN = %v, want ErrNotReef mentioning %q", err, want)
		}
		if got.Len() != 0 {
			t.Errorf("a dropped path left %+v in the table", got)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.route.AFI(), tc.route, tc.want) })
	}
	for _, tc := range familyCases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.afi, tc.route, tc.want) })
	}
}

// What DecodeVPN lets through: other ASes' communities, data1 values
// outside reef's, exact repeats (RFC 8092 asks receivers to drop them).
func TestDecodeVPNTolerates(t *testing.T) {
	claim := must(EncodeClaim(testASN, testClaim()))
	rec := must(EncodeRecord(testASN, testRecord()))
	cases := []struct {
		name  string
		route VPNRoute
		want  blockproto.Table
	}{
		{"another AS's reef-like communities", VPNRoute{claim.RD, claim.Prefix, with(claim.Communities, LargeCommunity{65000, lcState, 9}, LargeCommunity{65000, 103, 1})},
			blockproto.Table{Claims: []blockproto.Claim{testClaim()}}},
		{"our AS outside 100..199", VPNRoute{claim.RD, claim.Prefix, with(claim.Communities, LargeCommunity{testASN, 1, 2}, LargeCommunity{testASN, 200, 0})},
			blockproto.Table{Claims: []blockproto.Claim{testClaim()}}},
		{"a repeated community", VPNRoute{claim.RD, claim.Prefix, with(claim.Communities, LargeCommunity{testASN, lcState, 1}, LargeCommunity{testASN, lcMarker, 0})},
			blockproto.Table{Claims: []blockproto.Claim{testClaim()}}},
		{"a repeated voter", VPNRoute{rec.RD, rec.Prefix, with(rec.Communities, LargeCommunity{testASN, lcVoter, addrUint(nodeB)})},
			blockproto.Table{Records: []blockproto.Record{testRecord()}}},
		{"voters in any order", VPNRoute{rec.RD, rec.Prefix, append(without(rec.Communities, lcVoter),
			LargeCommunity{testASN, lcVoter, addrUint(nodeC)}, LargeCommunity{testASN, lcVoter, addrUint(nodeA)}, LargeCommunity{testASN, lcVoter, addrUint(nodeB)})},
			blockproto.Table{Records: []blockproto.Record{testRecord()}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeOne(tc.route)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnicastRoundTrip(t *testing.T) {
	b := UnicastBlock{Block: block, Owner: blockproto.Node{Addr: nodeA, Inc: 0xfeedface}}
	got, err := DecodeUnicast(testASN, testPools, b.Block, b.Owner.Addr, EncodeUnicast(testASN, b))
	if err != nil {
		t.Fatal(err)
	}
	if got != b {
		t.Errorf("round trip: %+v, want %+v", got, b)
	}
}

func TestDecodeUnicastDrops(t *testing.T) {
	good := EncodeUnicast(testASN, UnicastBlock{Block: block, Owner: blockproto.Node{Addr: nodeA, Inc: 7}})
	cases := []struct {
		name    string
		prefix  string
		nextHop netip.Addr
		lcs     []LargeCommunity
		want    string
	}{
		{"default route", "0.0.0.0/0", nodeA, good, "0.0.0.0/0: outside every pool"},
		{"node address", "192.168.77.12/32", nodeA, good, "outside every pool"},
		{"outside the pools", "10.99.0.0/26", nodeA, good, "outside every pool"},
		{"a /32 inside a block", "10.244.3.70/32", nodeA, good, "not a /26 block"},
		{"the whole pool", "10.244.0.0/16", nodeA, good, "not a /26 block"},
		{"wrong block size for the pool", "10.250.0.0/26", nodeA, good, "not a /28 block"},
		{"host bits", "10.244.3.65/26", nodeA, good, "host bits set"},
		{"IPv6", "2001:db8::/64", nodeA, good, "not IPv4"},
		{"an IPv6 block of a pool", "fd00:10:244::40/122", nodeA, good, "not IPv4"},
		{"IPv4-mapped", "::ffff:10.244.3.64/122", nodeA, good, "not IPv4"},
		{"no reef community", "10.244.3.64/26", nodeA, without(good, lcMarker), "no reef community"},
		{"another AS's communities", "10.244.3.64/26", nodeA, []LargeCommunity{{65000, lcMarker, 0}, {65000, lcInc, 7}}, "no reef community"},
		{"no incarnation", "10.244.3.64/26", nodeA, without(good, lcInc), "64512:111:* missing"},
		{"incarnation twice", "10.244.3.64/26", nodeA, with(good, LargeCommunity{testASN, lcInc, 8}), "twice"},
		{"an old claim", "10.244.3.64/26", nodeA, with(good, LargeCommunity{testASN, 101, 1_790_000_000}, LargeCommunity{testASN, 104, 1}), "64512:101:1790000000 does not belong"},
		{"a claim state", "10.244.3.64/26", nodeA, with(good, LargeCommunity{testASN, lcState, 2}), "64512:115:2 does not belong"},
		{"next hop a pod address", "10.244.3.64/26", netip.MustParseAddr("10.244.9.9"), good, "next hop (owner) 10.244.9.9 is a pod address"},
		{"no next hop", "10.244.3.64/26", netip.Addr{}, good, "is not a unicast IPv4 address"},
		{"next hop IPv6", "10.244.3.64/26", netip.MustParseAddr("2001:db8::1"), good, "is not a unicast IPv4 address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeUnicast(testASN, testPools, netip.MustParsePrefix(tc.prefix), tc.nextHop, tc.lcs)
			if err == nil || !errors.Is(err, ErrNotReef) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeUnicast = %v, want ErrNotReef mentioning %q", err, tc.want)
			}
		})
	}
}

// What a node checks of its own IPv6 unicast path before it sends it to
// its external peers: an IPv6 block of a pool with that pool's block size,
// reef's communities, and its own global unicast IPv6 address as next hop.
func TestCheckUnicast6(t *testing.T) {
	nh := netip.MustParseAddr("2001:db8:77::11")
	good := EncodeUnicast(testASN, UnicastBlock{Block: block6, Owner: blockproto.Node{Addr: nodeA, Inc: 7}})
	if err := checkUnicast6(testASN, testPools, block6, nh, good); err != nil {
		t.Errorf("a good path: %v", err)
	}
	cases := []struct {
		name    string
		prefix  string
		nextHop string
		lcs     []LargeCommunity
		want    string
	}{
		{"an IPv4 block", "10.244.3.64/26", "2001:db8:77::11", good, "not IPv6"},
		{"IPv4-mapped", "::ffff:10.244.3.64/122", "2001:db8:77::11", good, "IPv4-mapped"},
		{"outside the pools", "2001:db8::/122", "2001:db8:77::11", good, "outside every pool"},
		{"the wrong block size", "fd00:10:244::/120", "2001:db8:77::11", good, "not a /122 block"},
		{"the other pool's block size", "fd00:10:250::/122", "2001:db8:77::11", good, "not a /124 block"},
		{"host bits", "fd00:10:244::41/122", "2001:db8:77::11", good, "host bits set"},
		{"no reef community", "fd00:10:244::40/122", "2001:db8:77::11", without(good, lcMarker), "no reef community"},
		{"no incarnation", "fd00:10:244::40/122", "2001:db8:77::11", without(good, lcInc), "64512:111:* missing"},
		{"next hop IPv4", "fd00:10:244::40/122", "192.168.77.11", good, "not a global unicast IPv6 address"},
		{"next hop IPv4-mapped", "fd00:10:244::40/122", "::ffff:192.168.77.11", good, "not a global unicast IPv6 address"},
		{"next hop link-local", "fd00:10:244::40/122", "fe80::1", good, "not a global unicast IPv6 address"},
		{"next hop a pod address", "fd00:10:244::40/122", "fd00:10:244::9", good, "is a pod address (pool fd00:10:244::/56)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkUnicast6(testASN, testPools, netip.MustParsePrefix(tc.prefix), netip.MustParseAddr(tc.nextHop), tc.lcs)
			if err == nil || !errors.Is(err, ErrNotReef) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkUnicast6 = %v, want ErrNotReef mentioning %q", err, tc.want)
			}
		})
	}
}

// Whatever a peer sends, in either family, DecodeVPN neither panics nor
// accepts what it would not announce the same way itself.
func FuzzDecodeVPN(f *testing.F) {
	for _, rt := range []VPNRoute{must(EncodeRecord(testASN, testRecord())), must(EncodeClaim(testASN, testClaim())),
		must(EncodeGrant(testASN, testGrant())), must(EncodeForget(testASN, testForget())), must(EncodeSeen(testASN, blockproto.Seen{Node: testForget().Node})),
		must(EncodeClaim(testASN, testClaim6())), must(EncodeGrant(testASN, testGrant6())), must(EncodeRecord(testASN, testRecord6()))} {
		var lcs []byte
		for _, lc := range rt.Communities {
			lcs = append(lcs, byte(lc.Data1-lcReefFirst), byte(lc.Data2>>24), byte(lc.Data2>>16), byte(lc.Data2>>8), byte(lc.Data2))
		}
		a := rt.RD.Addr.As4()
		f.Add(uint16(rt.AFI()), rt.RD.Type, a[:], rt.RD.Number, rt.Prefix.Addr().AsSlice(), uint8(rt.Prefix.Bits()), lcs)
	}
	f.Fuzz(func(t *testing.T, afi uint16, typ uint16, rdAddr []byte, num uint16, pAddr []byte, bits uint8, lcBytes []byte) {
		if len(rdAddr) != 4 || len(pAddr) != 4 && len(pAddr) != 16 || int(bits) > 8*len(pAddr) {
			return
		}
		rd := RD{Type: typ, Addr: netip.AddrFrom4([4]byte(rdAddr)), Number: num}
		addr, _ := netip.AddrFromSlice(pAddr)
		prefix := netip.PrefixFrom(addr, int(bits))
		var lcs []LargeCommunity
		for ; len(lcBytes) >= 5; lcBytes = lcBytes[5:] {
			lcs = append(lcs, LargeCommunity{testASN, lcReefFirst + uint32(lcBytes[0]%24), uint32(lcBytes[1])<<24 | uint32(lcBytes[2])<<16 | uint32(lcBytes[3])<<8 | uint32(lcBytes[4])})
		}
		var tbl blockproto.Table
		if err := DecodeVPN(testASN, testPools, AFI(afi), rd, prefix, lcs, &tbl); err != nil {
			if !errors.Is(err, ErrNotReef) || tbl.Len() != 0 {
				t.Fatalf("error %v, table %+v", err, tbl)
			}
			return
		}
		if tbl.Len() != 1 {
			t.Fatalf("accepted into %d entries", tbl.Len())
		}
		var again VPNRoute
		var err error
		switch {
		case len(tbl.Records) == 1:
			again, err = EncodeRecord(testASN, tbl.Records[0])
		case len(tbl.Claims) == 1:
			again, err = EncodeClaim(testASN, tbl.Claims[0])
		case len(tbl.Grants) == 1:
			again, err = EncodeGrant(testASN, tbl.Grants[0])
		case len(tbl.Seen) == 1:
			again, err = EncodeSeen(testASN, tbl.Seen[0])
		default:
			again, err = EncodeForget(testASN, tbl.Forgets[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		if again.RD != rd || again.Prefix != prefix || again.AFI() != AFI(afi) {
			t.Fatalf("accepted %s:%s in %s, which encodes back as %s in %s", rd, prefix, AFI(afi), again, again.AFI())
		}
		back, err := decodeOne(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tbl, back, cmpOpts...); diff != "" {
			t.Fatalf("re-encoded (-first +again):\n%s", diff)
		}
	})
}

// DecodeVPN allocates nothing for a valid claim or grant but the entry in
// the table, and for a record its voter list: LearnedTable runs it over
// thousands of paths on every pass.
func BenchmarkDecodeVPN(b *testing.B) {
	for _, rt := range []VPNRoute{must(EncodeRecord(testASN, testRecord())), must(EncodeClaim(testASN, testClaim())),
		must(EncodeGrant(testASN, testGrant())), must(EncodeForget(testASN, testForget())), must(EncodeClaim(testASN, testClaim6()))} {
		b.Run(Kind(rt.RD.Number).String()+"/"+rt.AFI().String(), func(b *testing.B) {
			t := blockproto.Table{Records: make([]blockproto.Record, 0, 1), Claims: make([]blockproto.Claim, 0, 1),
				Grants: make([]blockproto.Grant, 0, 1), Forgets: make([]blockproto.Forget, 0, 1)}
			b.ReportAllocs()
			for b.Loop() {
				t.Records, t.Claims, t.Grants, t.Forgets = t.Records[:0], t.Claims[:0], t.Grants[:0], t.Forgets[:0]
				if err := DecodeVPN(testASN, testPools, rt.AFI(), rt.RD, rt.Prefix, rt.Communities, &t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
