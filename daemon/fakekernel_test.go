package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/sysctl/sysctltest"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// fakeKernel is the node's kernel as the reconcile pass and the CNI
// operations see it through their seams (routesKernel, routes.BlockKernel,
// routes.PodKernel as fakePods, natKernel, and the sysctls through sysctltest), with the
// kernel's own rules where they matter to the pass:
// a route needs its device, a link takes its routes, sysctls, qdiscs and
// pod end with it, a missing table fails an element. It has the ipip
// module: tunl0 is there from the start, down, with an address that is
// not reef's. String prints it as text.
type fakeKernel struct {
	mu     sync.Mutex
	routes map[netip.Prefix]routes.Route
	links  map[string]int      // reef veths and their MTU
	peers  map[string]fakePeer // a veth's pod end
	ipip   tunnel.IPIPState    // tunl0
	vxlan  *fakeVXLAN          // vxlan.reef; nil: none (fakevxlan_test.go)
	// vxlanIPv6Off: a new vxlan.reef has IPv6 off and no EUI-64
	// link-local (the node's net.ipv6.conf.default says so).
	vxlanIPv6Off bool
	// holes are the moments a route through vxlan.reef had no neighbour
	// and fdb entry for its next hop (holesLocked): its packets were lost.
	holes []string
	// ipv6DefaultOff: a new veth has IPv6 off and no EUI-64 link-local
	// (the node's net.ipv6.conf.default says so); linkDefaults are
	// those defaults by key, which String leaves out as it leaves out
	// sysctltest's.
	ipv6DefaultOff bool
	linkDefaults   map[string]string
	tables         map[nft.TableID]nft.Table
	ifbs           map[string]string // ifb -> alias (its veth)
	limits         map[string]tc.Bandwidth
	sys            *sysctltest.Kernel
	// onRead, if set, runs once when the pass reads the routes: a CNI
	// operation that happens between the pass's store read and its
	// kernel read.
	onRead func()
	// afterRead, if set, runs once when the blocks' owner applies its
	// plan: a CNI operation that begins after the pass read the kernel
	// and before the pods' owner syncs.
	afterRead func()
	// uplinkIndex is the uplinks' index by name where it is not newNode's
	// 2: a link deleted and created again has another; 0: gone.
	uplinkIndex map[string]int
}

// fakePeer is the pod's end of a veth: its interface in its netns.
type fakePeer struct {
	netns, ifName string
	mtu           int
}

// operatorAddr is an address on tunl0 that is not reef's: every state
// keeps it.
var operatorAddr = netip.MustParseAddr("192.168.99.1")

func newFakeKernel() *fakeKernel {
	return &fakeKernel{routes: map[netip.Prefix]routes.Route{}, links: map[string]int{}, peers: map[string]fakePeer{},
		ipip:         tunnel.IPIPState{Present: true, MTU: 1480, Addrs: map[netip.Addr]bool{operatorAddr: false}},
		linkDefaults: map[string]string{}, tables: map[nft.TableID]nft.Table{}, ifbs: map[string]string{}, limits: map[string]tc.Bandwidth{}, sys: sysctltest.New()}
}

// String is the kernel's state, one sorted line per object.
func (k *fakeKernel) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var lines []string
	for name, mtu := range k.links {
		lines = append(lines, fmt.Sprintf("link %s mtu %d", name, mtu))
	}
	for veth, p := range k.peers {
		lines = append(lines, fmt.Sprintf("peer %s %s in %s mtu %d", veth, p.ifName, p.netns, p.mtu))
	}
	if k.ipip.Present {
		lines = append(lines, fmt.Sprintf("link %s mtu %d up %v", tunnel.IPIPDevice, k.ipip.MTU, k.ipip.Up))
		for a, ours := range k.ipip.Addrs {
			if ours {
				lines = append(lines, fmt.Sprintf("addr %s/32 dev %s label %s", a, tunnel.IPIPDevice, tunnel.IPIPLabel))
			} else {
				lines = append(lines, fmt.Sprintf("addr %s/32 dev %s", a, tunnel.IPIPDevice))
			}
		}
	}
	for _, r := range k.routes {
		lines = append(lines, "route "+r.String())
	}
	lines = append(lines, k.vxlanLines()...)
	for id, t := range k.tables {
		lines = append(lines, "table "+id.String())
		for _, s := range t.Sets {
			for _, e := range s.Elems {
				lines = append(lines, fmt.Sprintf("elem %s %s %s", id, s.Name, e))
			}
		}
	}
	for ifb, alias := range k.ifbs {
		lines = append(lines, fmt.Sprintf("ifb %s of %s", ifb, alias))
	}
	for veth, bw := range k.limits {
		lines = append(lines, fmt.Sprintf("tc %s in %d/%d out %d/%d", veth, bw.IngressRate, bw.IngressBurst, bw.EgressRate, bw.EgressBurst))
	}
	lines = append(lines, k.sysctlLinesLocked()...)
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// sysctlLinesLocked are the sysctls that differ from their defaults (a
// new link's defaults say nothing): sysctltest's, or the node's
// (linkDefaults).
func (k *fakeKernel) sysctlLinesLocked() []string {
	changed := map[string]bool{}
	for _, l := range strings.Split(k.sys.Changed(), "\n") {
		changed[l] = true
	}
	var lines []string
	for _, l := range strings.Split(k.sys.String(), "\n") {
		key, v, _ := strings.Cut(l, " = ")
		d, ok := k.linkDefaults[key]
		if ok && v != d || !ok && l != "" && changed[l] {
			lines = append(lines, "sysctl "+l)
		}
	}
	return lines
}

// addLink is a link's creation: the link with its default sysctls.
func (k *fakeKernel) addLink(name string, mtu int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.links[name] = mtu
	k.sys.AddLink(name)
	if k.ipv6DefaultOff {
		for _, key := range []string{sysctl.DisableIPv6(name), sysctl.AddrGenMode(name)} {
			k.sys.Put(key, "1")
			k.linkDefaults[key] = "1"
		}
	}
}

// addVeth is a veth pair's creation (ADD): both ends with one MTU.
func (k *fakeKernel) addVeth(name, netns, ifName string, mtu int) {
	k.addLink(name, mtu)
	k.mu.Lock()
	k.peers[name] = fakePeer{netns: netns, ifName: ifName, mtu: mtu}
	k.mu.Unlock()
}

// delLink is a link's deletion: its routes, qdiscs and sysctls go with it.
func (k *fakeKernel) delLink(name string) {
	k.mu.Lock()
	k.delLinkLocked(name)
	k.mu.Unlock()
	k.sys.DelLink(name)
}

func (k *fakeKernel) delLinkLocked(name string) {
	delete(k.links, name)
	delete(k.peers, name)
	delete(k.limits, name)
	maps.DeleteFunc(k.routes, func(_ netip.Prefix, r routes.Route) bool { return r.Dev == name })
}

// routes.BlockKernel

func (k *fakeKernel) Read() (routes.State, error) {
	if f := k.onRead; f != nil {
		k.onRead = nil
		f()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	links, mtus := map[string]bool{}, map[string]routes.PodMTU{}
	for l, mtu := range k.links {
		links[l] = true
		mtus[l] = routes.PodMTU{HostVeth: l, MTU: mtu}
	}
	return routes.State{Routes: maps.Clone(k.routes), Links: links, MTUs: mtus}, nil
}

func (k *fakeKernel) Apply(p routes.Plan) error {
	if f := k.afterRead; f != nil {
		k.afterRead = nil
		f()
	}
	return k.apply(p)
}

// apply is Apply without the hook: the pods' owner's (fakePods).
func (k *fakeKernel) apply(p routes.Plan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, r := range p.Replace {
		if r.Kind == routes.PodRoute && k.links[r.Dev] == 0 {
			continue // the veth vanished since the pass read it: nothing to route on (routes.Kernel.Apply)
		}
		if r.Dev == tunnel.VXLANDevice && k.vxlan == nil {
			errs = append(errs, fmt.Errorf("replace route %s: Link not found", r))
			continue
		}
		k.routes[r.Dst] = r
	}
	for _, r := range p.DeleteRoute {
		delete(k.routes, r.Dst)
	}
	for _, m := range p.SetMTU {
		errs = append(errs, k.setPodMTULocked(m))
	}
	for _, l := range p.DeleteLink {
		if !strings.HasPrefix(l, routes.HostVethPrefix) {
			errs = append(errs, fmt.Errorf("refusing to delete link %q: not a reef link", l))
			continue
		}
		k.delLinkLocked(l)
		k.sys.DelLink(l)
	}
	k.holesLocked("a route plan")
	return errors.Join(errs...)
}

// setPodMTULocked gives both ends of a veth pair m.MTU, as
// routes.Kernel.Apply does: the pod's end is found by its netns and name.
func (k *fakeKernel) setPodMTULocked(m routes.PodMTU) error {
	if _, ok := k.links[m.HostVeth]; !ok {
		return nil // vanished since the pass read it (routes.Kernel.Apply)
	}
	k.links[m.HostVeth] = m.MTU
	p, ok := k.peers[m.HostVeth]
	if !ok || p.netns != m.Netns || p.ifName != m.IfName {
		return fmt.Errorf("set MTU %d on %s in netns %s: Link not found", m.MTU, m.IfName, m.Netns)
	}
	p.mtu = m.MTU
	k.peers[m.HostVeth] = p
	return nil
}

func (k *fakeKernel) HopTo(netip.Addr) (routes.Hop, error) { return routes.Hop{Dev: "eth0"}, nil }

// HasAddr: the fake kernel's uplink (eth0) keeps its addresses; another
// index is a link that is gone.
func (k *fakeKernel) HasAddr(index int, _ netip.Addr) (routes.NodeAddrState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if index != k.linkIndexLocked("eth0") {
		return routes.AddrGone, fmt.Errorf("link %d: Link not found", index)
	}
	return routes.AddrPresent, nil
}

// InTheWay: the fake kernel has no route of another protocol.
func (k *fakeKernel) InTheWay(netip.Prefix) error { return nil }

func (k *fakeKernel) ReadIPIP() (tunnel.IPIPState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.ipip
	st.Addrs = maps.Clone(st.Addrs)
	return st, nil
}

func (k *fakeKernel) ApplyIPIP(p tunnel.IPIPPlan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ipip.Present {
		return tunnel.ErrNoIPIP
	}
	if p.SetMTU != 0 {
		k.ipip.MTU = p.SetMTU
	}
	if p.AddAddr.IsValid() {
		k.ipip.Addrs[p.AddAddr] = true
	}
	for _, a := range p.DelAddrs {
		if k.ipip.Addrs[a] { // the label must match, as in the kernel
			delete(k.ipip.Addrs, a)
		}
	}
	k.ipip.Up = k.ipip.Up || p.SetUp
	return nil
}

// fakePods is the fake kernel as the pods' owner writes it
// (routes.PodKernel): veth pairs, pod routes, MTUs, tc and ifbs.
type fakePods struct{ *fakeKernel }

// Wire is an ADD's veth pair: both ends, the settings before the node's
// end is up, the routes to the pod's addresses. A stale veth of the name
// is replaced, with its ifb.
func (k fakePods) Wire(spec veth.Spec, settings func(string) error) (veth.Pair, error) {
	if err := k.Unwire(spec.HostVeth); err != nil {
		return veth.Pair{}, err
	}
	k.addVeth(spec.HostVeth, spec.Netns, spec.IfName, spec.MTU)
	if settings != nil {
		if err := settings(spec.HostVeth); err != nil {
			k.delLink(spec.HostVeth)
			return veth.Pair{}, err
		}
	}
	if spec.BeforeRoutes != nil {
		if err := spec.BeforeRoutes(); err != nil {
			k.delLink(spec.HostVeth)
			return veth.Pair{}, err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ip := range spec.IPs {
		dst := netip.PrefixFrom(ip, ip.BitLen())
		k.routes[dst] = routes.Route{Dst: dst, Kind: routes.PodRoute, Dev: spec.HostVeth}
	}
	return veth.Pair{}, nil
}

// Unwire is a DEL's: the veth pair, with its routes, and its ifb if the
// ifb's alias names it.
func (k fakePods) Unwire(hostVeth string) error {
	k.delLink(hostVeth)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ifbs[tc.IFBName(hostVeth)] == hostVeth {
		delete(k.ifbs, tc.IFBName(hostVeth))
	}
	return nil
}

func (k fakePods) Apply(p routes.Plan) error { return k.apply(p) }

func (k fakePods) SetBandwidth(veth string, bw tc.Bandwidth) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.links[veth]; !ok {
		return nil, fmt.Errorf("find veth %s: Link not found", veth)
	}
	var changes []string
	if k.limits[veth] != bw {
		k.limits[veth] = bw
		changes = append(changes, "limits of "+veth)
	}
	ifb := tc.IFBName(veth)
	if bw.EgressRate != 0 && k.ifbs[ifb] != veth {
		k.ifbs[ifb] = veth
		changes = append(changes, "ifb "+ifb)
	}
	if bw.EgressRate == 0 && k.ifbs[ifb] == veth {
		delete(k.ifbs, ifb)
		changes = append(changes, "ifb "+ifb+" removed")
	}
	return changes, nil
}

// RepairBandwidth is SetBandwidth, for which a veth that is gone is no
// failure (tc.RepairBandwidth).
func (k fakePods) RepairBandwidth(veth string, bw tc.Bandwidth) ([]string, error) {
	k.mu.Lock()
	_, ok := k.links[veth]
	k.mu.Unlock()
	if !ok {
		return nil, nil
	}
	return k.SetBandwidth(veth, bw)
}

func (k fakePods) OrphanIFBs(live map[string]bool) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for ifb, alias := range k.ifbs {
		if !live[alias] || tc.IFBName(alias) != ifb {
			out = append(out, ifb)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (k fakePods) DeleteIFB(name string, inUse func(string) bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	alias, ok := k.ifbs[name]
	if !ok || inUse != nil && alias != "" && inUse(alias) {
		return false, nil
	}
	delete(k.ifbs, name)
	return true, nil
}

var (
	_ routesKernel       = (*fakeKernel)(nil)
	_ routes.BlockKernel = (*fakeKernel)(nil)
	_ routes.PodKernel   = fakePods{}
	_ natKernel          = fakeNAT{}
)

// fakeRecords is the CNI server's side of a pass (podRecords) on the real
// store and the fake kernel: a release tears the pod down as DEL does,
// through the pods' owner.
type fakeRecords struct {
	st     *store.Store
	pods   *routes.Pods
	nat    *natDataplane
	policy *policyDataplane // nil: NetworkPolicy off
	alive  map[string]bool  // netns paths that exist
}

func (f *fakeRecords) Release(ep store.Endpoint, _ bool) (bool, error) {
	cur, found, err := f.st.Endpoint(ep.Handle)
	if err != nil || !found || cur.State != ep.State || cur.Netns != ep.Netns || cur.HostVeth != ep.HostVeth {
		return false, err
	}
	if ep.HostVeth != "" {
		if err := f.nat.DelPod(ep); err != nil {
			return false, err
		}
		if err := f.pods.Down(ep.HostVeth, nil); err != nil {
			return false, err
		}
	}
	if _, _, err = f.st.Release(ep.Handle); err != nil {
		return false, err
	}
	if f.policy != nil {
		f.policy.Uncover(ep)
	}
	return true, nil
}

func (f *fakeRecords) Update(ep store.Endpoint, record func(*store.Endpoint)) (bool, error) {
	cur, found, err := f.st.Endpoint(ep.Handle)
	if err != nil || !found || cur.State != ep.State || cur.HostVeth != ep.HostVeth {
		return false, err
	}
	return f.st.UpdateEndpoint(ep.Handle, func(e *store.Endpoint) bool { record(e); return true })
}

func (f *fakeRecords) ReleaseDeferred(string) bool  { return false }
func (f *fakeRecords) Alive(ep store.Endpoint) bool { return f.alive[ep.Netns] }
