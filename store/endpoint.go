package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"
)

// EndpointState is how far the plumbing of an endpoint got.
type EndpointState string

// The states of an endpoint. The startup reconcile finds interrupted ADDs
// by their pending state.
const (
	EndpointPending EndpointState = "pending" // address allocated, kernel plumbing not (yet) done: an ADD in flight or interrupted
	EndpointReady   EndpointState = "ready"
	// EndpointReserved holds an address that is no pod's: the node's
	// tunnel address (handle "vxlan-tunnel-addr-<node>").
	EndpointReserved EndpointState = "reserved"
)

// Endpoint is one pod attachment: the address it holds and the kernel
// objects made for it.
type Endpoint struct {
	Handle       string // "<network name>.<container id>", the key
	Network      string
	ContainerID  string
	IfName       string
	Netns        string
	PodNamespace string
	PodName      string
	HostVeth     string // node-side veth name
	IP           netip.Addr
	Block        netip.Prefix // the block IP came from
	Pool         netip.Prefix
	MTU          int
	State        EndpointState
	Created      time.Time
}

// endpointRecord is an Endpoint as stored, a type of its own so that a
// change to the Go API never silently changes the file format. JSON for
// the reasons given at blockRecord.
type endpointRecord struct {
	Handle       string        `json:"handle"`
	Network      string        `json:"network,omitempty"`
	ContainerID  string        `json:"containerID,omitempty"`
	IfName       string        `json:"ifName,omitempty"`
	Netns        string        `json:"netns,omitempty"`
	PodNamespace string        `json:"podNamespace,omitempty"`
	PodName      string        `json:"podName,omitempty"`
	HostVeth     string        `json:"hostVeth,omitempty"`
	IP           netip.Addr    `json:"ip"`
	Block        netip.Prefix  `json:"block"`
	Pool         netip.Prefix  `json:"pool"`
	MTU          int           `json:"mtu,omitempty"`
	State        EndpointState `json:"state"`
	Created      time.Time     `json:"created"`
}

func (ep Endpoint) record() endpointRecord { return endpointRecord(ep) }

func (r endpointRecord) endpoint() Endpoint { return Endpoint(r) }

func (st EndpointState) valid() bool {
	return st == EndpointPending || st == EndpointReady || st == EndpointReserved
}

// getEndpoint reads the record of handle; ok is false when there is none.
func getEndpoint(eps *bolt.Bucket, handle string) (ep Endpoint, ok bool, err error) {
	v := eps.Get([]byte(handle))
	if v == nil {
		return Endpoint{}, false, nil
	}
	ep, err = decodeEndpoint(handle, v)
	return ep, err == nil, err
}

func decodeEndpoint(handle string, v []byte) (Endpoint, error) {
	var r endpointRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Endpoint{}, fmt.Errorf("decode endpoint %s: %w", handle, err)
	}
	// The key is authoritative: it is what Release deletes.
	r.Handle = handle
	return r.endpoint(), nil
}

func putEndpoint(eps *bolt.Bucket, ep Endpoint) error {
	v, err := json.Marshal(ep.record())
	if err != nil {
		return fmt.Errorf("encode endpoint %s: %w", ep.Handle, err)
	}
	if err := eps.Put([]byte(ep.Handle), v); err != nil {
		return fmt.Errorf("write endpoint %s: %w", ep.Handle, err)
	}
	return nil
}

// Endpoint returns the record of handle; ok is false when there is none.
func (s *Store) Endpoint(handle string) (ep Endpoint, ok bool, err error) {
	if handle == "" {
		return Endpoint{}, false, errors.New("get endpoint: handle is empty")
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		ep, ok, err = getEndpoint(tx.Bucket(bucketEndpoints), handle)
		return err
	})
	return ep, ok, err
}

// Endpoints returns every endpoint record, sorted by Handle.
func (s *Store) Endpoints() ([]Endpoint, error) {
	var out []Endpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		// bbolt iterates in byte order of the keys, which is the sort order
		// of the handles as Go strings.
		return tx.Bucket(bucketEndpoints).ForEach(func(k, v []byte) error {
			ep, err := decodeEndpoint(string(k), v)
			out = append(out, ep)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list endpoints in %s: %w", s.path, err)
	}
	return out, nil
}

// EndpointsWithVeth returns the records whose node-side veth is name,
// sorted by Handle. Every ADD asks, so it decodes only the records whose
// bytes hold the name: a scan of raw values, not of decoded records.
func (s *Store) EndpointsWithVeth(name string) ([]Endpoint, error) {
	if name == "" {
		return nil, errors.New("endpoints with veth: name is empty")
	}
	quoted, err := json.Marshal(name)
	if err != nil {
		return nil, fmt.Errorf("endpoints with veth %q: %w", name, err)
	}
	needle := append([]byte(`"hostVeth":`), quoted...)
	var out []Endpoint
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEndpoints).ForEach(func(k, v []byte) error {
			if !bytes.Contains(v, needle) {
				return nil
			}
			ep, err := decodeEndpoint(string(k), v)
			if err == nil && ep.HostVeth == name {
				out = append(out, ep)
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("endpoints with veth %s in %s: %w", name, s.path, err)
	}
	return out, nil
}

// SetEndpoint overwrites the record of an existing endpoint, typically to
// mark it ready once the kernel plumbing is done. It returns ErrNotFound if
// the handle has no record. IP, Block and Pool belong to the allocation and
// cannot change here: release and allocate again instead. A zero Created
// keeps the stored one.
func (s *Store) SetEndpoint(ep Endpoint) error {
	if ep.Handle == "" {
		return errors.New("set endpoint: handle is empty")
	}
	if !ep.State.valid() {
		return fmt.Errorf("set endpoint %s: unknown state %q", ep.Handle, ep.State)
	}
	return s.update(func(tx *bolt.Tx) error {
		eps := tx.Bucket(bucketEndpoints)
		old, ok, err := getEndpoint(eps, ep.Handle)
		if err != nil {
			return fmt.Errorf("set endpoint %s: %w", ep.Handle, err)
		}
		if !ok {
			return fmt.Errorf("set endpoint: endpoint %s %w", ep.Handle, ErrNotFound)
		}
		if err := sameAllocation(old, ep); err != nil {
			return fmt.Errorf("set endpoint %s: %w", ep.Handle, err)
		}
		if ep.Created.IsZero() {
			ep.Created = old.Created
		}
		return putEndpoint(eps, ep)
	})
}

// sameAllocation explains how ep differs from old in what IPAM owns.
func sameAllocation(old, ep Endpoint) error {
	switch {
	case ep.IP != old.IP:
		return fmt.Errorf("ip %s differs from allocated %s; release and allocate again to change it", ep.IP, old.IP)
	case ep.Block != old.Block:
		return fmt.Errorf("block %s differs from allocated %s", ep.Block, old.Block)
	case ep.Pool != old.Pool:
		return fmt.Errorf("pool %s differs from allocated %s", ep.Pool, old.Pool)
	}
	return nil
}
