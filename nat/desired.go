// Package nat is reef's tables other than NetworkPolicy's, built on the
// nftables engine (package nft): the masquerade of pod traffic that leaves
// every pool (natOutgoing, table ip reef), the filter that keeps the node
// from answering a pod's ARP for the pod's own address (table arp reef),
// and the pods' hostPorts (table inet reef-hostport, hostport.go). reef
// keeps them in tables of its own, next to whatever else has tables on the
// node (kube-proxy, a firewall); it reads and writes only those.
//
// Desired computes the tables from the pools and the pods, purely; the
// engine diffs them against the kernel and applies the difference. The
// pools' sets and the pods' sets change by element, never by rewriting a
// rule. CNI ADD and DEL add and remove one pod's elements on their own
// (Kernel.AddPod, Kernel.DelPod).
package nat

import (
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/reefcni/reef/nat/nft"
)

// TableName is the name of reef's table in every family it uses. The name
// is reef's mark: a table of another name is never read or written.
const TableName = "reef"

// Ours reports whether a table is one of package nat's: named TableName
// (ip reef, arp reef), or table inet reef-hostport. NetworkPolicy's table
// inet reef has the name too, and is package policy's to write.
func Ours(id nft.TableID) bool { return id.Name == TableName || id == HostPortTableID }

// Names of reef's sets and chains.
const (
	SetAllPools      = "all-pools"  // every pool: traffic to these is never masqueraded
	SetMasqPools     = "masq-pools" // the pools with natOutgoing on
	SetPodAddrs      = "pod-addrs"  // node-side veth . pod address, one per pod
	ChainPostrouting = "postrouting"
	ChainOutput      = "output"
)

// MasqPriority is the postrouting chain's priority: srcnat + 10, after the
// chains of kube-proxy's nftables mode (srcnat), so that a Service's own
// masquerade decision comes first.
const MasqPriority nftables.ChainPriority = 110

// nfARPOut is the arp family's output hook (NF_ARP_OUT): replies the node
// sends. Not NF_INET_LOCAL_OUT, whose number differs.
const nfARPOut nftables.ChainHook = 1

// Rule comments, shown by `nft list ruleset`.
const (
	MasqComment = "reef natOutgoing: pods of these pools reach beyond every pool with the node's address"
	ARPComment  = "reef: never answer a pod's ARP for the pod's own address"
)

// Family is an IP family of reef's NAT table. IPv4 is the one built today.
// IPv6 takes another value (table ip6 reef, ipv6_addr sets, the ip6 header
// offsets) and, in place of the ARP filter, one on neighbour
// advertisements.
type Family struct {
	Table     nftables.TableFamily
	AddrType  nftables.SetDatatype
	SrcOffset uint32 // of the source address in the network header
	DstOffset uint32
}

// IPv4 is table ip reef.
var IPv4 = Family{Table: nftables.TableFamilyIPv4, AddrType: nftables.TypeIPAddr, SrcOffset: 12, DstOffset: 16}

func (f Family) addrLen() uint32 { return f.AddrType.Bytes }

func (f Family) holds(a netip.Addr) bool {
	return (f.addrLen() == 4 && a.Is4()) || (f.addrLen() == 16 && a.Is6() && !a.Is4In6())
}

// NATTableID is the ID of reef's NAT table in family f.
func NATTableID(f Family) nft.TableID { return nft.TableID{Family: f.Table, Name: TableName} }

// ARPTableID is the ID of reef's ARP-filter table.
var ARPTableID = nft.TableID{Family: nftables.TableFamilyARP, Name: TableName}

// Pool is what the dataplane needs of a pool.
type Pool struct {
	CIDR        netip.Prefix
	NATOutgoing bool
}

// Pod is one pod as reef's tables see it: its node-side veth and address
// (its ARP-filter element) and its hostPorts.
type Pod struct {
	Veth  string
	IP    netip.Addr
	Ports []HostPort
}

// Desired returns reef's tables for the pools and pods of family f: the
// NAT table, and for IPv4 the ARP filter and table inet reef-hostport,
// which holds both families (IPv4 is the first family; an IPv6 call adds
// only its NAT table). Pools and pods of another family are left out of
// the NAT table and the ARP filter, as are pods without a veth.
func Desired(f Family, pools []Pool, pods []Pod) []nft.Table {
	tables := []nft.Table{NATTable(f, pools)}
	if f.Table == nftables.TableFamilyIPv4 {
		var hp []HostPortPod
		for _, p := range pods {
			if len(p.Ports) > 0 {
				hp = append(hp, HostPortPod{IP: p.IP, Ports: p.Ports})
			}
		}
		tables = append(tables, ARPTable(pods), HostPortTable(hp))
	}
	return tables
}

// IDs returns the IDs of tables.
func IDs(tables []nft.Table) []nft.TableID {
	ids := make([]nft.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.ID
	}
	return ids
}

// NATTable is table <f> reef: the pool sets and the masquerade rule
//
//	ip saddr @masq-pools ip daddr != @all-pools counter masquerade fully-random
//
// Pod-to-pod traffic, on this node or another, is never masqueraded.
func NATTable(f Family, pools []Pool) nft.Table {
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
		ID: NATTableID(f),
		Sets: []nft.Set{
			poolSet(SetAllPools, "reef: every pool; traffic to these keeps its pod source address", all),
			poolSet(SetMasqPools, "reef: pools with natOutgoing", masq),
		},
		Chains: []nft.Chain{{
			Name: ChainPostrouting, Type: nftables.ChainTypeNAT, Hooked: true,
			Hook: *nftables.ChainHookPostrouting, Priority: MasqPriority, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: MasqComment, Exprs: []expr.Any{
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

// ARPTable is table arp reef: the pods' set and the rule
//
//	arp operation reply oifname . arp saddr ip @pod-addrs counter drop
//
// With proxy_arp on a pod's veth, the node answers the pod's ARP for any
// address it routes through another interface. Should the pod's /32 route
// be missing for a moment (before ADD writes it, or deleted by hand), a
// pod probing its own address would get the node's MAC back and take its
// address for a duplicate.
func ARPTable(pods []Pod) nft.Table {
	elems := make([]nft.Elem, 0, len(pods))
	for _, p := range pods {
		if p.Veth == "" || len(p.Veth) >= nft.IfNameSize || !p.IP.Is4() {
			continue
		}
		elems = append(elems, nft.Elem{Iface: p.Veth, From: p.IP, To: p.IP})
	}
	slices.SortFunc(elems, nft.CompareElems)
	elems = slices.Compact(elems)
	return nft.Table{
		ID: ARPTableID,
		Sets: []nft.Set{{Name: SetPodAddrs, KeyType: nft.KeyIfnameAddr4.Name, KeyLen: nft.KeyIfnameAddr4.Bytes, Concat: true,
			Comment: "reef: node-side veth . pod address, one per pod", Elems: elems}},
		Chains: []nft.Chain{{
			Name: ChainOutput, Type: nftables.ChainTypeFilter, Hooked: true,
			Hook: nfARPOut, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: ARPComment, Exprs: []expr.Any{
				// arp operation reply (2): payload at offset 6 of the ARP header
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 6, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 2}},
				// oifname (16 bytes) in register 1, the sender's IPv4
				// address (offset 14 for Ethernet/IPv4) right after it: the
				// concatenation the set's key is.
				&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
				&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: 14, Len: 4},
				&expr.Lookup{SourceRegister: 1, SetName: SetPodAddrs},
				&expr.Counter{},
				&expr.Verdict{Kind: expr.VerdictDrop},
			}}},
		}},
	}
}
