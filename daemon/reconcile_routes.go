package daemon

// The pass's routes: the blocks' owner and the pods' owner brought in
// line from one read of the kernel, what they changed logged and
// counted, and `reef routes`' comparison.

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// syncRoutes brings the routes and the pods' objects in line, from one
// read of the kernel (the blocks' owner's Read): through the blocks'
// owner, the own blocks' blackholes and the other nodes' blocks of
// snapshot; then, through the pods' owner, the pods' /32s and /128s, no
// veth without a pod, the pods' MTU on both ends of every veth pair and,
// with limits (a whole pass), each limited pod's tc and no ifb without a
// pod. After reading the kernel, before either owner changes it, it
// drops from live the endpoints a CNI operation touched since the mark,
// and returns the rest with the veths the kernel had and the MTU of each
// one's node-side end after the pass (nil when the kernel could not be
// read).
func (r *reconciler) syncRoutes(live []store.Endpoint, snapshot routes.BlockSnapshot, mark *activity.Mark, limits bool) ([]store.Endpoint, map[string]int, error) {
	have, err := r.blockRoutes.Read()
	if err != nil {
		return live, nil, err
	}
	live = untouched(live, mark.Touched())
	blocks, err := r.blockRoutes.Sync(snapshot, have)
	blocksIn, started := r.blocksIn, !r.blocksSynced
	r.blocksIn = blocksLeft(snapshot.Want().Routes, have.Routes, err)
	if err == nil {
		r.blocksSynced = true
	}
	errs := []error{err}
	want := podsOf(live, r.net.podMTU)
	sync := r.pods.SyncRoutes
	if limits {
		sync = r.pods.Sync
	}
	synced, err := sync(want, have, mark)
	errs = append(errs, err)
	r.logRoutes(blocks, synced.Plan, have, want, blocksIn, started)
	for _, c := range synced.TC {
		r.log.Warn("repaired: "+c.Change, "veth", c.HostVeth, "ip", ipOfVeth(live, c.HostVeth))
	}
	r.metrics.Repaired(metrics.RepairTC, len(synced.TC))
	for _, ifb := range synced.IFBs {
		r.log.Warn("removed an ifb no pod's egress limit uses", "ifb", ifb)
	}
	r.metrics.Repaired(metrics.RepairLink, len(synced.IFBs))
	return live, synced.MTUs, errors.Join(errs...)
}

// blocksLeft is the block routes a Sync that wanted want, on a kernel
// that had had, left there: every one of them when it succeeded; after an
// error, which of its changes landed is not known, so only those the
// kernel already had as wanted (the plan did not touch them). Dropping
// them all, as before, left a route deleted after a failed pass uncounted
// as a repair at every pass after.
func blocksLeft(want, had map[netip.Prefix]routes.Route, err error) map[netip.Prefix]routes.Route {
	if err == nil {
		return want
	}
	left := map[netip.Prefix]routes.Route{}
	for dst, rt := range want {
		if cur, ok := had[dst]; ok && cur == rt {
			left[dst] = rt
		}
	}
	return left
}

// ipOfVeth is the addresses of the endpoint of live whose veth is veth,
// for the log.
func ipOfVeth(live []store.Endpoint, veth string) string {
	for _, ep := range live {
		if ep.HostVeth == veth {
			return ep.AddrsString()
		}
	}
	return ""
}

// logRoutes logs and counts what the pass changed: blocks, its own plan,
// and pods, what the pods' owner applied. blocksIn is the block routes
// the last pass left in the kernel: one of them added again was deleted
// since, by hand or with its device (vxlan.reef deleted), a repair; one
// the kernel has as the last pass left it but that is wanted otherwise
// now is a change, not a repair. started: no Sync of the blocks has ended
// since the start, whose config may route another node's block otherwise
// (through vxlan.reef or not): changing such a route then is no repair.
func (r *reconciler) logRoutes(blocks, pods routes.Plan, have routes.State, want []routes.Pod, blocksIn map[netip.Prefix]routes.Route, started bool) {
	plan := routes.Plan{Replace: slices.Concat(blocks.Replace, pods.Replace), DeleteRoute: slices.Concat(blocks.DeleteRoute, pods.DeleteRoute),
		SetMTU: pods.SetMTU, DeleteLink: pods.DeleteLink}
	podAddrs := map[netip.Prefix]bool{} // the pods' /32s and /128s: ADD writes them, so a pass that adds one repairs it
	for _, ep := range want {
		for _, ip := range ep.IPs {
			podAddrs[netip.PrefixFrom(ip, ip.BitLen())] = true
		}
	}
	for _, rt := range plan.Replace {
		cur, ok := have.Routes[rt.Dst]
		was, had := blocksIn[rt.Dst]
		if ok && (had && was == cur || started && rt.Kind == routes.RemoteRoute && cur.Kind == routes.RemoteRoute) {
			// What the kernel has is what reef wanted before: the block
			// is routed otherwise now (its owner's address changed, or
			// this start's config), not repaired.
			r.log.Info("changing route", "route", rt.String(), "was", cur.String())
		} else if ok {
			r.log.Warn("repairing route", "want", rt.String(), "have", cur.String())
			r.metrics.Repaired(metrics.RepairRoute, 1)
		} else if was, ok := blocksIn[rt.Dst]; ok && was == rt {
			r.log.Warn("repairing route: it was deleted", "want", rt.String())
			r.metrics.Repaired(metrics.RepairRoute, 1)
		} else {
			r.log.Info("adding route", "route", rt.String())
			if podAddrs[rt.Dst] {
				r.metrics.Repaired(metrics.RepairRoute, 1)
			}
		}
	}
	for _, rt := range plan.DeleteRoute {
		if rt.Kind != routes.PodRoute && !r.net.inPools(rt.Dst) {
			r.log.Info("removing route of a pool gone from the config", "route", rt.String())
			continue
		}
		r.log.Warn("removing route no pod or block needs", "route", rt.String())
		r.metrics.Repaired(metrics.RepairRoute, 1)
	}
	ips := map[string]string{}
	for _, ep := range want {
		ips[ep.HostVeth] = joinAddrs(ep.IPs)
	}
	for _, m := range plan.SetMTU {
		r.log.Info("pod MTU changed", "ip", ips[m.HostVeth], "veth", m.HostVeth, "from", have.MTUs[m.HostVeth].MTU, "to", m.MTU)
	}
	for _, l := range plan.DeleteLink {
		r.log.Warn("removing veth no pod owns", "veth", l)
	}
	r.metrics.Repaired(metrics.RepairLink, len(plan.DeleteLink))
}

// joinAddrs is a pod's addresses as one log value: "10.244.0.5", or
// "10.244.0.5,fd00:10:244::5".
func joinAddrs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}

// podRoutes are the live endpoints that have a pod (not a reserved
// address such as the tunnel's), as package routes wants them, each veth
// pair with the pods' MTU (0: leave it).
func podRoutes(live []store.Endpoint, mtu int) []routes.Endpoint {
	var want []routes.Endpoint
	for _, pod := range podsOf(live, mtu) {
		want = append(want, pod.Endpoint)
	}
	return want
}

// podsOf are the live endpoints that have a pod, as the pods' owner wants
// them, with their bandwidth limits.
func podsOf(live []store.Endpoint, mtu int) []routes.Pod {
	var want []routes.Pod
	for _, ep := range live {
		if ep.State == store.EndpointReserved {
			continue
		}
		pod := routes.Pod{Endpoint: routes.Endpoint{IPs: ep.Addrs(), HostVeth: ep.HostVeth, Netns: ep.Netns, IfName: ep.IfName, MTU: mtu}}
		if ep.Bandwidth != nil {
			bw := cniserver.RoutesBandwidth(*ep.Bandwidth)
			pod.Bandwidth = &bw
		}
		want = append(want, pod)
	}
	return want
}

// compareRoutes is `reef routes`: the routes and veths reef wants next to
// the kernel's, without changing anything (the pass would release
// endpoints and sync the tunnels; this reads). Endpoints count as a
// routes-only pass counts them: ready and reserved ones. What CNI
// operations touched while it read is left out of both sides, as a pass
// leaves it alone.
func (r *reconciler) compareRoutes() (want, have routes.State, err error) {
	mark := r.activity.Mark()
	defer mark.Close()
	eps, err := r.store.Endpoints()
	if err != nil {
		return want, have, err
	}
	know(mark, eps)
	blocks, err := r.store.Blocks()
	if err != nil {
		return want, have, err
	}
	var errs []error
	own, remote, _ := r.routedBlocks(blocks, &errs)
	if have, err = r.blockRoutes.Read(); err != nil {
		return want, have, err
	}
	t := mark.Touched()
	maps.DeleteFunc(have.Links, func(name string, _ bool) bool { return t.Link(name) })
	maps.DeleteFunc(have.Routes, func(dst netip.Prefix, rt routes.Route) bool {
		return rt.Kind == routes.PodRoute && dst.IsSingleIP() && (t.Addr(dst.Addr()) || t.Link(rt.Dev))
	})
	live := untouched(readyEndpoints(eps), t)
	return routes.Desired(podRoutes(live, r.net.podMTU), own, remote, have.Links), have, errors.Join(errs...)
}

// compareEntries is routes.Compare of want and have, with each route reef
// wants and the kernel lacks marked routes.EntryInTheWay, the foreign
// route in Have, where a route of another protocol holds its place: reef
// does not overwrite it (routes.ForeignRouteError), so no pass repairs it.
func (r *reconciler) compareEntries(want, have routes.State) []routes.Entry {
	entries := routes.Compare(want, have)
	for i, e := range entries {
		if e.Kind != "route" || e.State != routes.EntryMissing {
			continue
		}
		dst, err := netip.ParsePrefix(e.Object)
		if err != nil {
			continue
		}
		if fe := (*routes.ForeignRouteError)(nil); errors.As(r.kernel.InTheWay(dst), &fe) {
			entries[i].State = routes.EntryInTheWay
			entries[i].Have = fmt.Sprintf("%s proto %s", dst, fe.Protocol)
		}
	}
	return entries
}

// sameRouting says whether two block lists route the same: the same blocks,
// in the same states, of the same owners. (Used and the other counters do
// not matter to the kernel.)
func sameRouting(a, b []store.Block) bool {
	return slices.EqualFunc(a, b, func(x, y store.Block) bool {
		return x.CIDR == y.CIDR && x.State == y.State && x.OwnerAddr == y.OwnerAddr && x.OwnerInc == y.OwnerInc && x.Own() == y.Own()
	})
}
