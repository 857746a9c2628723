package store

import (
	"errors"
	"fmt"
	"net/netip"
)

// Pool is a range of one address family cut into blocks of equal size.
type Pool struct {
	CIDR      netip.Prefix // masked
	BlockSize int          // prefix length of blocks, CIDR.Bits() <= BlockSize <= the family's bits
}

// Validate reports why p cannot be used, naming the pool.
func (p Pool) Validate() error {
	switch {
	case !p.CIDR.IsValid():
		return errors.New("pool has no valid CIDR")
	case p.CIDR.Addr().Is4In6():
		return fmt.Errorf("pool %s: an IPv4-mapped IPv6 prefix; write the IPv4 pool itself", p.CIDR)
	case p.CIDR != p.CIDR.Masked():
		return fmt.Errorf("pool %s: host bits set (did you mean %s?)", p.CIDR, p.CIDR.Masked())
	case p.BlockSize < p.CIDR.Bits() || p.BlockSize > p.CIDR.Addr().BitLen():
		return fmt.Errorf("pool %s: block size /%d must be between /%d and /%d", p.CIDR, p.BlockSize, p.CIDR.Bits(), p.CIDR.Addr().BitLen())
	case p.CIDR.Addr().Is6() && p.BlockSize < MinBlockSize6:
		return fmt.Errorf("pool %s: block size /%d: an IPv6 block holds at most /%d (%d addresses)", p.CIDR, p.BlockSize, MinBlockSize6, blockLen(netip.PrefixFrom(p.CIDR.Addr(), MinBlockSize6)))
	}
	return nil
}

// MinBlockSize6 is the shortest IPv6 block length: 4096 addresses, as
// Calico allows (116..128).
const MinBlockSize6 = 116

// blockLen is the number of addresses in p, which is at most 2^32 (an
// IPv4 prefix, or an IPv6 block, Validate sees to it).
func blockLen(p netip.Prefix) uint64 { return 1 << min(p.Addr().BitLen()-p.Bits(), 63) }

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addrKey is the key of a in the addrs bucket: its 4 or 16 bytes, so that
// keys sort in address order within a family and IPv4 keys are what they
// always were.
func addrKey(a netip.Addr) []byte { return a.AsSlice() }

// blockKey is the key of a block in the blocks bucket: the address first,
// so that keys sort in address order, then the length, so that two
// prefixes with one start address (a pool whose block size changed) keep
// distinct keys.
func blockKey(p netip.Prefix) []byte {
	return append(p.Addr().AsSlice(), byte(p.Bits()))
}

// parseBlockKey is the inverse of blockKey.
func parseBlockKey(k []byte) (netip.Prefix, error) {
	a, ok := netip.AddrFromSlice(k[:max(len(k)-1, 0)])
	if !ok || (len(k) != 5 && len(k) != 17) || int(k[len(k)-1]) > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("block key %x: want 4 or 16 address bytes and a length up to 32 or 128", k)
	}
	return netip.PrefixFrom(a, int(k[len(k)-1])), nil
}

// sameFamilyKey says whether k, a key of the addrs (or, with one more
// byte, the blocks) bucket, holds an address of a's family: the buckets
// hold both, and IPv4 and IPv6 keys interleave in byte order.
func sameFamilyKey(k []byte, a netip.Addr, extra int) bool { return len(k) == len(a.AsSlice())+extra }
