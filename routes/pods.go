package routes

import (
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/reefcni/reef/internal/keyed"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
)

// Pods is the one owner of the pods' kernel objects: each pod's veth pair
// and the pod's side of it, the node's /32 and /128 routes to the pod, the
// pair's MTU, the veth's sysctls (written through the sysctl owner), and
// the veth's tc qdiscs and ifb. The CNI path tells it that a pod now
// exists (Up, then Limit) or is gone (Down); the reconcile pass gives it
// the pods of its snapshot and what the kernel held (Sync), and it
// computes what they want, diffs and applies the difference.
//
// Its locks, one per veth, ifb and pod address, are its own: Up, Limit
// and Down hold a pod's while they write, and Sync takes each object's
// and asks Busy under it just before it changes the object, so that a CNI
// operation that began after the pass read the kernel is never undone
// (docs/design.md, "Who owns which kernel object"). The lock order is
// veth, ifb, then addresses in address order.
type Pods struct {
	k     PodKernel
	sys   *sysctl.Owner // nil: sets no sysctl
	locks keyed.Mutex
}

// PodKernel is the kernel as the pods' owner writes it (*Kernel). None of
// its methods locks: Pods is their one caller. Wire, Unwire and
// SetBandwidth run on the CNI operations' goroutines, the rest on the
// reconcile pass's.
type PodKernel interface {
	// Wire creates spec's veth pair and wires both ends (veth.Setup's
	// contract); settings, if not nil, is called once the node's end
	// exists and before it is up. On a failure it removes the pair again.
	Wire(spec veth.Spec, settings func(hostVeth string) error) (veth.Pair, error)
	// Unwire removes a veth pair by its node-side name, with the ifb of
	// its egress limit; what is already gone is success.
	Unwire(hostVeth string) error
	// Apply carries out a plan of pods' routes, MTUs and veths.
	Apply(p Plan) error
	SetBandwidth(hostVeth string, bw tc.Bandwidth) ([]string, error)
	RepairBandwidth(hostVeth string, bw tc.Bandwidth) ([]string, error)
	OrphanIFBs(live map[string]bool) ([]string, error)
	DeleteIFB(name string, inUse func(veth string) bool) (bool, error)
}

// NewPods returns the owner of the pods' objects in k, which asks sys for
// each veth's sysctls (nil: none).
func NewPods(k PodKernel, sys *sysctl.Owner) *Pods { return &Pods{k: k, sys: sys} }

// Up is ADD's "this pod now exists": it creates the pod's veth pair,
// asks the sysctl owner for the node end's settings before it is up, and
// wires both ends and the node's routes to the pod's addresses. A stale
// node-side veth of the same name (an earlier sandbox of the same pod) is
// replaced, with its ifb. On any failure nothing of the pod is left.
func (p *Pods) Up(spec veth.Spec) (veth.Pair, error) {
	defer p.lockPod(spec.HostVeth)()
	defer p.lockAddrs(spec.IPs)()
	return p.k.Wire(spec, p.settings(spec))
}

// settings is the request to the sysctl owner for spec's veth.
func (p *Pods) settings(spec veth.Spec) func(string) error {
	if p.sys == nil {
		return nil
	}
	pod := sysctl.Pod{HostVeth: spec.HostVeth, HostPorts: spec.HostPorts, IPv6: slices.ContainsFunc(spec.IPs, netip.Addr.Is6)}
	return func(string) error { _, err := p.sys.Pod(pod); return err }
}

// Limit is the rest of ADD: the pod's bandwidth limits, tc on its veth
// and its ifb (tc.SetBandwidth), under the pod's locks. It may run while
// the ADD does other work, once Up has returned.
func (p *Pods) Limit(hostVeth string, bw tc.Bandwidth) ([]string, error) {
	defer p.lockPod(hostVeth)()
	return p.k.SetBandwidth(hostVeth, bw)
}

// Down is DEL's "this pod is gone": its veth pair goes, and with it the
// node's routes to the pod and its qdiscs, and its ifb. What is already
// gone is success, so it can be repeated. With still (nil: always), it
// does so only if still, asked under the veth's locks, says the veth is
// still the pod's: a newer sandbox of the same pod takes the name over
// (cniserver's detachOthers) and may create it again at any moment.
func (p *Pods) Down(hostVeth string, still func() bool) error {
	defer p.lockPod(hostVeth)()
	if still != nil && !still() {
		return nil
	}
	return p.k.Unwire(hostVeth)
}

// Pod is a pod as the reconcile pass wants its objects: its addresses
// routed to its veth, the pair at its MTU (0: as it is), and its limits.
type Pod struct {
	Endpoint
	// Bandwidth is the pod's limits; nil: the pod asked for none, and
	// reef's tc on its veth is left as it is (its ifb is an orphan).
	Bandwidth *tc.Bandwidth
}

// PodSync is what a Sync did, for the pass's log and its later steps.
type PodSync struct {
	// Plan is the routes, MTUs and veth deletions it applied, less what
	// was busy when it looked.
	Plan Plan
	// MTUs are the node-side veths the kernel had, each with its MTU after
	// the Sync (a new MTU counts once Apply ended without error).
	MTUs map[string]int
	// TC are the repairs of the pods' limits, IFBs the ifbs it removed
	// because no pod's egress limit uses them.
	TC   []TCChange
	IFBs []string
}

// TCChange is one repair of a pod's limits.
type TCChange struct{ HostVeth, Change string }

// Sync brings the pods' objects in line with want, the pods of the pass's
// snapshot, given have, what the pass read of the kernel: each pod's
// routes and its pair's MTU; no reef veth without a pod; each limited
// pod's tc; no ifb that no pod's egress limit uses. An object that busy
// names is left alone, asked under the object's lock just before it would
// change; nil is never busy. It goes on after a failure and returns them
// all.
func (p *Pods) Sync(want []Pod, have State, busy Busy) (PodSync, error) {
	out, err := p.SyncRoutes(want, have, busy)
	var tcErr error
	out.TC, out.IFBs, tcErr = p.syncTC(want, out.MTUs, orNotBusy(busy))
	return out, errors.Join(err, tcErr)
}

// SyncRoutes is Sync without the limits: the pods' routes, MTUs and veths,
// for a pass that only follows a change of what is routed.
func (p *Pods) SyncRoutes(want []Pod, have State, busy Busy) (PodSync, error) {
	busy = orNotBusy(busy)
	have = have.PodObjects()
	eps := make([]Endpoint, len(want))
	for i, pod := range want {
		eps[i] = pod.Endpoint
	}
	out := PodSync{Plan: Diff(Desired(eps, nil, nil, have.Links), have).Without(busy), MTUs: map[string]int{}}
	for l := range have.Links {
		out.MTUs[l] = have.MTUs[l].MTU
	}
	err := p.apply(out.Plan, busy)
	if err == nil {
		for _, m := range out.Plan.SetMTU {
			out.MTUs[m.HostVeth] = m.MTU
		}
	}
	return out, err
}

// apply carries out plan one object at a time, each under its locks and
// only if busy does not name it.
func (p *Pods) apply(plan Plan, busy Busy) error {
	var errs []error
	for _, r := range plan.Replace {
		errs = append(errs, p.route(r, busy, Plan{Replace: []Route{r}}))
	}
	for _, r := range plan.DeleteRoute {
		errs = append(errs, p.route(r, busy, Plan{DeleteRoute: []Route{r}}))
	}
	for _, m := range plan.SetMTU {
		errs = append(errs, p.link(m.HostVeth, busy, Plan{SetMTU: []PodMTU{m}}))
	}
	for _, l := range plan.DeleteLink {
		errs = append(errs, p.link(l, busy, Plan{DeleteLink: []string{l}}))
	}
	return errors.Join(errs...)
}

// route applies change, a plan of the one route r, under the locks of its
// veth (the route is written on the veth's index) and its address.
func (p *Pods) route(r Route, busy Busy, change Plan) error {
	if linkname.Ours(r.Dev) {
		defer p.lockLink(r.Dev)()
	}
	defer p.lockAddr(r.Dst.Addr())()
	if busy.Addr(r.Dst.Addr()) || busy.Link(r.Dev) {
		return nil
	}
	return p.k.Apply(change)
}

// link applies change, a plan of the one veth name, under its lock.
func (p *Pods) link(name string, busy Busy, change Plan) error {
	defer p.lockLink(name)()
	if busy.Link(name) {
		return nil
	}
	return p.k.Apply(change)
}

// syncTC repairs the limits of each pod in want whose veth the kernel has
// (veths), and removes the ifbs no pod's egress limit uses.
func (p *Pods) syncTC(want []Pod, veths map[string]int, busy Busy) (changes []TCChange, removed []string, err error) {
	var errs []error
	limited := map[string]bool{} // veths whose pods limit egress
	for _, pod := range want {
		veth := pod.HostVeth
		if _, ok := veths[veth]; !ok || veth == "" || pod.Bandwidth == nil {
			continue
		}
		limited[veth] = pod.Bandwidth.EgressRate != 0
		unlock := p.lockPod(veth)
		if !busy.Link(veth) {
			cs, err := p.k.RepairBandwidth(veth, *pod.Bandwidth)
			for _, c := range cs {
				changes = append(changes, TCChange{veth, c})
			}
			errs = append(errs, err)
		}
		unlock()
	}
	maps.DeleteFunc(limited, func(_ string, egress bool) bool { return !egress })
	orphans, err := p.k.OrphanIFBs(limited)
	errs = append(errs, err)
	for _, ifb := range orphans {
		unlock := p.lockIFB(ifb)
		gone, err := p.k.DeleteIFB(ifb, busy.Link)
		unlock()
		if gone {
			removed = append(removed, ifb)
		}
		errs = append(errs, err)
	}
	return changes, removed, errors.Join(errs...)
}

// Links is the pods' veths as the sysctl owner's pass asks for them
// (sysctl.Links): a veth's settings are written under its lock, and not
// at all while busy names it.
func (p *Pods) Links(busy Busy) sysctl.Links { return podLinks{p, orNotBusy(busy)} }

type podLinks struct {
	p    *Pods
	busy Busy
}

func (l podLinks) With(hostVeth string, write func()) {
	defer l.p.lockLink(hostVeth)()
	if !l.busy.Link(hostVeth) {
		write()
	}
}

func (p *Pods) lockLink(name string) (unlock func())   { return p.locks.Lock("link " + name) }
func (p *Pods) lockAddr(ip netip.Addr) (unlock func()) { return p.locks.Lock("addr " + ip.String()) }

// lockIFB locks an ifb by its own name: it has no alias for a moment after
// its creation, and the pass learns an ifb's veth from its alias.
func (p *Pods) lockIFB(name string) (unlock func()) { return p.locks.Lock("ifb " + name) }

// lockPod locks a pod's veth and its ifb, in that order.
func (p *Pods) lockPod(hostVeth string) (unlock func()) {
	unlockLink := p.lockLink(hostVeth)
	unlockIFB := p.lockIFB(tc.IFBName(hostVeth))
	return func() { unlockIFB(); unlockLink() }
}

// lockAddrs locks a pod's addresses in address order (IPv4 first), the
// one order every holder of more than one takes them in.
func (p *Pods) lockAddrs(ips []netip.Addr) (unlock func()) {
	sorted := slices.Clone(ips)
	slices.SortFunc(sorted, netip.Addr.Compare)
	sorted = slices.Compact(sorted)
	unlocks := make([]func(), 0, len(sorted))
	for _, ip := range sorted {
		unlocks = append(unlocks, p.lockAddr(ip))
	}
	return func() {
		for _, u := range slices.Backward(unlocks) {
			u()
		}
	}
}

// The node's kernel as PodKernel: the CNI operations' methods open
// netlink handles of their own, the pass's use the Kernel's.

// Wire is veth.Setup.
func (k *Kernel) Wire(spec veth.Spec, settings func(hostVeth string) error) (veth.Pair, error) {
	return veth.Setup(spec, settings)
}

// Unwire is veth.Teardown.
func (k *Kernel) Unwire(hostVeth string) error { return veth.Teardown(hostVeth) }

func (k *Kernel) SetBandwidth(hostVeth string, bw tc.Bandwidth) ([]string, error) {
	return tc.SetBandwidth(hostVeth, bw)
}

func (k *Kernel) RepairBandwidth(hostVeth string, bw tc.Bandwidth) ([]string, error) {
	return tc.RepairBandwidth(hostVeth, bw)
}

func (k *Kernel) OrphanIFBs(live map[string]bool) ([]string, error) { return tc.OrphanIFBs(live) }

func (k *Kernel) DeleteIFB(name string, inUse func(veth string) bool) (bool, error) {
	return tc.DeleteIFB(name, inUse)
}

var _ PodKernel = (*Kernel)(nil)
