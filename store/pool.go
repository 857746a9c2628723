package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Pool is an IPv4 range cut into blocks of equal size.
type Pool struct {
	CIDR      netip.Prefix // IPv4, masked
	BlockSize int          // prefix length of blocks, CIDR.Bits() <= BlockSize <= 32
}

// Validate reports why p cannot be used, naming the pool.
func (p Pool) Validate() error {
	switch {
	case !p.CIDR.IsValid():
		return errors.New("pool has no valid CIDR")
	case !p.CIDR.Addr().Is4():
		return fmt.Errorf("pool %s: not IPv4", p.CIDR)
	case p.CIDR != p.CIDR.Masked():
		return fmt.Errorf("pool %s: host bits set (did you mean %s?)", p.CIDR, p.CIDR.Masked())
	case p.BlockSize < p.CIDR.Bits() || p.BlockSize > 32:
		return fmt.Errorf("pool %s: block size /%d must be between /%d and /32", p.CIDR, p.BlockSize, p.CIDR.Bits())
	}
	return nil
}

// numBlocks is the number of blocks the pool is cut into.
func (p Pool) numBlocks() uint64 { return 1 << (p.BlockSize - p.CIDR.Bits()) }

// block returns the block with index i, 0 <= i < numBlocks.
func (p Pool) block(i uint64) netip.Prefix {
	start := uint64(addrUint(p.CIDR.Addr())) + i*blockLen(p.BlockSize)
	return netip.PrefixFrom(uintAddr(uint32(start)), p.BlockSize)
}

// blockLen is the number of addresses in a block of prefix length bits.
func blockLen(bits int) uint64 { return 1 << (32 - bits) }

// lastAddr is the highest address of p as a number.
func lastAddr(p netip.Prefix) uint32 {
	return uint32(uint64(addrUint(p.Addr())) + blockLen(p.Bits()) - 1)
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func uintAddr(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

// addrKey is the key of a in the addrs bucket.
func addrKey(a netip.Addr) []byte {
	b := a.As4()
	return b[:]
}

// blockKey is the key of a block in the blocks bucket: the address first,
// so that keys sort in address order, then the length, so that two
// prefixes with one start address (a pool whose block size changed) keep
// distinct keys.
func blockKey(p netip.Prefix) []byte {
	b := p.Addr().As4()
	return append(b[:], byte(p.Bits()))
}

// parseBlockKey is the inverse of blockKey.
func parseBlockKey(k []byte) (netip.Prefix, error) {
	if len(k) != 5 || k[4] > 32 {
		return netip.Prefix{}, fmt.Errorf("block key %x: want 4 address bytes and a length up to 32", k)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte(k[:4])), int(k[4])), nil
}
