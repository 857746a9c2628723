package veth

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Check compares the kernel with the model for one pod and returns every
// difference it finds, each naming the object; nil means all is in place.
func Check(spec Spec) error {
	var errs []error
	host, err := nl.NewHandle()
	if err != nil {
		return err
	}
	defer host.Close()

	hostLink, err := host.LinkByName(spec.HostVeth)
	if err != nil {
		errs = append(errs, fmt.Errorf("node-side veth %s is missing", spec.HostVeth))
	} else {
		a := hostLink.Attrs()
		if hostLink.Type() != "veth" {
			errs = append(errs, fmt.Errorf("%s is a %s, not a veth", spec.HostVeth, hostLink.Type()))
		}
		if a.Flags&netIFUp == 0 {
			errs = append(errs, fmt.Errorf("veth %s is down", spec.HostVeth))
		}
		if !bytes.Equal(a.HardwareAddr, HostMAC) {
			errs = append(errs, fmt.Errorf("veth %s has MAC %s, want %s", spec.HostVeth, a.HardwareAddr, HostMAC))
		}
		if spec.MTU != 0 && a.MTU != spec.MTU {
			errs = append(errs, fmt.Errorf("veth %s has MTU %d, want %d", spec.HostVeth, a.MTU, spec.MTU))
		}
		if v, err := (sysctl.Proc{}).Get(sysctl.ProxyARP(spec.HostVeth)); err != nil || v != "1" {
			errs = append(errs, fmt.Errorf("proxy_arp on %s is %q, want 1", spec.HostVeth, v))
		}
		for _, ip := range spec.IPs {
			if !hasRoute(host, NodeRoute(ip, a.Index)) {
				errs = append(errs, fmt.Errorf("route %s dev %s proto reef is missing on the node", nl.Host(ip), spec.HostVeth))
			}
		}
		if slices.ContainsFunc(spec.IPs, netip.Addr.Is6) {
			if err := checkGateway6(host, hostLink); err != nil {
				errs = append(errs, err)
			}
		}
	}

	podNS, err := OpenNetns(spec.Netns)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer podNS.Close()
	pod, err := nl.NewHandleAt(podNS)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("netlink handle in netns %s: %w", spec.Netns, err))...)
	}
	defer pod.Close()
	podLink, err := pod.LinkByName(spec.IfName)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("interface %s is missing in netns %s", spec.IfName, spec.Netns))...)
	}
	if spec.MTU != 0 && podLink.Attrs().MTU != spec.MTU {
		errs = append(errs, fmt.Errorf("%s in netns %s has MTU %d, want %d", spec.IfName, spec.Netns, podLink.Attrs().MTU, spec.MTU))
	}
	for _, ip := range spec.IPs {
		errs = append(errs, checkPodAddr(pod, podLink, ip, spec)...)
	}
	return errors.Join(errs...)
}

// checkPodAddr is what the pod must have for ip: the address, and the
// default route of its family via the gateway.
func checkPodAddr(pod netlinksafe.Handle, podLink netlink.Link, ip netip.Addr, spec Spec) []error {
	var errs []error
	family, def := unix.AF_INET, netip.MustParsePrefix("0.0.0.0/0")
	if ip.Is6() {
		family, def = unix.AF_INET6, netip.MustParsePrefix("::/0")
	}
	addrs, err := pod.AddrList(podLink, family)
	if err != nil {
		errs = append(errs, fmt.Errorf("list addresses of %s in netns %s: %w", spec.IfName, spec.Netns, err))
	}
	found := false
	for _, a := range addrs {
		if p, ok := nl.Prefix(a.IPNet); ok && p == nl.Host(ip) {
			found = true
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("address %s is missing on %s in netns %s", nl.Host(ip), spec.IfName, spec.Netns))
	}
	gw := gatewayFor(ip)
	if !hasRoute(pod, &netlink.Route{LinkIndex: podLink.Attrs().Index, Dst: nl.IPNet(def), Gw: gw.AsSlice()}) {
		errs = append(errs, fmt.Errorf("default route via %s dev %s is missing in netns %s", gw, spec.IfName, spec.Netns))
	}
	return errs
}

// checkGateway6 says whether the node-side veth holds Gateway6, the
// IPv6 pods' next hop, and can use it: a tentative or duplicate link-local
// cannot send the neighbour solicitations that reach the pod.
func checkGateway6(host netlinksafe.Handle, hostLink netlink.Link) error {
	name := hostLink.Attrs().Name
	addrs, err := host.AddrList(hostLink, unix.AF_INET6)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if ip, ok := nl.Addr(a.IP, true); !ok || ip != Gateway6 {
			continue
		}
		if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
			return fmt.Errorf("link-local %s on veth %s is tentative or failed DAD", Gateway6, name)
		}
		return nil
	}
	return fmt.Errorf("veth %s lacks the link-local %s, the IPv6 pods' gateway", name, Gateway6)
}

const netIFUp = 1 // net.FlagUp

// hasRoute reports whether a route to want's destination exists with want's
// device, gateway and (if set) protocol.
func hasRoute(h netlinksafe.Handle, want *netlink.Route) bool {
	family := unix.AF_INET
	if want.Dst.IP.To4() == nil {
		family = unix.AF_INET6
	}
	rs, err := h.RouteListFiltered(family, &netlink.Route{Dst: want.Dst, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return false
	}
	for _, r := range rs {
		if r.LinkIndex != want.LinkIndex || !r.Gw.Equal(want.Gw) {
			continue
		}
		if want.Protocol != 0 && r.Protocol != want.Protocol {
			continue
		}
		return true
	}
	return false
}
