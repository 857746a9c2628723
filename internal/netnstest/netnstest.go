// Package netnstest makes the throw-away network namespaces of reef's
// kernel tests (routes, nat, policy, daemon): each test gets namespaces of
// its own, made by containernetworking/plugins' testutils, and never
// touches the namespace it was started in. The lab's named node and pod
// namespaces are made by internal/lab instead (Lab.AddNetns), under names
// that carry the lab's prefix.
package netnstest

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netns"
)

// New creates a network namespace that is deleted when t ends, pass or
// fail, and skips t when it does not run as root. The namespace is
// mounted under /var/run/netns (testutils names it "cnitest-" and 16
// random bytes), so tools reach it by its path: ip's "netns" arguments
// take the path, and Run enters it.
func New(t testing.TB) ns.NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping kernel test: needs root to create network namespaces")
	}
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		if err := testutils.UnmountNS(n); err != nil {
			t.Errorf("remove network namespace %s: %v", n.Path(), err)
		}
	})
	return n
}

// Run runs a command in n through nsenter (only the network namespace
// changes) and returns its combined output; an error fails t.
func Run(t testing.TB, n ns.NetNS, args ...string) string {
	t.Helper()
	out, err := Output(n, args...)
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", n.Path(), strings.Join(args, " "), err, out)
	}
	return out
}

// Output runs a command in n through nsenter and returns its combined
// output and error, for a test that expects the command may fail.
func Output(n ns.NetNS, args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + n.Path(), "--"}, args...)...).CombinedOutput()
	return string(out), err
}

// RequireRoot skips t unless it runs as root with the ip command
// (iproute2): what a test that makes namespaces and links needs.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping kernel test: needs root to create network namespaces and links (run go test as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping kernel test: the ip command (iproute2) is not installed")
	}
}

// Handle is a netlink handle bound to the namespace at path, for reading
// it without switching threads; it is closed when t ends.
func Handle(t testing.TB, path string) netlinksafe.Handle {
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

// Do runs f in the namespace n on a locked thread of its own and returns
// f's error; failing to enter n fails t.
func Do(t testing.TB, n ns.NetNS, f func() error) error {
	t.Helper()
	var ferr error
	if err := n.Do(func(ns.NetNS) error { ferr = f(); return nil }); err != nil {
		t.Fatalf("enter netns %s: %v", n.Path(), err)
	}
	return ferr
}

// Open is what open makes inside n (a netlink Kernel of the caller's
// namespace, opened there), closed when the test ends; a failure fails
// the test.
func Open[T interface{ Close() }](t testing.TB, n ns.NetNS, open func() (T, error)) T {
	t.Helper()
	var v T
	if err := Do(t, n, func() (err error) { v, err = open(); return err }); err != nil {
		t.Fatalf("open in netns %s: %v", n.Path(), err)
	}
	t.Cleanup(v.Close)
	return v
}

// Conntrack is n's connection tracking table as /proc/net/nf_conntrack
// prints it; t is skipped on a kernel without that file.
func Conntrack(t testing.TB, n ns.NetNS) string {
	t.Helper()
	out, err := Output(n, "cat", "/proc/net/nf_conntrack")
	if err != nil {
		t.Skipf("no /proc/net/nf_conntrack (nf_conntrack's proc file): %v: %s", err, out)
	}
	return out
}

// SendUDP sends one datagram in n to dst ("host:port") from src (an
// address, any port; "": the kernel's choice), so that conntrack has its
// flow; a failure fails t.
func SendUDP(t testing.TB, n ns.NetNS, src, dst string) {
	t.Helper()
	err := Do(t, n, func() error {
		var laddr *net.UDPAddr
		if src != "" {
			laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 0))
		}
		raddr, err := net.ResolveUDPAddr("udp", dst)
		if err != nil {
			return err
		}
		c, err := net.DialUDP("udp", laddr, raddr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return err
	})
	if err != nil {
		t.Fatalf("send a datagram from %q to %s: %v", src, dst, err)
	}
}
