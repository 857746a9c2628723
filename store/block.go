package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Block is a range of a pool with one owner node. Only the owner hands out
// addresses from it; that is what keeps pod addresses unique in a cluster.
type Block struct {
	CIDR      netip.Prefix
	Pool      netip.Prefix
	Owner     string     // node name; for another node's block the name its BGP session announced, or ""
	OwnerAddr netip.Addr // node address: with OwnerInc, the owner's identity in the block protocol
	OwnerInc  uint32     // the owner's incarnation (blockproto.Node)
	// OwnerAddr6 is another node's IPv6 address, from its record: its
	// IPv6 blocks are routed through it. Invalid for own blocks, and
	// while the owner's record has not given one.
	OwnerAddr6 netip.Addr
	// OwnerIPv6Only: the owner's record says it has no IPv4 address
	// (blockproto.Record.IPv6Only): its underlay is IPv6.
	OwnerIPv6Only bool
	State         BlockState
	Claimed       time.Time // own block: when this node claimed it; remote: when this node learned it
	Used          int       // allocated addresses (own blocks)
	Size          int       // addresses in the block
}

// BlockState is where a block stands in the block protocol.
type BlockState string

const (
	// BlockPending: this node claimed the block and announced the claim;
	// it gives out no address until the claim is confirmed.
	BlockPending BlockState = "pending"
	// BlockConfirmed: this node owns the block and gives out its addresses.
	BlockConfirmed BlockState = "confirmed"
	// BlockLost: this node's confirmed block that another node announces
	// confirmed too (blockproto.OwnLost): no address is given out from it
	// any more; pods that have one keep it.
	BlockLost BlockState = "lost"
	// BlockRemote: another node owns the block; traffic to it goes there.
	BlockRemote BlockState = "remote"
)

// Own reports whether the block is this node's (pending, confirmed or lost).
func (b Block) Own() bool {
	return b.State == BlockPending || b.State == BlockConfirmed || b.State == BlockLost
}

// blockRecord is a Block as stored. It is JSON because records are small,
// written only on a claim, and an operator can read them with `bbolt get`;
// above all, encoding/json ignores unknown fields and zero-fills missing
// ones, so fields can be added without a schema migration, and an older
// reef can still read a file a newer one wrote.
//
// The record describes a block whoever owns it. Blocks learned from other
// nodes go in the same bucket with their Owner, and will add omitempty
// fields such as the owner's node address, when it was last seen and
// whether a claim is pending or confirmed. The claim search already skips
// every block in the bucket, and only blocks whose Owner is this node give
// out addresses, so such records need no change to the allocation code.
// One key per block is what makes ownership single: a record for a block
// is replaced, never duplicated.
type blockRecord struct {
	CIDR        netip.Prefix `json:"cidr"`
	Pool        netip.Prefix `json:"pool"`
	Owner       string       `json:"owner"`
	OwnerAddr   netip.Addr   `json:"ownerAddr,omitzero"`
	OwnerInc    uint32       `json:"ownerInc,omitempty"`
	OwnerAddr6  netip.Addr   `json:"ownerAddr6,omitzero"`
	OwnerV6Only bool         `json:"ownerIPv6Only,omitempty"`
	State       BlockState   `json:"state,omitempty"` // "" in files of schema 1: confirmed if own
	Claimed     time.Time    `json:"claimed"`
}

// own reports whether the record is this node's block.
func (s *Store) own(r blockRecord) bool {
	return r.State == BlockPending || r.State == BlockConfirmed || r.State == BlockLost || (r.State == "" && r.Owner == s.node)
}

func (s *Store) block(r blockRecord, addrs *bolt.Bucket) Block {
	b := Block{CIDR: r.CIDR, Pool: r.Pool, Owner: r.Owner, OwnerAddr: r.OwnerAddr, OwnerInc: r.OwnerInc, OwnerAddr6: r.OwnerAddr6, OwnerIPv6Only: r.OwnerV6Only, State: r.State,
		Claimed: r.Claimed, Size: int(blockLen(r.CIDR))}
	if b.State == "" {
		b.State = BlockRemote
		if r.Owner == s.node {
			b.State = BlockConfirmed
		}
	}
	if s.own(r) && addrs != nil {
		b.Used = usedIn(addrs, r.CIDR)
	}
	return b
}

func decodeBlock(k, v []byte) (blockRecord, error) {
	cidr, err := parseBlockKey(k)
	if err != nil {
		return blockRecord{}, err
	}
	var r blockRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return blockRecord{}, fmt.Errorf("decode block %s: %w", cidr, err)
	}
	// The key is what the search and the uniqueness rest on; a record that
	// disagrees with it is damaged, and trusting either would be a guess.
	if r.CIDR != cidr {
		return blockRecord{}, fmt.Errorf("decode block %s: record says %s", cidr, r.CIDR)
	}
	return r, nil
}

func putBlock(blocks *bolt.Bucket, r blockRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode block %s: %w", r.CIDR, err)
	}
	if err := putKeyed(blocks, r.CIDR.Addr(), blockKey(r.CIDR), v); err != nil {
		return fmt.Errorf("write block %s: %w", r.CIDR, err)
	}
	return nil
}

// blockTaken reports whether any stored block, whoever owns it, overlaps
// c. Stored prefixes are masked, so a block containing c can only sit at
// one of c's shorter masks (exact lookups), and a block inside c must start
// within c (one seek). This stays right when a pool's block size changes
// and old and new blocks differ in length.
func blockTaken(blocks *bolt.Bucket, c netip.Prefix) bool {
	for bits := c.Bits(); bits >= 0; bits-- {
		if blocks.Get(blockKey(netip.PrefixFrom(c.Addr(), bits).Masked())) != nil {
			return true
		}
	}
	last := addrKey(lastAddr(c))
	cur := blocks.Cursor()
	for k, _ := cur.Seek(blockKey(netip.PrefixFrom(c.Addr(), 0))); k != nil; k, _ = cur.Next() {
		if sameFamilyKey(k, c.Addr(), 1) {
			return bytes.Compare(k[:len(k)-1], last) <= 0
		}
		// The other family's key: its length byte does not sort with
		// ours (a00:3::/120 sorts before 10.0.0.3/32), so it says
		// nothing about where our keys end.
	}
	return false
}

// usedIn counts the allocated addresses inside p.
func usedIn(addrs *bolt.Bucket, p netip.Prefix) int {
	last := addrKey(lastAddr(p))
	n := 0
	c := addrs.Cursor()
	for k, _ := c.Seek(addrKey(p.Addr())); k != nil && bytes.Compare(k, last) <= 0; k, _ = c.Next() {
		if sameFamilyKey(k, p.Addr(), 0) {
			n++
		}
	}
	return n
}

// firstFree returns the lowest unallocated address of p. Every address
// counts, network and broadcast included: a block is not a subnet, pods
// get /32s (/128s), and Calico does the same.
func firstFree(addrs *bolt.Bucket, p netip.Prefix) (netip.Addr, bool) {
	want, last := p.Masked().Addr(), lastAddr(p)
	c := addrs.Cursor()
	for k, _ := c.Seek(addrKey(want)); k != nil; k, _ = c.Next() {
		if !sameFamilyKey(k, want, 0) {
			continue // the other family's key, between two of ours
		}
		if a, _ := netip.AddrFromSlice(k); a != want {
			break // a gap: want is free
		}
		if want == last {
			return netip.Addr{}, false
		}
		want = want.Next()
	}
	return want, true
}

// Blocks returns every block the store knows, whoever owns it, in
// ascending address order. The caller owns the slice.
func (s *Store) Blocks() ([]Block, error) {
	blocks, gen, ok := s.cache.cachedBlocks()
	if ok {
		return blocks, nil
	}
	blocks, err := s.blocks(func(blockRecord) bool { return true })
	if err == nil {
		s.cache.keepBlocks(gen, blocks)
	}
	return blocks, err
}

// OwnBlocks returns the blocks owned by this node, pending or confirmed,
// in ascending address order.
func (s *Store) OwnBlocks() ([]Block, error) {
	return s.blocks(s.own)
}

func (s *Store) blocks(keep func(blockRecord) bool) ([]Block, error) {
	var out []Block
	err := s.view(func(tx *bolt.Tx) error {
		addrs := tx.Bucket(bucketAddrs)
		return tx.Bucket(bucketBlocks).ForEach(func(k, v []byte) error {
			r, err := decodeBlock(k, v)
			if err != nil {
				return err
			}
			if keep(r) {
				out = append(out, s.block(r, addrs))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list blocks in %s: %w", s.path, err)
	}
	return out, nil
}
