package blocksim

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
)

// TestKeysFollowTableSort: count merges two announcements sorted by
// blockproto.Table.Sort, so its keys must compare in that order, for IPv4
// and IPv6 alike, or it would count a kept announcement as a withdrawal
// and a new one.
func TestKeysFollowTableSort(t *testing.T) {
	addrs := []string{"10.0.0.2", "10.0.0.10", "9.255.255.255", "192.168.0.1", "fd00::1", "::ffff:10.0.0.1", "10.0.1.1"}
	blocks := []string{"10.244.0.64/26", "10.244.0.0/26", "10.244.0.0/24", "9.0.0.0/8", "fd00::40/122", "::ffff:10.244.0.0/122", "10.245.0.0/26"}
	var tbl blockproto.Table
	for i, a := range addrs {
		n := blockproto.Node{Addr: netip.MustParseAddr(a), Inc: uint32(len(addrs) - i)}
		b := netip.MustParsePrefix(blocks[i])
		tbl.Records = append(tbl.Records, blockproto.Record{Node: n})
		tbl.Claims = append(tbl.Claims, blockproto.Claim{Block: b, Owner: n, State: blockproto.Pending})
		tbl.Grants = append(tbl.Grants, blockproto.Grant{Block: b, Voter: n, To: n})
		tbl.Forgets = append(tbl.Forgets, blockproto.Forget{Node: n})
		tbl.Seen = append(tbl.Seen, blockproto.Seen{Node: n})
	}
	tbl.Sort()
	if !sortedBy(tbl.Records, recordKey, cmpAddr) || !sortedBy(tbl.Claims, claimKey, cmpPrefix) || !sortedBy(tbl.Grants, grantKey, cmpPrefix) ||
		!sortedBy(tbl.Forgets, forgetKey, cmpNode) || !sortedBy(tbl.Seen, seenKey, cmpNode) {
		t.Fatalf("blockproto.Table.Sort and the keys of count disagree: %+v", tbl)
	}
}

// sortedBy reports whether s is in strictly increasing order of key, as
// a sorted table of distinct keys is.
func sortedBy[T, K any](s []T, key func(T) K, cmpK func(K, K) int) bool {
	for i := 1; i < len(s); i++ {
		if cmpK(key(s[i-1]), key(s[i])) >= 0 {
			return false
		}
	}
	return true
}
