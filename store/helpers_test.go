package store

import (
	"errors"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// allocAuto is Allocate for tests of a lone node: when the confirmed blocks
// are full it claims and confirms a block at once (the first free one from
// the node's search offset), as the block protocol does on a node that is
// its own only voter, and reports newBlock.
func allocAuto(s *Store, ep Endpoint, pool Pool) (got Endpoint, existed, newBlock bool, err error) {
	got, existed, err = s.Allocate(ep, pool)
	if !errors.Is(err, ErrNoFreeAddress) {
		return got, existed, false, err
	}
	b, err := claimFree(s, pool)
	if err != nil {
		return Endpoint{}, false, false, err
	}
	if err := s.ApplyProtocol(blockproto.Changes{Confirm: []netip.Prefix{b}}); err != nil {
		return Endpoint{}, false, false, err
	}
	if got, existed, err = s.Allocate(ep, pool); errors.Is(err, ErrNoFreeAddress) {
		return allocAuto(s, ep, pool) // parallel callers filled it first
	}
	return got, existed, true, err
}

// claimFree records a pending claim of the first block of pool, from the
// node's offset, that the file does not have.
func claimFree(s *Store, pool Pool) (netip.Prefix, error) {
	bp := blockproto.Pool{CIDR: pool.CIDR, BlockSize: pool.BlockSize}
	n := bp.NumBlocks()
	off := blockproto.Offset(s.node, n)
	for i := range n {
		b := bp.Block((off + i) % n)
		taken := false
		s.db.View(func(tx *bolt.Tx) error {
			taken = blockTaken(tx.Bucket(bucketBlocks), b) || tx.Bucket(bucketReleased).Get(blockKey(b)) != nil
			return nil
		})
		if taken {
			continue
		}
		// A parallel caller may have taken it since: try the next one.
		if err := s.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: b, Pool: pool.CIDR}}}); err == nil {
			return b, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("pool %s %w", pool.CIDR, ErrPoolExhausted)
}
