package nl

import (
	"net"
	"net/netip"
)

// IPNet is p as netlink takes it.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Prefix is n as a prefix of its family, known by its mask's length: an
// IPv4 address in net.IP's 16-byte form is IPv4, an IPv6 one stays IPv6
// even if IPv4-mapped.
func Prefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	a, ok := Addr(n.IP, bits == 8*net.IPv6len)
	if !ok {
		return netip.Prefix{}, false
	}
	p := netip.PrefixFrom(a, ones)
	return p, p.IsValid()
}

// Addr is the address of a netlink IP of either family: IPv4 in either
// of net.IP's forms, IPv6 as its 16 bytes.
func Addr(ip net.IP, v6 bool) (netip.Addr, bool) {
	if !v6 {
		return netip.AddrFromSlice(ip.To4())
	}
	if len(ip) != net.IPv6len {
		return netip.Addr{}, false
	}
	return netip.AddrFromSlice(ip)
}

// Host is the prefix of ip alone: ip/32 or ip/128.
func Host(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, ip.BitLen()) }

// LinkLocalEUI64 is the link-local address the kernel derives from a
// 48-bit MAC with addr_gen_mode 0 (RFC 4291, appendix A): fe80::/64, then
// the MAC with ff:fe in its middle and the universal/local bit flipped.
func LinkLocalEUI64(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
	a[11], a[12] = 0xff, 0xfe
	a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(a)
}
