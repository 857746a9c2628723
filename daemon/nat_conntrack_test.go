package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"github.com/reefcni/reef/store"
)

// TestDelPodFlushesConntrack: a pod's DEL has the conntrack entries of
// each of its addresses deleted, after its elements; a failed flush is
// logged, not the DEL's failure.
func TestDelPodFlushesConntrack(t *testing.T) {
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
	if err := n.DelPod(ep); err != nil {
		t.Fatal(err)
	}
	if want := []netip.Addr{ep.IP, ep.Second.IP}; !slices.Equal(flushed, want) {
		t.Errorf("flushed %v, want %v", flushed, want)
	}
	fail, flushed = true, nil
	if err := n.DelPod(ep); err != nil {
		t.Errorf("DEL with the flush refused: %v, want nil", err)
	}
	if len(flushed) != 2 {
		t.Errorf("flushed %v after a refusal, want both addresses tried", flushed)
	}
}
