package routes

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CheckPod compares the kernel with the model for one pod and returns every
// difference it finds, each naming the object; nil means all is in place.
func CheckPod(spec PodSpec) error {
	var errs []error
	host, err := netlinksafe.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
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
		if !bytes.Equal(a.HardwareAddr, HostVethMAC) {
			errs = append(errs, fmt.Errorf("veth %s has MAC %s, want %s", spec.HostVeth, a.HardwareAddr, HostVethMAC))
		}
		if spec.MTU != 0 && a.MTU != spec.MTU {
			errs = append(errs, fmt.Errorf("veth %s has MTU %d, want %d", spec.HostVeth, a.MTU, spec.MTU))
		}
		if v, err := (sysctl.Proc{}).Get(sysctl.ProxyARP(spec.HostVeth)); err != nil || v != "1" {
			errs = append(errs, fmt.Errorf("proxy_arp on %s is %q, want 1", spec.HostVeth, v))
		}
		if !hasRoute(host, podRoute(spec.IP, a.Index)) {
			errs = append(errs, fmt.Errorf("route %s/32 dev %s proto reef is missing on the node", spec.IP, spec.HostVeth))
		}
	}

	podNS, err := openNetns(spec.Netns)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer podNS.Close()
	pod, err := netlinksafe.NewHandleAt(podNS)
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
	addrs, err := pod.AddrList(podLink, unix.AF_INET)
	if err != nil {
		errs = append(errs, fmt.Errorf("list addresses of %s in netns %s: %w", spec.IfName, spec.Netns, err))
	}
	found := false
	for _, a := range addrs {
		if p, ok := ipNetToPrefix(a.IPNet); ok && p == netip.PrefixFrom(spec.IP, 32) {
			found = true
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("address %s/32 is missing on %s in netns %s", spec.IP, spec.IfName, spec.Netns))
	}
	gw := prefixToIPNet(netip.PrefixFrom(PodGateway, 32))
	if !hasRoute(pod, &netlink.Route{LinkIndex: podLink.Attrs().Index, Dst: prefixToIPNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: gw.IP}) {
		errs = append(errs, fmt.Errorf("default route via %s dev %s is missing in netns %s", PodGateway, spec.IfName, spec.Netns))
	}
	return errors.Join(errs...)
}

const netIFUp = 1 // net.FlagUp

// hasRoute reports whether a route to want's destination exists with want's
// device, gateway and (if set) protocol.
func hasRoute(h netlinksafe.Handle, want *netlink.Route) bool {
	rs, err := h.RouteListFiltered(unix.AF_INET, &netlink.Route{Dst: want.Dst, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
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
