package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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

// Endpoint is one pod attachment: the addresses it holds, at most one of
// each family, and the kernel objects made for it.
type Endpoint struct {
	Handle       string // "<network name>.<container id>", the key
	Network      string
	ContainerID  string
	IfName       string
	Netns        string
	PodNamespace string
	PodName      string
	HostVeth     string // node-side veth name
	// IP, Block and Pool are the endpoint's first address, the block it
	// came from and the block's pool: its IPv4 address when it has one.
	IP    netip.Addr
	Block netip.Prefix
	Pool  netip.Prefix
	// Second is its address of the other family (a dual-stack pod: always
	// the IPv6 one); zero when it has one address.
	Second  Assignment
	MTU     int
	State   EndpointState
	Created time.Time
	// PortMappings are the pod's hostPorts, each held by this endpoint
	// alone on the node. Only ClaimPorts changes them, because it keeps the
	// hostports index with them; nil is none.
	PortMappings []PortMapping
	Bandwidth    *Bandwidth // nil: no limits
}

// Assignment is one address of an endpoint, the block it came from and
// the block's pool. It is stored as it is, so its JSON tags are part of
// the file format.
type Assignment struct {
	IP    netip.Addr   `json:"ip"`
	Block netip.Prefix `json:"block"`
	Pool  netip.Prefix `json:"pool"`
}

// Assignments are the endpoint's addresses with their blocks: the first
// (IP, Block, Pool), then Second if it has one. A reserved endpoint may
// have none yet.
func (ep Endpoint) Assignments() []Assignment {
	var out []Assignment
	if ep.IP.IsValid() {
		out = append(out, Assignment{IP: ep.IP, Block: ep.Block, Pool: ep.Pool})
	}
	if ep.Second.IP.IsValid() {
		out = append(out, ep.Second)
	}
	return out
}

// Addrs are the endpoint's addresses, as the routes and the CNI result
// take them: one, or one of each family (IPv4 first).
func (ep Endpoint) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, a := range ep.Assignments() {
		out = append(out, a.IP)
	}
	return out
}

// Holds reports whether ip is one of the endpoint's addresses.
func (ep Endpoint) Holds(ip netip.Addr) bool {
	return ip.IsValid() && (ep.IP == ip || ep.Second.IP == ip)
}

// HasIPv6 reports whether the endpoint has an IPv6 address.
func (ep Endpoint) HasIPv6() bool { return ep.IP.Is6() || ep.Second.IP.Is6() }

// AddrsString is the endpoint's addresses for a message or a log line:
// "10.244.0.5" or "10.244.0.5,fd00:10:244::5".
func (ep Endpoint) AddrsString() string {
	s := make([]string, 0, 2)
	for _, a := range ep.Addrs() {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
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
	Second       Assignment    `json:"second,omitzero"` // absent in files of pods with one address
	MTU          int           `json:"mtu,omitempty"`
	State        EndpointState `json:"state"`
	Created      time.Time     `json:"created"`
	PortMappings []PortMapping `json:"portMappings,omitempty"`
	Bandwidth    *Bandwidth    `json:"bandwidth,omitempty"`
}

// PortMapping is one hostPort of a pod (CNI capability portMappings). It is
// stored as it is, so its JSON tags are part of the file format.
type PortMapping struct {
	Protocol      string     `json:"protocol"`        // "tcp", "udp" or "sctp"
	HostIP        netip.Addr `json:"hostIP,omitzero"` // zero: every local address of the node
	HostPort      uint16     `json:"hostPort"`
	ContainerPort uint16     `json:"containerPort"`
}

// Bandwidth is a pod's limits (CNI capability bandwidth): rates in bits per
// second, bursts in bits, as the CNI convention has them; 0 is no limit in
// that direction. It is stored as it is, so its JSON tags are part of the
// file format.
type Bandwidth struct {
	IngressRate  uint64 `json:"ingressRate,omitempty"`
	IngressBurst uint64 `json:"ingressBurst,omitempty"`
	EgressRate   uint64 `json:"egressRate,omitempty"`
	EgressBurst  uint64 `json:"egressBurst,omitempty"`
}

// String gives the mapping as "tcp 8080 -> 80", or "tcp 192.168.1.5:8080 ->
// 80" when it is bound to one host address.
func (m PortMapping) String() string {
	return fmt.Sprintf("%s %s -> %d", m.Protocol, m.hostPort(), m.ContainerPort)
}

// hostPort is the host side of m: "8080", "192.168.1.5:8080" or
// "[fd00::1]:8080".
func (m PortMapping) hostPort() string {
	if !m.HostIP.IsValid() {
		return strconv.Itoa(int(m.HostPort))
	}
	return netip.AddrPortFrom(m.HostIP, m.HostPort).String()
}

// Overlaps reports whether m and o cannot both be given to pods of one
// node: the same protocol and host port, on the same host address or with
// either on every address.
func (m PortMapping) Overlaps(o PortMapping) bool {
	if m.Protocol != o.Protocol || m.HostPort != o.HostPort {
		return false
	}
	return !m.HostIP.IsValid() || !o.HostIP.IsValid() || m.HostIP == o.HostIP
}

// Recovered reports whether the record was rebuilt by Recover from the
// kernel alone, without its container ID.
func (ep Endpoint) Recovered() bool { return strings.HasPrefix(ep.Handle, RecoveredHandlePrefix) }

func (ep Endpoint) record() endpointRecord { return endpointRecord(ep) }

func (r endpointRecord) endpoint() Endpoint { return Endpoint(r) }

// clone is ep with its own PortMappings and Bandwidth.
func (ep Endpoint) clone() Endpoint {
	ep.PortMappings = slices.Clone(ep.PortMappings)
	if ep.Bandwidth != nil {
		b := *ep.Bandwidth
		ep.Bandwidth = &b
	}
	return ep
}

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
	err = s.view(func(tx *bolt.Tx) error {
		ep, ok, err = getEndpoint(tx.Bucket(bucketEndpoints), handle)
		return err
	})
	return ep, ok, err
}

// Endpoints returns every endpoint record, sorted by Handle.
func (s *Store) Endpoints() ([]Endpoint, error) {
	var out []Endpoint
	err := s.view(func(tx *bolt.Tx) error {
		// bbolt iterates in byte order of the keys, which is the sort order
		// of the handles as Go strings.
		var err error
		out, err = s.cache.endpoints(tx.Bucket(bucketEndpoints))
		return err
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
	err = s.view(func(tx *bolt.Tx) error {
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
// the handle has no record. IP, Block, Pool and Second belong to the allocation and
// cannot change here: release and allocate again instead. Nor can
// PortMappings, which the hostports index follows: ep must carry the stored
// ones (it does when it was read from the store after the last ClaimPorts),
// and ClaimPorts changes them. A zero Created keeps the stored one.
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
		if err := samePortMappings(old, ep); err != nil {
			return fmt.Errorf("set endpoint %s: %w", ep.Handle, err)
		}
		// Equal, but the stored form (nil for none) is the one to keep.
		ep.PortMappings = old.PortMappings
		if ep.Created.IsZero() {
			ep.Created = old.Created
		}
		return putEndpoint(eps, ep)
	})
}

// UpdateEndpoint changes the record of handle in one transaction: change
// gets the stored record and returns whether to write it back, changed.
// It says whether it wrote; a record that is not there is not an error
// (false). What IPAM owns (address, block, pool, hostPorts) cannot change.
func (s *Store) UpdateEndpoint(handle string, change func(*Endpoint) bool) (bool, error) {
	wrote := false
	err := s.update(func(tx *bolt.Tx) error {
		eps := tx.Bucket(bucketEndpoints)
		old, ok, err := getEndpoint(eps, handle)
		if err != nil {
			return fmt.Errorf("update endpoint %s: %w", handle, err)
		}
		if !ok {
			return nil
		}
		ep := old
		ep.PortMappings = slices.Clone(old.PortMappings)
		if !change(&ep) {
			return nil
		}
		if !ep.State.valid() {
			return fmt.Errorf("update endpoint %s: unknown state %q", handle, ep.State)
		}
		if err := sameAllocation(old, ep); err != nil {
			return fmt.Errorf("update endpoint %s: %w", handle, err)
		}
		if err := samePortMappings(old, ep); err != nil {
			return fmt.Errorf("update endpoint %s: %w", handle, err)
		}
		ep.Handle = handle
		wrote = true
		return putEndpoint(eps, ep)
	})
	return wrote && err == nil, err
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
	case ep.Second != old.Second:
		return fmt.Errorf("second address %s (block %s) differs from allocated %s (block %s); release and allocate again to change it",
			ep.Second.IP, ep.Second.Block, old.Second.IP, old.Second.Block)
	}
	return nil
}

// samePortMappings explains how ep's port mappings differ from old's: only
// ClaimPorts may change them, since it keeps the index with them.
func samePortMappings(old, ep Endpoint) error {
	if slices.Equal(old.PortMappings, ep.PortMappings) {
		return nil
	}
	return fmt.Errorf("port mappings [%s] differ from stored [%s]; change them with ClaimPorts",
		joinMappings(ep.PortMappings), joinMappings(old.PortMappings))
}

// joinMappings lists pms for a message: "tcp 8080 -> 80, udp 53 -> 53".
func joinMappings(pms []PortMapping) string {
	s := make([]string, len(pms))
	for i, m := range pms {
		s[i] = m.String()
	}
	return strings.Join(s, ", ")
}
