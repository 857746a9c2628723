package daemon

import (
	"context"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// The seams between the reconcile pass and what it changes: the real ones
// talk to the kernel and the CNI server; the state tests
// (reconcile_states_test.go) give a fake kernel that prints its state as
// text. The store is the real bbolt file in both.

// routesKernel is the node's own routing as the pass reads it: where it
// sends packets for another node in another subnet, whether a route of
// another protocol holds the place of one of reef's, and the uplinks and
// the node's addresses on them (*routes.Kernel). reef's
// routes and veths are read and written only through their owners: the
// block routes through routes.Blocks (on a routes.BlockKernel), the pods'
// objects through routes.Pods (on a routes.PodKernel), the tunnels through
// theirs (tunnelKernel).
type routesKernel interface {
	HopTo(addr netip.Addr) (routes.Hop, error)
	InTheWay(dst netip.Prefix) error
	HasAddr(index int, addr netip.Addr) (routes.NodeAddrState, error)
	LinkIndex(name string) (int, error)
}

// podRecords is the CNI server's side of a pass: what it changes of a
// pod's record goes through the server, under the pod's lock
// (*cniserver.Server).
type podRecords interface {
	Release(ep store.Endpoint, wait bool) (bool, error)
	Update(ep store.Endpoint, record func(*store.Endpoint)) (bool, error)
	ReleaseDeferred(handle string) bool
	Alive(ep store.Endpoint) bool
}

// natKernel is reef's nftables tables (*nat.Kernel).
type natKernel interface {
	Read(ids []nft.TableID) ([]nft.Table, error)
	Apply(p nft.Plan) error
	AddPod(p nat.Pod) error
	DelPod(p nat.Pod) error
}

// policyAPI is policy's view of the Kubernetes API (*kube.Watcher).
type policyAPI interface {
	Synced() bool
	Status() kube.Status
	Input() policy.Input
	Policies() []*networkingv1.NetworkPolicy
	ClusterPolicies() []*cnp.ClusterNetworkPolicy
	Pod(namespace, name string) (*policy.Pod, bool)
	WaitPod(ctx context.Context, namespace, name string) bool
	MarkLocal(namespace, name string)
	SetClusterConditions(want map[string]kube.Condition)
}

// policyKernel is table inet reef in the kernel (*nft.Kernel), with the
// ruleset generation it follows (Mark, Unchanged: nft.Generations).
type policyKernel interface {
	Read(ids []nft.TableID) ([]nft.Table, error)
	Apply(p nft.Plan) error
	Mark() nft.Mark
	Unchanged(m nft.Mark) bool
}

var (
	_ policyAPI    = (*kube.Watcher)(nil)
	_ policyKernel = (*nft.Kernel)(nil)
	_ routesKernel = (*routes.Kernel)(nil)
	_ podRecords   = (*cniserver.Server)(nil)
	_ natKernel    = (*nat.Kernel)(nil)
)
