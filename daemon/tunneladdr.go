package daemon

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/reefcni/reef/store"
)

// tunnelHandle is the IPAM handle of the node's VXLAN tunnel address.
func (n netInfo) tunnelHandle() string { return VXLANTunnelHandle(n.node) }

// tunnelHandle6 is the IPAM handle of the node's IPv6 VXLAN tunnel address.
func (n netInfo) tunnelHandle6() string { return VXLANTunnelHandle6(n.node) }

// ipipHandle is the IPAM handle of the node's IPIP tunnel address.
func (n netInfo) ipipHandle() string { return IPIPTunnelHandle(n.node) }

// VXLANTunnelHandle is the IPAM handle of node's VXLAN tunnel address.
func VXLANTunnelHandle(node string) string { return "vxlan-tunnel-addr-" + node }

// VXLANTunnelHandle6 is the IPAM handle of node's IPv6 VXLAN tunnel
// address.
func VXLANTunnelHandle6(node string) string { return "vxlan-v6-tunnel-addr-" + node }

// IPIPTunnelHandle is the IPAM handle of node's IPIP tunnel address.
func IPIPTunnelHandle(node string) string { return "ipip-tunnel-addr-" + node }

// address is the node's tunnel address of a tunnel (handle), brought in
// line with the store: with a pool (one uses the encapsulation; for the
// IPv6 address of vxlan.reef, an IPv6 pool uses VXLAN) it is the address
// the store holds, reserved in the first confirmed own block of pool when
// there is none yet (with no such block yet, the device runs without one
// until the first pod brings a block); without one, the store's is
// released and there is none.
func (t *tunnels) address(n netInfo, handle string, pool netip.Prefix, errs *[]error) netip.Addr {
	ep, found, err := t.store.Endpoint(handle)
	switch {
	case err != nil:
		*errs = append(*errs, err)
		return netip.Addr{}
	case found && !pool.IsValid():
		if _, _, err := t.store.Release(handle); err != nil {
			*errs = append(*errs, err)
		} else {
			t.log.Info("released a tunnel address: no pool uses its encapsulation", "handle", handle, "ip", ep.IP)
		}
		return netip.Addr{}
	case found:
		return ep.IP
	case !pool.IsValid():
		return netip.Addr{}
	}
	var sp store.Pool
	for _, p := range n.pools {
		if p.CIDR == pool {
			sp = store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}
		}
	}
	ep, _, err = t.store.Allocate(store.Endpoint{Handle: handle, State: store.EndpointReserved, Network: ""}, sp)
	if errors.Is(err, store.ErrNoFreeAddress) {
		return netip.Addr{}
	}
	if err != nil {
		*errs = append(*errs, fmt.Errorf("reserve tunnel address %s: %w", handle, err))
		return netip.Addr{}
	}
	t.log.Info("reserved a tunnel address", "ip", ep.IP, "handle", handle)
	return ep.IP
}

// tunnelAddrs are vxlan.reef's tunnel addresses, held in the store: the
// IPv4 and IPv6 ones.
type tunnelAddrs struct{ vxlan, vxlan6 netip.Addr }
