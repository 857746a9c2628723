package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"
)

// protocolNumbers are the IP protocol numbers that start hostports keys.
var protocolNumbers = map[string]byte{"tcp": 6, "udp": 17, "sctp": 132}

// PortTakenError is the error of ClaimPorts when Holder holds a hostPort
// that overlaps Mapping, the one asked for. It matches ErrPortTaken.
type PortTakenError struct {
	Mapping PortMapping
	Holder  Endpoint
}

func (e *PortTakenError) Error() string {
	return fmt.Sprintf("hostPort %s %s %s %s", e.Mapping.Protocol, e.Mapping.hostPort(), ErrPortTaken, holderName(e.Holder))
}

// Unwrap makes errors.Is(err, ErrPortTaken) hold.
func (e *PortTakenError) Unwrap() error { return ErrPortTaken }

// holderName names ep for a person: "pod default/web (container abc123,
// handle k8s-pod-network.abc123)", or by container or handle alone when it
// has no pod.
func holderName(ep Endpoint) string {
	switch {
	case ep.PodName != "" && ep.PodNamespace != "":
		return fmt.Sprintf("pod %s/%s (container %s, handle %s)", ep.PodNamespace, ep.PodName, ep.ContainerID, ep.Handle)
	case ep.PodName != "":
		return fmt.Sprintf("pod %s (container %s, handle %s)", ep.PodName, ep.ContainerID, ep.Handle)
	case ep.ContainerID != "":
		return fmt.Sprintf("container %s (handle %s)", ep.ContainerID, ep.Handle)
	}
	return "endpoint " + ep.Handle
}

// ClaimPorts makes pms the port mappings of the endpoint of handle, in one
// transaction, and returns the updated record. It fails with a
// *PortTakenError (ErrPortTaken) if another endpoint holds a host port that
// overlaps one of pms; then nothing changes. The ports the endpoint held
// before and does not ask for again are freed, so a repeated call is a no-op
// and a call with no mappings clears them.
func (s *Store) ClaimPorts(handle string, pms []PortMapping) (Endpoint, error) {
	if handle == "" {
		return Endpoint{}, errors.New("claim ports: handle is empty")
	}
	if err := validatePortMappings(pms); err != nil {
		return Endpoint{}, fmt.Errorf("claim ports for %s: %w", handle, err)
	}
	if len(pms) == 0 {
		pms = nil // the stored form of none
	}
	var ep Endpoint
	err := s.update(func(tx *bolt.Tx) error {
		var ok bool
		var err error
		ep, ok, err = getEndpoint(tx.Bucket(bucketEndpoints), handle)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("endpoint %s %w", handle, ErrNotFound)
		}
		return claimPorts(tx, &ep, pms)
	})
	if err != nil {
		return Endpoint{}, fmt.Errorf("claim ports for %s: %w", handle, err)
	}
	return ep, nil
}

// claimPorts is ClaimPorts inside a transaction: it checks pms against the
// other endpoints, frees the ports ep held before, claims pms and writes
// ep with them. pms are valid (validatePortMappings).
func claimPorts(tx *bolt.Tx, ep *Endpoint, pms []PortMapping) error {
	eps, hp := tx.Bucket(bucketEndpoints), tx.Bucket(bucketHostPorts)
	for _, m := range pms {
		if err := checkPortFree(eps, hp, ep.Handle, m); err != nil {
			return err
		}
	}
	if err := dropPortIndex(hp, ep.Handle, ep.PortMappings); err != nil {
		return err
	}
	for _, m := range pms {
		if err := hp.Put(portKey(m), []byte(ep.Handle)); err != nil {
			return fmt.Errorf("write hostPort %s: %w", m, err)
		}
	}
	ep.PortMappings = pms
	return putEndpoint(eps, *ep)
}

// validatePortMappings reports the first mapping of pms that cannot be
// claimed, or two that overlap each other.
func validatePortMappings(pms []PortMapping) error {
	for i, m := range pms {
		if err := validatePortMapping(m); err != nil {
			return err
		}
		for _, o := range pms[:i] {
			if m.Overlaps(o) {
				return fmt.Errorf("hostPort %s overlaps %s of the same request", m, o)
			}
		}
	}
	return nil
}

func validatePortMapping(m PortMapping) error {
	if _, ok := protocolNumbers[m.Protocol]; !ok {
		return fmt.Errorf("hostPort %s: protocol %q is not tcp, udp or sctp", m, m.Protocol)
	}
	if m.HostPort == 0 {
		return fmt.Errorf("hostPort %s: host port is 0", m)
	}
	if m.ContainerPort == 0 {
		return fmt.Errorf("hostPort %s: container port is 0", m)
	}
	// Each host address must have one key, and the key is compared with ==
	// when checking overlaps: forms that mean the same address differently
	// are refused rather than silently rewritten.
	ip := m.HostIP
	switch {
	case !ip.IsValid():
	case ip.IsUnspecified():
		return fmt.Errorf("hostPort %s: host IP %s stands for every address; leave it zero instead", m, ip)
	case ip.Is4In6():
		return fmt.Errorf("hostPort %s: host IP %s is IPv4 in IPv6 form; give it as %s", m, ip, ip.Unmap())
	case ip.Zone() != "":
		return fmt.Errorf("hostPort %s: host IP %s has a zone", m, ip)
	}
	return nil
}

// portKey is the hostports key of m: protocol number, host port and host
// address, if any, in its 4- or 16-byte form.
func portKey(m PortMapping) []byte {
	k := portPrefix(m)
	if m.HostIP.IsValid() {
		k = append(k, m.HostIP.AsSlice()...)
	}
	return k
}

// portPrefix is the start every hostports key of m's protocol and host port
// shares, whatever the host address.
func portPrefix(m PortMapping) []byte {
	return binary.BigEndian.AppendUint16([]byte{protocolNumbers[m.Protocol]}, m.HostPort)
}

// keyHostIP decodes the host address of a hostports key; ok is false for a
// malformed one.
func keyHostIP(k []byte) (ip netip.Addr, ok bool) {
	switch a := k[3:]; len(a) {
	case 0:
		return netip.Addr{}, true
	case 4, 16:
		ip, _ = netip.AddrFromSlice(a)
		return ip, true
	}
	return netip.Addr{}, false
}

// checkPortFree fails with a *PortTakenError if an endpoint other than
// handle holds a mapping that overlaps m. Index entries that no record
// backs any more are deleted on the way.
func checkPortFree(eps, hp *bolt.Bucket, handle string, m PortMapping) error {
	prefix := portPrefix(m)
	var stale [][]byte
	c := hp.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if string(v) == handle {
			continue // ours: replaced below
		}
		ip, ok := keyHostIP(k)
		if !ok {
			// No record's mapping has this key, so it guards nothing.
			stale = append(stale, bytes.Clone(k))
			continue
		}
		held := PortMapping{Protocol: m.Protocol, HostIP: ip, HostPort: m.HostPort}
		if !held.Overlaps(m) {
			continue
		}
		holder, ok, err := getEndpoint(eps, string(v))
		if err != nil {
			return err
		}
		if ok && listsKey(holder.PortMappings, k) {
			return &PortTakenError{Mapping: m, Holder: holder}
		}
		stale = append(stale, bytes.Clone(k))
	}
	for _, k := range stale {
		if err := hp.Delete(k); err != nil {
			return fmt.Errorf("delete stale hostports entry %x: %w", k, err)
		}
	}
	return nil
}

// listsKey reports whether a mapping of pms has the hostports key k.
func listsKey(pms []PortMapping, k []byte) bool {
	for _, m := range pms {
		if bytes.Equal(portKey(m), k) {
			return true
		}
	}
	return false
}

// dropPortIndex deletes the index entries of pms that are handle's. One
// that another handle holds is left alone: it was never this one's to free.
func dropPortIndex(hp *bolt.Bucket, handle string, pms []PortMapping) error {
	for _, m := range pms {
		k := portKey(m)
		if !bytes.Equal(hp.Get(k), []byte(handle)) {
			continue
		}
		if err := hp.Delete(k); err != nil {
			return fmt.Errorf("free hostPort %s: %w", m, err)
		}
	}
	return nil
}
