package store

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Problem is one inconsistency of the store's IPAM records, for `reef
// ipam check`.
type Problem struct {
	Kind   string     // ProblemOrphanAddress, ProblemUnindexed, ProblemOutsideBlocks
	IP     netip.Addr // the address concerned
	Handle string     // the endpoint or index entry's handle
	Detail string
}

// The kinds of Problem.
const (
	// ProblemOrphanAddress: the address index gives an address to a
	// handle that has no endpoint record, or whose record does not hold
	// it. ReleaseOrphanAddress frees it.
	ProblemOrphanAddress = "address-without-endpoint"
	// ProblemUnindexed: an endpoint's address is not its own in the index
	// (free there, or another handle's).
	ProblemUnindexed = "endpoint-without-allocation"
	// ProblemOutsideBlocks: an endpoint's address is in none of this
	// node's own blocks.
	ProblemOutsideBlocks = "address-outside-own-blocks"
)

// Check reads the endpoints, the address index and the blocks in one
// transaction and lists what does not agree.
func (s *Store) Check() ([]Problem, error) {
	var out []Problem
	err := s.view(func(tx *bolt.Tx) error {
		eps, addrs, blocks := tx.Bucket(bucketEndpoints), tx.Bucket(bucketAddrs), tx.Bucket(bucketBlocks)
		var own []netip.Prefix
		if err := blocks.ForEach(func(k, v []byte) error {
			r, err := decodeBlock(k, v)
			if err != nil {
				return err
			}
			if b := s.block(r, addrs); b.Own() {
				own = append(own, b.CIDR)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := addrs.ForEach(func(k, v []byte) error {
			ip, ok := netip.AddrFromSlice(k)
			if !ok {
				return nil
			}
			rec := eps.Get(v)
			if rec == nil {
				out = append(out, Problem{Kind: ProblemOrphanAddress, IP: ip, Handle: string(v),
					Detail: fmt.Sprintf("address %s is held by handle %s, which has no endpoint record", ip, v)})
				return nil
			}
			ep, err := decodeEndpoint(string(v), rec)
			if err != nil {
				return err
			}
			if !ep.Holds(ip) {
				out = append(out, Problem{Kind: ProblemOrphanAddress, IP: ip, Handle: string(v),
					Detail: fmt.Sprintf("address %s is held by handle %s, whose endpoint record does not hold it (it holds %s)", ip, v, ep.AddrsString())})
			}
			return nil
		}); err != nil {
			return err
		}
		return eps.ForEach(func(k, v []byte) error {
			ep, err := decodeEndpoint(string(k), v)
			if err != nil {
				return err
			}
			for _, a := range ep.Assignments() {
				out = append(out, checkAddr(ep.Handle, a.IP, addrs.Get(addrKey(a.IP)), own)...)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", s.path, err)
	}
	return out, nil
}

// ReleaseOrphanAddress frees ip in the address index if its holder has no
// endpoint record, or one that does not hold ip (ProblemOrphanAddress),
// and returns that holder. An address its holder's record holds is
// refused: Release frees it with its record.
func (s *Store) ReleaseOrphanAddress(ip netip.Addr) (handle string, err error) {
	if !ip.IsValid() || ip.Is4In6() || ip.Zone() != "" {
		return "", fmt.Errorf("release %s: not a plain IPv4 or IPv6 address", ip)
	}
	err = s.update(func(tx *bolt.Tx) error {
		addrs, eps := tx.Bucket(bucketAddrs), tx.Bucket(bucketEndpoints)
		holder := addrs.Get(addrKey(ip))
		if holder == nil {
			return fmt.Errorf("address %s is not allocated: %w", ip, ErrNotFound)
		}
		handle = string(holder)
		if rec := eps.Get(holder); rec != nil {
			ep, err := decodeEndpoint(handle, rec)
			if err != nil {
				return err
			}
			if ep.Holds(ip) {
				return fmt.Errorf("address %s belongs to endpoint %s: release the endpoint, not the address", ip, handle)
			}
		}
		return addrs.Delete(addrKey(ip))
	})
	if err != nil {
		return "", fmt.Errorf("release %s: %w", ip, err)
	}
	return handle, nil
}

// checkAddr is what is wrong with address ip of endpoint handle: the
// address index gives it to holder, and own are this node's blocks.
func checkAddr(handle string, ip netip.Addr, holder []byte, own []netip.Prefix) []Problem {
	var out []Problem
	switch {
	case holder == nil:
		out = append(out, Problem{Kind: ProblemUnindexed, IP: ip, Handle: handle,
			Detail: fmt.Sprintf("endpoint %s has address %s, which the address index has as free", handle, ip)})
	case !bytes.Equal(holder, []byte(handle)):
		out = append(out, Problem{Kind: ProblemUnindexed, IP: ip, Handle: handle,
			Detail: fmt.Sprintf("endpoint %s has address %s, which the address index gives to %s", handle, ip, holder)})
	}
	if !slices.ContainsFunc(own, func(b netip.Prefix) bool { return b.Contains(ip) }) {
		out = append(out, Problem{Kind: ProblemOutsideBlocks, IP: ip, Handle: handle,
			Detail: fmt.Sprintf("endpoint %s has address %s, in none of this node's blocks", handle, ip)})
	}
	return out
}
