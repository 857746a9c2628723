// Package sysctl owns the node's sysctls that reef needs: IPv4 forwarding,
// IPv6 forwarding once the node has an IPv6 pool or pod, and on each pod's
// node-side veth proxy ARP (the node answers for the pod's gateway), for a
// pod with hostPorts route_localnet (DNAT to the pod from 127.0.0.1), and
// for a pod with an IPv6 address what its IPv6 gateway needs: IPv6 on,
// the EUI-64 link-local the pod routes through, no DAD; and while
// vxlan.reef carries IPv6, IPv6 on that device with its EUI-64 link-local,
// which the other nodes route this node's IPv6 blocks through. Desired computes
// the values from the pods, purely; an Owner reads what the kernel holds
// and writes only what differs. It is the only writer of these values: the
// owner of the pods' kernel objects (routes.Pods) asks it for one pod's
// veth while it creates the veth (Owner.Pod), the reconcile pass for the
// node's (Owner.Sync).
//
// A veth's settings exist only with the veth, and only the veth's owner
// knows whether a CNI operation is busy with it, so the pass writes them
// through that owner (Links): under the veth's lock, and not at all while
// an operation is busy with it. The owner has an opinion only on the pods
// it is told of: a veth of a pod that is not in the pass's snapshot (an
// ADD half-way, an orphan that the links' owner removes) is left alone,
// so a pass never races an ADD, and a value reef does not need is
// never reset (route_localnet of a pod without hostPorts keeps what the
// node's default gave it, the IPv6 settings of an IPv4 pod's veth and
// IPv6 forwarding of a node without IPv6 what the node has).
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/reefcni/reef/routes/linkname"
)

// Forwarding and Forwarding6 are the keys of IPv4 and IPv6 forwarding in
// the daemon's namespace. Writing IPv6's "all" sets every link's and the
// default for new ones.
const (
	Forwarding  = "net/ipv4/ip_forward"
	Forwarding6 = "net/ipv6/conf/all/forwarding"
)

// ProxyARP, RouteLocalnet, AcceptDAD, AddrGenMode and DisableIPv6 are the
// keys of a link's settings.
func ProxyARP(link string) string      { return "net/ipv4/conf/" + link + "/proxy_arp" }
func RouteLocalnet(link string) string { return "net/ipv4/conf/" + link + "/route_localnet" }
func AcceptDAD(link string) string     { return "net/ipv6/conf/" + link + "/accept_dad" }
func AddrGenMode(link string) string   { return "net/ipv6/conf/" + link + "/addr_gen_mode" }
func DisableIPv6(link string) string   { return "net/ipv6/conf/" + link + "/disable_ipv6" }

// Pod is what the settings of one pod depend on.
type Pod struct {
	HostVeth  string
	HostPorts bool
	// IPv6 is a pod with an IPv6 address. Its gateway is the veth's
	// link-local address, fe80::ecee:eeff:feee:eeee, which the kernel
	// derives from the veth's MAC only with IPv6 on and addr_gen_mode 0
	// (EUI-64), and which answers the node's neighbour solicitations to
	// the pod only once it is not tentative: without accept_dad=0 a new
	// pod's first packets wait about 2 s for DAD.
	IPv6 bool
}

// Node is what the node's settings depend on: the pods, and whether the
// node has an IPv6 pool, so that it forwards IPv6 before its first IPv6
// pod is added (ADD asks only for its pod's settings). VXLAN6 says that
// vxlan.reef carries IPv6 (an IPv6 pool may use VXLAN).
type Node struct {
	Pods     []Pod
	IPv6Pool bool
	VXLAN6   bool
}

// TunnelDevice is the VXLAN device whose IPv6 settings the owner keeps
// (routes/tunnel.VXLANDevice; this package imports neither routes nor
// routes/tunnel).
const TunnelDevice = "vxlan.reef"

// Setting is one sysctl and the value reef wants: Key is its path under
// /proc/sys ("net/ipv4/conf/reef0123456789a/proxy_arp").
type Setting struct{ Key, Value string }

// Change is a setting the owner wrote, and what the kernel held before.
type Change struct {
	Setting
	Was string
}

func (c Change) String() string { return fmt.Sprintf("%s %s -> %s", c.Key, c.Was, c.Value) }

// Kernel reads and writes sysctls; Get and Set of a key whose link is
// gone fail with an error that matches fs.ErrNotExist.
type Kernel interface {
	Get(key string) (string, error)
	Set(key, value string) error
}

// Desired is what the node's sysctls must hold: IPv4 forwarding on, and
// IPv6 forwarding with an IPv6 pool or pod; proxy ARP on every pod's veth;
// route_localnet on the veths of pods with hostPorts; IPv6 on, EUI-64
// link-local and no DAD on the veths of pods with an IPv6 address. The
// node's settings come first, then the links' sorted by key.
func Desired(n Node) ([]Setting, error) {
	want := append(nodeSettings(n), tunnelSettings(n.VXLAN6)...)
	var errs []error
	var links []Setting
	for _, p := range n.Pods {
		s, err := podSettings(p)
		links, errs = append(links, s...), append(errs, err)
	}
	slices.SortFunc(links, func(a, b Setting) int { return strings.Compare(a.Key, b.Key) })
	return append(want, slices.Compact(links)...), errors.Join(errs...)
}

// nodeSettings are the node's own: forwarding of the families it has.
func nodeSettings(n Node) []Setting {
	want := []Setting{{Forwarding, "1"}}
	if n.IPv6Pool || slices.ContainsFunc(n.Pods, func(p Pod) bool { return p.IPv6 }) {
		want = append(want, Setting{Forwarding6, "1"})
	}
	return want
}

func isNodeKey(key string) bool { return key == Forwarding || key == Forwarding6 }

// tunnelSettings are vxlan.reef's while it carries IPv6: IPv6 on, and the
// EUI-64 link-local (tunnel.VTEPLinkLocal) that the other nodes' routes to
// this node's IPv6 blocks name as gateway, addr_gen_mode first for the
// same reason as a pod's. Without IPv6 the device's settings are left as
// the node's defaults made them.
func tunnelSettings(v6 bool) []Setting {
	if !v6 {
		return nil
	}
	return []Setting{{AddrGenMode(TunnelDevice), "0"}, {DisableIPv6(TunnelDevice), "0"}}
}

// podSettings are the settings of one pod's veth, in the order they must
// be written: on a veth that is up, turning IPv6 on makes the link-local
// at once, so addr_gen_mode and accept_dad go before disable_ipv6. A veth
// without reef's prefix is refused: reef never touches another link's
// settings.
func podSettings(p Pod) ([]Setting, error) {
	if !linkname.Ours(p.HostVeth) {
		return nil, fmt.Errorf("refusing the sysctls of %q: not a reef link", p.HostVeth)
	}
	want := []Setting{{ProxyARP(p.HostVeth), "1"}}
	if p.HostPorts {
		want = append(want, Setting{RouteLocalnet(p.HostVeth), "1"})
	}
	if p.IPv6 {
		want = append(want, Setting{AcceptDAD(p.HostVeth), "0"}, Setting{AddrGenMode(p.HostVeth), "0"}, Setting{DisableIPv6(p.HostVeth), "0"})
	}
	return want, nil
}

// Owner brings the kernel's sysctls in line with Desired. It keeps no state
// of its own, so ADDs and passes may call it at the same time: each writes
// only the values Desired gives, which never conflict.
type Owner struct{ k Kernel }

// New returns the owner of the sysctls that k reads and writes.
func New(k Kernel) *Owner { return &Owner{k: k} }

// Links is the owner of the pods' veths (routes.Pods), which the pass asks
// before it writes a veth's settings: With runs write under the veth's
// lock, or not at all if a CNI operation is busy with the veth (it may be
// replacing the veth with a new sandbox's, whose settings its ADD sets).
type Links interface {
	With(hostVeth string, write func())
}

// Sync is the pass: the node's forwarding and the settings of every pod in
// the snapshot, each pod's through links (nil: at once, for a caller alone
// on the node). A pod whose veth is gone is skipped (the links' owner
// deals with it). It returns what it changed: each change is a repair.
func (o *Owner) Sync(n Node, links Links) ([]Change, error) {
	changes, err := o.apply(nodeSettings(n), true)
	errs := []error{err}
	c, err := o.apply(tunnelSettings(n.VXLAN6), true)
	changes, errs = append(changes, c...), append(errs, err)
	for _, p := range n.Pods {
		pw, err := podSettings(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		write := func() {
			c, aerr := o.apply(pw, true)
			changes, errs = append(changes, c...), append(errs, aerr)
		}
		if links == nil {
			write()
		} else {
			links.With(p.HostVeth, write)
		}
	}
	return changes, errors.Join(errs...)
}

// Pod is ADD's request, through the veth's owner, which holds the veth's
// lock: one pod's settings, before its veth is up. Its veth must exist.
func (o *Owner) Pod(p Pod) ([]Change, error) {
	want, err := podSettings(p)
	if err != nil {
		return nil, err
	}
	changes, err := o.apply(want, false)
	if errors.Is(err, fs.ErrNotExist) {
		return changes, fmt.Errorf("veth %s is gone: %w", p.HostVeth, err)
	}
	return changes, err
}

// Tunnel is the tunnel owner's request: vxlan.reef's settings (with v6,
// that is while the device carries IPv6), before it writes the device's
// addresses and neighbours, and before a device it made is up. The
// device must exist.
func (o *Owner) Tunnel(v6 bool) ([]Change, error) {
	return o.apply(tunnelSettings(v6), false)
}

// apply writes each setting whose value differs. With linkGoneOK, a
// setting whose link is gone is skipped: for a pass, its pod is being
// deleted.
func (o *Owner) apply(want []Setting, linkGoneOK bool) ([]Change, error) {
	var changes []Change
	var errs []error
	for _, s := range want {
		cur, err := o.k.Get(s.Key)
		if err == nil && cur == s.Value {
			continue
		}
		if err == nil {
			err = o.k.Set(s.Key, s.Value)
		}
		switch {
		case err == nil:
			changes = append(changes, Change{s, cur})
		case linkGoneOK && errors.Is(err, fs.ErrNotExist) && !isNodeKey(s.Key):
		default:
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
}
