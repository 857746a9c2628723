// Package masq is reef's masquerade table (natOutgoing): table ip reef,
// the pools' sets and the rule that masquerades pod traffic leaving every
// pool. It is built, purely, from the pools; package nat puts it beside
// reef's other tables and the engine (package nft) applies it. The pools'
// sets change by element, never by rewriting the rule.
package masq

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/reefcni/reef/nat/nft"
)

// Names of the table's sets and chain.
const (
	SetAllPools      = "all-pools"  // every pool: traffic to these is never masqueraded
	SetMasqPools     = "masq-pools" // the pools with natOutgoing on
	ChainPostrouting = "postrouting"
)

// Priority is the postrouting chain's priority: srcnat + 10, after the
// chains of kube-proxy's nftables mode (srcnat), so that a Service's own
// masquerade decision comes first.
const Priority nftables.ChainPriority = 110

// Comment is the masquerade rule's comment, shown by `nft list ruleset`.
const Comment = "reef natOutgoing: pods of these pools reach beyond every pool with the node's address"

// Family is an IP family of the table: table ip reef or table ip6 reef,
// their address type and the offsets of the addresses in the header.
type Family struct {
	Table     nftables.TableFamily
	AddrType  nftables.SetDatatype
	SrcOffset uint32 // of the source address in the network header
	DstOffset uint32
}

// IPv4 is table ip reef.
var IPv4 = Family{Table: nftables.TableFamilyIPv4, AddrType: nftables.TypeIPAddr, SrcOffset: 12, DstOffset: 16}

// IPv6 is table ip6 reef.
var IPv6 = Family{Table: nftables.TableFamilyIPv6, AddrType: nftables.TypeIP6Addr, SrcOffset: 8, DstOffset: 24}

func (f Family) addrLen() uint32 { return f.AddrType.Bytes }

func (f Family) holds(a netip.Addr) bool {
	return (f.addrLen() == 4 && a.Is4()) || (f.addrLen() == 16 && a.Is6() && !a.Is4In6())
}

// TableID is the ID of the table in family f.
func TableID(f Family) nft.TableID { return nft.TableID{Family: f.Table, Name: nft.TableName} }

// Pool is what the table needs of a pool.
type Pool struct {
	CIDR        netip.Prefix
	NATOutgoing bool
}

// Table is table <f> reef: the pool sets and the masquerade rule
//
//	ip saddr @masq-pools ip daddr != @all-pools counter masquerade fully-random
//
// Pod-to-pod traffic, on this node or another, is never masqueraded.
// Pools of another family are left out.
func Table(f Family, pools []Pool) nft.Table {
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
		return nft.Set{Name: name, KeyType: f.AddrType.Name, KeyLen: f.addrLen(), Interval: true, Comment: comment, Elems: nft.Intervals(ps)}
	}
	return nft.Table{
		ID: TableID(f),
		Sets: []nft.Set{
			poolSet(SetAllPools, "reef: every pool; traffic to these keeps its pod source address", all),
			poolSet(SetMasqPools, "reef: pools with natOutgoing", masq),
		},
		Chains: []nft.Chain{{
			Name: ChainPostrouting, Type: nftables.ChainTypeNAT, Hooked: true,
			Hook: *nftables.ChainHookPostrouting, Priority: Priority, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: Comment, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.SrcOffset, Len: f.addrLen()},
				&expr.Lookup{SourceRegister: 1, SetName: SetMasqPools},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.DstOffset, Len: f.addrLen()},
				&expr.Lookup{SourceRegister: 1, SetName: SetAllPools, Invert: true},
				&expr.Counter{},
				&expr.Masq{FullyRandom: true},
			}}},
		}},
	}
}
