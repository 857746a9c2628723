package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/internal/lab"
)

// TestStoreRecover: a damaged store (pages in use overwritten, the file cut
// short, or emptied) stops the daemon with one error naming the file and
// `reef store recover`, never a panic, while the pods keep their traffic.
// The recovery brings up a daemon whose pods keep their addresses and
// traffic, whose new pods get unused addresses, which refuses to claim new
// blocks, and whose `reef ipam check` is clean once the pods it could not
// name are deleted (a DEL, and a sandbox gone without one).
func TestStoreRecover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"pages overwritten", func(t *testing.T, path string) {
			used := boltPages(t, path, "leaf", "branch")
			overwrite(t, path, used[0], used[len(used)-1])
		}},
		{"truncated", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2+100); err != nil {
				t.Fatal(err)
			}
		}},
		{"zero-length", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testStoreRecover(t, tc.damage) })
	}
}

func testStoreRecover(t *testing.T, damage func(t *testing.T, path string)) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	a, b := newPod(t, n, "a"), newPod(t, n, "b")
	// c has a hostPort and limits, which the kernel keeps if its record is
	// lost.
	c, err := n.NewPodNetns("default", "c")
	if err != nil {
		t.Fatal(err)
	}
	c.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		"bandwidth": lab.Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3}}
	if err := c.Add(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ServePorts(c.Netns); err != nil {
		t.Fatal(err)
	}
	hostPort := "tcp:" + n.Address.String() + ":8080"
	if reply, why := probeOne(t, l, a.Netns, hostPort); reply == "" {
		t.Fatalf("c's hostPort before the damage: %s", why)
	}
	// recover rebuilds the node's blocks from their blackholes: wait for
	// the pass that writes the own block's one, or a crash before it
	// leaves recover no sign the block was ours (and ADD d fails).
	eventually(t, 20*time.Second, func() string {
		for _, r := range reefRoutes(t, n) {
			if strings.HasPrefix(r, "blackhole") {
				return ""
			}
		}
		return "no blackhole for the node's block yet"
	})
	if err := n.Kill(); err != nil { // a crash: nothing flushed on the way out
		t.Fatal(err)
	}
	db := filepath.Join(n.StateDir, "reef.db")
	damage(t, db)

	if err := n.StartNoWait(); err != nil {
		t.Fatal(err)
	}
	err, exited := n.Wait(20 * time.Second)
	if !exited {
		t.Fatal("the daemon with a damaged store did not exit")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 65 {
		t.Errorf("exit: %v, want status 65", err)
	}
	log := n.LogTail(5)
	for _, want := range []string{"store " + db + " is damaged:", "reef store recover", "Pods keep their traffic"} {
		if !strings.Contains(log, want) {
			t.Errorf("the daemon's last words do not say %q:\n%s", want, log)
		}
	}
	if all := n.Log(); strings.Contains(all, "\npanic: ") || strings.Contains(all, "goroutine ") {
		t.Errorf("the daemon panicked:\n%s", n.LogTail(40))
	}
	if _, err := a.Ping(b.IP); err != nil {
		t.Fatalf("a -> b with the daemon down: %v", err)
	}

	out, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n.Config)
	if err != nil {
		t.Fatalf("reef store recover: %v", err)
	}
	t.Logf("reef store recover:\n%s", out)
	for _, want := range []string{"rebuilt; the damaged file is " + db + ".damaged-", "addresses kept: 3 of pods", a.IP.String(), b.IP.String(), c.IP.String(), "blocks kept (1)", "from identity file"} {
		if !strings.Contains(out, want) {
			t.Errorf("reef store recover does not say %q", want)
		}
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); len(got) != 3 || got[a.IP.String()] == "" || got[b.IP.String()] == "" || got[c.IP.String()] == "" {
		t.Errorf("allocations after the recovery: %v, want %s, %s and %s", got, a.IP, b.IP, c.IP)
	}
	for _, p := range []*lab.Pod{a, b, c} {
		for _, q := range []*lab.Pod{a, b, c} {
			if p != q {
				if _, err := p.Ping(q.IP); err != nil {
					t.Errorf("%s -> %s after the recovery: %v", p.Name, q.Name, err)
				}
			}
		}
	}
	if out, err := n.Reef("routes"); err != nil {
		t.Errorf("reef routes after the recovery: %v\n%s", err, out)
	}
	// The reconcile passes put back c's hostPort and its limits.
	eventually(t, 20*time.Second, func() string {
		if reply, why := probeOne(t, l, a.Netns, hostPort); reply == "" {
			return "c's hostPort after the recovery: " + why
		}
		if q := run(t, l, n.Netns, "tc", "qdisc", "show", "dev", vethOf(c)); !strings.Contains(q, "tbf") || !strings.Contains(q, "10Mbit") {
			return "c's veth after the recovery has no 10 Mbit/s tbf:\n" + q
		}
		return ""
	})
	st, err := n.Reef("status")
	if err != nil || !strings.Contains(st, "reef store recover") {
		t.Errorf("reef status does not say the store was recovered: %v\n%s", err, st)
	}
	d := newPod(t, n, "d")
	if slices.Contains([]string{a.IP.String(), b.IP.String(), c.IP.String()}, d.IP.String()) {
		t.Fatalf("a new pod got %s, which an existing pod holds", d.IP)
	}
	if _, err := d.Ping(a.IP); err != nil {
		t.Errorf("d -> a: %v", err)
	}

	// A DEL of another sandbox of pod c (same name, so the same veth
	// name, another container and netns) must not touch c.
	other, err := n.NewPodNetns("default", "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Del(); err != nil {
		t.Fatalf("DEL of another sandbox of c: %v", err)
	}
	if _, err := b.Ping(c.IP); err != nil {
		t.Errorf("b -> c after the DEL of another sandbox of c: %v", err)
	}
	if got := allocations(t, n); got[c.IP.String()] == "" {
		t.Errorf("c's address was freed by the DEL of another sandbox of c: %v", got)
	}

	// Pod a's DEL finds its record by its veth; pod b's sandbox goes
	// without a DEL and the reconcile pass frees it.
	if err := a.Del(); err != nil {
		t.Fatalf("DEL of a: %v", err)
	}
	if err := l.DelNetns(b.Netns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		got := allocations(t, n)
		if len(got) != 2 || got[c.IP.String()] == "" || got[d.IP.String()] == "" {
			return "allocations " + strings.Join(keys(got), " ") + ", want only c's and d's"
		}
		return ""
	})
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check after the DELs: %v\n%s", err, out)
	}
	if v := reefVeths(t, n); len(v) != 2 {
		t.Errorf("veths %v, want c's and d's", v)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// boltPages lists the pages of a bbolt file of the given types.
func boltPages(t *testing.T, path string, types ...string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 0; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if slices.Contains(types, p.Type) {
				out = append(out, id)
			}
		}
	})
	if err != nil || len(out) < 2 {
		t.Fatalf("pages %v of %s: %v %v", types, path, out, err)
	}
	return out
}

// overwrite writes junk over whole pages of a file.
func overwrite(t *testing.T, path string, pages ...int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", os.Getpagesize()/4))
	for _, p := range pages {
		if _, err := f.WriteAt(junk, int64(p*os.Getpagesize())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreRecoverInMesh: node2 of three loses its store. While it is down
// the others still route to its pod; `reef store recover` brings it back
// under the same incarnation, owning the same block, which the others never
// gave away. It fills its block and then refuses to claim (code 105), while
// node1 still gets the pool's last block from the other two voters.
func TestStoreRecoverInMesh(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 3, smallPool)
	a, b, c := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")
	converge(t, nodes...)
	n2 := nodes[1]
	blocks := blocksOf(t, n2)
	inc := mustStatus(t, n2).GetIncarnation()

	if err := n2.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(n2.StateDir, "reef.db"), 0); err != nil {
		t.Fatal(err)
	}
	if err := n2.StartNoWait(); err != nil {
		t.Fatal(err)
	}
	if _, exited := n2.Wait(20 * time.Second); !exited {
		t.Fatal("node2 with an empty store did not exit")
	}
	if _, err := a.Ping(b.IP); err != nil {
		t.Errorf("a -> b while node2's daemon is down: %v", err)
	}
	if out, err := l.Run(n2.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n2.Config); err != nil {
		t.Fatalf("reef store recover: %v\n%s", err, out)
	}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	if got := mustStatus(t, n2).GetIncarnation(); got != inc {
		t.Errorf("incarnation %s after the recovery, want the old %s", got, inc)
	}
	// The same incarnation: recovered (no claims, votes only for confirmed
	// owners), not a new store.
	if r := mustStatus(t, n2).GetVoterRestricted(); r != "" {
		t.Errorf("node2 after a recovery that kept its incarnation is restricted as a new store: %s", r)
	}
	if got := blocksOf(t, n2); !slices.Equal(got, blocks) {
		t.Errorf("node2's blocks %v after the recovery, want %v", got, blocks)
	}
	converge(t, nodes...)
	for _, n := range []*lab.Node{nodes[0], nodes[2]} {
		if o := ownersSeenBy(t, n)[blocks[0]]; o != n2.Address.String() {
			t.Errorf("%s sees %s owned by %q, want node2", n.Name, blocks[0], o)
		}
	}
	for _, p := range []*lab.Pod{a, c} {
		if _, err := p.Ping(b.IP); err != nil {
			t.Errorf("%s -> b after the recovery: %v", p.Name, err)
		}
		if _, err := b.Ping(p.IP); err != nil {
			t.Errorf("b -> %s after the recovery: %v", p.Name, err)
		}
	}

	more, err := fill(t, n2, "b", 10)
	if cniCode(err) != 105 || !strings.Contains(err.Error(), "reef store recover") {
		t.Fatalf("ADD on node2 past its block: %v, want code 105 naming reef store recover", err)
	}
	t.Logf("node2 filled its block with %d more pods, then: %v", len(more), err)
	if _, err := fill(t, nodes[0], "a", 20); cniCode(err) != 100 {
		t.Errorf("node1 filling the pool: %v, want it to take the last block and then end with code 100", err)
	}
	all := append([]*lab.Pod{a, b, c}, more...)
	uniqueOwners(t, nodes...)
	uniqueAddresses(t, all)
}

// TestStoreRecoverIPIPLabel: `reef store recover` takes from tunl0 only
// reef's tunnel address (label tunl0:reef). An address of the pool on
// tunl0 without the label (another CNI's leftover, the operator's) is not
// recovered as reef's: no second tunnel address, no block claimed for
// it, and `reef ipam check` is clean.
func TestStoreRecoverIPIPLabel(t *testing.T) {
	l := newLab(t)
	n := ipipNode(t, l)
	const foreign = "10.244.200.1"
	run(t, l, n.Netns, "ip", "addr", "add", foreign+"/32", "dev", "tunl0")
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	newPod(t, n, "web-1")
	// recover needs the own block's blackhole and reef's tunnel address.
	eventually(t, 20*time.Second, func() string {
		if out, _ := l.Run(n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "tunl0"); !strings.Contains(out, "tunl0:reef") {
			return "no address labelled tunl0:reef on tunl0:\n" + out
		}
		for _, r := range reefRoutes(t, n) {
			if strings.HasPrefix(r, "blackhole") {
				return ""
			}
		}
		return "no blackhole for the node's block yet"
	})
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(n.StateDir, "reef.db"), 0); err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n.Config)
	t.Logf("reef store recover:\n%s", out)
	if err != nil {
		t.Fatalf("reef store recover: %v", err)
	}
	if !strings.Contains(out, "ipip-tunnel-addr-node1 (reserved)") {
		t.Errorf("reef's tunnel address on tunl0 is not recovered")
	}
	if strings.Contains(out, "10.244.200.") {
		t.Errorf("recovered the address %s on tunl0 without reef's label, or its block", foreign)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if check, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check after the recovery: %v\n%s", err, check)
	}
	if a := run(t, l, n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "tunl0"); !strings.Contains(a, foreign+"/32") {
		t.Errorf("the address %s on tunl0 is gone:\n%s", foreign, a)
	}
}

// TestStoreRecoverRefusesSoundStore: `reef store recover` on a store that
// is not damaged (the daemon stopped for another reason) changes nothing
// and says why: rebuilt, it would be marked recovered and claim no new
// block until the node is drained. --force rebuilds it.
func TestStoreRecoverRefusesSoundStore(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	newPod(t, n, "a")
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(n.StateDir, "reef.db")
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n.Config)
	if err == nil || !strings.Contains(out, "is not damaged") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("reef store recover on a sound store: %v, want a refusal that says it is not damaged:\n%s", err, out)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Error("reef store recover changed a sound store it refused")
	}
	if aside, _ := filepath.Glob(db + ".damaged-*"); len(aside) > 0 {
		t.Errorf("reef store recover moved a sound store aside: %v", aside)
	}
	if out, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--force", "--config", n.Config); err != nil || !strings.Contains(out, "rebuilt") {
		t.Errorf("reef store recover --force: %v\n%s", err, out)
	}
}
