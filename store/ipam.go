package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Allocate gives ep.Handle an address from each of pools, in one
// transaction: one pool, or two of different families (a dual-stack pod).
//
// If the handle already has an endpoint record, Allocate returns that
// record unchanged with existed=true, so a repeated ADD gets the same
// addresses. Otherwise it takes, from each pool, the lowest free address
// of this node's confirmed blocks of that pool, blocks in ascending order.
// It never claims a block: that takes the block protocol (blockproto,
// ApplyProtocol). When every confirmed block of a pool is full it returns
// a *NoFreeAddressError naming that pool, and the other one if it is full
// too (errors.Is ErrNoFreeAddress), and takes no address from the other
// pool either: an allocation is whole or not at all.
//
// ep is the template of the record: Allocate sets IP, Block, Pool and
// Second (any values given are ignored; the IPv4 address is the first),
// Created if zero and State to EndpointPending if empty, and stores it.
// Its PortMappings are claimed in the same transaction (ClaimPorts'
// check: a port another endpoint holds fails the whole allocation with a
// *PortTakenError). For a handle that exists already nothing is written
// and its record is returned (existed): its ports are the caller's to
// change with ClaimPorts.
func (s *Store) Allocate(ep Endpoint, pools ...Pool) (got Endpoint, existed bool, err error) {
	return s.AllocateThen(ep, nil, pools...)
}

// AllocateThen is Allocate that calls chosen (nil: none) with the new
// record once it is written, before the write is committed and synced
// to disk: the caller can start on the record's addresses while the disk
// syncs (an ADD's NetworkPolicy cover). The commit may still fail, with
// Allocate's error; chosen is not called for a handle that existed, or
// for an allocation that fails before it is written. It runs in the write
// transaction: it must return at once, and not call the store.
func (s *Store) AllocateThen(ep Endpoint, chosen func(Endpoint), pools ...Pool) (got Endpoint, existed bool, err error) {
	if ep.Handle == "" {
		return Endpoint{}, false, errors.New("allocate: handle is empty")
	}
	pools, err = allocationPools(pools)
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("allocate %s: %w", ep.Handle, err)
	}
	if ep.State == "" {
		ep.State = EndpointPending
	}
	if !ep.State.valid() {
		return Endpoint{}, false, fmt.Errorf("allocate %s: unknown state %q", ep.Handle, ep.State)
	}
	if err := validatePortMappings(ep.PortMappings); err != nil {
		return Endpoint{}, false, fmt.Errorf("allocate %s: %w", ep.Handle, err)
	}
	pms := ep.PortMappings
	if len(pms) == 0 {
		pms = nil // the stored form of none
	}
	ep.PortMappings = nil // claimPorts sets them
	if ep.Created.IsZero() {
		// UTC and no monotonic reading: what comes back from the file.
		ep.Created = time.Now().UTC().Round(0)
	}

	// Everything from the handle lookup to the final write happens in this
	// one closure: bbolt runs one writer at a time, so no other Allocate can
	// see the address as free between our read and our write. An error
	// rolls the whole transaction back, an address already taken from the
	// first pool included.
	err = s.update(func(tx *bolt.Tx) error {
		eps := tx.Bucket(bucketEndpoints)
		old, ok, err := getEndpoint(eps, ep.Handle)
		if err != nil {
			return err
		}
		if ok {
			got, existed = old, true
			return nil
		}

		as, err := s.takeAddresses(tx, ep.Handle, pools)
		if err != nil {
			return err
		}
		ep.IP, ep.Block, ep.Pool, ep.Second = as[0].IP, as[0].Block, as[0].Pool, Assignment{}
		if len(as) > 1 {
			ep.Second = as[1]
		}
		if pms != nil {
			err = claimPorts(tx, &ep, pms) // writes ep
		} else {
			err = putEndpoint(eps, ep)
		}
		if err != nil {
			return err
		}
		got = ep
		if chosen != nil {
			chosen(ep)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("allocate %s: %w", ep.Handle, err)
	}
	return got, existed, nil
}

// takeAddresses takes the lowest free address of this node's confirmed
// blocks of each pool for handle, or returns a *NoFreeAddressError naming
// every pool without one (the caller's transaction then rolls back the
// addresses taken).
func (s *Store) takeAddresses(tx *bolt.Tx, handle string, pools []Pool) ([]Assignment, error) {
	blocks, addrs := tx.Bucket(bucketBlocks), tx.Bucket(bucketAddrs)
	var as []Assignment
	var full []netip.Prefix
	for _, pool := range pools {
		ip, block, found, err := s.freeInOwnBlocks(blocks, addrs, pool)
		if err != nil {
			return nil, err
		}
		if !found {
			// Look at the other pool still: the ADD waits for a block of
			// each full pool at once, not one after the other.
			full = append(full, pool.CIDR)
			continue
		}
		if err := putKeyed(addrs, ip, addrKey(ip), []byte(handle)); err != nil {
			return nil, fmt.Errorf("write address %s: %w", ip, err)
		}
		as = append(as, Assignment{IP: ip, Block: block, Pool: pool.CIDR})
	}
	if len(full) > 0 {
		return nil, &NoFreeAddressError{Pools: full}
	}
	return as, nil
}

// NoFreeAddressError is Allocate's error when a pool has no free address
// in this node's confirmed blocks: Pools are every such pool of the
// allocation (one, or both of a dual-stack pod's), each needing a new
// block. It matches ErrNoFreeAddress.
type NoFreeAddressError struct{ Pools []netip.Prefix }

func (e *NoFreeAddressError) Error() string {
	ps := make([]string, len(e.Pools))
	for i, p := range e.Pools {
		ps[i] = p.String()
	}
	return fmt.Sprintf("pool %s: %s in this node's confirmed blocks", strings.Join(ps, " and "), ErrNoFreeAddress)
}

func (e *NoFreeAddressError) Is(target error) bool { return target == ErrNoFreeAddress }

// allocationPools checks the pools of one allocation (one, or one of each
// family) and returns them IPv4 first.
func allocationPools(pools []Pool) ([]Pool, error) {
	switch {
	case len(pools) == 0:
		return nil, errors.New("no pool given")
	case len(pools) > 2:
		return nil, fmt.Errorf("%d pools given: an endpoint has at most one address of each family", len(pools))
	}
	for _, p := range pools {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	if len(pools) == 2 {
		if pools[0].CIDR.Addr().Is4() == pools[1].CIDR.Addr().Is4() {
			return nil, fmt.Errorf("pools %s and %s are of one family: an endpoint has at most one address of each family", pools[0].CIDR, pools[1].CIDR)
		}
		if pools[0].CIDR.Addr().Is6() {
			pools = []Pool{pools[1], pools[0]}
		}
	}
	return pools, nil
}

// freeInOwnBlocks returns the lowest free address of this node's blocks of
// pool. Blocks of other owners are skipped: their addresses are theirs to
// give, even if this file shows none of them in use.
func (s *Store) freeInOwnBlocks(blocks, addrs *bolt.Bucket, pool Pool) (netip.Addr, netip.Prefix, bool, error) {
	// Blocks of the pool lie inside it, so a seek to its start and a stop
	// past its end visits only them, in address order.
	end := addrKey(lastAddr(pool.CIDR))
	c := blocks.Cursor()
	for k, v := c.Seek(blockKey(netip.PrefixFrom(pool.CIDR.Addr(), 0))); k != nil; k, v = c.Next() {
		if !sameFamilyKey(k, pool.CIDR.Addr(), 1) {
			continue // the other family's, whose length byte sorts apart from ours
		}
		if bytes.Compare(k[:len(k)-1], end) > 0 {
			break
		}
		r, err := decodeBlock(k, v)
		if err != nil {
			return netip.Addr{}, netip.Prefix{}, false, err
		}
		if !s.own(r) || r.State == BlockPending || r.State == BlockLost || r.Pool != pool.CIDR {
			continue
		}
		if ip, ok := firstFree(addrs, r.CIDR); ok {
			return ip, r.CIDR, true, nil
		}
	}
	return netip.Addr{}, netip.Prefix{}, false, nil
}

// Release removes the endpoint record of handle and frees its addresses
// and hostPorts, in one transaction, and returns the record removed. An unknown handle is not
// an error (found=false): DEL must be safe to repeat. The block stays this
// node's even when it becomes empty, as in Calico: keeping it spares a
// claim and a BGP announcement for the next pod.
func (s *Store) Release(handle string) (ep Endpoint, found bool, err error) {
	if handle == "" {
		return Endpoint{}, false, errors.New("release: handle is empty")
	}
	err = s.update(func(tx *bolt.Tx) error {
		eps := tx.Bucket(bucketEndpoints)
		ep, found, err = getEndpoint(eps, handle)
		if err != nil || !found {
			return err
		}
		addrs := tx.Bucket(bucketAddrs)
		// Free an address only if it is still this handle's: a damaged
		// file must not let one DEL take another pod's address.
		for _, ip := range ep.Addrs() {
			if bytes.Equal(addrs.Get(addrKey(ip)), []byte(handle)) {
				if err := addrs.Delete(addrKey(ip)); err != nil {
					return fmt.Errorf("free address %s: %w", ip, err)
				}
			}
		}
		// The same for its hostPorts.
		if err := dropPortIndex(tx.Bucket(bucketHostPorts), handle, ep.PortMappings); err != nil {
			return err
		}
		if err := eps.Delete([]byte(handle)); err != nil {
			return fmt.Errorf("delete endpoint record: %w", err)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("release %s: %w", handle, err)
	}
	return ep, found, nil
}
