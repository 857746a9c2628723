package store

import (
	"errors"
	"time"
)

// allocAuto is Allocate for tests of a lone node: when the confirmed blocks
// are full it claims and confirms a block at once, as the block protocol
// does when no other node contests a claim, and reports newBlock.
func allocAuto(s *Store, ep Endpoint, pool Pool) (got Endpoint, existed, newBlock bool, err error) {
	got, existed, err = s.Allocate(ep, pool)
	if !errors.Is(err, ErrNoFreeAddress) {
		return got, existed, false, err
	}
	b, err := s.Claim(pool, time.Now())
	if err != nil {
		return Endpoint{}, false, false, err
	}
	if err := s.ConfirmBlock(b); err != nil {
		return Endpoint{}, false, false, err
	}
	got, existed, err = s.Allocate(ep, pool)
	return got, existed, true, err
}
