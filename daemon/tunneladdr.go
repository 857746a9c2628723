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

// tunnelAddress returns the node's tunnel address of a tunnel (handle),
// reserving it in the first confirmed own block of pool when there is
// none yet (with no such block yet, the device runs without one until the
// first pod brings a block). With no pool (none uses the encapsulation, or
// for the IPv6 address of vxlan.reef no IPv6 pool uses VXLAN), it
// releases it.
func (r *reconciler) tunnelAddress(handle string, pool netip.Prefix, errs *[]error) netip.Addr {
	ep, found, err := r.store.Endpoint(handle)
	if err != nil {
		*errs = append(*errs, err)
		return netip.Addr{}
	}
	if !pool.IsValid() {
		if found {
			if _, _, err := r.store.Release(handle); err != nil {
				*errs = append(*errs, err)
			} else {
				r.log.Info("released a tunnel address: no pool uses its encapsulation", "handle", handle, "ip", ep.IP)
			}
		}
		return netip.Addr{}
	}
	if found {
		return ep.IP
	}
	var sp store.Pool
	for _, p := range r.net.pools {
		if p.CIDR == pool {
			sp = store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}
		}
	}
	ep, _, err = r.store.Allocate(store.Endpoint{Handle: handle, State: store.EndpointReserved, Network: ""}, sp)
	if errors.Is(err, store.ErrNoFreeAddress) {
		return netip.Addr{}
	}
	if err != nil {
		*errs = append(*errs, fmt.Errorf("reserve tunnel address %s: %w", handle, err))
		return netip.Addr{}
	}
	r.log.Info("reserved a tunnel address", "ip", ep.IP, "handle", handle)
	return ep.IP
}

// tunnelAddrs are the node's tunnel addresses, held in the store: the
// IPv4 and IPv6 ones of vxlan.reef, and tunl0's.
type tunnelAddrs struct{ vxlan, vxlan6, ipip netip.Addr }

// tunnelAddresses is the store's side of the tunnels, before their desired
// state is computed: it reserves each tunnel's address in the first
// confirmed own block of its pool, or releases it when no pool uses the
// encapsulation any more (tunnelAddress).
func (r *reconciler) tunnelAddresses(errs *[]error) tunnelAddrs {
	return tunnelAddrs{
		vxlan:  r.tunnelAddress(r.net.tunnelHandle(), r.net.vxlanPool(), errs),
		vxlan6: r.tunnelAddress(r.net.tunnelHandle6(), r.net.vxlanPool6(), errs),
		ipip:   r.tunnelAddress(r.net.ipipHandle(), r.net.ipipPool(), errs),
	}
}
