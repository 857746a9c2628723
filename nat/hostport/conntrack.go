package hostport

import (
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/conntrack"
)

// FlushUDPConntrack deletes the conntrack entries of UDP traffic to
// hostPort hp (to its address, or to any address of either family), in
// the caller's network namespace: a client that sent to the port before
// it was mapped, or while another pod had it, keeps an entry that sends
// it there for as long as it keeps sending. TCP needs none: a new
// connection gets a new entry. It is one request per family the kernel
// filters as it walks its table, or a dump on a kernel without the
// filter, and always for a hostPort bound to an IPv6 address (see
// conntrack.Flush).
func FlushUDPConntrack(hp Mapping) error {
	return conntrack.Flush(udpFilters(hp)...)
}

// udpFilters select hp's UDP entries: of its hostIP's family, or of both,
// since a hostPort without hostIP answers on the node's IPv4 and IPv6
// addresses alike (a dual-stack or IPv6 pod has an IPv6 element).
func udpFilters(hp Mapping) []conntrack.Filter {
	if !hp.HostIP.IsValid() {
		return []conntrack.Filter{
			{Family: unix.AF_INET, Proto: unix.IPPROTO_UDP, DstPort: hp.Port},
			{Family: unix.AF_INET6, Proto: unix.IPPROTO_UDP, DstPort: hp.Port},
		}
	}
	ip, fam := hp.HostIP.Unmap(), uint8(unix.AF_INET)
	if ip.Is6() {
		fam = unix.AF_INET6
	}
	return []conntrack.Filter{{Family: fam, Dst: ip, Proto: unix.IPPROTO_UDP, DstPort: hp.Port}}
}
