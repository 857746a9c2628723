package e2e

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestPodModel checks the kernel state after ADD against the Calico L3
// model line by line, then sends real packets.
func TestPodModel(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	a := newPod(t, n, "web-1")
	b := newPod(t, n, "web-2")

	sum := sha1.Sum([]byte("default.web-1"))
	veth := "reef" + hex.EncodeToString(sum[:])[:11]
	if len(veth) != 15 {
		t.Fatalf("veth name %q is not 15 characters", veth)
	}
	block := netip.PrefixFrom(a.IP, 26).Masked()
	if !netip.MustParsePrefix("10.244.0.0/16").Contains(a.IP) {
		t.Fatalf("pod address %s not in the default pool", a.IP)
	}

	// The CNI result: /32, gateway, the MTU on both interfaces (1.1.0).
	if got := a.Result.IPs[0].Address.String(); got != a.IP.String()+"/32" {
		t.Errorf("result address %s, want %s/32", got, a.IP)
	}
	if got := a.Result.IPs[0].Gateway.String(); got != "169.254.1.1" {
		t.Errorf("result gateway %s, want 169.254.1.1", got)
	}
	if len(a.Result.Interfaces) != 2 || a.Result.Interfaces[0].Name != veth || a.Result.Interfaces[1].Name != "eth0" ||
		a.Result.Interfaces[1].Sandbox != lab.NetnsPath(a.Netns) {
		t.Errorf("result interfaces = %+v, want %s and eth0 in %s", a.Result.Interfaces, veth, lab.NetnsPath(a.Netns))
	}
	for _, i := range a.Result.Interfaces {
		if i.Mtu != 1450 {
			t.Errorf("result interface %s mtu %d, want 1450 (1500 uplink - 50 VXLAN)", i.Name, i.Mtu)
		}
	}

	// Node side.
	link := run(t, l, n.Netns, "ip", "-d", "link", "show", veth)
	for _, want := range []string{"mtu 1450", "link/ether ee:ee:ee:ee:ee:ee", "state UP", "veth"} {
		if !strings.Contains(link, want) {
			t.Errorf("node veth %s: %q missing in\n%s", veth, want, link)
		}
	}
	if addrs := run(t, l, n.Netns, "ip", "-4", "addr", "show", "dev", veth); strings.Contains(addrs, "inet ") {
		t.Errorf("node veth %s has an IPv4 address:\n%s", veth, addrs)
	}
	wantSysctl := map[string]string{
		"net.ipv4.conf." + veth + ".proxy_arp": "1",
		"net.ipv4.ip_forward":                  "1",
	}
	for k, v := range wantSysctl {
		if got := strings.TrimSpace(run(t, l, n.Netns, "sysctl", "-n", k)); got != v {
			t.Errorf("node %s = %s, want %s", k, got, v)
		}
	}
	// The pod's /32 is in place when its ADD returns; the block's
	// blackhole comes from the pass after the block's claim, which may end
	// just after the ADD returns (waitBlackholes; seen in CI, ac6c264).
	waitBlackholes(t, n, block)
	routes := strings.Join(reefRoutes(t, n), "\n")
	for _, want := range []string{
		fmt.Sprintf("%s dev %s scope link", a.IP, veth),
		fmt.Sprintf("blackhole %s", block),
	} {
		if !strings.Contains(routes, want) {
			t.Errorf("node routes with proto 238: %q missing in\n%s", want, routes)
		}
	}

	// Pod side.
	podAddr := run(t, l, a.Netns, "ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if !strings.Contains(podAddr, "inet "+a.IP.String()+"/32 ") {
		t.Errorf("pod eth0 address: want %s/32 in\n%s", a.IP, podAddr)
	}
	if podLink := run(t, l, a.Netns, "ip", "link", "show", "eth0"); !strings.Contains(podLink, "mtu 1450") || !strings.Contains(podLink, "state UP") {
		t.Errorf("pod eth0: want mtu 1450, UP:\n%s", podLink)
	}
	podRoutes := nonEmptyLines(run(t, l, a.Netns, "ip", "-4", "route"))
	wantRoutes := []string{"default via 169.254.1.1 dev eth0", "169.254.1.1 dev eth0 scope link"}
	if strings.Join(podRoutes, "\n") != strings.Join(wantRoutes, "\n") {
		t.Errorf("pod routes:\n%s\nwant:\n%s", strings.Join(podRoutes, "\n"), strings.Join(wantRoutes, "\n"))
	}
	neigh := run(t, l, a.Netns, "ip", "neigh", "show", "169.254.1.1")
	if !strings.Contains(neigh, "lladdr ee:ee:ee:ee:ee:ee PERMANENT") {
		t.Errorf("pod neighbour 169.254.1.1: want permanent ee:ee:ee:ee:ee:ee, got %q", neigh)
	}
	if got := strings.TrimSpace(run(t, l, a.Netns, "sysctl", "-n", "net.ipv4.ip_forward")); got != "0" {
		t.Errorf("pod net.ipv4.ip_forward = %s, want 0", got)
	}

	// Packets: pod to pod through the node (TTL decremented once), pod to node.
	ttl, err := a.Ping(b.IP)
	if err != nil {
		t.Fatal(err)
	}
	if ttl != 63 {
		t.Errorf("pod->pod ttl %d, want 63 (one routed hop)", ttl)
	}
	if ttl, err := b.Ping(a.IP); err != nil || ttl != 63 {
		t.Errorf("pod->pod reverse: ttl %d, %v", ttl, err)
	}
	if ttl, err := a.Ping(n.Address); err != nil || ttl != 64 {
		t.Errorf("pod->node: ttl %d, %v; want 64", ttl, err)
	}
	// The node answers a pod's ARP for the gateway only: the pod never
	// resolved anything but 169.254.1.1 on its own.
	if m := regexp.MustCompile(`(?m)^10\.244\.`).FindString(run(t, l, a.Netns, "ip", "neigh")); m != "" {
		t.Errorf("pod has a neighbour entry for a pod address; traffic should go via the gateway")
	}
}

// TestCheckAndDel covers CHECK on a healthy and a broken pod, and DEL
// removing everything, twice, with and without the netns.
func TestCheckAndDel(t *testing.T) {
	l := newLab(t)
	// A long interval: the drift made below must still be there for CHECK.
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * 60e9})
	p := newPod(t, n, "web-1")
	if err := p.Check(); err != nil {
		t.Fatalf("CHECK on a healthy pod: %v", err)
	}
	veth := p.Result.Interfaces[0].Name

	// The pass that follows the ADD may run after the drift is made and
	// repair it (its start is not the ADD's to wait for): the drift is
	// made again until CHECK has seen it. No other pass comes for ten
	// minutes.
	eventually(t, 20*time.Second, func() string {
		l.Run(n.Netns, "ip", "route", "del", p.IP.String()+"/32") // gone already after the first try: fine
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), "route "+p.IP.String()+"/32 dev "+veth) {
			return fmt.Sprintf("CHECK without the node route: got %v, want an error naming the route", err)
		}
		return ""
	})
	run(t, l, n.Netns, "ip", "link", "del", veth)
	err := p.Check()
	if err == nil || !strings.Contains(err.Error(), "veth "+veth+" is missing") {
		t.Fatalf("CHECK without the veth: got %v, want an error naming the veth", err)
	}

	q := newPod(t, n, "web-2")
	qveth := q.Result.Interfaces[0].Name
	if err := q.Del(); err != nil {
		t.Fatal(err)
	}
	if err := q.Del(); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	if err := q.DelNoNetns(); err != nil {
		t.Fatalf("DEL with empty CNI_NETNS: %v", err)
	}
	for _, v := range reefVeths(t, n) {
		if v == qveth {
			t.Errorf("veth %s still there after DEL", qveth)
		}
	}
	for _, r := range reefRoutes(t, n) {
		if strings.HasPrefix(r, q.IP.String()+" ") {
			t.Errorf("route %q still there after DEL", r)
		}
	}
	if _, ok := allocations(t, n)[q.IP.String()]; ok {
		t.Errorf("address %s still allocated after DEL", q.IP)
	}
	// DEL of a pod whose netns is already gone, and of a never-seen one.
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := p.Del(); err != nil {
		t.Fatalf("DEL with a missing netns: %v", err)
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations left: %v", got)
	}
	ghost, err := n.NewPodNetns("default", "ghost")
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.Del(); err != nil {
		t.Fatalf("DEL of an unknown container: %v", err)
	}
}

// TestReconcileRepairs changes reef's kernel state by hand and waits for
// the loop (1s interval in the lab) to put it back, while what is not
// reef's stays untouched.
func TestReconcileRepairs(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	veth := p.Result.Interfaces[0].Name
	podRoute := fmt.Sprintf("%s dev %s scope link", p.IP, veth)

	// Not reef's: a static route, a foreign veth pair; they must survive.
	run(t, l, n.Netns, "ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1")
	run(t, l, n.Netns, "ip", "link", "set", "other0", "up")
	run(t, l, n.Netns, "ip", "link", "set", "other1", "up")
	run(t, l, n.Netns, "ip", "route", "add", "10.99.0.0/24", "dev", "other0", "proto", "static")
	// Reef's by mark but wanted by nobody: a stray veth and a stray route.
	run(t, l, n.Netns, "ip", "link", "add", "reefstray0", "type", "veth", "peer", "name", "reefstray1")
	run(t, l, n.Netns, "ip", "route", "add", "10.244.250.7/32", "dev", "eth0", "proto", "238")
	// Drift of what reef wants.
	run(t, l, n.Netns, "ip", "route", "del", p.IP.String()+"/32")
	run(t, l, n.Netns, "sysctl", "-w", "net.ipv4.conf."+veth+".proxy_arp=0")
	run(t, l, n.Netns, "sysctl", "-w", "net.ipv4.ip_forward=0")
	podMTU := linkMTU(t, l, p.Netns, "eth0")
	run(t, l, n.Netns, "ip", "link", "set", veth, "mtu", "9000")
	run(t, l, n.Netns, "ip", "link", "set", "other0", "mtu", "1400")

	eventually(t, 5e9, func() string {
		routes := strings.Join(reefRoutes(t, n), "\n")
		switch {
		case !strings.Contains(routes, podRoute):
			return "pod route not restored: " + routes
		case strings.Contains(routes, "10.244.250.7"):
			return "stray proto-238 route not removed"
		}
		for _, v := range reefVeths(t, n) {
			if strings.HasPrefix(v, "reefstray") {
				return "stray veth not removed"
			}
		}
		if v := strings.TrimSpace(run(t, l, n.Netns, "sysctl", "-n", "net.ipv4.conf."+veth+".proxy_arp")); v != "1" {
			return "proxy_arp not restored"
		}
		if v := strings.TrimSpace(run(t, l, n.Netns, "sysctl", "-n", "net.ipv4.ip_forward")); v != "1" {
			return "ip_forward not restored"
		}
		if m := linkMTU(t, l, n.Netns, veth); m != podMTU {
			return fmt.Sprintf("veth MTU %d not restored to the pod's %d", m, podMTU)
		}
		return ""
	})
	if m := linkMTU(t, l, n.Netns, "other0"); m != 1400 {
		t.Errorf("reconcile changed the MTU of other0, which is not reef's, to %d", m)
	}
	if !strings.Contains(run(t, l, n.Netns, "ip", "route", "show", "10.99.0.0/24"), "proto static") {
		t.Error("reconcile touched a route that is not reef's (10.99.0.0/24 proto static)")
	}
	if _, err := l.Run(n.Netns, "ip", "link", "show", "other0"); err != nil {
		t.Error("reconcile deleted link other0, which is not reef's")
	}
	if ttl, err := l.Ping(n.Netns, p.IP); err != nil || ttl != 64 {
		t.Errorf("node->pod after repair: ttl %d, %v", ttl, err)
	}
	if !strings.Contains(n.Log(), "repairing") && !strings.Contains(n.Log(), "adding route") {
		t.Error("daemon log does not say what it repaired")
	}
	if !strings.Contains(n.Log(), "pod MTU changed") {
		t.Error(`daemon log does not say "pod MTU changed"`)
	}
}

// TestRepairsCountDeletedBlockRoute: the own block's blackhole and
// vxlan.reef, deleted by hand, are put back as repairs: each logged as
// "repairing" and counted in reef_reconcile_repairs_total (kind route,
// kind link), as a deleted pod route is. A restarted daemon, which finds
// them in place, counts none (TestRestartKeepsTraffic).
func TestRepairsCountDeletedBlockRoute(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	newPod(t, n, "web-1")
	var hole string
	eventually(t, 20*time.Second, func() string {
		for _, r := range reefRoutes(t, n) {
			if strings.HasPrefix(r, "blackhole ") {
				hole = strings.Fields(r)[1]
				return ""
			}
		}
		return "no blackhole for the node's block yet"
	})
	run(t, l, n.Netns, "ip", "link", "show", "vxlan.reef")
	waitPass(t, n) // a pass that found both in place
	count := func(kind string) int {
		t.Helper()
		for _, line := range repairs(t, n) {
			if strings.HasPrefix(line, `reef_reconcile_repairs_total{kind="`+kind+`"} `) {
				v, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
				if err != nil {
					t.Fatal(err)
				}
				return int(v)
			}
		}
		return 0
	}
	routes, links := count("route"), count("link")
	run(t, l, n.Netns, "ip", "route", "del", "blackhole", hole, "proto", "238")
	// The pass puts the route back before it counts the repair (the
	// block routes' sync, then its log): both are waited for.
	eventually(t, 20*time.Second, func() string {
		if !strings.Contains(strings.Join(reefRoutes(t, n), "\n"), "blackhole "+hole) {
			return "the blackhole of " + hole + " is not back"
		}
		if got := count("route"); got != routes+1 {
			return fmt.Sprintf("route repairs after the blackhole was deleted and put back: %d, want %d", got, routes+1)
		}
		return ""
	})
	run(t, l, n.Netns, "ip", "link", "del", "vxlan.reef")
	eventually(t, 20*time.Second, func() string {
		if _, err := l.Run(n.Netns, "ip", "link", "show", "vxlan.reef"); err != nil {
			return "vxlan.reef is not back"
		}
		return ""
	})
	if got := count("link"); got != links+1 {
		t.Errorf("link repairs after vxlan.reef was deleted and created again: %d, want %d", got, links+1)
	}
	for _, want := range []string{"repairing route: it was deleted", "repairing vxlan.reef: it was deleted"} {
		if !strings.Contains(n.Log(), want) {
			t.Errorf("the daemon's log does not say %q", want)
		}
	}
}

// linkMTU is the MTU of dev in netns, from `ip -o link show`.
func linkMTU(t *testing.T, l *lab.Lab, netns, dev string) int {
	t.Helper()
	f := strings.Fields(run(t, l, netns, "ip", "-o", "link", "show", dev))
	for i := range len(f) - 1 {
		if f[i] == "mtu" {
			if m, err := strconv.Atoi(f[i+1]); err == nil {
				return m
			}
		}
	}
	t.Fatalf("no MTU for %s in %s", dev, netns)
	return 0
}
