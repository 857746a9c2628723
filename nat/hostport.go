package nat

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/reefcni/reef/nat/nft"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// HostPortTableID is table inet reef-hostport: the pods' hostPorts (CNI
// capability portMappings), for both address families. It is a table of
// its own, next to NetworkPolicy's table inet reef, so that each has one
// writer.
var HostPortTableID = nft.TableID{Family: nftables.TableFamilyINet, Name: TableName + "-hostport"}

// Chains of table inet reef-hostport.
const (
	ChainHostPortPrerouting  = "prerouting"
	ChainHostPortOutput      = "output"
	ChainHostPorts           = "hostports"
	ChainHostPortPostrouting = "postrouting"
)

// DNATPriority is the priority of the hostPort DNAT chains: dstnat + 10,
// after kube-proxy's (dstnat), so that a Service's own DNAT decision comes
// first. A nat chain does not see a connection an earlier one has NATed.
const DNATPriority nftables.ChainPriority = -90

// HostPort is one hostPort of a pod: traffic to HostIP:Port (HostIP zero:
// any of the node's addresses) of protocol Proto is sent to the pod's
// PodPort.
type HostPort struct {
	Proto   uint8 // unix.IPPROTO_TCP, _UDP, _SCTP
	HostIP  netip.Addr
	Port    uint16
	PodPort uint16
}

// hostPortFamily is what differs between the IPv4 and IPv6 halves of the
// table.
type hostPortFamily struct {
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

var hostPortFamilies = []hostPortFamily{
	{"4", unix.NFPROTO_IPV4, nftables.TypeIPAddr, 12, 16, 9, 10},
	{"6", unix.NFPROTO_IPV6, nftables.TypeIP6Addr, 8, 24, 2, 13},
}

func (f hostPortFamily) holds(a netip.Addr) bool { return a.Is4() == (f.suffix == "4") }

// Key and data types of the maps and sets: a hostPort on any address is
// keyed by protocol . port, one on an address by address . protocol .
// port; both map to the pod's address . port. The hairpin set holds pod .
// pod: a pod that reaches its own hostPort.

func (f hostPortFamily) keyIPPort() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrProtoPort4
	}
	return nft.KeyAddrProtoPort6
}

func (f hostPortFamily) target() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrPort4
	}
	return nft.KeyAddrPort6
}

func (f hostPortFamily) pair() nftables.SetDatatype {
	if f.suffix == "4" {
		return nft.KeyAddrAddr4
	}
	return nft.KeyAddrAddr6
}

// Names of the maps and sets, per family suffix.
func mapAnyPort(f hostPortFamily) string { return "hostports" + f.suffix }
func mapIPPort(f hostPortFamily) string  { return "hostports" + f.suffix + "-ip" }
func setHairpin(f hostPortFamily) string { return "hairpin" + f.suffix }

// HostPortPod is one pod's part of the table: its address and hostPorts.
type HostPortPod struct {
	IP    netip.Addr
	Ports []HostPort
}

// HostPortElems are the elements pod puts in each set of the table, by
// set name: what ADD adds and DEL removes, and what HostPortTable is made
// of.
func HostPortElems(pod HostPortPod) map[string][]nft.Elem {
	out := map[string][]nft.Elem{}
	addHostPortElems(out, pod)
	return out
}

// addHostPortElems appends pod's elements to out, by set name.
func addHostPortElems(out map[string][]nft.Elem, pod HostPortPod) {
	if !pod.IP.IsValid() || len(pod.Ports) == 0 {
		return
	}
	ip := pod.IP.Unmap()
	f := hostPortFamilies[0]
	if !f.holds(ip) {
		f = hostPortFamilies[1]
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

// HostPortTable is table inet reef-hostport for the pods:
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
func HostPortTable(pods []HostPortPod) nft.Table {
	elems := map[string][]nft.Elem{}
	for _, p := range pods {
		addHostPortElems(elems, p)
	}
	t := nft.Table{ID: HostPortTableID}
	hostports := nft.Chain{Name: ChainHostPorts}
	post := nft.Chain{Name: ChainHostPortPostrouting, Type: nftables.ChainTypeNAT, Hooked: true,
		Hook: *nftables.ChainHookPostrouting, Priority: MasqPriority, Policy: nftables.ChainPolicyAccept}
	for _, f := range hostPortFamilies {
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
		hook(ChainHostPortOutput, *nftables.ChainHookOutput),
		post,
		hook(ChainHostPortPrerouting, *nftables.ChainHookPrerouting),
	}
	slices.SortFunc(t.Sets, func(a, b nft.Set) int { return strings.Compare(a.Name, b.Name) })
	return t
}

// HostVethPrefix starts the name of every node-side veth of reef's (as
// routes.HostVethPrefix; package nat does not import routes).
const HostVethPrefix = "reef"

func nfproto(f hostPortFamily) []expr.Any {
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
func dnatExprs(f hostPortFamily, withAddr bool) []expr.Any {
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

// FlushUDPConntrack deletes the conntrack entries of UDP traffic to
// hostPort hp (to its address, or to any), in the caller's network
// namespace: a client that sent to the port before it was mapped, or
// while another pod had it, keeps an entry that sends it there for as
// long as it keeps sending. TCP needs none: a new connection gets a new
// entry.
//
// It is one request: the kernel walks its table with the filter
// (ctnetlink's flush with CTA_FILTER on the original tuple's protocol,
// destination port and address). A kernel without that filter refuses
// it (EOPNOTSUPP) rather than flushing everything; reef then dumps the
// table and deletes the matching entries one by one, which costs
// milliseconds per thousand entries.
func FlushUDPConntrack(hp HostPort) error {
	err := flushFiltered(hp)
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	f := &netlink.ConntrackFilter{}
	if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
		return err
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, hp.Port); err != nil {
		return err
	}
	fam := netlink.InetFamily(unix.AF_INET)
	if hp.HostIP.IsValid() {
		if hp.HostIP.Is6() {
			fam = unix.AF_INET6
		}
		if err := f.AddIP(netlink.ConntrackOrigDstIP, hp.HostIP.AsSlice()); err != nil {
			return err
		}
	}
	if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, fam, f); err != nil {
		return fmt.Errorf("delete conntrack entries of udp port %d: %w", hp.Port, err)
	}
	return nil
}

// ctnetlink's filter attributes (linux/netfilter/nfnetlink_conntrack.h,
// and the flags of net/netfilter/nf_conntrack_netlink.c).
const (
	ctaFilter           = 25
	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
	ctaFilterIPDst      = 1 << 1
	ctaFilterProtoNum   = 1 << 3
	ctaFilterDstPort    = 1 << 5
)

func flushFiltered(hp HostPort) error {
	fam, dst, ipAttr := uint8(unix.AF_INET), []byte(nil), uint16(nl.CTA_IP_V4_DST)
	flags := uint32(ctaFilterProtoNum | ctaFilterDstPort)
	if hp.HostIP.IsValid() {
		a := hp.HostIP.Unmap()
		if a.Is6() {
			fam, ipAttr = unix.AF_INET6, nl.CTA_IP_V6_DST
		}
		dst, flags = a.AsSlice(), flags|ctaFilterIPDst
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: fam, Version: nl.NFNETLINK_V0})
	tuple := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG, nil)
	if dst != nil {
		tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil).AddRtAttr(int(ipAttr), dst)
	}
	proto := tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
	proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{unix.IPPROTO_UDP})
	proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(hp.Port))
	req.AddData(tuple)
	filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
	filter.AddRtAttr(ctaFilterOrigFlags, nl.Uint32Attr(flags))
	filter.AddRtAttr(ctaFilterReplyFlags, nl.Uint32Attr(0))
	req.AddData(filter)
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("flush conntrack entries of udp port %d: %w", hp.Port, err)
	}
	return nil
}
