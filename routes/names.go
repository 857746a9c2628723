// Package routes programs the kernel's view of reef's pods: the veth pairs,
// the pod side of the Calico L3 model, the node's /32 and /128 routes, the
// blackholes of its own blocks, the other nodes' blocks and the tunnels
// to them. Pods is the one owner of each pod's objects (its veth pair,
// its routes, its veth's sysctls through routes/sysctl, its tc and ifb
// through routes/tc): the CNI path and the reconcile pass both ask it. It
// touches only what carries reef's marks: routes with Protocol and links
// whose names start with HostVethPrefix.
package routes

import (
	"crypto/sha1"
	"encoding/hex"
	"net"
	"net/netip"

	"github.com/reefcni/reef/routes/linkname"
)

// Protocol is reef's rtnetlink protocol number. packaging/rt_protos.d names
// it "reef" so that `ip route` prints "proto reef"; the kernel needs no name.
const Protocol = 238

// HostVethPrefix starts every node-side veth name reef creates
// (linkname.Prefix).
const HostVethPrefix = linkname.Prefix

// PodGateway is the link-local next hop every pod routes through. It exists
// nowhere: the node answers for it by proxy ARP and the permanent neighbour
// entry written in the pod.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// HostVethMAC is the node side's MAC on every veth, as in Calico, so that the
// pod's neighbour entry for PodGateway is the same on every node and survives
// live migration of the address.
var HostVethMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

// PodGateway6 is the next hop of every IPv6 pod, fe80::ecee:eeff:feee:eeee:
// the link-local address the kernel gives the node-side veth from
// HostVethMAC (EUI-64, with the settings routes/sysctl writes for an IPv6
// pod), so it too is the same on every node. Unlike PodGateway it exists,
// and the node answers for it without a proxy.
var PodGateway6 = linkLocalEUI64(HostVethMAC)

// linkLocalEUI64 is the link-local address the kernel derives from a
// 48-bit MAC with addr_gen_mode 0 (RFC 4291, appendix A): fe80::/64, then
// the MAC with ff:fe in its middle and the universal/local bit flipped.
func linkLocalEUI64(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
	a[11], a[12] = 0xff, 0xfe
	a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(a)
}

// gatewayFor is the pod's next hop for its address ip.
func gatewayFor(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return PodGateway
	}
	return PodGateway6
}

// hostPrefix is the prefix of ip alone: ip/32 or ip/128.
func hostPrefix(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, ip.BitLen()) }

// HostVethName is the node-side veth of a pod: "reef" and the first 11 hex
// digits of sha1("<namespace>.<pod>"), 15 characters (IFNAMSIZ-1). Without a
// pod name (a runtime that sends no K8S_POD_NAME) the container ID is hashed.
func HostVethName(podNamespace, podName, containerID string) string {
	key := containerID
	if podName != "" {
		key = podNamespace + "." + podName
	}
	sum := sha1.Sum([]byte(key))
	return HostVethPrefix + hex.EncodeToString(sum[:])[:11]
}
