package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// Route reflectors (docs/bgp.md): six client nodes peer only with two
// reflectors, two reef nodes with bgp.routeReflector: true in one test and
// two BIRD 2 daemons in the other. Three of the clients are the voters,
// listed on every node. The clients' names make their block searches start
// at the same block and they ADD their first pods at once, so their claims
// compete through the reflectors. Then: every pod reaches every pod,
// every block has one owner, and a restart of one reflector loses no ping
// between pods on two clients. The dual-stack variants give the clients
// an IPv6 pool too: its blocks travel through the reflectors in IPv6 VPN.

// rrPool: 16 blocks of 16 addresses, no VXLAN (one subnet).
const rrPool = "pools:\n  - cidr: 10.251.0.0/24\n    blockSize: 28\n    vxlanMode: Never\n"

// rrPool6 is the IPv6 pool of the dual-stack variants (after rrPool): 16
// blocks of 16 addresses too, so that a name's block search starts at the
// same block in both pools (blockproto.Offset depends on the number of
// blocks only) and the IPv6 claims compete as well.
const rrPool6 = "  - cidr: fd00:10:248::/120\n    blockSize: 124\n    vxlanMode: Never\n"

var (
	rrPrefix4 = netip.MustParsePrefix("10.251.0.0/24")
	rrPrefix6 = netip.MustParsePrefix("fd00:10:248::/120")
)

const rrClients = 6

// sameOffsetNames returns n node names ("c<i>") whose block searches in
// pool all start at the same block (blockproto.Offset).
func sameOffsetNames(t *testing.T, n int, pool blockproto.Pool) []string {
	t.Helper()
	var names []string
	for i := 0; len(names) < n && i < 10000; i++ {
		name := fmt.Sprintf("c%d", i)
		if len(names) == 0 || blockproto.Offset(name, pool.NumBlocks()) == blockproto.Offset(names[0], pool.NumBlocks()) {
			names = append(names, name)
		}
	}
	if len(names) < n {
		t.Fatalf("found only %d names with the same offset", len(names))
	}
	return names
}

// addClients adds the client nodes with the pools (rrPool, and rrPool6
// after it or not), peering with rrs; the first three are the voters.
// first is the index of the first client among the lab's nodes (their
// addresses follow the nodes added before).
func addClients(t *testing.T, l *lab.Lab, first int, rrs []netip.Addr, pools string) ([]*lab.Node, []netip.Addr) {
	t.Helper()
	pool := blockproto.Pool{CIDR: rrPrefix4, BlockSize: 28}
	var voters []netip.Addr
	for i := range 3 {
		voters = append(voters, lab.NodeAddress(first+i))
	}
	var clients []*lab.Node
	for _, name := range sameOffsetNames(t, rrClients, pool) {
		n, err := l.AddNode(name, lab.NodeOptions{BGP: lab.ClientBGP(rrs, voters), Extra: pools})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, n)
	}
	return clients, voters
}

// competingPods ADDs one pod on every client at the same moment. The
// clients' first choice is the same block (sameOffsetNames); so that they
// all claim it before any hears another's claim, whatever the timing, the
// switch drops the reflectors' frames (hold: their names) until every
// client has claimed (claims: one block per family of its pools), for well
// under the lab's 3 s hold time: the sessions (established before) stay
// up, and TCP delivers the claims, all at once, after.
func competingPods(t *testing.T, l *lab.Lab, clients []*lab.Node, hold []string, claims int) []*lab.Pod {
	t.Helper()
	for _, h := range hold {
		if err := l.Drop(h, true); err != nil {
			t.Fatal(err)
		}
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		for _, h := range hold {
			if err := l.Drop(h, false); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()
	pods := make([]*lab.Pod, len(clients))
	var wg sync.WaitGroup
	for i, n := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := n.NewPod("default", "first")
			if err != nil {
				t.Errorf("%s: %v", n.Name, err)
				return
			}
			pods[i] = p
		}()
	}
	if len(hold) > 0 {
		if err := poll.Until(1500*time.Millisecond, func() error {
			var late []string
			for _, n := range clients {
				if strings.Count(n.Log(), "claimed a block") < claims {
					late = append(late, n.Name)
				}
			}
			if len(late) > 0 {
				return fmt.Errorf("%v did not claim %d block(s)", late, claims)
			}
			return nil
		}); err != nil {
			t.Logf("%v since the ADDs began; the reflectors take the claims in anyway", err)
		}
		release()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return pods
}

// givenUp matches the daemon's log line of a claim lost to a competitor.
var givenUp = regexp.MustCompile(`msg="gave up a pending claim[^"]*".* block=(\S+)`)

// checkUnique: no address on two pods, no block confirmed by two nodes, no
// conflict logged; it reports how many claims were lost to competitors, and
// fails if none was in a family the pods have addresses of.
func checkUnique(t *testing.T, pods []*lab.Pod, nodes []*lab.Node) {
	t.Helper()
	uniqueAddresses(t, pods)
	owners := uniqueOwners(t, nodes...)
	lost := map[string]int{} // "IPv4", "IPv6" -> claims given up
	for _, n := range nodes {
		for _, m := range givenUp.FindAllStringSubmatch(n.Log(), -1) {
			lost[family(netip.MustParsePrefix(m[1]).Addr())]++
		}
		if strings.Contains(n.Log(), "block conflict") {
			t.Errorf("%s logged a block conflict", n.Name)
		}
	}
	families := map[string]bool{}
	for _, p := range pods {
		for _, ip := range p.IPs {
			families[family(ip)] = true
			if o := ownerOf(owners, ip); o != p.Node.Name {
				t.Errorf("pod %s/%s has %s, in a block of %q", p.Node.Name, p.Name, ip, o)
			}
		}
	}
	t.Logf("%d blocks owned by %d nodes; claims given up to a competing claim of the same block: %v", len(owners), len(nodes), lost)
	for f := range families {
		if lost[f] == 0 {
			t.Errorf("no claim of an %s block was given up: the clients' claims did not compete", f)
		}
	}
}

func family(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}

func ownerOf(owners map[string]string, ip netip.Addr) string {
	for b, o := range owners {
		if netip.MustParsePrefix(b).Contains(ip) {
			return o
		}
	}
	return ""
}

// pingAll pings every address of every pod from every other pod.
func pingAll(t *testing.T, pods []*lab.Pod) {
	t.Helper()
	for _, a := range pods {
		for _, b := range pods {
			if a == b {
				continue
			}
			for _, ip := range b.IPs {
				if _, err := a.Ping(ip); err != nil {
					t.Errorf("%s -> %s (%s): %v", a.Node.Name, b.Node.Name, ip, err)
				}
			}
		}
	}
}

// checkPeers: a node's sessions are all established with the types want
// (address -> type), and the import filter dropped nothing.
func checkPeers(t *testing.T, n *lab.Node, want map[string]string) {
	t.Helper()
	// Routes through one reflector may come before the other's paths
	// (held back by a test's cut, they wait for TCP's retransmission).
	eventually(t, 10*time.Second, func() string {
		for _, p := range mustStatus(t, n).GetPeers() {
			if p.GetState() != "established" || p.GetReceived() == 0 {
				return fmt.Sprintf("%s: peer %s is %s, %d paths received", n.Name, p.GetAddress(), p.GetState(), p.GetReceived())
			}
		}
		return ""
	})
	st := mustStatus(t, n)
	got := map[string]string{}
	for _, p := range st.GetPeers() {
		got[p.GetAddress()] = p.GetType()
		if p.GetState() != "established" || p.GetReceived() == 0 || p.GetAccepted() != p.GetReceived() {
			t.Errorf("%s: peer %s is %s, %d paths received, %d accepted", n.Name, p.GetAddress(), p.GetState(), p.GetReceived(), p.GetAccepted())
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: peers %v, want %v", n.Name, got, want)
	}
	if d := st.GetBgpDropped(); d != 0 {
		t.Errorf("%s: the import filter dropped %d paths", n.Name, d)
	}
	out, err := n.Reef("status")
	if err != nil || !strings.Contains(out, "TYPE") {
		t.Errorf("%s: reef status: %v\n%s", n.Name, err, out)
	}
	for a, typ := range want {
		if !regexp.MustCompile(regexp.QuoteMeta(a) + `\s+\S+\s+` + typ + `\s`).MatchString(out) {
			t.Errorf("%s: reef status does not show peer %s as %s:\n%s", n.Name, a, typ, out)
		}
	}
}

// noLossAcross pings between pods on two clients in both directions, to
// each of their addresses (both families of dual-stack pods), while
// restart runs, and fails the test if any ping is lost.
func noLossAcross(t *testing.T, a, b *lab.Pod, what string, restart func()) {
	t.Helper()
	type pinger struct {
		dir  string
		wait func() (int, int)
	}
	var pingers []pinger
	for _, d := range [][2]*lab.Pod{{a, b}, {b, a}} {
		for _, ip := range d[1].IPs {
			pingers = append(pingers, pinger{fmt.Sprintf("%s -> %s (%s)", d[0].Node.Name, d[1].Node.Name, family(ip)), pingFor(t, d[0], ip.String(), 80)})
		}
	}
	time.Sleep(time.Second) // a second of traffic before the restart: the scenario, not a wait
	restart()
	for _, p := range pingers {
		recv, sent := p.wait()
		if recv != sent {
			t.Errorf("%s: %d of %d pings lost across %s", p.dir, sent-recv, sent, what)
		} else {
			t.Logf("%s: %d of %d pings answered across %s", p.dir, recv, sent, what)
		}
	}
}

// TestReflectorsReef: two reef nodes reflect (bgp.routeReflector: true,
// each with the other in bgp.peers, the clients accepted through
// bgp.peerPrefixes) and host pods themselves.
func TestReflectorsReef(t *testing.T) {
	l := newLab(t)
	rrAddrs := []netip.Addr{lab.NodeAddress(0), lab.NodeAddress(1)}
	voters := []netip.Addr{lab.NodeAddress(2), lab.NodeAddress(3), lab.NodeAddress(4)}
	var rrs []*lab.Node
	for i, name := range []string{"rr1", "rr2"} {
		n, err := l.AddNode(name, lab.NodeOptions{BGP: lab.ReflectorBGP([]netip.Addr{rrAddrs[1-i]}, voters), Extra: rrPool})
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, n)
	}
	clients, v := addClients(t, l, 2, rrAddrs, rrPool)
	if !slices.Equal(v, voters) {
		t.Fatalf("voters %v, want %v", v, voters)
	}
	all := append(append([]*lab.Node{}, rrs...), clients...)
	pods := reflectedClaims(t, l, rrs, clients)

	for _, c := range clients {
		checkPeers(t, c, map[string]string{rrAddrs[0].String(): "reflector", rrAddrs[1].String(): "reflector"})
	}
	for i, rr := range rrs {
		want := map[string]string{rrAddrs[1-i].String(): "reflector"}
		for _, c := range clients {
			want[c.Address.String()] = "client"
		}
		checkPeers(t, rr, want)
	}

	noLossAcross(t, pods[0], pods[3], "the restart of reflector rr1", func() {
		if err := rrs[0].Restart(); err != nil {
			t.Fatal(err)
		}
	})
	if err := lab.WaitReflected(all, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkPeers(t, clients[0], map[string]string{rrAddrs[0].String(): "reflector", rrAddrs[1].String(): "reflector"})
	uniqueOwners(t, all...)
}

// externalRR is a route reflector that is not a reef node.
type externalRR struct {
	name  string
	host  string // its namespace's name on the underlay (Lab.Drop)
	addr  netip.Addr
	start func() error
	kill  func()
	dump  func() string // its state, for a failed test
	check func(clients []*lab.Node) string
}

// externalReflectors adds two route reflectors of kind "bird" or "frr"
// to l, with the configuration of docs/bgp.md.
func externalReflectors(t *testing.T, l *lab.Lab, kind string) []externalRR {
	t.Helper()
	var rrs []externalRR
	for i := range 2 {
		switch kind {
		case "bird":
			b, err := l.AddBird(fmt.Sprintf("bird%d", i+1), lab.BirdAddress(i), lab.Underlay)
			if err != nil {
				t.Fatal(err)
			}
			rrs = append(rrs, externalRR{name: "BIRD " + b.Name, host: b.Name, addr: b.Address, start: b.Start, kill: b.Kill,
				dump: func() string {
					out, _ := b.Birdc("show", "protocols")
					for _, table := range []string{"reefvpn", "reefvpn6", "master4"} {
						r, _ := b.Birdc("show", "route", "table", table, "all")
						out += r
					}
					return out + "log:\n" + b.Log()
				},
				check: func(clients []*lab.Node) string { return birdTablesDiffer(b, clients) }})
		case "frr":
			f, err := l.AddFRR(fmt.Sprintf("frr%d", i+1), lab.BirdAddress(i), lab.Underlay)
			if err != nil {
				t.Fatal(err)
			}
			rrs = append(rrs, externalRR{name: "FRR " + f.Name, host: f.Name, addr: f.Address, start: f.Start, kill: f.Kill,
				dump: func() string {
					out, _ := f.Vtysh("show bgp summary")
					for _, table := range []string{"ipv4 vpn", "ipv6 vpn"} {
						r, _ := f.Vtysh("show bgp " + table)
						out += r
					}
					return out + "log:\n" + f.Log()
				},
				check: func(clients []*lab.Node) string { return frrTablesDiffer(f, clients) }})
		default:
			t.Fatalf("no route reflector of kind %q", kind)
		}
	}
	return rrs
}

// testExternalReflectors: six clients peer with two external route
// reflectors of kind ("bird", "frr"), not peered with each other, and
// none else: competing claims, every pod to every pod, the reflectors'
// tables (check), and a kill and restart of one reflector loses no ping.
// With dual, the clients have IPv6 addresses on their uplinks and the
// IPv6 pool rrPool6 too, and all that holds for both families.
func testExternalReflectors(t *testing.T, kind string, dual bool) {
	if _, err := os.Stat(lab.Vtysh); kind == "frr" && err != nil {
		t.Skip("FRR is not installed (apt-get install frr); docs/bgp.md says what was checked without it")
	}
	l := newLab(t)
	rrs := externalReflectors(t, l, kind)
	var addrs []netip.Addr
	for _, rr := range rrs {
		if err := rr.start(); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, rr.addr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, rr := range rrs {
				t.Logf("%s:\n%s", rr.name, rr.dump())
			}
		}
	})
	pools, claims := rrPool, 1
	if dual {
		pools, claims = rrPool+rrPool6, 2
	}
	clients, _ := addClients(t, l, 0, addrs, pools)
	if dual {
		addNodeAddrs6(t, clients...)
	}
	if err := lab.StartAll(clients); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, rr := range rrs {
		held = append(held, rr.host)
	}
	if err := lab.WaitReflected(clients, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pods := competingPods(t, l, clients, held, claims)
	if dual {
		for _, p := range pods {
			dualPod(t, l, p, rrPrefix4, rrPrefix6)
		}
	}
	// Every client routes every other's blocks of both families via the
	// owner's address; the clients have no session but to the reflectors.
	if err := lab.WaitReflected(clients, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkUnique(t, pods, clients)
	pingAll(t, pods)
	for _, c := range clients {
		checkPeers(t, c, map[string]string{addrs[0].String(): "reflector", addrs[1].String(): "reflector"})
	}
	for _, rr := range rrs {
		if d := rr.check(clients); d != "" {
			t.Errorf("%s: %s", rr.name, d)
		}
	}

	noLossAcross(t, pods[0], pods[3], "a kill and restart of "+rrs[0].name, func() {
		rrs[0].kill()
		time.Sleep(time.Second) // the reflector stays down a second: the outage under test
		if err := rrs[0].start(); err != nil {
			t.Fatal(err)
		}
	})
	if err := lab.WaitReflected(clients, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string { return rrs[0].check(clients) })
	uniqueOwners(t, clients...)
}

// TestReflectorsBird: two BIRD 2 route reflectors with the configuration of
// docs/bgp.md (lab.BirdConfig). BIRD holds one path per NLRI, from the
// speaker its route distinguisher names, with reef's large communities as
// reef sent them, and the confirmed blocks with the owners as next hops.
func TestReflectorsBird(t *testing.T) { testExternalReflectors(t, "bird", false) }

// TestReflectorsFRR: the same with two FRR route reflectors, configured as
// docs/bgp.md says (lab.FRRConfig). FRR holds one path per NLRI of the
// VPN table, and every client's record and claims.
func TestReflectorsFRR(t *testing.T) { slowSuite(t); testExternalReflectors(t, "frr", false) }

// TestReflectorsBirdDualStack: the clients of the BIRD reflectors have an
// IPv4 and an IPv6 pool (issue 29): the IPv6 claims compete through
// BIRD's IPv6 VPN table as the IPv4 ones do, every client routes the
// others' IPv6 blocks via their IPv6 addresses, and dual-stack pods ping
// each other over both families, through a kill of a reflector too.
func TestReflectorsBirdDualStack(t *testing.T) { testExternalReflectors(t, "bird", true) }

// TestReflectorsFRRDualStack: the same with the FRR reflectors.
func TestReflectorsFRRDualStack(t *testing.T) { slowSuite(t); testExternalReflectors(t, "frr", true) }

// birdTablesDiffer compares BIRD's tables with what the clients announce:
// in the VPN tables (IPv4 and IPv6), one path per NLRI, from the speaker
// its RD names; each client's record, and the claims of its confirmed
// blocks, with exactly the large communities reef encodes (an IPv6 block's
// in the IPv6 VPN table, next hop = the owner); in the IPv4 table, each
// confirmed IPv4 block once, next hop = owner. It returns "" when all is
// as it should be.
func birdTablesDiffer(b *lab.Bird, clients []*lab.Node) string {
	vpn, err := b.Paths("reefvpn")
	if err != nil {
		return err.Error()
	}
	vpn6, err := b.Paths("reefvpn6")
	if err != nil {
		return err.Error()
	}
	vpn = append(vpn, vpn6...)
	uc, err := b.Paths("master4")
	if err != nil {
		return err.Error()
	}
	seen := map[string]lab.BirdPath{}
	for _, p := range vpn {
		if _, dup := seen[p.Net]; dup {
			return fmt.Sprintf("%s: two paths for %s", b.Name, p.Net)
		}
		seen[p.Net] = p
		rd, _, _ := strings.Cut(p.Net, " ")
		addr, _, _ := strings.Cut(rd, ":")
		if addr != p.From.String() {
			return fmt.Sprintf("%s: %s came from %s, not from the speaker its RD names", b.Name, p.Net, p.From)
		}
	}
	ucSeen := map[string]lab.BirdPath{}
	for _, p := range uc {
		if _, dup := ucSeen[p.Net]; dup {
			return fmt.Sprintf("%s: two IPv4 paths for %s", b.Name, p.Net)
		}
		ucSeen[p.Net] = p
	}
	for _, c := range clients {
		st, err := c.Status()
		if err != nil {
			return err.Error()
		}
		inc, err := strconv.ParseUint(st.GetIncarnation(), 16, 32)
		if err != nil {
			return fmt.Sprintf("%s: incarnation %q: %v", c.Name, st.GetIncarnation(), err)
		}
		self := blockproto.Node{Addr: c.Address, Inc: uint32(inc)}
		var want []bgp.VPNRoute
		for _, blk := range st.GetBlocks() {
			if blk.GetState() != "confirmed" {
				continue
			}
			rt, err := bgp.EncodeClaim(64512, blockproto.Claim{Block: netip.MustParsePrefix(blk.GetCidr()), Owner: self,
				State: blockproto.Confirmed, VoterHash: st.GetVoterHash()})
			if err != nil {
				return err.Error()
			}
			want = append(want, rt)
			if rt.Prefix.Addr().Is6() {
				// No IPv6 unicast in the cluster: the claim is the block's path.
				if p, ok := seen[rt.RD.String()+" "+rt.Prefix.String()]; ok && p.NextHop.Unmap() != c.Address {
					return fmt.Sprintf("%s: IPv6 VPN path %s (%s's claim): %+v (want next hop %s, IPv4-mapped)", b.Name, rt, c.Name, p, c.Address)
				}
				continue
			}
			p, ok := ucSeen[blk.GetCidr()]
			if !ok || p.NextHop != c.Address {
				return fmt.Sprintf("%s: IPv4 path of %s's block %s: %+v (want next hop %s)", b.Name, c.Name, blk.GetCidr(), p, c.Address)
			}
		}
		for _, rt := range want {
			p, ok := seen[rt.RD.String()+" "+rt.Prefix.String()]
			if !ok {
				return fmt.Sprintf("%s has no path %s (%s's claim); it has %d VPN paths, %d of them IPv6", b.Name, rt, c.Name, len(vpn), len(vpn6))
			}
			if got, want := sortedLarge(p.Large), wantLarge(rt); got != want {
				return fmt.Sprintf("%s: %s has large communities %s, reef sent %s", b.Name, rt, got, want)
			}
		}
		if _, ok := seen[c.Address.String()+":1 "+c.Address.String()+"/32"]; !ok {
			return fmt.Sprintf("%s has no record of %s", b.Name, c.Name)
		}
	}
	return ""
}

func wantLarge(rt bgp.VPNRoute) string {
	var s []string
	for _, lc := range rt.Communities {
		s = append(s, fmt.Sprintf("(%d, %d, %d)", lc.ASN, lc.Data1, lc.Data2))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func sortedLarge(lcs []string) string {
	s := slices.Clone(lcs)
	slices.Sort(s)
	return strings.Join(s, " ")
}

// frrVPN is FRR's VPN table of one family: RD -> prefix -> paths.
type frrVPN map[string]map[string][]struct {
	Nexthops []struct {
		IP string `json:"ip"`
	} `json:"nexthops"`
}

// frrVPNTable reads FRR's VPN table of family ("ipv4", "ipv6").
func frrVPNTable(f *lab.FRR, family string) (frrVPN, error) {
	cmd := "show bgp " + family + " vpn json"
	out, err := f.Vtysh(cmd)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(out) == "" {
		return nil, nil // FRR 8.4 prints nothing for an empty VPN table
	}
	var vpn struct {
		Routes struct {
			RouteDistinguishers frrVPN `json:"routeDistinguishers"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &vpn); err != nil {
		return nil, fmt.Errorf("%s: %v: %.300s", cmd, err, out)
	}
	return vpn.Routes.RouteDistinguishers, nil
}

// frrTablesDiffer checks FRR's VPN tables: each client's record and the
// claims of its confirmed blocks are there, once each, with one path per
// NLRI (an IPv6 block's claim in the IPv6 VPN table, next hop the owner's
// address, IPv4-mapped), and each confirmed IPv4 block is in its IPv4
// table with the owner as next hop. It returns "" when all is as it
// should be.
func frrTablesDiffer(f *lab.FRR, clients []*lab.Node) string {
	rds, err := frrVPNTable(f, "ipv4")
	if err != nil {
		return err.Error()
	}
	rds6, err := frrVPNTable(f, "ipv6")
	if err != nil {
		return err.Error()
	}
	out, err := f.Vtysh("show bgp ipv4 unicast json")
	if err != nil {
		return err.Error()
	}
	var uc struct {
		Routes map[string][]struct {
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &uc); err != nil {
		return fmt.Sprintf("show bgp ipv4 unicast json: %v: %.300s", err, out)
	}
	for _, t := range []frrVPN{rds, rds6} {
		for rd, nets := range t {
			for net, paths := range nets {
				if len(paths) != 1 {
					return fmt.Sprintf("%d paths for %s %s", len(paths), rd, net)
				}
			}
		}
	}
	for _, c := range clients {
		st, err := c.Status()
		if err != nil {
			return err.Error()
		}
		a := c.Address.String()
		if _, ok := rds[a+":1"][a+"/32"]; !ok {
			return fmt.Sprintf("no record of %s (RD %s:1) in %v", c.Name, a, rds)
		}
		for _, blk := range st.GetBlocks() {
			if blk.GetState() != "confirmed" {
				continue
			}
			if strings.Contains(blk.GetCidr(), ":") {
				p, ok := rds6[a+":2"][blk.GetCidr()]
				if !ok || len(p[0].Nexthops) == 0 {
					return fmt.Sprintf("no IPv6 VPN claim of %s by %s: %+v", blk.GetCidr(), c.Name, p)
				}
				if nh, err := netip.ParseAddr(p[0].Nexthops[0].IP); err != nil || nh.Unmap() != c.Address {
					return fmt.Sprintf("IPv6 VPN claim of %s by %s has next hop %q, want %s IPv4-mapped", blk.GetCidr(), c.Name, p[0].Nexthops[0].IP, a)
				}
				continue
			}
			if p, ok := rds[a+":2"][blk.GetCidr()]; !ok || len(p[0].Nexthops) == 0 || p[0].Nexthops[0].IP != a {
				return fmt.Sprintf("no claim of %s by %s with next hop %s: %+v", blk.GetCidr(), c.Name, a, p)
			}
			if p, ok := uc.Routes[blk.GetCidr()]; !ok || len(p) != 1 || len(p[0].Nexthops) == 0 || p[0].Nexthops[0].IP != a {
				return fmt.Sprintf("IPv4 path of %s's block %s: %+v (want one, next hop %s)", c.Name, blk.GetCidr(), p, a)
			}
		}
	}
	return ""
}

// reflectedClaims starts two reef reflectors and their clients, lets the
// clients' competing claims meet at the reflectors, puts a pod on each
// reflector too (they are nodes like any other), and checks what a cluster
// of reflectors must do whatever its family: no block and no address had
// twice, every pod reaching every other.
func reflectedClaims(t *testing.T, l *lab.Lab, rrs, clients []*lab.Node) []*lab.Pod {
	t.Helper()
	all := append(append([]*lab.Node{}, rrs...), clients...)
	if err := lab.StartAll(all); err != nil {
		t.Fatal(err)
	}
	// Sessions first: the claims must meet at the reflectors, not wait
	// for sessions (competingPods).
	if err := lab.WaitReflected(all, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pods := competingPods(t, l, clients, []string{"rr1", "rr2"}, 1)
	if err := lab.WaitReflected(all, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkUnique(t, pods, clients)
	for _, rr := range rrs {
		pods = append(pods, newPod(t, rr, "on-"+rr.Name))
	}
	if err := lab.WaitReflected(all, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	uniqueAddresses(t, pods)
	uniqueOwners(t, all...)
	pingAll(t, pods)
	return pods
}
