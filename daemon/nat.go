package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/conntrack"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/store"
)

// natDataplane is the daemon's side of package nat: reef's nftables tables
// (table inet reef-nat: natOutgoing of both families; table arp reef: the
// IPv4 pods' ARP filter; table ip6 reef-ndp, with an IPv6 pool: the IPv6
// pods' NDP filter; table inet reef-hostport: the pods' hostPorts). CNI
// ADD and DEL add and remove one pod's element through it, and every
// reconcile pass compares the tables with the pools and the live endpoints
// and repairs what differs, and deletes the tables nat.Retired names (an
// earlier version's masquerade tables among them) in the same batch.
// Stopping the daemon leaves the tables in place; `reef cleanup` removes
// them.
type natDataplane struct {
	// mu orders ADD's and DEL's elements with a pass: a pass that asks
	// which pods CNI operations touched, under mu, sees every AddPod and
	// DelPod before it, and none comes between its read and its write.
	mu      sync.Mutex
	kernel  natKernel
	metrics *metrics.Metrics // nil: off
	pools   []masq.Pool
	log     *slog.Logger
	// flushConntrack deletes the conntrack entries of a deleted pod's
	// address (conntrack.FlushAddr, in the daemon's namespace); nil:
	// none (the tests' fake kernels, which must not touch the host's).
	flushConntrack func(netip.Addr) error
	// flushUDP deletes the conntrack entries of a UDP hostPort an ADD
	// maps (hostport.FlushUDPConntrack, in the daemon's namespace); nil:
	// none, as flushConntrack.
	flushUDP func(hostport.Mapping) error
	// programmed: a pass has brought the tables in line. Before that,
	// creating them is the normal start of a new node, not a repair.
	programmed bool
}

// newNATDataplane is the nftables dataplane of the daemon's network
// namespace (the node's). Its commits are accounted in gens (nil: none),
// which the policy dataplane follows.
func newNATDataplane(pools []PoolConfig, m *metrics.Metrics, log *slog.Logger, gens *nft.Generations) *natDataplane {
	k := nat.NewKernel()
	k.Follow(gens)
	n := &natDataplane{kernel: k, metrics: m, log: log.With("component", "nftables"), flushConntrack: conntrack.FlushAddr,
		flushUDP: hostport.FlushUDPConntrack}
	for _, p := range pools {
		n.pools = append(n.pools, masq.Pool{CIDR: p.CIDR, NATOutgoing: p.NATOutgoing})
	}
	return n
}

// AddPod adds the pod's ARP-filter element and its hostPorts, and
// flushes the conntrack entries of its UDP hostPorts (a client's old
// entry would keep sending to where the port went before). A missing
// table is not the pod's fault: the error wraps cniserver.ErrRepairLater,
// the ADD goes on, and the whole pass it asks for once it has ended
// recreates the tables with every live pod's elements, this one's
// included.
func (n *natDataplane) AddPod(ep store.Endpoint) error {
	p, err := natPod(ep)
	if err != nil {
		return err
	}
	n.mu.Lock()
	err = n.kernel.AddPod(p)
	n.mu.Unlock()
	if errors.Is(err, nat.ErrNoTable) {
		return fmt.Errorf("add the elements of %s (%s): %w: %w", ep.HostVeth, ep.AddrsString(), err, cniserver.ErrRepairLater)
	}
	if err != nil {
		return err
	}
	n.flushUDPPorts(p.Ports)
	return nil
}

// flushUDPPorts deletes the conntrack entries of the UDP hostPorts of
// ports: a client's entry keeps sending where the port led when it was
// made, mapped since or unmapped. A failure is logged.
func (n *natDataplane) flushUDPPorts(ports []hostport.Mapping) {
	for _, hp := range ports {
		if hp.Proto != unix.IPPROTO_UDP || n.flushUDP == nil {
			continue
		}
		if err := n.flushUDP(hp); err != nil {
			n.log.Warn("flush conntrack entries of a UDP hostPort", "hostPort", hp.Port, "error", err)
		}
	}
}

// DelPod removes the pod's ARP-filter element and hostPorts, and flushes
// the conntrack entries of its UDP hostPorts (a repeated ADD that drops
// one keeps the pod's address, which Forget's flush goes by); absent is
// success.
func (n *natDataplane) DelPod(ep store.Endpoint) error {
	p, err := natPod(ep)
	if err != nil {
		return err
	}
	n.mu.Lock()
	err = n.kernel.DelPod(p)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	n.flushUDPPorts(p.Ports)
	return nil
}

// Forget deletes the conntrack entries of the pod's addresses, its veth
// gone (cniserver.PodForgetter): the next pod given one of them starts
// with none (an established flow is accepted before any NetworkPolicy,
// and a client still sending to the old pod's hostPort would reach the
// new one through its DNAT entry). A failure is logged; the DEL goes on.
func (n *natDataplane) Forget(ep store.Endpoint) {
	if n.flushConntrack == nil {
		return
	}
	for _, a := range ep.Addrs() {
		if err := n.flushConntrack(a); err != nil {
			n.log.Warn("delete the conntrack entries of a deleted pod's address", "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName, "ip", a, "error", err)
		}
	}
}

// CheckPod lists what of the pod's ARP-filter, NDP-filter and hostPort
// elements the kernel lacks, for CNI CHECK; it only reads.
func (n *natDataplane) CheckPod(ep store.Endpoint) ([]string, error) {
	c, ok := n.kernel.(interface {
		CheckPod(nat.Pod) ([]string, error)
	})
	if !ok {
		return nil, nil // a kernel that cannot say (a test's fake)
	}
	p, err := natPod(ep)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return c.CheckPod(p)
}

// natPod is an endpoint as package nat sees it.
func natPod(ep store.Endpoint) (nat.Pod, error) {
	p := nat.Pod{Veth: ep.HostVeth, IPs: ep.Addrs()}
	for _, m := range ep.PortMappings {
		proto, ok := nft.Proto(m.Protocol)
		if !ok {
			return p, fmt.Errorf("endpoint %s: hostPort %s: unknown protocol %q", ep.Handle, m, m.Protocol)
		}
		p.Ports = append(p.Ports, hostport.Mapping{Proto: proto, HostIP: m.HostIP, Port: m.HostPort, PodPort: m.ContainerPort})
	}
	return p, nil
}

// reconcile brings reef's tables in line with the pools and the live
// endpoints, in one batch, and logs each change with what differed. The
// elements of pods that CNI operations touched since mark stay as the
// kernel has them (nft.LeaveAlone). A nil natDataplane does nothing
// (reconciler tests without nftables).
func (n *natDataplane) reconcile(live []store.Endpoint, mark *activity.Mark) error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	touched := mark.Touched()
	var pods []nat.Pod
	for _, ep := range untouched(live, touched) {
		if ep.HostVeth == "" {
			continue
		}
		p, err := natPod(ep)
		if err != nil {
			n.log.Error("a pod's hostPorts cannot be programmed", "error", err)
		}
		pods = append(pods, p)
	}
	want, retired := nat.Desired(n.pools, pods), nat.Retired(n.pools)
	have, err := n.kernel.Read(append(nat.IDs(want), retired...))
	if err != nil {
		return err
	}
	// One batch: an earlier version's masquerade tables go as table inet
	// reef-nat comes, so that no packet sees neither or both.
	plan := nft.Diff(nft.LeaveAlone(want, have, func(e nft.Elem) bool { return touchedElem(e, touched) }), have)
	plan.Changes = append(plan.Changes, nft.Retire(retired, have)...)
	for _, c := range plan.Changes {
		if !n.programmed && c.Kind == nft.CreateTable {
			n.log.Info("creating nftables table", "table", c.Table.ID.String())
			continue
		}
		// The pools' sets are the config's: on a start with pools added
		// or removed they differ from what the previous run wrote, and
		// that is no drift.
		if !n.programmed && c.Table.ID == masq.TableID && (c.Kind == nft.AddElems || c.Kind == nft.DelElems) {
			n.log.Info("updating nftables pool set to the configured pools: "+c.Why, "change", c.Kind.String(), "table", c.Table.ID.String())
			continue
		}
		if c.Kind == nft.DeleteTable {
			why := "no pool is IPv6 any more"
			if slices.Contains(masq.OldTableIDs, c.Table.ID) {
				why = "an earlier version's masquerade, now in table " + masq.TableID.String()
			}
			n.log.Info("deleting nftables table: "+why, "table", c.Table.ID.String())
			continue
		}
		n.log.Warn("repairing nftables: "+c.Why, "change", c.Kind.String(), "table", c.Table.ID.String())
		n.metrics.Repaired(metrics.RepairNFTables, 1)
	}
	if err := n.kernel.Apply(plan); err != nil {
		return err
	}
	n.programmed = true
	return nil
}

// touchedElem says whether e is an element of a pod that t names: by its
// veth (the ARP filter), its address (the hairpin set) or the address a
// hostPort leads to.
func touchedElem(e nft.Elem, t activity.Touched) bool {
	return e.Iface != "" && t.Link(e.Iface) ||
		e.From.IsValid() && e.From == e.To && t.Addr(e.From) ||
		e.Value.IsValid() && t.Addr(e.Value.Addr())
}
