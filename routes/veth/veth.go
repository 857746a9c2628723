// Package veth is a pod's veth pair and the pod's side of it, as the
// Calico L3 model wires them: Setup creates and wires the pair (the pod's
// addresses, its routes and gateway neighbour, its forwarding off, the
// node's /32 and /128 to it), Teardown removes it, Check compares it with
// the model. Its functions take no lock: the pods' owner (routes.Pods) is
// their one caller, under each pod's locks; the CNI DEL path only asks
// (NetnsExists, LinkExists, PeerIn).
package veth

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tc"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Gateway is the link-local next hop every pod routes through. It exists
// nowhere: the node answers for it by proxy ARP and the permanent neighbour
// entry written in the pod.
var Gateway = netip.MustParseAddr("169.254.1.1")

// HostMAC is the node side's MAC on every veth, as in Calico, so that the
// pod's neighbour entry for Gateway is the same on every node and survives
// live migration of the address.
var HostMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

// Gateway6 is the next hop of every IPv6 pod, fe80::ecee:eeff:feee:eeee:
// the link-local address the kernel gives the node-side veth from
// HostMAC (EUI-64, with the settings routes/sysctl writes for an IPv6
// pod), so it too is the same on every node. Unlike Gateway it exists,
// and the node answers for it without a proxy.
var Gateway6 = nl.LinkLocalEUI64(HostMAC)

// gatewayFor is the pod's next hop for its address ip.
func gatewayFor(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return Gateway
	}
	return Gateway6
}

// ErrNetnsGone says the pod's network namespace does not exist (any more):
// the container is gone, so there is nothing to wire or to clean.
var ErrNetnsGone = errors.New("network namespace does not exist")

// ErrIfNameTaken says the pod's namespace has an interface of the name
// CNI_IFNAME asks for already, one that is not reef's: the spec has ADD
// fail then.
var ErrIfNameTaken = errors.New("the interface exists in the pod's network namespace already")

// Spec is one pod attachment as the Calico L3 model wires it.
type Spec struct {
	Netns    string // path of the pod's network namespace
	IfName   string // interface name inside the pod (CNI_IFNAME)
	HostVeth string // node-side veth name (HostVethName)
	// IPs are the pod's addresses: one, or one of each family
	// (dual-stack), in any order.
	IPs []netip.Addr
	MTU int
	// HostPorts is a pod with hostPorts: its veth gets route_localnet
	// (Pods asks the sysctl owner for the veth's settings).
	HostPorts bool
	// TestPauseAfterVeth holds Setup between creating the veth and
	// wiring it, so the lab can make the netns vanish mid-ADD. Zero in
	// production; the daemon sets it only from REEF_TEST_PAUSE_AFTER_VETH.
	TestPauseAfterVeth time.Duration
	// BeforeRoutes, if not nil, is called once the pod's end is wired
	// and before the node's routes to the pod's addresses are written:
	// until then nothing reaches the pod (an ADD's policy cover, made
	// meanwhile, is waited for here). Its error fails the wiring, which
	// is removed again. It runs under the pod's locks (routes.Pods.Up):
	// a slow hook holds back the reconcile pass's work on this pod.
	BeforeRoutes func() error
}

// Pair describes the veth pair Setup made (routes.Pods.Up).
type Pair struct {
	HostMAC net.HardwareAddr
	PodMAC  net.HardwareAddr
}

// OpenNetns opens a pod namespace by path and makes sure it is one: an
// ordinary file at that path (a netns whose mount is gone) is ErrNetnsGone.
func OpenNetns(path string) (netns.NsHandle, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("netns %s: %w", path, ErrNetnsGone)
		}
		return -1, fmt.Errorf("netns %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		return -1, fmt.Errorf("netns %s is not a network namespace (no nsfs mount): %w", path, ErrNetnsGone)
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("netns %s: %w", path, ErrNetnsGone)
		}
		return -1, fmt.Errorf("open netns %s: %w", path, err)
	}
	// A namespace of another type (mnt, pid, ...) is on nsfs too; the
	// kernel would refuse it only at the first netlink call. A kernel
	// without NS_GET_NSTYPE (before 4.11) is not asked.
	if t, err := unix.IoctlRetInt(int(h), unix.NS_GET_NSTYPE); err == nil && t != unix.CLONE_NEWNET {
		h.Close()
		return -1, fmt.Errorf("netns %s is not a network namespace (a namespace of another type): %w", path, ErrNetnsGone)
	}
	return h, nil
}

// sameNetns reports whether path still names the namespace h holds.
func sameNetns(path string, h netns.NsHandle) bool {
	var a, b unix.Stat_t
	if err := unix.Stat(path, &a); err != nil {
		return false
	}
	if err := unix.Fstat(int(h), &b); err != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// NetnsExists reports whether path is a live network namespace.
func NetnsExists(path string) bool {
	h, err := OpenNetns(path)
	if err != nil {
		return false
	}
	h.Close()
	return true
}

// LinkExists reports whether a link of that name is in the current
// network namespace. Only "no such link" is false: any other netlink
// error is taken for the link being there, so that callers that free
// what is gone never free on a passing error.
func LinkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	return err == nil || !errors.As(err, &nf)
}

// PeerIn reports whether hostVeth's peer is a link of the network
// namespace at path: the veth of that pod sandbox, not of another.
func PeerIn(path, hostVeth string) (bool, error) {
	host, err := netlink.LinkByName(hostVeth)
	if err != nil {
		return false, fmt.Errorf("find veth %s: %w", hostVeth, err)
	}
	peerIdx := host.Attrs().ParentIndex // IFLA_LINK: the peer's index in its namespace
	podNS, err := OpenNetns(path)
	if err != nil {
		return false, err
	}
	defer podNS.Close()
	pod, err := nl.NewHandleAt(podNS)
	if err != nil {
		return false, fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer pod.Close()
	peer, err := pod.LinkByIndex(peerIdx)
	if err != nil {
		return false, nil // no link of that index there
	}
	// Indexes are per namespace: the peer must point back at hostVeth.
	return peer.Type() == "veth" && peer.Attrs().ParentIndex == host.Attrs().Index, nil
}

// Setup creates the veth pair and wires both ends (routes.Pods.Up, through
// routes.Kernel.Wire; it takes no lock). For an IPv4 address
// the pod gets ip/32, the route to Gateway, the default route and a
// permanent neighbour for the gateway, and the node "ip/32 dev host-veth
// scope link proto reef"; for an IPv6 address the pod gets ip/128 (nodad:
// usable at once), the default route via Gateway6 and a permanent
// neighbour for it, and the node "ip/128 dev host-veth proto reef".
// Forwarding is off in the pod; the node side gets the fixed MAC and, from
// settings (nil: none), its sysctls before it is up. On any failure it removes the pair again, so
// a failed ADD leaves nothing. A stale node-side veth of the same name (an
// earlier sandbox of the same pod) is replaced.
func Setup(spec Spec, settings func(hostVeth string) error) (Pair, error) {
	if err := checkPodAddrs(spec.IPs); err != nil {
		return Pair{}, err
	}
	podNS, err := OpenNetns(spec.Netns)
	if err != nil {
		return Pair{}, err
	}
	defer podNS.Close()
	host, err := nl.NewHandle()
	if err != nil {
		return Pair{}, err
	}
	defer host.Close()
	pod, err := nl.NewHandleAt(podNS)
	if err != nil {
		return Pair{}, fmt.Errorf("netlink handle in netns %s: %w", spec.Netns, err)
	}
	defer pod.Close()

	if err := Delete(host, spec.HostVeth); err != nil {
		return Pair{}, err
	}
	// A stale pair's ifb held its egress limit; the new sandbox gets its
	// own through SetBandwidth.
	if _, err := tc.DeletePodIFB(host, spec.HostVeth); err != nil {
		return Pair{}, err
	}
	// Checked after the stale pair went: its peer is this pod's own
	// interface of an earlier ADD.
	if _, err := pod.LinkByName(spec.IfName); err == nil {
		return Pair{}, fmt.Errorf("interface %q in netns %s: %w", spec.IfName, spec.Netns, ErrIfNameTaken)
	}
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name:         spec.HostVeth,
			MTU:          spec.MTU,
			HardwareAddr: HostMAC,
		},
		PeerName:      spec.IfName,
		PeerNamespace: netlink.NsFd(int(podNS)),
	}
	if err := host.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return Pair{}, fmt.Errorf("create veth %s: interface %q already exists in netns %s", spec.HostVeth, spec.IfName, spec.Netns)
		}
		return Pair{}, fmt.Errorf("create veth %s with peer %s in netns %s: %w", spec.HostVeth, spec.IfName, spec.Netns, err)
	}
	if spec.TestPauseAfterVeth > 0 {
		time.Sleep(spec.TestPauseAfterVeth)
	}
	links, err := wirePod(host, pod, spec, settings)
	if err == nil && !sameNetns(spec.Netns, podNS) {
		// The sandbox went away while we wired it: our open handle kept the
		// namespace alive, but nobody can reach it any more.
		err = fmt.Errorf("netns %s vanished during ADD: %w", spec.Netns, ErrNetnsGone)
	}
	if err != nil {
		if derr := Delete(host, spec.HostVeth); derr != nil {
			err = errors.Join(err, fmt.Errorf("roll back: %w", derr))
		}
		if !NetnsExists(spec.Netns) {
			err = fmt.Errorf("%w (%w)", err, ErrNetnsGone)
		}
		return Pair{}, err
	}
	return links, nil
}

// checkPodAddrs refuses what Setup cannot wire: no address, two of a
// family, a zone or an IPv4-mapped IPv6 address.
func checkPodAddrs(ips []netip.Addr) error {
	if len(ips) == 0 {
		return errors.New("wire pod: no address")
	}
	var v4, v6 int
	for _, ip := range ips {
		switch {
		case !ip.IsValid() || ip.Zone() != "" || ip.Is4In6():
			return fmt.Errorf("wire pod: %q is not a pod address", ip)
		case ip.Is4():
			v4++
		default:
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("wire pod: addresses %v: at most one of each family", ips)
	}
	return nil
}

func wirePod(host, pod netlinksafe.Handle, spec Spec, settings func(string) error) (Pair, error) {
	hostLink, err := host.LinkByName(spec.HostVeth)
	if err != nil {
		return Pair{}, fmt.Errorf("find veth %s: %w", spec.HostVeth, err)
	}
	if settings != nil {
		if err := settings(spec.HostVeth); err != nil {
			return Pair{}, err
		}
	}
	if err := host.LinkSetUp(hostLink); err != nil {
		return Pair{}, fmt.Errorf("set %s up: %w", spec.HostVeth, err)
	}

	podLink, err := pod.LinkByName(spec.IfName)
	if err != nil {
		return Pair{}, fmt.Errorf("find %s in netns %s: %w", spec.IfName, spec.Netns, err)
	}
	// Before the addresses: an IPv6 address needs IPv6 on.
	if err := podSysctls(spec); err != nil {
		return Pair{}, err
	}
	for _, ip := range spec.IPs {
		addr := &netlink.Addr{IPNet: nl.IPNet(nl.Host(ip))}
		if ip.Is6() {
			// A /128 on one end of a veth has nobody to collide with; DAD
			// would keep it tentative, unusable, for a second or two.
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := pod.AddrReplace(podLink, addr); err != nil {
			return Pair{}, fmt.Errorf("add %s to %s in netns %s: %w", nl.Host(ip), spec.IfName, spec.Netns, err)
		}
	}
	if err := pod.LinkSetUp(podLink); err != nil {
		return Pair{}, fmt.Errorf("set %s up in netns %s: %w", spec.IfName, spec.Netns, err)
	}
	for _, ip := range spec.IPs {
		if err := podGatewayRoutes(pod, podLink.Attrs().Index, ip, spec); err != nil {
			return Pair{}, err
		}
	}
	if spec.BeforeRoutes != nil {
		if err := spec.BeforeRoutes(); err != nil {
			return Pair{}, err
		}
	}
	for _, ip := range spec.IPs {
		if err := nl.WriteRoute(host, NodeRoute(ip, hostLink.Attrs().Index)); err != nil {
			return Pair{}, fmt.Errorf("add route %s dev %s: %w", nl.Host(ip), spec.HostVeth, err)
		}
	}
	return Pair{HostMAC: hostLink.Attrs().HardwareAddr, PodMAC: podLink.Attrs().HardwareAddr}, nil
}

// podSysctls turns forwarding off in the pod: it must not route for
// others, and a new netns inherits the node's ip_forward=1 (IPv6's is
// reset to 0 in a new netns, unless net.core.devconf_inherit_init_net
// says otherwise). For an IPv6 address it turns IPv6 on on the pod's
// interface, which a netns may have off by default.
func podSysctls(spec Spec) error {
	v6 := slices.ContainsFunc(spec.IPs, netip.Addr.Is6)
	err := ns.WithNetNSPath(spec.Netns, func(ns.NetNS) error {
		proc := sysctl.Proc{}
		if err := proc.Set(sysctl.Forwarding, "0"); err != nil || !v6 {
			return err
		}
		if err := proc.Set(sysctl.Forwarding6, "0"); err != nil {
			return err
		}
		return proc.Set(sysctl.DisableIPv6(spec.IfName), "0")
	})
	if err != nil {
		return fmt.Errorf("in netns %s: %w", spec.Netns, err)
	}
	return nil
}

// podGatewayRoutes are the pod's way out for ip's family: the default
// route via the gateway and a permanent neighbour for it, and for IPv4 a
// route to the gateway (an IPv6 link-local gateway is on the link by
// definition).
func podGatewayRoutes(pod netlinksafe.Handle, idx int, ip netip.Addr, spec Spec) error {
	gw := gatewayFor(ip)
	family, def := unix.AF_INET, netip.MustParsePrefix("0.0.0.0/0")
	if ip.Is6() {
		family, def = unix.AF_INET6, netip.MustParsePrefix("::/0")
	} else if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: nl.IPNet(nl.Host(gw)), Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("add route %s dev %s in netns %s: %w", gw, spec.IfName, spec.Netns, err)
	}
	if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: nl.IPNet(def), Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("add default route via %s in netns %s: %w", gw, spec.Netns, err)
	}
	neigh := &netlink.Neigh{LinkIndex: idx, Family: family, State: netlink.NUD_PERMANENT, IP: gw.AsSlice(), HardwareAddr: HostMAC}
	if err := pod.NeighSet(neigh); err != nil {
		return fmt.Errorf("add neighbour %s lladdr %s in netns %s: %w", gw, HostMAC, spec.Netns, err)
	}
	return nil
}

// NodeRoute is the node's route to a pod's address: IPv4's with scope
// link, as `ip route add <ip> dev <veth>` writes it; IPv6 routes have no
// scope.
func NodeRoute(ip netip.Addr, linkIndex int) *netlink.Route {
	r := &netlink.Route{
		LinkIndex: linkIndex,
		Dst:       nl.IPNet(nl.Host(ip)),
		Protocol:  nl.Protocol,
	}
	if ip.Is4() {
		r.Scope = netlink.SCOPE_LINK
	}
	return r
}

// Teardown removes a pod's veth pair by its node-side name, and the ifb
// of its egress limit (IFBName, if its alias names this veth); the kernel
// removes the /32 route and the veth's qdiscs with the veth. What is
// already gone is success, so DEL can be repeated (routes.Pods.Down, through
// routes.Kernel.Unwire; it takes no lock).
func Teardown(hostVeth string) error {
	h, err := nl.NewHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := Delete(h, hostVeth); err != nil {
		return err
	}
	_, err = tc.DeletePodIFB(h, hostVeth)
	return err
}

// Delete deletes a reef link if present. It refuses names without
// reef's prefix: nothing else on the node is ours to delete.
func Delete(h netlinksafe.Handle, name string) error {
	if !linkname.Ours(name) {
		return fmt.Errorf("refusing to delete link %q: not a reef link", name)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil
		}
		return fmt.Errorf("find link %s: %w", name, err)
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}
