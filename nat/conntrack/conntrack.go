// Package conntrack deletes the kernel's connection tracking entries of a
// pod's address once the pod is gone, so that the next pod given the
// address inherits none of them.
package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ctnetlink's filter attributes (linux/netfilter/nfnetlink_conntrack.h,
// and the flags of net/netfilter/nf_conntrack_netlink.c).
const (
	ctaFilter           = 25
	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
	ctaFilterIPSrc      = 1 << 0
	ctaFilterIPDst      = 1 << 1
)

// sides are the four places of an entry an address can hold: an entry
// the pod opened (original source; its reply's destination, unless
// masqueraded), one opened to it (original destination), and one
// translated to it (the reply's source: a hostPort's or a Service's
// DNAT).
var sides = []struct {
	reply bool
	flag  uint32
	name  string
}{
	{false, ctaFilterIPSrc, "original source"},
	{false, ctaFilterIPDst, "original destination"},
	{true, ctaFilterIPSrc, "reply source"},
	{true, ctaFilterIPDst, "reply destination"},
}

// FlushAddr deletes, in the caller's network namespace, every conntrack
// entry that has addr on either side of either direction: a pod that
// gets addr next must not inherit the last one's connections (a client
// that keeps sending to a hostPort of the old pod would otherwise reach
// the new one through its old DNAT entry, and an established connection
// would pass the new pod's NetworkPolicy). Each side is one request the
// kernel filters as it walks its table (ctnetlink's flush with
// CTA_FILTER); a kernel without that filter refuses it, and the entries
// are then dumped and deleted one by one. An IPv6 address is always
// deleted by dump: the kernel's filter inverts its IPv6 address match
// (ctnetlink_filter_match_tuple tests !ipv6_addr_cmp, true when the
// addresses are equal; 6.18 still does), so a filtered flush would keep
// addr's entries and delete every other's. No entry is success.
func FlushAddr(addr netip.Addr) error {
	addr = addr.Unmap()
	if addr.Is6() {
		return flushByDump(addr)
	}
	for _, s := range sides {
		err := flushFiltered(addr, s.reply, s.flag)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			return flushByDump(addr)
		}
		if err != nil {
			return fmt.Errorf("delete the conntrack entries with %s as %s: %w", addr, s.name, err)
		}
	}
	return nil
}

// flushFiltered flushes the entries with IPv4 address addr on one side in
// one request.
func flushFiltered(addr netip.Addr, reply bool, flag uint32) error {
	ipAttr := nl.CTA_IP_V4_SRC
	if flag == ctaFilterIPDst {
		ipAttr = nl.CTA_IP_V4_DST
	}
	tupleAttr, origFlags, replyFlags := nl.CTA_TUPLE_ORIG, flag, uint32(0)
	if reply {
		tupleAttr, origFlags, replyFlags = nl.CTA_TUPLE_REPLY, 0, flag
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_INET, Version: nl.NFNETLINK_V0})
	tuple := nl.NewRtAttr(unix.NLA_F_NESTED|tupleAttr, nil)
	tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil).AddRtAttr(int(ipAttr), addr.AsSlice())
	req.AddData(tuple)
	filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
	filter.AddRtAttr(ctaFilterOrigFlags, nl.Uint32Attr(origFlags))
	filter.AddRtAttr(ctaFilterReplyFlags, nl.Uint32Attr(replyFlags))
	req.AddData(filter)
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// flushByDump is the fallback for a kernel without the flush filter: it
// dumps addr's family's table and deletes the entries with addr on any
// side, which costs milliseconds per thousand entries.
func flushByDump(addr netip.Addr) error {
	fam := netlink.FAMILY_V4
	if addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	var filters []netlink.CustomConntrackFilter
	for _, f := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP, netlink.ConntrackReplySrcIP, netlink.ConntrackReplyDstIP} {
		cf := &netlink.ConntrackFilter{}
		if err := cf.AddIP(f, addr.AsSlice()); err != nil {
			return err
		}
		filters = append(filters, cf)
	}
	var err error
	for range 5 {
		// A table that changed during the dump (a busy node) gives a
		// partial one, whose matches are deleted: the next dump finds
		// the rest.
		if _, err = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), filters...); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete the conntrack entries of %s: %w", addr, err)
	}
	return nil
}
