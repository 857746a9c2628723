// Package arpfilter is reef's ARP filter: table arp reef, the set of the
// pods' node-side veth . address pairs and the rule that keeps the node
// from answering a pod's ARP for the pod's own address. The table is
// built, purely, from the pods; one pod's element is an edit of its own
// (Edit), which CNI ADD adds and DEL deletes through package nat.
package arpfilter

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/reefcni/reef/nat/nft"
)

// TableID is table arp reef.
var TableID = nft.TableID{Family: nftables.TableFamilyARP, Name: nft.TableName}

// Names of the table's set and chain.
const (
	SetPodAddrs = "pod-addrs" // node-side veth . pod address, one per pod
	ChainOutput = "output"
)

// Comment is the filter rule's comment, shown by `nft list ruleset`.
const Comment = "reef: never answer a pod's ARP for the pod's own address"

// nfARPOut is the arp family's output hook (NF_ARP_OUT): replies the node
// sends. Not NF_INET_LOCAL_OUT, whose number differs.
const nfARPOut nftables.ChainHook = 1

// Pod is one pod as the filter sees it: its node-side veth and address.
type Pod struct {
	Veth string
	IP   netip.Addr
}

// ok reports whether p can have an element: a veth name an interface can
// have, and an IPv4 address.
func (p Pod) ok() bool { return p.Veth != "" && len(p.Veth) < nft.IfNameSize && p.IP.Is4() }

// Check returns an error naming p if it cannot have an element.
func (p Pod) Check() error {
	if !p.ok() {
		return fmt.Errorf("pod %q . %s: want a veth name of 1-15 characters and an IPv4 address", p.Veth, p.IP)
	}
	return nil
}

func (p Pod) elem() nft.Elem { return nft.Elem{Iface: p.Veth, From: p.IP, To: p.IP} }

// Edit is p's element as an edit of the table's set: what ADD adds and DEL
// deletes, in a batch of its own. The caller checks p first (Check).
func Edit(p Pod) nft.ElemEdit {
	return nft.ElemEdit{Table: TableID, Set: Table(nil).Sets[0], Elems: []nft.Elem{p.elem()}}
}

// Table is table arp reef: the pods' set and the rule
//
//	arp operation reply oifname . arp saddr ip @pod-addrs counter drop
//
// With proxy_arp on a pod's veth, the node answers the pod's ARP for any
// address it routes through another interface. Should the pod's /32 route
// be missing for a moment (before ADD writes it, or deleted by hand), a
// pod probing its own address would get the node's MAC back and take its
// address for a duplicate. Pods that cannot have an element (Check) are
// left out.
func Table(pods []Pod) nft.Table {
	elems := make([]nft.Elem, 0, len(pods))
	for _, p := range pods {
		if !p.ok() {
			continue
		}
		elems = append(elems, p.elem())
	}
	slices.SortFunc(elems, nft.CompareElems)
	elems = slices.Compact(elems)
	return nft.Table{
		ID: TableID,
		Sets: []nft.Set{{Name: SetPodAddrs, KeyType: nft.KeyIfnameAddr4.Name, KeyLen: nft.KeyIfnameAddr4.Bytes, Concat: true,
			Comment: "reef: node-side veth . pod address, one per pod", Elems: elems}},
		Chains: []nft.Chain{{
			Name: ChainOutput, Type: nftables.ChainTypeFilter, Hooked: true,
			Hook: nfARPOut, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: Comment, Exprs: []expr.Any{
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
