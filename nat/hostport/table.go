// Package hostport is reef's hostPort table: table inet reef-hostport,
// the pods' hostPorts (CNI capability portMappings) for both address
// families, DNAT to the pod and masquerade where the reply would not come
// back otherwise. The table is built, purely, from the pods; one pod's
// elements are edits of their own (Edits), which CNI ADD adds and DEL
// deletes through package nat. FlushUDPConntrack clears what a UDP client
// sent to a port before it was mapped.
package hostport

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
)

// TableID is table inet reef-hostport. It is a table of its own, next to
// NetworkPolicy's table inet reef, so that each has one writer.
var TableID = nft.TableID{Family: nftables.TableFamilyINet, Name: nft.TableName + "-hostport"}

// Chains of the table.
const (
	ChainPrerouting  = "prerouting"
	ChainOutput      = "output"
	ChainHostPorts   = "hostports"
	ChainPostrouting = "postrouting"
)

// DNATPriority is the priority of the hostPort DNAT chains: dstnat + 10,
// after kube-proxy's (dstnat), so that a Service's own DNAT decision comes
// first. A nat chain does not see a connection an earlier one has NATed.
const DNATPriority nftables.ChainPriority = -90

// Mapping is one hostPort of a pod: traffic to HostIP:Port (HostIP zero:
// any of the node's addresses) of protocol Proto is sent to the pod's
// PodPort.
type Mapping struct {
	Proto   uint8 // unix.IPPROTO_TCP, _UDP, _SCTP
	HostIP  netip.Addr
	Port    uint16
	PodPort uint16
}

// family is what differs between the IPv4 and IPv6 halves of the
// table.
type family struct {
	suffix   string // of the maps' and sets' names
	nfproto  byte
	addr     nftables.SetDatatype
	src, dst uint32 // offsets in the network header
	// The registers of the protocol and the port after an address in a
	// concatenation: the address takes one 4-byte register (IPv4) or four
	// (IPv6). The kernel names a 4-byte register that starts a 16-byte
	// one by the 16-byte one's number (NFT_REG32_04 is NFT_REG_2), so
	// that is the number used, to read back the same.
	protoReg, portReg uint32
}

var families = []family{
	{"4", unix.NFPROTO_IPV4, nftables.TypeIPAddr, 12, 16, 9, 10},
	{"6", unix.NFPROTO_IPV6, nftables.TypeIP6Addr, 8, 24, 2, 13},
}

func (f family) holds(a netip.Addr) bool { return a.Is4() == (f.suffix == "4") }

// Key and data types of the maps and sets: a hostPort on any address is
// keyed by protocol . port, one on an address by address . protocol .
// port; both map to the pod's address . port. The hairpin set holds pod .
// pod: a pod that reaches its own hostPort.

func (f family) keyIPPort() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrProtoPort4
	}
	return nft.KeyAddrProtoPort6
}

func (f family) target() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrPort4
	}
	return nft.KeyAddrPort6
}

func (f family) pair() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrAddr4
	}
	return nft.KeyAddrAddr6
}

// Names of the maps and sets, per family suffix.
func mapAnyPort(f family) string { return "hostports" + f.suffix }
func mapIPPort(f family) string  { return "hostports" + f.suffix + "-ip" }
func setHairpin(f family) string { return "hairpin" + f.suffix }

// Pod is one pod's part of the table: its addresses (one, or one of
// each family) and hostPorts.
type Pod struct {
	IPs   []netip.Addr
	Ports []Mapping
}

// Elems are the elements pod puts in each set of the table, by set name:
// what ADD adds and DEL removes (Edits), and what Table is made of.
func Elems(pod Pod) map[string][]nft.Elem {
	out := map[string][]nft.Elem{}
	addElems(out, pod)
	return out
}

// Edits are pod's elements as edits of the table's sets, one for each set
// it has elements in: what ADD adds and DEL deletes, in a batch of its
// own.
func Edits(pod Pod) []nft.ElemEdit {
	elems := Elems(pod)
	var out []nft.ElemEdit
	for _, s := range Table(nil).Sets {
		if es := elems[s.Name]; len(es) > 0 {
			out = append(out, nft.ElemEdit{Table: TableID, Set: s, Elems: es})
		}
	}
	return out
}

// addElems appends pod's elements to out, by set name. A mapping on every
// address leads to each of the pod's addresses, in its family's map (a
// dual-stack pod's hostPort answers over IPv4 and IPv6); one on a host
// address leads to the pod's address of that family, and to nothing if
// the pod has none.
func addElems(out map[string][]nft.Elem, pod Pod) {
	if len(pod.Ports) == 0 {
		return
	}
	for _, ip := range pod.IPs {
		if !ip.IsValid() {
			continue
		}
		ip = ip.Unmap()
		f := families[0]
		if !f.holds(ip) {
			f = families[1]
		}
		anyPort, ipPort, hairpin := mapAnyPort(f), mapIPPort(f), setHairpin(f)
		for _, hp := range pod.Ports {
			to := netip.AddrPortFrom(ip, hp.PodPort)
			switch {
			case !hp.HostIP.IsValid():
				out[anyPort] = append(out[anyPort], nft.Elem{Proto: hp.Proto, Port: hp.Port, Value: to})
			case f.holds(hp.HostIP.Unmap()):
				a := hp.HostIP.Unmap()
				out[ipPort] = append(out[ipPort], nft.Elem{From: a, To: a, Proto: hp.Proto, Port: hp.Port, Value: to})
			}
		}
		out[hairpin] = append(out[hairpin], nft.Elem{From: ip, To: ip})
	}
}

// Table is table inet reef-hostport for the pods:
//
//	chain prerouting { type nat hook prerouting priority dstnat + 10
//		fib daddr type local jump hostports }
//	chain output { type nat hook output priority dstnat + 10
//		fib daddr type local jump hostports }
//	chain hostports {
//		meta nfproto ipv4 dnat ip to ip daddr . meta l4proto . th dport map @hostports4-ip
//		meta nfproto ipv4 dnat ip to meta l4proto . th dport map @hostports4
//		(the same for ipv6) }
//	chain postrouting { type nat hook postrouting priority srcnat + 10
//		ct status dnat ip saddr . ip daddr @hairpin4 masquerade
//		ct status dnat ip saddr 127.0.0.0/8 oifname "reef*" masquerade
//		ct status dnat ip6 saddr . ip6 daddr @hairpin6 masquerade }
//
// A mapping on an address comes before one on any address. Traffic from
// outside and from other pods keeps its source address. A pod that
// reaches its own hostPort (hairpin) is masqueraded, or its reply would
// go to itself; so is the node's traffic from 127.0.0.1, which the pod
// could not answer (the pod's veth has route_localnet on for it).
func Table(pods []Pod) nft.Table {
	elems := map[string][]nft.Elem{}
	for _, p := range pods {
		addElems(elems, p)
	}
	t := nft.Table{ID: TableID}
	hostports := nft.Chain{Name: ChainHostPorts}
	// At the masquerade's priority: after kube-proxy's srcnat chains.
	post := nft.Chain{Name: ChainPostrouting, Type: nftables.ChainTypeNAT, Hooked: true,
		Hook: *nftables.ChainHookPostrouting, Priority: masq.Priority, Policy: nftables.ChainPolicyAccept}
	for _, f := range families {
		sets := []nft.Set{
			{Name: mapAnyPort(f), KeyType: nft.KeyProtoPort.Name, KeyLen: nft.KeyProtoPort.Bytes, Concat: true,
				DataType: f.target().Name, DataLen: f.target().Bytes, Comment: "reef: hostPorts on every local address: protocol . port : pod . port"},
			{Name: mapIPPort(f), KeyType: f.keyIPPort().Name, KeyLen: f.keyIPPort().Bytes, Concat: true,
				DataType: f.target().Name, DataLen: f.target().Bytes, Comment: "reef: hostPorts on one address: address . protocol . port : pod . port"},
			{Name: setHairpin(f), KeyType: f.pair().Name, KeyLen: f.pair().Bytes, Concat: true,
				Comment: "reef: pod . pod for pods with hostPorts, masqueraded when a pod reaches its own"},
		}
		for i := range sets {
			sets[i].Elems = uniqueElems(elems[sets[i].Name])
		}
		t.Sets = append(t.Sets, sets...)
		hostports.Rules = append(hostports.Rules,
			nft.Rule{Comment: "reef: hostPorts on one address (" + f.suffix + ")", Exprs: dnatExprs(f, true)},
			nft.Rule{Comment: "reef: hostPorts on every local address (" + f.suffix + ")", Exprs: dnatExprs(f, false)})
		post.Rules = append(post.Rules, nft.Rule{Comment: "reef: a pod reaching its own hostPort (" + f.suffix + ")", Exprs: slices.Concat(
			nfproto(f), ctDNAT(),
			[]expr.Any{
				// Two loads, not one of both addresses: nft then prints
				// "ip saddr . ip daddr".
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.src, Len: f.addr.Bytes},
				&expr.Payload{DestRegister: f.protoReg, Base: expr.PayloadBaseNetworkHeader, Offset: f.dst, Len: f.addr.Bytes},
				&expr.Lookup{SourceRegister: 1, SetName: setHairpin(f)},
				&expr.Counter{},
				&expr.Masq{},
			})})
		if f.suffix == "4" {
			post.Rules = append(post.Rules, nft.Rule{Comment: "reef: the node reaching a hostPort from 127.0.0.0/8", Exprs: slices.Concat(
				nfproto(f), ctDNAT(),
				[]expr.Any{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.src, Len: 4},
					&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}},
					&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(HostVethPrefix)},
					&expr.Counter{},
					&expr.Masq{},
				})})
		}
	}
	local := []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: ChainHostPorts},
	}
	hook := func(name string, h nftables.ChainHook) nft.Chain {
		return nft.Chain{Name: name, Type: nftables.ChainTypeNAT, Hooked: true, Hook: h, Priority: DNATPriority, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: "reef: hostPorts, to the node's own addresses only", Exprs: local}}}
	}
	t.Chains = []nft.Chain{
		hostports,
		hook(ChainOutput, *nftables.ChainHookOutput),
		post,
		hook(ChainPrerouting, *nftables.ChainHookPrerouting),
	}
	slices.SortFunc(t.Sets, func(a, b nft.Set) int { return strings.Compare(a.Name, b.Name) })
	return t
}

// HostVethPrefix starts the name of every node-side veth of reef's (as
// routes.HostVethPrefix; package hostport does not import routes).
const HostVethPrefix = "reef"

func nfproto(f family) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
	}
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit.
const ipsDstNAT = 1 << 5

// ctDNAT is "ct status dnat": the connection's destination was NATed.
func ctDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// dnatExprs is the DNAT through one of family f's maps: the key built in
// register 1 and those after it (a concatenation), the value (pod address
// . port) looked up into register 1 and the one after the address.
func dnatExprs(f family, withAddr bool) []expr.Any {
	out := nfproto(f)
	set, protoReg, portReg := mapAnyPort(f), uint32(1), uint32(9)
	if withAddr {
		set, protoReg, portReg = mapIPPort(f), f.protoReg, f.portReg
		out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.dst, Len: f.addr.Bytes})
	}
	// The value: the address in register 1, the port where the protocol
	// is in the key with an address. Max as min, as the kernel lists it.
	return append(out,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set, DestRegister: 1, IsDestRegSet: true},
		&expr.Counter{},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(f.nfproto), RegAddrMin: 1, RegAddrMax: 1,
			RegProtoMin: f.protoReg, RegProtoMax: f.protoReg, Specified: true},
	)
}

// uniqueElems sorts es and drops repeats; of two elements with the same
// key (two pods claiming one hostPort, which the store refuses), the
// first in order is kept, so that the map stays one a kernel accepts.
func uniqueElems(es []nft.Elem) []nft.Elem {
	slices.SortFunc(es, nft.CompareElems)
	return slices.CompactFunc(es, func(a, b nft.Elem) bool { return a.KeyOnly() == b.KeyOnly() })
}
