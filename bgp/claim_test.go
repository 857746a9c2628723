package bgp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	testPools = []Pool{{netip.MustParsePrefix("10.244.0.0/16"), 26}, {netip.MustParsePrefix("10.250.0.0/24"), 28}}
	nodeA     = netip.MustParseAddr("192.168.77.11")
	nodeB     = netip.MustParseAddr("192.168.77.12")
	t0        = time.Date(2026, 11, 29, 12, 0, 0, 123e6, time.UTC)
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, st := range []ClaimState{Pending, Confirmed, Forgotten} {
		c := Claim{Block: netip.MustParsePrefix("10.244.3.64/26"), Owner: nodeA, Claimed: t0, State: st}
		got, err := Decode(64512, testPools, c.Block, nodeA, Encode(64512, c))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
			cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", st, diff)
		}
	}
}

func TestDecodeDrops(t *testing.T) {
	good := Claim{Block: netip.MustParsePrefix("10.244.3.64/26"), Owner: nodeA, Claimed: t0, State: Confirmed}
	lcs := Encode(64512, good)
	without := func(data1 uint32) []LargeCommunity {
		var out []LargeCommunity
		for _, lc := range lcs {
			if lc.Data1 != data1 {
				out = append(out, lc)
			}
		}
		return out
	}
	with := func(extra ...LargeCommunity) []LargeCommunity {
		return append(append([]LargeCommunity{}, lcs...), extra...)
	}
	cases := []struct {
		name    string
		prefix  string
		nextHop netip.Addr
		lcs     []LargeCommunity
		want    string
	}{
		{"default route", "0.0.0.0/0", nodeA, lcs, "outside every pool"},
		{"node address", "192.168.77.12/32", nodeA, lcs, "outside every pool"},
		{"outside the pools", "10.99.0.0/26", nodeA, lcs, "outside every pool"},
		{"a /32 inside a block", "10.244.3.70/32", nodeA, lcs, "not a /26 block"},
		{"the whole pool", "10.244.0.0/16", nodeA, lcs, "not a /26 block"},
		{"wrong block size for the pool", "10.250.0.0/26", nodeA, lcs, "not a /28 block"},
		{"no reef community", "10.244.3.64/26", nodeA, without(lcMarker), "no reef community"},
		{"another AS's communities", "10.244.3.64/26", nodeA, Encode(65000, good), "no reef community"},
		{"no owner", "10.244.3.64/26", nodeA, without(lcOwner), "103"},
		{"no state", "10.244.3.64/26", nodeA, without(lcState), "104"},
		{"next hop is not the owner", "10.244.3.64/26", nodeB, lcs, "next hop 192.168.77.12 is not the owner"},
		{"duplicate community", "10.244.3.64/26", nodeA, with(LargeCommunity{64512, lcOwner, 1}), "twice"},
		{"bad millis", "10.244.3.64/26", nodeA, append(without(lcMillis), LargeCommunity{64512, lcMillis, 5000}), "out of range"},
		{"unknown state", "10.244.3.64/26", nodeA, append(without(lcState), LargeCommunity{64512, lcState, 9}), "unknown claim state"},
		{"owner is a pod address", "10.244.3.64/26", netip.MustParseAddr("10.244.9.9"),
			append(without(lcOwner), LargeCommunity{64512, lcOwner, addrUint(netip.MustParseAddr("10.244.9.9"))}), "pod address"},
		{"IPv6", "2001:db8::/64", nodeA, lcs, "not IPv4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(64512, testPools, netip.MustParsePrefix(tc.prefix), tc.nextHop, tc.lcs)
			if err == nil || !errors.Is(err, ErrNotReef) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want ErrNotReef mentioning %q", err, tc.want)
			}
		})
	}
	// A tombstone may come from anyone: its next hop is the announcer's.
	tomb := good
	tomb.State = Forgotten
	if _, err := Decode(64512, testPools, tomb.Block, nodeB, Encode(64512, tomb)); err != nil {
		t.Errorf("tombstone from a third node: %v", err)
	}
}

func TestBeats(t *testing.T) {
	a := Claim{Owner: nodeA, Claimed: t0}
	b := Claim{Owner: nodeB, Claimed: t0}
	later := Claim{Owner: nodeA, Claimed: t0.Add(time.Millisecond)}
	if !a.Beats(b) || b.Beats(a) {
		t.Error("same time: the lower owner address must win, on both sides")
	}
	if !b.Beats(later) || later.Beats(b) {
		t.Error("the earlier claim must win whatever the addresses")
	}
	if a.Beats(a) {
		t.Error("a claim must not beat itself")
	}
}
