package nl

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNewHandleRouteOnly: the handles speak NETLINK_ROUTE and no other
// family (netlink's default would add XFRM and netfilter sockets).
func TestNewHandleRouteOnly(t *testing.T) {
	h, err := NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for fam, want := range map[int]bool{unix.NETLINK_ROUTE: true, unix.NETLINK_XFRM: false, unix.NETLINK_NETFILTER: false} {
		if got := h.SupportsNetlinkFamily(fam); got != want {
			t.Errorf("NewHandle's handle supports netlink family %d: %v, want %v", fam, got, want)
		}
	}
}
