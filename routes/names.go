// Package routes programs the kernel's view of reef's pods: the veth pairs,
// the pod side of the Calico L3 model, the node's /32 routes, the
// blackholes of its own blocks, the other nodes' blocks and the tunnels
// to them. The pods' bandwidth limits are routes/tc's, their sysctls
// routes/sysctl's. It touches only what carries reef's marks: routes with
// Protocol and links whose names start with HostVethPrefix.
package routes

import (
	"crypto/sha1"
	"encoding/hex"
	"net"
	"net/netip"

	"github.com/reefcni/reef/routes/podlink"
)

// Protocol is reef's rtnetlink protocol number. packaging/rt_protos.d names
// it "reef" so that `ip route` prints "proto reef"; the kernel needs no name.
const Protocol = 238

// HostVethPrefix starts every node-side veth name reef creates
// (podlink.Prefix).
const HostVethPrefix = podlink.Prefix

// PodGateway is the link-local next hop every pod routes through. It exists
// nowhere: the node answers for it by proxy ARP and the permanent neighbour
// entry written in the pod.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// HostVethMAC is the node side's MAC on every veth, as in Calico, so that the
// pod's neighbour entry for PodGateway is the same on every node and survives
// live migration of the address.
var HostVethMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

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
