package ndpfilter_test

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/nat/ndpfilter"
	"github.com/reefcni/reef/nat/nft"
)

// TestDADInKernel is the filter's reason to exist, in throw-away
// namespaces: a node that answers neighbour solicitations for a pod's
// address by proxy NDP (a proxy entry, proxy_ndp on the veth, no delay)
// makes the pod's duplicate address detection fail; with the pod's element
// in table ip6 reef-ndp, the node's answer is dropped, the pod keeps its
// address and the rule's counter shows the drop. Then, the element
// deleted (DEL's edit), the same detection fails again: the filter, not
// the namespaces, is what the pod's address owes its life to.
func TestDADInKernel(t *testing.T) {
	node, pod := netnstest.New(t), netnstest.New(t)
	const veth, podAddr = "reefndp0test01", "fd00:10:244::5"
	netnstest.Run(t, node, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pod.Path())
	for _, cmd := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"sysctl", "-qw", "net.ipv6.conf." + veth + ".proxy_ndp=1"},
		{"sysctl", "-qw", "net.ipv6.neigh." + veth + ".proxy_delay=0"},
		{"ip", "link", "set", veth, "up"},
		{"ip", "-6", "neigh", "add", "proxy", podAddr, "dev", veth},
	} {
		netnstest.Run(t, node, cmd...)
	}
	netnstest.Run(t, pod, "ip", "link", "set", "eth0", "up")
	// The node answers nothing on the veth until its own link-local
	// address has passed its detection.
	poll.For(t, 10*time.Second, func() error {
		out := netnstest.Run(t, node, "ip", "-6", "addr", "show", "dev", veth, "scope", "link")
		if !strings.Contains(out, "fe80::") || strings.Contains(out, "tentative") {
			return fmt.Errorf("the veth's link-local address is not ready:\n%s", out)
		}
		return nil
	})

	k := nft.NewKernel(nftables.WithNetNSFd(int(node.Fd())))
	p := ndpfilter.Pod{Veth: veth, IP: netip.MustParseAddr(podAddr)}
	have, err := k.Read([]nft.TableID{ndpfilter.TableID})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Apply(nft.Diff([]nft.Table{ndpfilter.Table([]ndpfilter.Pod{p})}, have)); err != nil {
		t.Fatalf("apply table ip6 reef-ndp: %v", err)
	}
	if state := dad(t, pod, podAddr); state != "valid" {
		t.Fatalf("with the pod's element, its address ended %s, want valid", state)
	}
	if out := netnstest.Run(t, node, "nft", "list", "chain", "ip6", "reef-ndp", "output"); !dropped.MatchString(out) {
		t.Errorf("the rule dropped nothing, so nothing answered the detection and the test proves nothing:\n%s", out)
	}

	if err := k.EditElems([]nft.ElemEdit{ndpfilter.Edit(p)}, false); err != nil {
		t.Fatalf("delete the pod's element: %v", err)
	}
	netnstest.Run(t, pod, "ip", "-6", "addr", "del", podAddr+"/128", "dev", "eth0")
	if state := dad(t, pod, podAddr); state != "dadfailed" {
		t.Errorf("without the pod's element, its address ended %s, want dadfailed (the node's proxy answer)", state)
	}
}

var dropped = regexp.MustCompile(`counter packets [1-9]`)

// dad adds a to the pod's eth0 with duplicate address detection and
// returns how the detection ended: "valid" or "dadfailed".
func dad(t *testing.T, pod ns.NetNS, a string) string {
	t.Helper()
	netnstest.Run(t, pod, "ip", "-6", "addr", "add", a+"/128", "dev", "eth0")
	var state string
	poll.For(t, 10*time.Second, func() error {
		out := netnstest.Run(t, pod, "ip", "-6", "addr", "show", "dev", "eth0")
		switch {
		case !strings.Contains(out, a):
			return fmt.Errorf("%s is not on eth0:\n%s", a, out)
		case strings.Contains(out, "dadfailed"):
			state = "dadfailed"
		case strings.Contains(out, "tentative"):
			return errors.New("duplicate address detection still running")
		default:
			state = "valid"
		}
		return nil
	})
	return state
}
