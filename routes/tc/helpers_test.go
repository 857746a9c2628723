package tc

import (
	"net/netip"
	"os"
	"os/exec"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
)

// Kernel tests run in throw-away namespaces (netnstest.New) through ns.Do,
// never in the namespace the test was started in.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping kernel test: needs root to create network namespaces and veths (run `sudo go test ./routes/tc/`)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping kernel test: the ip command (iproute2) is not installed")
	}
}

// netnsHandle is a netlink handle bound to the namespace at path.
func netnsHandle(t *testing.T, path string) netlinksafe.Handle {
	t.Helper()
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open netns %s: %v", path, err)
	}
	defer nsh.Close()
	h, err := netlinksafe.NewHandleAt(nsh)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", path, err)
	}
	t.Cleanup(h.Close)
	return h
}

// in runs f in the namespace n on a locked thread of its own.
func in(t *testing.T, n ns.NetNS, f func() error) error {
	t.Helper()
	var ferr error
	if err := n.Do(func(ns.NetNS) error { ferr = f(); return nil }); err != nil {
		t.Fatalf("enter netns %s: %v", n.Path(), err)
	}
	return ferr
}

// testBusy is a podlink.Busy of fixed objects.
type testBusy struct {
	links map[string]bool
	addrs map[netip.Addr]bool
}

func (b testBusy) Link(name string) bool   { return b.links[name] }
func (b testBusy) Addr(ip netip.Addr) bool { return b.addrs[ip] }
