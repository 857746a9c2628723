package bgp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// A node's IPv6 address travels in its record as four large communities,
// <asn>:119..122:<32 bits each>, so that the other nodes can route its IPv6
// blocks to it (`<block> via <address> dev <uplink> onlink`): the nodes
// are named by IPv4 addresses in the block protocol and talk over IPv4,
// so nothing else says where a node's IPv6 pods are. No decision of the
// protocol reads it.

// appendAddr6 appends the communities of a node's IPv6 address a, none
// when it is invalid (the node has no IPv6 pool or address).
func appendAddr6(lcs []LargeCommunity, asn uint32, a netip.Addr) []LargeCommunity {
	if !a.IsValid() {
		return lcs
	}
	b := a.As16()
	for i := range 4 {
		lcs = append(lcs, LargeCommunity{asn, lcAddr6 + uint32(i), binary.BigEndian.Uint32(b[4*i:])})
	}
	return lcs
}

// addr6 is a record's IPv6 address (<asn>:119..122), invalid when it
// carries none: all four communities or none, a global unicast IPv6
// address, not IPv4-mapped, outside every pool (checkAddr6).
func (s *lcSet) addr6(asn uint32, pools []Pool) (netip.Addr, error) {
	n := 0
	var b [16]byte
	for i := range uint32(4) {
		if s.has(lcAddr6 + i) {
			n++
			binary.BigEndian.PutUint32(b[4*i:], s.get(lcAddr6+i))
		}
	}
	switch n {
	case 0:
		return netip.Addr{}, nil
	case 4:
	default:
		return netip.Addr{}, fmt.Errorf("%d of the 4 communities %d:%d..%d:* of the node's IPv6 address: %w", n, asn, lcAddr6, lcAddr6+3, ErrNotReef)
	}
	a := netip.AddrFrom16(b)
	if err := checkAddr6(pools, a, "node IPv6 address"); err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", err, ErrNotReef)
	}
	return a, nil
}

// checkAddr6 accepts a node's IPv6 address: global unicast IPv6, not
// IPv4-mapped, outside every pool.
func checkAddr6(pools []Pool, a netip.Addr, role string) error {
	if !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() {
		return fmt.Errorf("%s %s is not a global unicast IPv6 address", role, a)
	}
	for _, p := range pools {
		if p.CIDR.Contains(a) {
			return fmt.Errorf("%s %s is a pod address (pool %s)", role, a, p.CIDR)
		}
	}
	return nil
}
