// Package ndpfilter is the IPv6 counterpart of the ARP filter: table ip6
// reef-ndp, the set of the IPv6 pods' node-side veth . address pairs and
// the rule that keeps the node from answering a pod's neighbour
// solicitation for the pod's own address. The table is built, purely,
// from the pods; one pod's element is an edit of its own (Edit), which CNI
// ADD adds and DEL deletes through package nat.
package ndpfilter

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

// TableID is table ip6 reef-ndp.
var TableID = nft.TableID{Family: nftables.TableFamilyIPv6, Name: "reef-ndp"}

// Names of the table's set and chain.
const (
	SetPodAddrs = "pod-addrs" // node-side veth . pod IPv6 address, one per IPv6 pod
	ChainOutput = "output"
)

// Comment is the filter rule's comment, shown by `nft list ruleset`.
const Comment = "reef: never answer a pod's neighbour solicitation for the pod's own address"

// icmpv6NeighborAdvert is the ICMPv6 type of a neighbour advertisement
// (RFC 4861, 4.4); its target address starts 8 bytes into the message.
const (
	icmpv6NeighborAdvert = 136
	naTargetOffset       = 8
)

// Pod is one pod as the filter sees it: its node-side veth and IPv6
// address.
type Pod struct {
	Veth string
	IP   netip.Addr
}

// ok reports whether p can have an element: a veth name an interface can
// have, and an IPv6 address (not an IPv4-mapped one).
func (p Pod) ok() bool {
	return p.Veth != "" && len(p.Veth) < nft.IfNameSize && p.IP.Is6() && !p.IP.Is4In6()
}

// Check returns an error naming p if it cannot have an element.
func (p Pod) Check() error {
	if !p.ok() {
		return fmt.Errorf("pod %q . %s: want a veth name of 1-15 characters and an IPv6 address", p.Veth, p.IP)
	}
	return nil
}

func (p Pod) elem() nft.Elem { return nft.Elem{Iface: p.Veth, From: p.IP, To: p.IP} }

// Edit is p's element as an edit of the table's set: what ADD adds and DEL
// deletes, in a batch of its own. The caller checks p first (Check).
func Edit(p Pod) nft.ElemEdit {
	return nft.ElemEdit{Table: TableID, Set: Table(nil).Sets[0], Elems: []nft.Elem{p.elem()}}
}

// Table is table ip6 reef-ndp: the pods' set and the rule
//
//	meta l4proto ipv6-icmp icmpv6 type nd-neighbor-advert
//	    oifname . <the advertisement's target> @pod-addrs counter drop
//
// in the output hook, which every neighbour advertisement the node sends
// passes. A pod's gateway is the node-side veth's own link-local address,
// so the node has no reason to answer for any other address on a pod's
// veth; it would for the pod's own address only with proxy NDP (a proxy
// entry for it, and proxy_ndp on the veth or on all interfaces), set by
// hand or by another tool. The pod would then see its duplicate address
// detection fail and lose its address. Pods that cannot have an element
// (Check) are left out.
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
		Sets: []nft.Set{{Name: SetPodAddrs, KeyType: nft.KeyIfnameAddr6.Name, KeyLen: nft.KeyIfnameAddr6.Bytes, Concat: true,
			Comment: "reef: node-side veth . pod IPv6 address, one per IPv6 pod", Elems: elems}},
		Chains: []nft.Chain{{
			Name: ChainOutput, Type: nftables.ChainTypeFilter, Hooked: true,
			Hook: *nftables.ChainHookOutput, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: Comment, Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{icmpv6NeighborAdvert}},
				// oifname (16 bytes) in register 1, the target address in
				// the registers right after it: the set's concatenated key.
				&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
				&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseTransportHeader, Offset: naTargetOffset, Len: 16},
				&expr.Lookup{SourceRegister: 1, SetName: SetPodAddrs},
				&expr.Counter{},
				&expr.Verdict{Kind: expr.VerdictDrop},
			}}},
		}},
	}
}
