package cniserver

import (
	"context"
	"errors"
	"log/slog"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/store"
)

// PodFilter is the per-pod part of the node's nftables: the ARP filter
// and the hostPorts (ep.PortMappings) of package nat, through the daemon.
// ADD calls AddPod once the pod is wired, and its failure fails and
// undoes the ADD; DEL, and every other release of an endpoint, calls
// DelPod before the veth goes. DelPod must succeed when there is nothing
// to remove. An AddPod error that wraps ErrRepairLater does not fail the
// ADD: the pod's elements come with the whole pass the ADD asks for (Deps.
// Trigger) once it has ended.
type PodFilter interface {
	AddPod(ep store.Endpoint) error
	DelPod(ep store.Endpoint) error
}

// PodChecker is a PodFilter that can say, for CHECK, which of a pod's
// elements the kernel lacks, one line each; it only reads. A PodFilter
// without it is not checked.
type PodChecker interface {
	CheckPod(ep store.Endpoint) ([]string, error)
}

// PodForgetter is a PodFilter that can delete the kernel's connection
// tracking entries of an endpoint's addresses. release calls Forget once
// the veth is gone (nothing new can reach the addresses) and before the
// addresses are freed: the next pod given one must not inherit the last
// one's entries (a client still sending to the old pod's hostPort would
// reach it through the old DNAT entry; an established connection would
// pass its NetworkPolicy). Failures are the implementation's to log: a
// DEL does not fail for them.
type PodForgetter interface {
	Forget(ep store.Endpoint)
}

// PolicyGate is NetworkPolicy's part of an ADD and a DEL. Admit is asked
// before anything is allocated: it refuses (with "try again later") while
// the API's objects are not known, or the pod is not among them. Cover
// puts the pod under the policies that select it before the ADD returns:
// a new pod's from the moment its record is written, while the store
// syncs it to disk and its veth is made, done before the node's routes
// to the pod are written (veth.Spec.BeforeRoutes); a repeated ADD's
// before its wiring is redone. Cover takes ep as one of the node's
// endpoints whether or not its record is committed, until Settle (the
// ADD is over) or Uncover. Its failure fails and undoes the ADD. Uncover
// is called once an endpoint's record is gone (a DEL, a rolled-back ADD,
// an allocation whose commit failed, a release by the reconcile pass):
// its address leaves the policies' sets before it returns, or, should
// that fail, with a full sync it asks for; it does not fail the DEL.
type PolicyGate interface {
	Admit(ctx context.Context, namespace, name string) *types.Error
	Cover(ep store.Endpoint) error
	Settle(ep store.Endpoint)
	Uncover(ep store.Endpoint)
}

// ErrRepairLater, wrapped by a PodFilter's AddPod, says a table of reef's
// is missing (deleted by hand): the whole pass that recreates it adds the
// pod's elements, if it runs after the ADD has ended (a pass leaves an
// operation in flight alone).
var ErrRepairLater = errors.New("a table is missing; the next whole reconcile pass recreates it with the pod's elements")

type noPodFilter struct{}

func (noPodFilter) AddPod(store.Endpoint) error { return nil }
func (noPodFilter) DelPod(store.Endpoint) error { return nil }

// unwire undoes the kernel side of an ADD that got past wiring: the pod's
// filter element, then its veth (and with it the /32 route). Failures are
// logged: the caller is already returning the error that made it undo.
func (s *Server) unwire(ep store.Endpoint, log *slog.Logger) {
	if err := s.deps.PodFilter.DelPod(ep); err != nil {
		log.Error("roll back the pod's nftables elements (ARP filter, hostPorts)", "veth", ep.HostVeth, "ip", ep.AddrsString(), "error", err)
	}
	if err := s.deps.Pods.Down(ep.HostVeth, nil); err != nil {
		log.Error("roll back veth", "veth", ep.HostVeth, "error", err)
	}
}
