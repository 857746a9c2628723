package cniserver

import (
	"log/slog"
	"net/netip"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// PodFilter is the per-pod part of the node's packet filter: the ARP
// filter of package nat, through the daemon. ADD calls AddPod once the pod
// is wired, and its failure fails and undoes the ADD; DEL, and every other
// release of an endpoint, calls DelPod before the veth goes. DelPod must
// succeed when there is nothing to remove.
type PodFilter interface {
	AddPod(hostVeth string, ip netip.Addr) error
	DelPod(hostVeth string, ip netip.Addr) error
}

type noPodFilter struct{}

func (noPodFilter) AddPod(string, netip.Addr) error { return nil }
func (noPodFilter) DelPod(string, netip.Addr) error { return nil }

// podFilter is Server.PodFilter, or one that does nothing (tests, and a
// server the daemon has not given one).
func (s *Server) podFilter() PodFilter {
	if s.PodFilter == nil {
		return noPodFilter{}
	}
	return s.PodFilter
}

// unwire undoes the kernel side of an ADD that got past wiring: the pod's
// filter element, then its veth (and with it the /32 route). Failures are
// logged: the caller is already returning the error that made it undo.
func (s *Server) unwire(ep store.Endpoint, log *slog.Logger) {
	if err := s.podFilter().DelPod(ep.HostVeth, ep.IP); err != nil {
		log.Error("roll back ARP-filter element", "veth", ep.HostVeth, "ip", ep.IP, "error", err)
	}
	if err := routes.TeardownPod(ep.HostVeth); err != nil {
		log.Error("roll back veth", "veth", ep.HostVeth, "error", err)
	}
}
