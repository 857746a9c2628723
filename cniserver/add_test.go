package cniserver

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/store"
)

// TestAddNeedsBothBlocksAtOnce: the first ADD of a fresh dual-stack node
// (no block of either pool) asks for a block of both pools in one wait, so
// that both are claimed at once rather than the IPv6 block only after the
// IPv4 one is confirmed. Nothing reaches the kernel: the wait fails.
func TestAddNeedsBothBlocksAtOnce(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "node-a", Address: netip.MustParseAddr("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v4 := store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}
	v6 := store.Pool{CIDR: netip.MustParsePrefix("fd00:10:244::/56"), BlockSize: 122}
	var waits [][]netip.Prefix
	need := func(_ context.Context, pools []store.Pool) *types.Error {
		var w []netip.Prefix
		for _, p := range pools {
			w = append(w, p.CIDR)
		}
		waits = append(waits, w)
		return types.NewError(types.ErrTryAgainLater, "no block in this test", "")
	}
	s := New(Config{Pools: []store.Pool{v6, v4}, MTU: 1450}, Deps{Store: st, Log: slog.New(slog.DiscardHandler), NeedBlock: need})
	s.SetReady(true)
	if _, cerr := s.add(context.Background(), goodRequest(nil)); cerr == nil || cerr.Code != types.ErrTryAgainLater {
		t.Fatalf("ADD: %v, want NeedBlock's error", cerr)
	}
	want := [][]netip.Prefix{{v4.CIDR, v6.CIDR}}
	if diff := cmp.Diff(want, waits, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("NeedBlock's calls (-want +got):\n%s", diff)
	}
}
