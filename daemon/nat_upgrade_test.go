package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
)

// previousMasqTable is the masquerade table as reef wrote it before table
// inet reef-nat (masq.Table of that version, whole): table ip reef for
// IPv4, table ip6 reef for IPv6, each with the family's pools in
// all-pools and masq-pools and the same rule.
func previousMasqTable(fam nftables.TableFamily, pools []masq.Pool) nft.Table {
	addrType, src, dst := nftables.TypeIPAddr, uint32(12), uint32(16)
	holds := netip.Addr.Is4
	if fam == nftables.TableFamilyIPv6 {
		addrType, src, dst = nftables.TypeIP6Addr, 8, 24
		holds = func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
	}
	var all, masqd []netip.Prefix
	for _, p := range pools {
		if !holds(p.CIDR.Addr()) {
			continue
		}
		all = append(all, p.CIDR)
		if p.NATOutgoing {
			masqd = append(masqd, p.CIDR)
		}
	}
	set := func(name, comment string, ps []netip.Prefix) nft.Set {
		return nft.Set{Name: name, KeyType: addrType.Name, KeyLen: addrType.Bytes, Interval: true, Comment: comment, Elems: nft.Intervals(ps)}
	}
	return nft.Table{
		ID: nft.TableID{Family: fam, Name: "reef"},
		Sets: []nft.Set{
			set("all-pools", "reef: every pool; traffic to these keeps its pod source address", all),
			set("masq-pools", "reef: pools with natOutgoing", masqd),
		},
		Chains: []nft.Chain{{
			Name: "postrouting", Type: nftables.ChainTypeNAT, Hooked: true,
			Hook: *nftables.ChainHookPostrouting, Priority: 110, Policy: nftables.ChainPolicyAccept,
			Rules: []nft.Rule{{Comment: masq.Comment, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: src, Len: addrType.Bytes},
				&expr.Lookup{SourceRegister: 1, SetName: "masq-pools"},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: dst, Len: addrType.Bytes},
				&expr.Lookup{SourceRegister: 1, SetName: "all-pools", Invert: true},
				&expr.Counter{},
				&expr.Masq{FullyRandom: true},
			}}},
		}},
	}
}

// recordingNAT is the real kernel, with each plan Apply sent recorded.
type recordingNAT struct {
	*nat.Kernel
	plans []nft.Plan
}

func (r *recordingNAT) Apply(p nft.Plan) error {
	r.plans = append(r.plans, p)
	return r.Kernel.Apply(p)
}

// The addresses of the masquerade lab: a pod with one address of each
// family behind the node, the node's uplink, a server outside that has no
// route to the pools (it answers a pod only through the masquerade).
var (
	upgradePools = []masq.Pool{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), NATOutgoing: true},
		{CIDR: netip.MustParsePrefix("fd00:10:244::/56"), NATOutgoing: true}}
	natPod4, natPod6   = netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00:10:244::5")
	natNode4, natNode6 = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("fd03::1")
	natOut4, natOut6   = netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("fd03::10")
)

// masqLab makes three throw-away namespaces, pod - node - outside, and
// returns the node's and a function that opens a TCP connection from the
// pod to the outside server's address of a family.
func masqLab(t *testing.T) (node ns.NetNS, dial func(to netip.Addr) *echoConn) {
	netnstest.RequireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (the nftables package; make test installs it)")
	}
	pod, node, out := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	const veth = "reefupgrade0"
	netnstest.Run(t, node, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pod.Path())
	netnstest.Run(t, node, "ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", out.Path())
	for _, c := range []struct {
		n    ns.NetNS
		args []string
	}{
		{node, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
		{node, []string{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"}},
		{node, []string{"ip", "addr", "add", "192.168.100.1/24", "dev", veth}},
		{node, []string{"ip", "addr", "add", "fd00:99::1/64", "dev", veth, "nodad"}},
		{node, []string{"ip", "link", "set", veth, "up"}},
		{node, []string{"ip", "route", "add", natPod4.String() + "/32", "dev", veth}},
		{node, []string{"ip", "route", "add", natPod6.String() + "/128", "dev", veth}},
		{node, []string{"ip", "addr", "add", natNode4.String() + "/24", "dev", "eth1"}},
		{node, []string{"ip", "addr", "add", natNode6.String() + "/64", "dev", "eth1", "nodad"}},
		{node, []string{"ip", "link", "set", "eth1", "up"}},
		{pod, []string{"ip", "addr", "add", natPod4.String() + "/32", "dev", "eth0"}},
		{pod, []string{"ip", "addr", "add", natPod6.String() + "/128", "dev", "eth0", "nodad"}},
		{pod, []string{"ip", "link", "set", "eth0", "up"}},
		{pod, []string{"ip", "route", "add", "192.168.100.1", "dev", "eth0"}},
		{pod, []string{"ip", "route", "add", "default", "via", "192.168.100.1", "dev", "eth0"}},
		{pod, []string{"ip", "-6", "route", "add", "fd00:99::1", "dev", "eth0"}},
		{pod, []string{"ip", "-6", "route", "add", "default", "via", "fd00:99::1", "dev", "eth0"}},
		{out, []string{"ip", "addr", "add", natOut4.String() + "/24", "dev", "eth0"}},
		{out, []string{"ip", "addr", "add", natOut6.String() + "/64", "dev", "eth0", "nodad"}},
		{out, []string{"ip", "link", "set", "eth0", "up"}},
	} {
		netnstest.Run(t, c.n, c.args...)
	}
	for _, a := range []netip.Addr{natOut4, natOut6} {
		var ln net.Listener
		if err := netnstest.Do(t, out, func() (err error) {
			ln, err = net.Listen("tcp", netip.AddrPortFrom(a, 8080).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go serveEcho(ln)
	}
	return node, func(to netip.Addr) *echoConn {
		t.Helper()
		var c net.Conn
		err := netnstest.Do(t, pod, func() (err error) {
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(to, 8080).String(), 3*time.Second)
			return err
		})
		if err != nil {
			t.Fatalf("connect from the pod to %s: %v (no masquerade: the server has no route back)", to, err)
		}
		t.Cleanup(func() { c.Close() })
		return &echoConn{c: c, r: bufio.NewReader(c)}
	}
}

// serveEcho answers every line of every connection with the address the
// connection comes from.
func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				if _, err := fmt.Fprintln(c, from); err != nil {
					return
				}
			}
		}()
	}
}

// echoConn is a pod's connection to the outside server.
type echoConn struct {
	c net.Conn
	r *bufio.Reader
}

// seen sends a line and returns the address the server says the
// connection comes from.
func (e *echoConn) seen(t *testing.T) netip.Addr {
	t.Helper()
	e.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(e.c, "who am I"); err != nil {
		t.Fatalf("write on %s: %v", e.c.RemoteAddr(), err)
	}
	line, err := e.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read on %s: %v", e.c.RemoteAddr(), err)
	}
	return netip.MustParseAddr(strings.TrimSpace(line))
}

var masqCounter = regexp.MustCompile(`(ip6?) saddr @masq-pools\d? .* counter packets (\d+) bytes`)

// masqCounts is how many packets each masquerade rule of table fam name
// has counted, by "ip" and "ip6"; a missing table counts nothing.
func masqCounts(t *testing.T, node ns.NetNS, fam, name string) map[string]int {
	out, err := netnstest.Output(node, "nft", "list", "table", fam, name)
	got := map[string]int{}
	if err != nil {
		return got
	}
	for _, m := range masqCounter.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] += n
	}
	return got
}

// TestNATUpgradeToInetTable: a node with the masquerade tables of the
// version before table inet reef-nat (table ip reef and table ip6 reef, as
// that version wrote them, and its other tables) and a pod with an
// established masqueraded TCP connection of each family. The daemon's
// first pass (natDataplane.reconcile, the tables' one owner) creates table
// inet reef-nat and deletes the old two in one batch, one Apply; the
// connections go on from the node's address, and new ones are
// masqueraded by the new table. Then the downgrade's state, the old
// tables back beside the new one as an older daemon writes them: every
// new connection is still masqueraded, once (the counters of the two
// tables' rules add up to the connections made: the first NAT decision
// binds), and the next pass of this version deletes the old ones again.
// Last, a start without the IPv6 pool removes its elements and logs that
// at info: a pool changed in the config is no drift.
func TestNATUpgradeToInetTable(t *testing.T) {
	node, dial := masqLab(t)
	k := &recordingNAT{Kernel: nat.NewKernel(nftables.WithNetNSFd(int(node.Fd())))}
	previous := []nft.Table{previousMasqTable(nftables.TableFamilyIPv4, upgradePools), previousMasqTable(nftables.TableFamilyIPv6, upgradePools)}
	for _, tbl := range nat.Desired(upgradePools, nil) {
		if tbl.ID != masq.TableID {
			previous = append(previous, tbl) // unchanged in this version
		}
	}
	if err := k.Kernel.Apply(nft.Diff(previous, nil)); err != nil {
		t.Fatalf("install the previous version's tables: %v", err)
	}
	conns := map[netip.Addr]*echoConn{natOut4: dial(natOut4), natOut6: dial(natOut6)}
	want := map[netip.Addr]netip.Addr{natOut4: natNode4, natOut6: natNode6}
	for to, c := range conns {
		if seen := c.seen(t); seen != want[to] {
			t.Fatalf("before the upgrade, the server %s saw %s, want the node's %s", to, seen, want[to])
		}
	}
	if got := masqCounts(t, node, "ip", "reef")["ip"] + masqCounts(t, node, "ip6", "reef")["ip6"]; got != 2 {
		t.Fatalf("the previous tables masqueraded %d connections, want 2", got)
	}

	var logs bytes.Buffer
	n := &natDataplane{kernel: k, pools: upgradePools, log: slog.New(slog.NewTextHandler(&logs, nil))}
	pass := func() {
		t.Helper()
		mark := new(activity.Log).Mark()
		defer mark.Close()
		if err := n.reconcile(nil, mark); err != nil {
			t.Fatalf("reconcile: %v\n%s", err, logs.String())
		}
	}
	pass()
	if len(k.plans) != 1 {
		t.Fatalf("the upgrade took %d batches, want 1", len(k.plans))
	}
	var did []string
	for _, c := range k.plans[0].Changes {
		did = append(did, c.Kind.String()+" "+c.Table.ID.String())
	}
	if got, want := strings.Join(did, ", "), "create table inet reef-nat, delete table ip reef, delete table ip6 reef"; got != want {
		t.Errorf("the upgrade's batch: %s, want %s", got, want)
	}
	tables := netnstest.Run(t, node, "nft", "list", "tables")
	if !strings.Contains(tables, "table inet reef-nat\n") || strings.Contains(tables, "table ip reef\n") || strings.Contains(tables, "table ip6 reef\n") {
		t.Errorf("tables after the upgrade:\n%s", tables)
	}
	for _, line := range []string{
		`level=INFO msg="creating nftables table" table="inet reef-nat"`,
		`level=INFO msg="deleting nftables table: an earlier version's masquerade, now in table inet reef-nat" table="ip reef"`,
		`level=INFO msg="deleting nftables table: an earlier version's masquerade, now in table inet reef-nat" table="ip6 reef"`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the pass did not log %s:\n%s", line, logs.String())
		}
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the upgrade logged a repair:\n%s", logs.String())
	}
	for to, c := range conns {
		if seen := c.seen(t); seen != want[to] {
			t.Errorf("the established connection to %s after the upgrade: the server saw %s, want the node's %s", to, seen, want[to])
		}
		if seen := dial(to).seen(t); seen != want[to] {
			t.Errorf("a new connection to %s after the upgrade: the server saw %s, want the node's %s", to, seen, want[to])
		}
	}
	if got := masqCounts(t, node, "inet", "reef-nat"); got["ip"] != 1 || got["ip6"] != 1 {
		t.Errorf("table inet reef-nat masqueraded %v new connections, want one of each family", got)
	}

	// Downgraded: an older daemon puts its tables back and leaves the one
	// it does not know.
	if err := k.Kernel.Apply(nft.Diff(previous[:2], nil)); err != nil {
		t.Fatalf("put the previous masquerade tables back: %v", err)
	}
	before := map[string]int{}
	for _, tbl := range [][2]string{{"ip", "reef"}, {"ip6", "reef"}, {"inet", "reef-nat"}} {
		for fam, n := range masqCounts(t, node, tbl[0], tbl[1]) {
			before[fam] += n
		}
	}
	const conns2 = 3
	for range conns2 {
		for _, to := range []netip.Addr{natOut4, natOut6} {
			if seen := dial(to).seen(t); seen != want[to] {
				t.Errorf("with both masquerade tables, a new connection to %s: the server saw %s, want the node's %s", to, seen, want[to])
			}
		}
	}
	after := map[string]int{}
	for _, tbl := range [][2]string{{"ip", "reef"}, {"ip6", "reef"}, {"inet", "reef-nat"}} {
		for fam, n := range masqCounts(t, node, tbl[0], tbl[1]) {
			after[fam] += n
		}
	}
	for _, fam := range []string{"ip", "ip6"} {
		if d := after[fam] - before[fam]; d != conns2 {
			t.Errorf("with both masquerade tables the %s rules counted %d first packets for %d connections, want one each", fam, d, conns2)
		}
	}
	k.plans = nil
	pass()
	if tables := netnstest.Run(t, node, "nft", "list", "tables"); strings.Contains(tables, "table ip reef\n") || strings.Contains(tables, "table ip6 reef\n") ||
		!strings.Contains(tables, "table inet reef-nat\n") || len(k.plans) != 1 {
		t.Errorf("after the upgrade again (%d batches):\n%s", len(k.plans), tables)
	}

	// A restart without the IPv6 pool: its elements go, logged as the
	// config's change, not as a repair.
	logs.Reset()
	n = &natDataplane{kernel: k, pools: upgradePools[:1], log: slog.New(slog.NewTextHandler(&logs, nil))}
	pass()
	if set := netnstest.Run(t, node, "nft", "list", "set", "inet", "reef-nat", "masq-pools6"); strings.Contains(set, "fd00:10:244::/56") {
		t.Errorf("the IPv6 pool is left after a start without it:\n%s", set)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="updating nftables pool set to the configured pools: set inet reef-nat masq-pools6 has 1 element(s) reef does not want: fd00:10:244::/56"`) ||
		strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a start with a pool removed logged:\n%s", logs.String())
	}
}
