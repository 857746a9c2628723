package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
)

// Issue 26: five nodes with lower addresses than the three running ones
// join a cluster, configured as the README says, while the two racks are cut
// apart at the switch; both sides fill their blocks; then the cut heals. No
// address is ever on two pods and no block has two owners: every node names
// the same three voters (bgp.voters), so the joiners, who reach none of
// them during the cut, confirm nothing until the cut heals.

// eightBlocks: a pool of 8 blocks of 8 addresses, no VXLAN (no tunnel
// address to count).
const eightBlocks = "pools:\n  - cidr: 10.244.0.0/26\n    blockSize: 29\n    vxlanMode: Never\n"

// oldFill is how many more pods each old node adds while the racks are cut:
// with its first pod, 9 pods in two blocks each (its first block full, the
// second claimed ahead of need), 6 blocks of 8 on the old side, so that two
// are left for the joiners once the cut heals.
const oldFill = 8

// joinLab is a cluster of three running nodes (old1..old3, the higher
// addresses) and five joiners (new1..new5, the lower ones), not started.
type joinLab struct {
	l            *lab.Lab
	old, joiners []*lab.Node
	all          []*lab.Node
}

// newJoinLab configures every node as the README's cluster section says,
// with the same explicit voters everywhere (the three old nodes): the old
// nodes list each other and accept the underlay; a joiner lists every node
// and accepts the underlay too.
func newJoinLab(t *testing.T) *joinLab {
	t.Helper()
	l := newLab(t)
	var addrs []netip.Addr
	for i := 0; i < 8; i++ {
		addrs = append(addrs, lab.NodeAddress(i))
	}
	oldAddrs := addrs[5:]
	var vs []string
	for _, a := range oldAddrs {
		vs = append(vs, a.String())
	}
	voters := "  voters: [" + strings.Join(vs, ", ") + "]\n"
	underlay := []netip.Prefix{lab.Underlay}
	jl := &joinLab{l: l}
	// Lab addresses follow creation order: the joiners first.
	for i := 0; i < 5; i++ {
		n, err := l.AddNode(fmt.Sprintf("new%d", i+1), lab.NodeOptions{Peers: addrs, PeerPrefixes: underlay, BGPExtra: voters, Extra: eightBlocks})
		if err != nil {
			t.Fatal(err)
		}
		jl.joiners = append(jl.joiners, n)
	}
	for i := 0; i < 3; i++ {
		var peers []netip.Addr
		for j, a := range oldAddrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		n, err := l.AddNode(fmt.Sprintf("old%d", i+1), lab.NodeOptions{Peers: peers, PeerPrefixes: underlay, BGPExtra: voters, Extra: eightBlocks})
		if err != nil {
			t.Fatal(err)
		}
		jl.old = append(jl.old, n)
	}
	jl.all = append(append([]*lab.Node{}, jl.joiners...), jl.old...)
	for i, n := range jl.all {
		if n.Address != addrs[i] {
			t.Fatalf("%s has address %s, want %s", n.Name, n.Address, addrs[i])
		}
	}
	return jl
}

// startOldThenCutJoin starts the old nodes, gives each a pod, waits for
// them to converge, cuts the racks apart and starts the joiners behind the
// cut. It returns the old nodes' pods.
func (jl *joinLab) startOldThenCutJoin(t *testing.T) []*lab.Pod {
	t.Helper()
	if err := lab.StartAll(jl.old); err != nil {
		t.Fatal(err)
	}
	var pods []*lab.Pod
	for _, n := range jl.old {
		pods = append(pods, newPod(t, n, "first"))
	}
	converge(t, jl.old...)
	if err := jl.l.Split(jl.old, jl.joiners); err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(jl.joiners); err != nil {
		t.Fatal(err)
	}
	// Two racks: the joiners reach each other, no old node.
	for _, n := range jl.joiners {
		eventually(t, 15*time.Second, func() string {
			state := map[string]string{}
			for _, p := range mustStatus(t, n).GetPeers() {
				state[p.GetAddress()] = p.GetState()
			}
			for _, o := range jl.joiners {
				if o != n && state[o.Address.String()] != "established" {
					return fmt.Sprintf("%s's session to %s is %q", n.Name, o.Name, state[o.Address.String()])
				}
			}
			return ""
		})
		for _, o := range jl.old {
			if s := sessionState(t, n, o); s == "established" {
				t.Fatalf("%s's session to %s is established through the cut", n.Name, o.Name)
			}
		}
	}
	return pods
}

func sessionState(t *testing.T, n, to *lab.Node) string {
	t.Helper()
	for _, p := range mustStatus(t, n).GetPeers() {
		if p.GetAddress() == to.Address.String() {
			return p.GetState()
		}
	}
	return ""
}

// filling is one node's fill running in its own goroutine: fill without
// the test's t, which only the test goroutine may fail.
type filling struct {
	n    *lab.Node
	pods []*lab.Pod
	err  error         // the ADD that failed; nil when max pods were added
	took time.Duration // how long that ADD took
	lab  error         // the lab failed (a netns), not reef
	done chan struct{}
}

func startFill(n *lab.Node, prefix string, max int, added *atomic.Int64) *filling {
	return startFillPaced(n, prefix, max, 0, added)
}

// startFillPaced is startFill with an ADD started at most every pace;
// added counts the ADDs that succeeded (shared by a group of fills).
func startFillPaced(n *lab.Node, prefix string, max int, pace time.Duration, added *atomic.Int64) *filling {
	f := &filling{n: n, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		next := time.Now()
		for i := 0; i < max; i++ {
			time.Sleep(time.Until(next)) // the pace of the ADDs, as a runtime starts pods
			next = next.Add(pace)
			p, err := n.NewPodNetns("default", fmt.Sprintf("%s-%d", prefix, i))
			if err != nil {
				f.lab = err
				return
			}
			start := time.Now()
			if err := p.Add(); err != nil {
				f.err, f.took = err, time.Since(start)
				return
			}
			f.pods = append(f.pods, p)
			added.Add(1)
		}
	}()
	return f
}

func (f *filling) wait(t *testing.T) {
	t.Helper()
	<-f.done
	if f.lab != nil {
		t.Fatal(f.lab)
	}
}

// fillAll fills nodes concurrently (max pods each) and waits for all.
func fillAll(t *testing.T, nodes []*lab.Node, prefix string, max int) []*filling {
	t.Helper()
	var added atomic.Int64
	var fs []*filling
	for _, n := range nodes {
		fs = append(fs, startFill(n, prefix, max, &added))
	}
	for _, f := range fs {
		f.wait(t)
	}
	return fs
}

func podsOf(fs []*filling) []*lab.Pod {
	var pods []*lab.Pod
	for _, f := range fs {
		pods = append(pods, f.pods...)
	}
	return pods
}

func (f *filling) String() string {
	s := fmt.Sprintf("%s: %d pods", f.n.Name, len(f.pods))
	if f.err != nil {
		s += fmt.Sprintf(", then code %d after %s", cniCode(f.err), f.took.Round(100*time.Millisecond))
	}
	return s
}

// wantCode fails the test unless every fill either added its max pods
// (when maxOK) or ended with an ADD failing with one of codes.
func wantCode(t *testing.T, what string, fs []*filling, maxOK bool, codes ...uint) {
	t.Helper()
	for _, f := range fs {
		t.Logf("%s: %s", what, f)
		if f.err == nil {
			if !maxOK {
				t.Errorf("%s: %s added its max pods, want an ADD to fail with code %v", what, f.n.Name, codes)
			}
			continue
		}
		ok := false
		for _, c := range codes {
			ok = ok || cniCode(f.err) == c
		}
		if !ok {
			t.Errorf("%s: %s: %v, want code %v", what, f.n.Name, f.err, codes)
		}
	}
}

// noBlocksYet fails the test if a joiner confirmed or claims a block while
// it reaches no voter.
func noBlocksYet(t *testing.T, joiners []*lab.Node) {
	t.Helper()
	for _, n := range joiners {
		st := mustStatus(t, n)
		var got []string
		for _, b := range st.GetBlocks() {
			got = append(got, b.GetCidr()+" "+b.GetState())
		}
		if len(got) > 0 {
			t.Errorf("%s got blocks %v while cut off from every voter", n.Name, got)
		}
		if st.GetClaimBlocked() == "" {
			t.Errorf("%s says it can claim while cut off from every voter (voters %v, reached %d)", n.Name, st.GetVoters(), st.GetQuorumUp())
		}
	}
}

// checkJoined is what must hold once the cut has healed and every node
// has filled the pool: no address on two pods, on any node's record too; the
// eight blocks each confirmed by one node, every node agreeing on the owner;
// no node saw a conflict; the joiners got blocks and their pods reach the
// old nodes' pods.
func checkJoined(t *testing.T, jl *joinLab, pods []*lab.Pod) {
	t.Helper()
	uniqueAddresses(t, pods)
	// Every node's own record of its pods' addresses.
	held := map[string]string{}
	valid := 0
	for _, p := range pods {
		if p.IP.IsValid() {
			valid++
		}
	}
	for _, n := range jl.all {
		rep, err := n.IPAM()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rep.GetAllocations() {
			if o, dup := held[a.GetIp()]; dup {
				t.Errorf("address %s allocated on %s and on %s (%s)", a.GetIp(), o, n.Name, a.GetPod())
			}
			held[a.GetIp()] = n.Name
		}
	}
	if len(held) != valid {
		t.Errorf("the nodes hold %d addresses, the pods %d", len(held), valid)
	}

	owners := uniqueOwners(t, jl.all...)
	addrOf := map[string]string{}
	for _, n := range jl.all {
		addrOf[n.Name] = n.Address.String()
	}
	if len(owners) != 8 {
		t.Errorf("owned blocks: %v, want all 8", owners)
	}
	for _, n := range jl.all {
		eventually(t, 15*time.Second, func() string {
			seen := ownersSeenBy(t, n)
			for b, o := range owners {
				if seen[b] != addrOf[o] {
					return fmt.Sprintf("%s sees %s owned by %q, its owner is %s (%s)", n.Name, b, seen[b], o, addrOf[o])
				}
			}
			return ""
		})
	}
	settledViews(t, jl.all, 8)
	var joinerBlocks []string
	for b, o := range owners {
		if strings.HasPrefix(o, "new") {
			joinerBlocks = append(joinerBlocks, b+" "+o)
		}
	}
	sort.Strings(joinerBlocks)
	t.Logf("blocks of the joiners: %v", joinerBlocks)
	if len(joinerBlocks) == 0 {
		t.Errorf("no joiner got a block after the cut healed: owners %v", owners)
	}
	for _, n := range jl.all {
		if strings.Contains(n.Log(), "block conflict") {
			t.Errorf("%s logged a block conflict", n.Name)
		}
	}
	// The cluster works: a joiner's pod reaches an old node's pod.
	var fromJoiner, onOld *lab.Pod
	for _, p := range pods {
		if !p.IP.IsValid() {
			continue
		}
		if fromJoiner == nil && strings.HasPrefix(p.Node.Name, "new") {
			fromJoiner = p
		}
		if onOld == nil && strings.HasPrefix(p.Node.Name, "old") {
			onOld = p
		}
	}
	if fromJoiner == nil || onOld == nil {
		t.Errorf("no pod on a joiner (%v) or on an old node (%v)", fromJoiner, onOld)
		return
	}
	if _, err := fromJoiner.Ping(onOld.IP); err != nil {
		t.Errorf("%s's pod %s -> %s's pod %s: %v", fromJoiner.Node.Name, fromJoiner.IP, onOld.Node.Name, onOld.IP, err)
	}
}

// TestVoterJoinLowerAddresses: the racks are cut apart while the five
// joiners start. The old side fills six of the eight blocks; every joiner's
// first ADD waits for a block and fails with code 11, no block claimed or
// confirmed, since it reaches none of the voters. The cut heals, every
// node fills the pool: the joiners take the two blocks left, and nothing is
// ever on two pods or owned twice.
func TestVoterJoinLowerAddresses(t *testing.T) {
	timerBound(t)
	start := time.Now()
	jl := newJoinLab(t)
	pods := jl.startOldThenCutJoin(t)
	t.Logf("%s: old nodes converged, racks cut, joiners started", time.Since(start).Round(time.Second))

	var added atomic.Int64
	var cut []*filling
	for _, n := range jl.old {
		cut = append(cut, startFill(n, "cut", oldFill, &added))
	}
	for _, n := range jl.joiners {
		cut = append(cut, startFill(n, "cut", 70, &added))
	}
	for _, f := range cut {
		f.wait(t)
	}
	t.Logf("%s: filled while cut", time.Since(start).Round(time.Second))
	wantCode(t, "old side, cut", cut[:3], true)
	wantCode(t, "joiners, cut", cut[3:], false, uint(types.ErrTryAgainLater))
	for _, f := range cut[3:] {
		if len(f.pods) != 0 {
			t.Errorf("%s, cut off from every voter, gave addresses %v", f.n.Name, podIPs(f.pods))
		}
	}
	t.Logf("new1's ADD: %v", cut[3].err)
	noBlocksYet(t, jl.joiners)
	t.Logf("new1's status: %s", mustStatus(t, jl.joiners[0]).GetClaimBlocked())
	pods = append(pods, podsOf(cut)...)
	uniqueAddresses(t, pods)
	uniqueOwners(t, jl.all...)
	if t.Failed() {
		t.FailNow()
	}

	if err := jl.l.Heal(); err != nil {
		t.Fatal(err)
	}
	converge(t, jl.all...)
	t.Logf("%s: healed, all eight converged", time.Since(start).Round(time.Second))
	after := fillAll(t, jl.all, "after", 70)
	t.Logf("%s: filled after the heal", time.Since(start).Round(time.Second))
	wantCode(t, "after the heal", after, false, cniPoolExhausted)
	pods = append(pods, podsOf(after)...)
	converge(t, jl.all...)
	checkJoined(t, jl, pods)
	t.Logf("%s: done, %d pods", time.Since(start).Round(time.Second), len(pods))
}

// TestVoterJoinCutHealsMidFill: the same join, but every node starts
// filling while the racks are still cut, and the cut heals while ADDs are in
// flight: the joiners' first ADDs waiting for a block (their dials to the old
// nodes, 10 s after their start, have failed through the cut), the old nodes
// part way through theirs, paced to span the heal. Then every node fills
// the pool again.
func TestVoterJoinCutHealsMidFill(t *testing.T) {
	timerBound(t)
	start := time.Now()
	jl := newJoinLab(t)
	pods := jl.startOldThenCutJoin(t)
	t.Logf("%s: old nodes converged, racks cut, joiners started", time.Since(start).Round(time.Second))

	const oldPace, healAfter = 3 * time.Second, 12 * time.Second
	var oldAdded, newAdded atomic.Int64
	var fs []*filling
	for _, n := range jl.old {
		fs = append(fs, startFillPaced(n, "mid", oldFill, oldPace, &oldAdded))
	}
	for _, n := range jl.joiners {
		fs = append(fs, startFill(n, "mid", 70, &newAdded))
	}
	fillStart := time.Now()
	// The cut heals healAfter into the fills, while ADDs are in flight:
	// the scenario's timing, not a wait for the daemons.
	time.Sleep(healAfter)
	if n := newAdded.Load(); n != 0 {
		t.Errorf("the joiners added %d pods while cut off from every voter", n)
	}
	for _, f := range fs[3:] {
		select {
		case <-f.done:
			t.Errorf("%s's first ADD ended before the heal: %v", f.n.Name, f.err)
		default:
		}
	}
	noBlocksYet(t, jl.joiners)
	if err := jl.l.Heal(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: healed %s into the fills, the old side %d of %d pods in, the joiners' first ADDs waiting",
		time.Since(start).Round(time.Second), time.Since(fillStart).Round(10*time.Millisecond), oldAdded.Load(), 3*oldFill)
	for _, f := range fs {
		f.wait(t)
	}
	t.Logf("%s: fills across the heal done", time.Since(start).Round(time.Second))
	// The old nodes may find the pool exhausted when the joiners were quick;
	// a joiner may still wait for its sessions when its ADD's 30 s run out.
	wantCode(t, "old side, across the heal", fs[:3], true, cniPoolExhausted)
	wantCode(t, "joiners, across the heal", fs[3:], false, cniPoolExhausted, uint(types.ErrTryAgainLater))
	pods = append(pods, podsOf(fs)...)
	uniqueAddresses(t, pods)
	uniqueOwners(t, jl.all...)

	converge(t, jl.all...)
	after := fillAll(t, jl.all, "after", 70)
	t.Logf("%s: filled again", time.Since(start).Round(time.Second))
	wantCode(t, "after the heal", after, false, cniPoolExhausted)
	pods = append(pods, podsOf(after)...)
	converge(t, jl.all...)
	checkJoined(t, jl, pods)
	t.Logf("%s: done, %d pods", time.Since(start).Round(time.Second), len(pods))
}

func podIPs(pods []*lab.Pod) []string {
	var s []string
	for _, p := range pods {
		s = append(s, p.IP.String())
	}
	return s
}

// settledViews waits until every node's status says the voter list is
// settled (the documented wait between two list changes), each seeing
// blocks confirmed blocks and all the same view, and its
// reef_block_voter_list_settled reads 1.
func settledViews(t *testing.T, nodes []*lab.Node, blocks int) {
	t.Helper()
	eventually(t, 20*time.Second, func() string {
		views := map[string][]string{}
		for _, n := range nodes {
			st := mustStatus(t, n)
			if u := st.GetVotersUnsettled(); u != "" {
				return fmt.Sprintf("%s: voter list not settled: %s", n.Name, u)
			}
			if got := st.GetBlocksConfirmed(); int(got) != blocks {
				return fmt.Sprintf("%s sees %d blocks confirmed, want %d", n.Name, got, blocks)
			}
			views[st.GetView()] = append(views[st.GetView()], n.Name)
		}
		if len(views) != 1 {
			return fmt.Sprintf("the nodes show %d views: %v", len(views), views)
		}
		return ""
	})
	for _, n := range nodes {
		if got := scrapeIn(t, n, "reef_block_voter_list_settled"); got != "1" {
			t.Errorf("%s: reef_block_voter_list_settled = %q, want 1", n.Name, got)
		}
	}
	out, err := nodes[0].Reef("status")
	if err != nil || !strings.Contains(out, "voter list settled here") {
		t.Errorf("reef status on %s does not say the voter list settled: %v\n%s", nodes[0].Name, err, out)
	}
}
