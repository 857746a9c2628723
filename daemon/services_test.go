package daemon

import (
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
)

// TestServiceAnnouncerNeedsExternalPeers: a node that assigns LoadBalancer
// addresses but has no external peers (the config allows it,
// docs/lbipam.md) announces no Service address, so it runs no announcer:
// no watch of every Service and EndpointSlice, and no pass that fails with
// "no external peers" at ERROR on every event and every 30 s. The
// kubeconfig here does not exist: an announcer would fail to load it.
func TestServiceAnnouncerNeedsExternalPeers(t *testing.T) {
	var cfg Config
	cfg.Kubernetes.Kubeconfig = filepath.Join(t.TempDir(), "missing-kubeconfig")
	cfg.BGP.ServiceLoadBalancerIPs = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/29")}
	a, err := newServiceAnnouncer(t.Context(), cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if a != nil || err != nil {
		t.Errorf("newServiceAnnouncer without external peers: %v, %v; want none", a, err)
	}
	cfg.BGP.ExternalPeers = []ExternalPeerConfig{{Address: netip.MustParseAddr("192.168.77.1"), ASN: 65000}}
	if _, err := newServiceAnnouncer(t.Context(), cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Errorf("newServiceAnnouncer with an external peer did not read the kubeconfig %s", cfg.Kubernetes.Kubeconfig)
	}
}
