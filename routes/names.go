// Package routes programs reef's routes of both families: the node's /32
// and /128 routes to its pods, the blackholes of its own blocks and the
// routes to the other nodes' blocks (on the uplink, or through the
// devices of routes/tunnel), as a desired state and a diff. Pods is the
// one owner of each pod's objects (its veth pair through routes/veth, its
// routes, its veth's sysctls through routes/sysctl, its tc and ifb
// through routes/tc): the CNI path and the reconcile pass both ask it.
// Blocks is the one owner of the blocks' routes. It touches only what
// carries reef's marks: routes with Protocol and links whose names start
// with HostVethPrefix.
package routes

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/linkname"
)

// Protocol is reef's rtnetlink protocol number. packaging/rt_protos.d names
// it "reef" so that `ip route` prints "proto reef"; the kernel needs no name.
const Protocol = nl.Protocol

// ForeignRouteError says a route of another owner holds the place of a
// route of reef's, which reef leaves alone (routes/internal/nl/ours.go).
type ForeignRouteError = nl.ForeignRouteError

// HostVethPrefix starts every node-side veth name reef creates
// (linkname.Prefix).
const HostVethPrefix = linkname.Prefix

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
