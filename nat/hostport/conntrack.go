package hostport

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// FlushUDPConntrack deletes the conntrack entries of UDP traffic to
// hostPort hp (to its address, or to any address of either family), in
// the caller's network namespace: a client that sent to the port before
// it was mapped, or while another pod had it, keeps an entry that sends
// it there for as long as it keeps sending. TCP needs none: a new
// connection gets a new entry.
//
// It is one request per family: the kernel walks its table with the filter
// (ctnetlink's flush with CTA_FILTER on the original tuple's protocol,
// destination port and address). A kernel without that filter refuses
// it (EOPNOTSUPP) rather than flushing everything; reef then dumps the
// table and deletes the matching entries one by one, which costs
// milliseconds per thousand entries. A hostPort bound to an IPv6 address
// is always flushed that way (below).
func FlushUDPConntrack(hp Mapping) error {
	for _, fam := range flushFamilies(hp) {
		if fam == unix.AF_INET6 && hp.HostIP.IsValid() {
			// The kernel's filter inverts its IPv6 address match
			// (ctnetlink_filter_match_tuple tests !ipv6_addr_cmp, true
			// when the addresses are equal; 6.18 still does): filtered,
			// the flush would keep the hostIP's entries and take the
			// port's at every other address.
			if err := flushByDump(hp, fam); err != nil {
				return err
			}
			continue
		}
		err := flushFiltered(hp, fam)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			err = flushByDump(hp, fam)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flushFamilies are the address families of hp's entries: its hostIP's,
// or both, since a hostPort without hostIP answers on the node's IPv4
// and IPv6 addresses alike (a dual-stack or IPv6 pod has an IPv6 element).
func flushFamilies(hp Mapping) []uint8 {
	if !hp.HostIP.IsValid() {
		return []uint8{unix.AF_INET, unix.AF_INET6}
	}
	if hp.HostIP.Unmap().Is6() {
		return []uint8{unix.AF_INET6}
	}
	return []uint8{unix.AF_INET}
}

// flushByDump is the fallback for a kernel without ctnetlink's flush
// filter: it dumps family fam's table and deletes the matching entries.
func flushByDump(hp Mapping, fam uint8) error {
	f := &netlink.ConntrackFilter{}
	if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
		return err
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, hp.Port); err != nil {
		return err
	}
	if hp.HostIP.IsValid() {
		if err := f.AddIP(netlink.ConntrackOrigDstIP, hp.HostIP.Unmap().AsSlice()); err != nil {
			return err
		}
	}
	if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), f); err != nil {
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

// flushFiltered flushes family fam's matching entries in one request.
func flushFiltered(hp Mapping, fam uint8) error {
	dst, ipAttr := []byte(nil), uint16(nl.CTA_IP_V4_DST)
	if fam == unix.AF_INET6 {
		ipAttr = nl.CTA_IP_V6_DST
	}
	flags := uint32(ctaFilterProtoNum | ctaFilterDstPort)
	if hp.HostIP.IsValid() {
		dst, flags = hp.HostIP.Unmap().AsSlice(), flags|ctaFilterIPDst
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
