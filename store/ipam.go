package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Allocate gives ep.Handle an address from pool, in one transaction.
//
// If the handle already has an endpoint record, Allocate returns that
// record unchanged with existed=true, so a repeated ADD gets the same
// address. Otherwise it takes the lowest free address of this node's
// confirmed blocks of the pool, blocks in ascending order. It never claims
// a block: that takes the block protocol (blockproto, ApplyProtocol). When every confirmed block is full it returns
// ErrNoFreeAddress, wrapped.
//
// ep is the template of the record: Allocate sets IP, Block and Pool (any
// values given are ignored), Created if zero and State to EndpointPending
// if empty, and stores it. Its PortMappings are claimed in the same
// transaction (ClaimPorts' check: a port another endpoint holds fails the
// whole allocation with a *PortTakenError). For a handle that exists
// already nothing is written and its record is returned (existed): its
// ports are the caller's to change with ClaimPorts.
func (s *Store) Allocate(ep Endpoint, pool Pool) (got Endpoint, existed bool, err error) {
	if ep.Handle == "" {
		return Endpoint{}, false, errors.New("allocate: handle is empty")
	}
	if err := pool.Validate(); err != nil {
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
	// see the address as free between our read and our write.
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

		blocks, addrs := tx.Bucket(bucketBlocks), tx.Bucket(bucketAddrs)
		ip, block, found, err := s.freeInOwnBlocks(blocks, addrs, pool)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("pool %s: %w in this node's confirmed blocks", pool.CIDR, ErrNoFreeAddress)
		}

		ep.IP, ep.Block, ep.Pool = ip, block, pool.CIDR
		if err := putKeyed(addrs, ip, addrKey(ip), []byte(ep.Handle)); err != nil {
			return fmt.Errorf("write address %s: %w", ip, err)
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
		return nil
	})
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("allocate %s: %w", ep.Handle, err)
	}
	return got, existed, nil
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

// Release removes the endpoint record of handle and frees its address and
// hostPorts, in one transaction, and returns the record removed. An unknown handle is not
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
		// Free the address only if it is still this handle's: a damaged
		// file must not let one DEL take another pod's address.
		if ep.IP.IsValid() && bytes.Equal(addrs.Get(addrKey(ep.IP)), []byte(handle)) {
			if err := addrs.Delete(addrKey(ep.IP)); err != nil {
				return fmt.Errorf("free address %s: %w", ep.IP, err)
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
