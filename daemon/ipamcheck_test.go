package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/store"
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

// TestReleaseReplyDualStack: the reply's Ip is one address (the first),
// not the two joined, and its text names both.
func TestReleaseReplyDualStack(t *testing.T) {
	ep := store.Endpoint{Handle: "k8s-pod-network.c1", PodNamespace: "default", PodName: "web", ContainerID: "c1",
		IP: netip.MustParseAddr("10.244.0.5"), Second: store.Assignment{IP: netip.MustParseAddr("fd00:10:244::5")}}
	rep := releaseReply(ep, false)
	if rep.GetIp() != "10.244.0.5" {
		t.Errorf("Ip %q, want the first address 10.244.0.5", rep.GetIp())
	}
	if w := rep.GetWhat(); !strings.Contains(w, "released 10.244.0.5 and fd00:10:244::5 of pod default/web") || !strings.Contains(w, "both addresses are free") {
		t.Errorf("What %q, want both addresses named", w)
	}
	if w := releaseReply(store.Endpoint{IP: netip.MustParseAddr("10.244.0.6"), PodName: "p"}, true).GetWhat(); !strings.Contains(w, "released 10.244.0.6 of") ||
		!strings.Contains(w, "the address is free (forced") {
		t.Errorf("one address, forced: %q", w)
	}
}
