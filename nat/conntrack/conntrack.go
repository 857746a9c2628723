// Package conntrack deletes the kernel's connection tracking entries that
// must not outlive what they were made for: a deleted pod's (FlushAddr),
// so that the next pod given its address inherits none of them, and a UDP
// hostPort's (package hostport), so that a client's old entry stops
// sending where the port no longer leads. It is reef's one owner of the
// ctnetlink requests.
package conntrack

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Filter selects the entries of one address family by their original
// tuple (the reply's, if Reply): every field set must match, a zero one
// matches anything.
type Filter struct {
	Family   uint8 // unix.AF_INET or unix.AF_INET6
	Reply    bool
	Src, Dst netip.Addr // of Family
	Proto    uint8      // unix.IPPROTO_UDP, ...
	DstPort  uint16     // needs Proto; of the original tuple only
}

// Flush deletes, in the caller's network namespace, the entries any of
// filters selects; no entry is success. Each filter is one request the
// kernel filters as it walks its table (ctnetlink's flush with
// CTA_FILTER). A kernel without that filter refuses it (EOPNOTSUPP)
// rather than flushing everything; the entries are then dumped and
// deleted one by one, which costs milliseconds per thousand entries. A
// filter with an IPv6 address always goes by dump: the kernel's filter
// inverts its IPv6 address match (ctnetlink_filter_match_tuple tests
// !ipv6_addr_cmp, true when the addresses are equal; 6.18 still does),
// so a filtered flush would keep the address's entries and delete every
// other's.
func Flush(filters ...Filter) error {
	for _, f := range filters {
		if err := f.check(); err != nil {
			return err
		}
	}
	var byDump []Filter
	for i, f := range filters {
		if f.Family == unix.AF_INET6 && (f.Src.IsValid() || f.Dst.IsValid()) {
			byDump = append(byDump, f)
			continue
		}
		err := flushFiltered(f)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			byDump = append(byDump, filters[i:]...)
			break
		}
		if err != nil {
			return fmt.Errorf("flush the conntrack entries of %s: %w", f, err)
		}
	}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		var same []Filter
		for _, f := range byDump {
			if f.Family == fam {
				same = append(same, f)
			}
		}
		if err := flushByDump(fam, same); err != nil {
			return err
		}
	}
	return nil
}

// FlushAddr deletes, in the caller's network namespace, every conntrack
// entry that has addr on either side of either direction: a pod that
// gets addr next must not inherit the last one's connections (a client
// that keeps sending to a hostPort of the old pod would otherwise reach
// the new one through its old DNAT entry, and an established connection
// would pass the new pod's NetworkPolicy). The four places are an entry
// the pod opened (original source; its reply's destination, unless
// masqueraded), one opened to it (original destination), and one
// translated to it (the reply's source: a hostPort's or a Service's
// DNAT).
func FlushAddr(addr netip.Addr) error {
	return Flush(addrFilters(addr)...)
}

// addrFilters select the entries with addr in any of the four places.
func addrFilters(addr netip.Addr) []Filter {
	addr = addr.Unmap()
	fam := uint8(unix.AF_INET)
	if addr.Is6() {
		fam = unix.AF_INET6
	}
	return []Filter{
		{Family: fam, Src: addr},
		{Family: fam, Dst: addr},
		{Family: fam, Reply: true, Src: addr},
		{Family: fam, Reply: true, Dst: addr},
	}
}

func (f Filter) String() string {
	s := "original"
	if f.Reply {
		s = "reply"
	}
	if f.Src.IsValid() {
		s += " src " + f.Src.String()
	}
	if f.Dst.IsValid() {
		s += " dst " + f.Dst.String()
	}
	if f.Proto != 0 {
		s += fmt.Sprintf(" proto %d", f.Proto)
	}
	if f.DstPort != 0 {
		s += fmt.Sprintf(" dport %d", f.DstPort)
	}
	return s
}

// check refuses a filter the requests cannot say (an address of the
// other family, a port without its protocol or on the reply side) and
// one that selects every entry.
func (f Filter) check() error {
	if f.Family != unix.AF_INET && f.Family != unix.AF_INET6 {
		return fmt.Errorf("conntrack filter %s: family %d", f, f.Family)
	}
	if f == (Filter{Family: f.Family, Reply: f.Reply}) {
		return fmt.Errorf("conntrack filter %s: it would take every entry", f)
	}
	for _, a := range []netip.Addr{f.Src, f.Dst} {
		if a.IsValid() && a.Is4() != (f.Family == unix.AF_INET) {
			return fmt.Errorf("conntrack filter %s: address %s not of family %d", f, a, f.Family)
		}
	}
	if f.DstPort != 0 && (f.Proto == 0 || f.Reply) {
		return fmt.Errorf("conntrack filter %s: a port needs a protocol and the original tuple", f)
	}
	return nil
}

// ctnetlink's filter attributes (linux/netfilter/nfnetlink_conntrack.h,
// and the flags of net/netfilter/nf_conntrack_netlink.c).
const (
	ctaFilter           = 25
	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
	ctaFilterIPSrc      = 1 << 0
	ctaFilterIPDst      = 1 << 1
	ctaFilterProtoNum   = 1 << 3
	ctaFilterDstPort    = 1 << 5
)

// flushFiltered flushes f's entries in one request.
func flushFiltered(f Filter) error {
	srcAttr, dstAttr := nl.CTA_IP_V4_SRC, nl.CTA_IP_V4_DST
	if f.Family == unix.AF_INET6 {
		srcAttr, dstAttr = nl.CTA_IP_V6_SRC, nl.CTA_IP_V6_DST
	}
	tupleAttr := nl.CTA_TUPLE_ORIG
	if f.Reply {
		tupleAttr = nl.CTA_TUPLE_REPLY
	}
	var flags uint32
	tuple := nl.NewRtAttr(unix.NLA_F_NESTED|tupleAttr, nil)
	if f.Src.IsValid() || f.Dst.IsValid() {
		ip := tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
		if f.Src.IsValid() {
			ip.AddRtAttr(srcAttr, f.Src.AsSlice())
			flags |= ctaFilterIPSrc
		}
		if f.Dst.IsValid() {
			ip.AddRtAttr(dstAttr, f.Dst.AsSlice())
			flags |= ctaFilterIPDst
		}
	}
	if f.Proto != 0 {
		proto := tuple.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
		proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{f.Proto})
		flags |= ctaFilterProtoNum
		if f.DstPort != 0 {
			proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(f.DstPort))
			flags |= ctaFilterDstPort
		}
	}
	origFlags, replyFlags := flags, uint32(0)
	if f.Reply {
		origFlags, replyFlags = 0, flags
	}
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_CTNETLINK<<8|nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: f.Family, Version: nl.NFNETLINK_V0})
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

// flushByDump is the fallback for a kernel without the flush filter (and
// the way for an IPv6 address): it dumps family fam's table once and
// deletes the entries any of filters selects. No filter: nothing to do.
func flushByDump(fam uint8, filters []Filter) error {
	if len(filters) == 0 {
		return nil
	}
	var nf []netlink.CustomConntrackFilter
	for _, f := range filters {
		c, err := f.netlinkFilter()
		if err != nil {
			return err
		}
		nf = append(nf, c)
	}
	var err error
	for range 5 {
		// A table that changed during the dump (a busy node) gives a
		// partial one, whose matches are deleted: the next dump finds
		// the rest.
		if _, err = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), nf...); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete the conntrack entries of %s: %w", filters[0], err)
	}
	return nil
}

// netlinkFilter is f as the dump's matcher.
func (f Filter) netlinkFilter() (*netlink.ConntrackFilter, error) {
	c := &netlink.ConntrackFilter{}
	var src, dst netlink.ConntrackFilterType = netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP
	if f.Reply {
		src, dst = netlink.ConntrackReplySrcIP, netlink.ConntrackReplyDstIP
	}
	if f.Src.IsValid() {
		if err := c.AddIP(src, f.Src.AsSlice()); err != nil {
			return nil, err
		}
	}
	if f.Dst.IsValid() {
		if err := c.AddIP(dst, f.Dst.AsSlice()); err != nil {
			return nil, err
		}
	}
	if f.Proto != 0 {
		if err := c.AddProtocol(f.Proto); err != nil {
			return nil, err
		}
	}
	if f.DstPort != 0 {
		if err := c.AddPort(netlink.ConntrackOrigDstPort, f.DstPort); err != nil {
			return nil, err
		}
	}
	return c, nil
}
