package nl

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NewHandle opens a netlink handle in the caller's network namespace for
// NETLINK_ROUTE alone. Every handle that routes and its packages open
// comes from here or NewHandleAt: vishvananda/netlink's default families
// would also open an XFRM and a netfilter socket per handle, which reef
// never uses, and closing the netfilter one right after an nftables batch
// cost an ADD ~10 ms on a policy node (docs/policy.md).
func NewHandle() (netlinksafe.Handle, error) {
	h, err := netlinksafe.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return h, fmt.Errorf("netlink handle: %w", err)
	}
	return h, nil
}

// NewHandleAt is NewHandle in the network namespace ns; its error is
// netlink's, for the caller to name the namespace.
func NewHandleAt(ns netns.NsHandle) (netlinksafe.Handle, error) {
	return netlinksafe.NewHandleAt(ns, unix.NETLINK_ROUTE)
}
