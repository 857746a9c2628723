package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestPackageUpgradeIPv6Only is TestPackage's Upgrade on IPv6-only nodes
// (docs/design.md, "IPv6-only nodes"): node1 runs the installed package,
// node2 the lab's daemon, meshed over IPv6, each with a pod of an IPv6
// pool routed directly. The pods ping each other across the nodes every
// 10 ms while version N+1 is installed over N on node1 with dpkg and the
// test plays the try-restart the postinst asks of systemd. No ping is
// lost; the new daemon reports the new version, keeps its identity, has
// its session to node2 up again, both say the other is reached "direct
// over IPv6", and it serves an ADD whose pod node2's pod reaches.
//
// The package can be installed once per machine, so only node1 has it;
// the installed config has the operator's edit, the bgp section and pool
// the lab wrote for node1.
func TestPackageUpgradeIPv6Only(t *testing.T) {
	slowSuite(t) // two `make package` runs: over a minute here
	needTools(t, "dpkg", "dpkg-deb", "setpriv", "unshare", "make", "git")
	oldPkg, newPkg := upgradePackages(t, packages)
	l := newLab(t)
	nodes, err := l.AddMeshWith(2, lab.NodeOptions{IPv6Only: true, Extra: pool6Only})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := nodes[0], nodes[1]
	packageNode(t, l, n1, lab.RouterAddr6)
	purgeAtEnd(t, n1.Netns)
	env := newPkgEnv(t, n1.Netns, true)

	labCfg, err := os.ReadFile(n1.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, bgpAndPools, ok := strings.Cut(string(labCfg), "\nbgp:\n")
	if !ok {
		t.Fatalf("the lab's config of node1 has no bgp section:\n%s", labCfg)
	}
	edited := installConfigured(t, env, oldPkg, "nodeName: "+n1.Name+"\nbgp:\n"+bgpAndPools)
	// node1 is one of the two voters: a founder, initialised as the
	// operator of a new cluster does (the lab does it for node2).
	run(t, l, n1.Netns, installedReef, "store", "init", "--config", installedConfig)
	if err := n2.StartNoWait(); err != nil {
		t.Fatal(err)
	}
	unit, old := startInstalled(t, n1)
	if err := n2.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	a, err := newInstalledPod(t, l, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	b := newPod(t, n2, "web-2")
	if a.ip.IsValid() || !a.ip6.IsValid() || !b.IP.Is6() {
		t.Fatalf("pods of an IPv6 pool on IPv6-only nodes got %s %s and %s", a.ip, a.ip6, b.IP)
	}
	eventually(t, 20*time.Second, func() string {
		for _, c := range []struct{ from, to string }{{a.netns, b.IP.String()}, {b.Netns, a.ip6.String()}} {
			if out, err := l.Run(c.from, "ping", "-6", "-c", "1", "-W", "1", c.to); err != nil {
				return fmt.Sprintf("ping %s from %s: %v\n%s", c.to, c.from, err, out)
			}
		}
		return ""
	})

	// 1000 pings each way, one every 10 ms: longer than the upgrade, which
	// the check after it makes sure of.
	pings := map[string]*pingRun{
		"node1 -> node2": startPings(t, l, a.netns, b.IP.String(), "0.01", 1000),
		"node2 -> node1": startPings(t, l, b.Netns, a.ip6.String(), "0.01", 1000),
	}
	time.Sleep(500 * time.Millisecond) // half a second of traffic before the upgrade: the scenario, not a wait
	upgradeUnit(t, env, n1, unit, old, newPkg)
	for dir, p := range pings {
		if !p.running() {
			t.Errorf("%s: the pings ended before the upgrade did; they do not cover it", dir)
		}
	}
	for dir, p := range pings {
		recv, sent := p.wait()
		if recv != sent || sent == 0 {
			t.Errorf("%s: %d of %d IPv6 pings lost across the upgrade", dir, sent-recv, sent)
		} else {
			t.Logf("%s: %d of %d IPv6 pings answered across the upgrade", dir, recv, sent)
		}
	}

	st, _ := checkUpgraded(t, newPkg)
	if st.GetNodeName() != n1.Name || st.GetIdentity() != n1.Address.String() || st.GetNodeAddressV6() != n1.PeerAddress().String() || st.GetNodeAddress() != "" {
		t.Errorf("the new daemon: node %q, identity %q, IPv6 %q, IPv4 %q; want %s, %s (bgp.routerID), %s, none",
			st.GetNodeName(), st.GetIdentity(), st.GetNodeAddressV6(), st.GetNodeAddress(), n1.Name, n1.Address, n1.PeerAddress())
	}
	if got, _ := os.ReadFile(installedConfig); !bytes.Equal(got, edited) {
		t.Errorf("the upgrade replaced the operator's %s", installedConfig)
	}
	// Each reaches the other's blocks directly over IPv6 (reef status's
	// REACHED) once the session is up again.
	eventually(t, 20*time.Second, func() string {
		st, _ := installedIPAM(t)
		for _, p := range st.GetPeers() {
			if p.GetAddress() == n2.PeerAddress().String() && p.GetState() == "established" && p.GetReached() == "direct over IPv6" {
				return ""
			}
		}
		return fmt.Sprintf("the new daemon has no established session to node2 reached direct over IPv6: %v", st.GetPeers())
	})
	for _, p := range mustStatus(t, n2).GetPeers() {
		if p.GetAddress() == n1.PeerAddress().String() && p.GetReached() != "direct over IPv6" {
			t.Errorf("node2 says node1 is reached %q, want direct over IPv6", p.GetReached())
		}
	}
	c, err := newInstalledPod(t, l, "web-3")
	if err != nil {
		t.Fatalf("ADD after the upgrade: %v", err)
	}
	if !c.ip6.IsValid() || c.ip6 == a.ip6 {
		t.Errorf("a new pod got %s; web-1 has %s", c.ip6, a.ip6)
	}
	if _, err := l.Ping(b.Netns, c.ip6); err != nil {
		t.Errorf("node2's pod to the pod added after the upgrade: %v", err)
	}
}
