// Package masq is reef's masquerade table (natOutgoing): table inet
// reef-nat, the pools' sets of both address families and the rules that
// masquerade pod traffic leaving every pool. It is built, purely, from the
// pools; package nat puts it beside reef's other tables and the engine
// (package nft) applies it. The pools' sets change by element, never by
// rewriting a rule.
//
// One inet table holds both families, as table inet reef-hostport and
// NetworkPolicy's table inet reef do: an IPv6 pool adds elements to it,
// not a table of its own. Before, the masquerade was table ip reef and,
// with an IPv6 pool, table ip6 reef (OldTableIDs); package nat deletes
// those in the batch that creates this one.
package masq

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

// TableID is table inet reef-nat. It is a table of its own, next to
// NetworkPolicy's table inet reef and table inet reef-hostport, so that
// each has one writer; "nat" because it holds the source NAT of pod
// traffic, as reef-hostport holds the destination NAT of hostPorts.
var TableID = nft.TableID{Family: nftables.TableFamilyINet, Name: nft.TableName + "-nat"}

// OldTableIDs are the masquerade tables of reef before table inet
// reef-nat: table ip reef and table ip6 reef, one per family, with the
// same sets and rule. They are reef's own (package nat's mark is their
// name in those families), and retired: deleted where found.
var OldTableIDs = []nft.TableID{
	{Family: nftables.TableFamilyIPv4, Name: nft.TableName},
	{Family: nftables.TableFamilyIPv6, Name: nft.TableName},
}

// Names of the table's sets, by family, and its chain.
const (
	SetAllPools4     = "all-pools4"  // every IPv4 pool: traffic to these is never masqueraded
	SetMasqPools4    = "masq-pools4" // the IPv4 pools with natOutgoing on
	SetAllPools6     = "all-pools6"
	SetMasqPools6    = "masq-pools6"
	ChainPostrouting = "postrouting"
)

// Priority is the postrouting chain's priority: srcnat + 10, after the
// chains of kube-proxy's nftables mode (srcnat), so that a Service's own
// masquerade decision comes first.
const Priority nftables.ChainPriority = 110

// Comment is the masquerade rules' comment, shown by `nft list ruleset`.
const Comment = "reef natOutgoing: pods of these pools reach beyond every pool with the node's address"

// family is what differs between the IPv4 and IPv6 halves of the table.
type family struct {
	nfproto         byte
	addr            nftables.SetDatatype
	src, dst        uint32 // offsets of the addresses in the network header
	allSet, masqSet string
}

var families = []family{
	{unix.NFPROTO_IPV4, nftables.TypeIPAddr, 12, 16, SetAllPools4, SetMasqPools4},
	{unix.NFPROTO_IPV6, nftables.TypeIP6Addr, 8, 24, SetAllPools6, SetMasqPools6},
}

func (f family) holds(a netip.Addr) bool {
	return (f.nfproto == unix.NFPROTO_IPV4 && a.Is4()) || (f.nfproto == unix.NFPROTO_IPV6 && a.Is6() && !a.Is4In6())
}

// Pool is what the table needs of a pool.
type Pool struct {
	CIDR        netip.Prefix
	NATOutgoing bool
}

// Table is table inet reef-nat: the pool sets of each family and one
// masquerade rule per family
//
//	ip saddr @masq-pools4 ip daddr != @all-pools4 counter masquerade fully-random
//	ip6 saddr @masq-pools6 ip6 daddr != @all-pools6 counter masquerade fully-random
//
// Pod-to-pod traffic, on this node or another, is never masqueraded (the
// destination is in a pool: the exemption). A family without pools has
// its sets empty and its rule matches nothing. Sets and chains are sorted
// by name, as the kernel lists them.
func Table(pools []Pool) nft.Table {
	t := nft.Table{ID: TableID}
	post := nft.Chain{
		Name: ChainPostrouting, Type: nftables.ChainTypeNAT, Hooked: true,
		Hook: *nftables.ChainHookPostrouting, Priority: Priority, Policy: nftables.ChainPolicyAccept,
	}
	for _, f := range families {
		var all, masq []netip.Prefix
		for _, p := range pools {
			if !f.holds(p.CIDR.Addr()) {
				continue
			}
			all = append(all, p.CIDR)
			if p.NATOutgoing {
				masq = append(masq, p.CIDR)
			}
		}
		poolSet := func(name, comment string, ps []netip.Prefix) nft.Set {
			return nft.Set{Name: name, KeyType: f.addr.Name, KeyLen: f.addr.Bytes, Interval: true, Comment: comment, Elems: nft.Intervals(ps)}
		}
		t.Sets = append(t.Sets,
			poolSet(f.allSet, "reef: every pool; traffic to these keeps its pod source address", all),
			poolSet(f.masqSet, "reef: pools with natOutgoing", masq))
		post.Rules = append(post.Rules, nft.Rule{Comment: Comment, Exprs: []expr.Any{
			// The family first: in an inet table a rule sees both, and
			// the addresses are at other offsets in each.
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.src, Len: f.addr.Bytes},
			&expr.Lookup{SourceRegister: 1, SetName: f.masqSet},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.dst, Len: f.addr.Bytes},
			&expr.Lookup{SourceRegister: 1, SetName: f.allSet, Invert: true},
			&expr.Counter{},
			&expr.Masq{FullyRandom: true},
		}})
	}
	slices.SortFunc(t.Sets, func(a, b nft.Set) int { return strings.Compare(a.Name, b.Name) })
	t.Chains = []nft.Chain{post}
	return t
}
