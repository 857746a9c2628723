package podlink

import (
	"net/netip"
	"testing"
)

// A dual-stack pod's addresses are locked together, each by its own key
// (what the pass's LockAddr of one of them waits for), a repeated one
// once, and all are free after the unlock.
func TestLockAddrs(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244::5")
	unlock := LockAddrs([]netip.Addr{v6, v4, v6})
	for _, ip := range []netip.Addr{v4, v6} {
		if u, ok := locks.TryLock("addr " + ip.String()); ok {
			u()
			t.Errorf("LockAddrs left %s unlocked", ip)
		}
	}
	unlock()
	if n := locks.Len(); n != 0 {
		t.Errorf("%d keys held after the unlock", n)
	}
}
