package daemon

import (
	"errors"
	"log/slog"
	"net/netip"

	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/store"
)

// natDataplane is the daemon's side of package nat: reef's nftables tables
// (table ip reef: natOutgoing; table arp reef: the pods' ARP filter). CNI
// ADD and DEL add and remove one pod's element through it, and every
// reconcile pass compares the tables with the pools and the live endpoints
// and repairs what differs. Stopping the daemon leaves the tables in place;
// `reef cleanup` removes them.
type natDataplane struct {
	kernel  *nat.Kernel
	pools   []nat.Pool
	log     *slog.Logger
	trigger func()
	// programmed: a pass has brought the tables in line. Before that,
	// creating them is the normal start of a new node, not a repair.
	programmed bool
}

// setupNAT gives the CNI server and the reconcile loop the nftables
// dataplane, in the daemon's network namespace (the node's).
func (d *Daemon) setupNAT() {
	n := &natDataplane{kernel: nat.NewKernel(), log: d.log.With("component", "nftables"), trigger: d.rec.Trigger}
	for _, p := range d.cfg.Pools {
		n.pools = append(n.pools, nat.Pool{CIDR: p.CIDR, NATOutgoing: p.NATOutgoing})
	}
	d.cni.PodFilter = n
	d.rec.nat = n
}

// AddPod adds the pod's ARP-filter element. A missing table is not the
// pod's fault: the ADD goes on, and the reconcile pass it triggers
// recreates the table with every live pod's element, this one's included.
func (n *natDataplane) AddPod(veth string, ip netip.Addr) error {
	err := n.kernel.AddPod(nat.Pod{Veth: veth, IP: ip})
	if errors.Is(err, nat.ErrNoTable) {
		n.log.Warn("nftables table arp reef is missing at ADD; triggering a reconcile pass to recreate it", "veth", veth, "ip", ip, "error", err)
		n.trigger()
		return nil
	}
	return err
}

// DelPod removes the pod's ARP-filter element; absent is success.
func (n *natDataplane) DelPod(veth string, ip netip.Addr) error {
	return n.kernel.DelPod(nat.Pod{Veth: veth, IP: ip})
}

// reconcile brings reef's tables in line with the pools and the live
// endpoints, in one batch, and logs each change with what differed. A nil
// natDataplane does nothing (reconciler tests without nftables).
func (n *natDataplane) reconcile(live []store.Endpoint) error {
	if n == nil {
		return nil
	}
	var pods []nat.Pod
	for _, ep := range live {
		if ep.HostVeth != "" {
			pods = append(pods, nat.Pod{Veth: ep.HostVeth, IP: ep.IP})
		}
	}
	want := nat.Desired(nat.IPv4, n.pools, pods)
	have, err := n.kernel.Read(nat.IDs(want))
	if err != nil {
		return err
	}
	plan := nat.Diff(want, have)
	for _, c := range plan.Changes {
		if !n.programmed && c.Kind == nat.CreateTable {
			n.log.Info("creating nftables table", "table", c.Table.ID.String())
			continue
		}
		n.log.Warn("repairing nftables: "+c.Why, "change", c.Kind.String(), "table", c.Table.ID.String())
	}
	if err := n.kernel.Apply(plan); err != nil {
		return err
	}
	n.programmed = true
	return nil
}
