package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/store"
)

// TestForgetFlushesConntrack: a released pod's conntrack entries are
// deleted for each of its addresses; a failed flush is logged, and the
// other address is still tried. The flush is a field so that the tests'
// natDataplanes over fake kernels never touch the host's entries.
func TestForgetFlushesConntrack(t *testing.T) {
	var flushed []netip.Addr
	fail := false
	n := &natDataplane{kernel: fakeNAT{newFakeKernel()}, log: slog.New(slog.DiscardHandler),
		flushConntrack: func(a netip.Addr) error {
			flushed = append(flushed, a)
			if fail {
				return errors.New("refused")
			}
			return nil
		}}
	ep := store.Endpoint{Handle: "net.c1", HostVeth: "reefc1", IP: netip.MustParseAddr("10.244.0.7"),
		Second: store.Assignment{IP: netip.MustParseAddr("fd00:10:244::7")}}
	n.Forget(ep)
	if want := []netip.Addr{ep.IP, ep.Second.IP}; !slices.Equal(flushed, want) {
		t.Errorf("flushed %v, want %v", flushed, want)
	}
	fail, flushed = true, nil
	n.Forget(ep)
	if len(flushed) != 2 {
		t.Errorf("flushed %v after a refusal, want both addresses tried", flushed)
	}
	n.flushConntrack, flushed = nil, nil
	n.Forget(ep)
	if len(flushed) != 0 {
		t.Errorf("a natDataplane without a flush flushed %v", flushed)
	}
}

// TestAddDelPodFlushUDPConntrack: ADD, and the removal of a pod's
// elements, flush the conntrack entries of the pod's UDP hostPorts, not
// of its TCP ones, through the natDataplane's
// flushUDP; one without (the tests' fake kernels) flushes nothing in its
// caller's namespace. Before flushUDP, every such test deleted the
// host's entries of its UDP hostPorts (reconcile_states_test.go's 8053).
func TestAddDelPodFlushUDPConntrack(t *testing.T) {
	var flushed []hostport.Mapping
	n := &natDataplane{kernel: fakeNAT{newFakeKernel()}, log: slog.New(slog.DiscardHandler),
		flushUDP: func(hp hostport.Mapping) error { flushed = append(flushed, hp); return nil }}
	mark := new(activity.Log).Mark()
	defer mark.Close()
	if err := n.reconcile(nil, mark); err != nil { // the tables, for the pod's elements
		t.Fatal(err)
	}
	ep := store.Endpoint{Handle: "net.c1", HostVeth: "reefc1", IP: netip.MustParseAddr("10.244.0.7"),
		PortMappings: []store.PortMapping{{Protocol: "tcp", HostPort: 7060, ContainerPort: 80}, {Protocol: "udp", HostPort: 7061, ContainerPort: 53}}}
	if err := n.AddPod(ep); err != nil {
		t.Fatal(err)
	}
	if want := []hostport.Mapping{{Proto: unix.IPPROTO_UDP, Port: 7061, PodPort: 53}}; !slices.Equal(flushed, want) {
		t.Errorf("flushed %v, want %v", flushed, want)
	}
	// DelPod too: a repeated ADD that drops a UDP hostPort keeps the
	// pod's address, so Forget's flush by address does not run, and a
	// client still sending to the port would reach the pod.
	flushed = nil
	if err := n.DelPod(ep); err != nil {
		t.Fatal(err)
	}
	if want := []hostport.Mapping{{Proto: unix.IPPROTO_UDP, Port: 7061, PodPort: 53}}; !slices.Equal(flushed, want) {
		t.Errorf("DelPod flushed %v, want %v", flushed, want)
	}

	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
	netnstest.Run(t, ns, "nft", "add table inet t; add chain inet t track { type filter hook output priority 0; }; add rule inet t track ct state new counter")
	netnstest.SendUDP(t, ns, "", "127.0.0.1:7061")
	n.flushUDP = nil
	if err := netnstest.Do(t, ns, func() error { return n.AddPod(ep) }); err != nil {
		t.Fatal(err)
	}
	if out := netnstest.Conntrack(t, ns); !strings.Contains(out, "dport=7061 ") {
		t.Errorf("a natDataplane without flushUDP flushed its caller's entry of UDP 7061:\n%s", out)
	}
}
