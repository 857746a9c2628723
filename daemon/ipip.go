package daemon

import (
	"errors"
	"net/netip"

	"github.com/reefcni/reef/routes/tunnel"
)

// desiredIPIP is what tunl0 must be, purely: nil while no pool may use
// IPIP (reef then only takes its own address off it), else up, with the
// uplink's MTU less IPIP's overhead, and addr on it (none yet: the device
// runs without one until the first pod brings a block).
func (n netInfo) desiredIPIP(addr netip.Addr) *tunnel.IPIPConfig {
	if !n.ipipPool().IsValid() {
		return nil
	}
	return &tunnel.IPIPConfig{MTU: n.uplink.MTU - ipipOverhead, TunnelAddr: addr}
}

// syncIPIP brings tunl0 in line with desiredIPIP, its tunnel address
// reserved or released in the store first. reef never creates tunl0: this
// lab's kernel has no ipip module, and the error (tunnel.ErrNoIPIP) then
// says so in the log and reef status.
func (t *tunnels) syncIPIP(n netInfo) error {
	var errs []error
	addr := t.address(n, n.ipipHandle(), n.ipipPool(), &errs)
	have, err := t.kernel.ReadIPIP()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	plan, err := tunnel.DiffIPIP(n.desiredIPIP(addr), have)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if plan.Empty() {
		return errors.Join(errs...)
	}
	var what []any
	if plan.SetMTU != 0 {
		what = append(what, "mtu", plan.SetMTU, "was", have.MTU)
	}
	if plan.AddAddr.IsValid() {
		what = append(what, "addAddress", plan.AddAddr)
	}
	if len(plan.DelAddrs) > 0 {
		what = append(what, "removeAddresses", plan.DelAddrs)
	}
	if plan.SetUp {
		what = append(what, "setUp", true)
	}
	t.log.Info("bringing "+tunnel.IPIPDevice+" in line", what...)
	return errors.Join(append(errs, t.kernel.ApplyIPIP(plan))...)
}
