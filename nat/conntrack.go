package nat

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// FlushConntrackOf deletes the conntrack entries of a pod's address, in
// the caller's network namespace: those whose original source or
// destination is addr (the pod's own connections, either way, masqueraded
// or not) and those whose reply source is addr (DNATed to it: a hostPort,
// a Service's backend). The DEL of a pod calls it: the next pod given the
// address would otherwise meet the old pod's flows as established, which
// table inet reef accepts before any NetworkPolicy (as Calico, reef clears
// them when the endpoint goes).
//
// For IPv4 it is one request per direction: the kernel walks its table
// with the filter (ctnetlink's flush with CTA_FILTER). A kernel without
// it refuses it (EOPNOTSUPP, EINVAL) rather than flushing everything;
// reef then dumps the table once and deletes the matching entries. IPv6
// is always dumped: the same filtered request for an IPv6 address
// (CTA_IP_V6_SRC or _DST) took the entries whose address differs and left
// the address's own on this machine's kernel (6.18), as if the kernel's
// comparison of IPv6 addresses were inverted; TestFlushConntrackOf has
// both kinds of entry, and fails on it.
func FlushConntrackOf(addr netip.Addr) error {
	addr = addr.Unmap()
	if addr.Is6() {
		return flushAddrByDump(addr, unix.AF_INET6)
	}
	fam := uint8(unix.AF_INET)
	for _, f := range []struct {
		tuple uint16 // CTA_TUPLE_ORIG or CTA_TUPLE_REPLY
		flag  uint32 // ctaFilterIPSrc or ctaFilterIPDst
	}{{nl.CTA_TUPLE_ORIG, ctaFilterIPSrc}, {nl.CTA_TUPLE_ORIG, ctaFilterIPDst}, {nl.CTA_TUPLE_REPLY, ctaFilterIPSrc}} {
		err := flushAddrFiltered(addr, fam, f.tuple, f.flag)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			return flushAddrByDump(addr, fam)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ctnetlink's filter attributes (linux/netfilter/nfnetlink_conntrack.h).
const (
	ctaFilter           = 25
	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
	ctaFilterIPSrc      = 1 << 0
	ctaFilterIPDst      = 1 << 1
)

// flushAddrFiltered flushes family fam's entries whose tuple (original or
// reply) has IPv4 address addr as its source or destination (flag), in
// one request.
func flushAddrFiltered(addr netip.Addr, fam uint8, tuple uint16, flag uint32) error {
	ipAttr := nl.CTA_IP_V4_SRC
	if flag == ctaFilterIPDst {
		ipAttr = nl.CTA_IP_V4_DST
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: fam, Version: nl.NFNETLINK_V0})
	t := nl.NewRtAttr(unix.NLA_F_NESTED|int(tuple), nil)
	t.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil).AddRtAttr(ipAttr, addr.AsSlice())
	req.AddData(t)
	origFlags, replyFlags := flag, uint32(0)
	if tuple == nl.CTA_TUPLE_REPLY {
		origFlags, replyFlags = 0, flag
	}
	filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
	filter.AddRtAttr(ctaFilterOrigFlags, nl.Uint32Attr(origFlags))
	filter.AddRtAttr(ctaFilterReplyFlags, nl.Uint32Attr(replyFlags))
	req.AddData(filter)
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("flush conntrack entries of %s: %w", addr, err)
	}
	return nil
}

// addrFlows matches the flows flushAddrFiltered's three requests take.
type addrFlows netip.Addr

func (a addrFlows) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	is := func(ip []byte) bool {
		x, ok := netip.AddrFromSlice(ip)
		return ok && x.Unmap() == netip.Addr(a)
	}
	return is(f.Forward.SrcIP) || is(f.Forward.DstIP) || is(f.Reverse.SrcIP)
}

// flushAddrByDump is the fallback for a kernel without ctnetlink's flush
// filter: it dumps family fam's table and deletes the matching entries.
// A dump the table's changes interrupted is done again (deleting is
// repeatable), a few times.
func flushAddrByDump(addr netip.Addr, fam uint8) error {
	var err error
	for range 3 {
		if _, err = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), addrFlows(addr)); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete conntrack entries of %s: %w", addr, err)
	}
	return nil
}
