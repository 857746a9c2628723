package daemon

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
)

func TestClaimedTwice(t *testing.T) {
	self := blockproto.Node{Addr: netip.MustParseAddr("192.168.77.11"), Inc: 1}
	other := blockproto.Node{Addr: netip.MustParseAddr("192.168.77.12"), Inc: 7}
	third := blockproto.Node{Addr: netip.MustParseAddr("192.168.77.13"), Inc: 3}
	a, b, c := netip.MustParsePrefix("10.244.0.0/26"), netip.MustParsePrefix("10.244.0.64/26"), netip.MustParsePrefix("10.244.0.128/26")
	claims := []blockproto.Claim{
		{Block: a, Owner: self, State: blockproto.Confirmed},  // this node's own, relayed back: once
		{Block: b, Owner: other, State: blockproto.Confirmed}, // also this node's: twice
		{Block: c, Owner: other, State: blockproto.Confirmed},
		{Block: c, Owner: third, State: blockproto.Pending}, // a pending claim is no conflict
	}
	got := claimedTwice(claims, []netip.Prefix{a, b}, self)
	if len(got) != 1 || got[0].block != b || len(got[0].owners) != 2 || got[0].owners[0] != self.String()+" (this node)" {
		t.Fatalf("claimedTwice: %+v", got)
	}
	claims = append(claims, blockproto.Claim{Block: c, Owner: third, State: blockproto.Confirmed})
	if got := claimedTwice(claims, []netip.Prefix{a, b}, self); len(got) != 2 || got[1].block != c {
		t.Errorf("two other nodes confirming one block: %+v", got)
	}
}
