package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

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
