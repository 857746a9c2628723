package daemon

import (
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/store"
)

// readCounting is the real kernel with its Reads counted; forceTrust makes
// its Unchanged always true, as a pass that skipped the read whatever the
// generation would be.
type readCounting struct {
	*nft.Kernel
	reads      int
	forceTrust bool
}

func (k *readCounting) Read(ids []nft.TableID) ([]nft.Table, error) {
	k.reads++
	return k.Kernel.Read(ids)
}

func (k *readCounting) Unchanged(m nft.Mark) bool { return k.forceTrust || k.Kernel.Unchanged(m) }

// TestPolicyPassRepairsDrift: in a throw-away network namespace, the
// reconcile pass of a policy dataplane on the real kernel skips reading
// table inet reef while only reef committed since its last read (its own
// ADDs, the NAT dataplane's pod elements, which follow the same
// generation), and reads and repairs it after the nft binary deletes one
// of its set elements (an ADD following), or one of its rules. With the skip forced on
// whatever the generation (forceTrust), the deleted element and rule stay
// deleted: the repair checks of this test fail, as they must.
func TestPolicyPassRepairsDrift(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (the nftables package; make test installs it)")
	}
	for _, force := range []bool{false, true} {
		name := "generation"
		if force {
			name = "skip forced"
		}
		t.Run(name, func(t *testing.T) { testPolicyPassDrift(t, force) })
	}
}

func testPolicyPassDrift(t *testing.T, forceTrust bool) {
	n := netnstest.New(t)
	opt := nftables.WithNetNSFd(int(n.Fd()))
	gens := nft.NewGenerations(opt)
	t.Cleanup(func() { gens.Close() })
	k := &readCounting{Kernel: nft.NewKernel(opt).Follow(gens), forceTrust: forceTrust}
	other := nft.NewKernel(opt).Follow(gens) // the NAT dataplane's

	st := storeWithBlock(t)
	api := &fakePolicyAPI{in: incrementalAPI()}
	p := &policyDataplane{watch: api, kernel: k, store: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		trigger: func() {}, skipped: map[string]string{}, notEnforced: map[string]bool{}}
	allocate := func(pod string) store.Endpoint {
		t.Helper()
		ns, name, _ := strings.Cut(pod, "/")
		ep, _, err := st.Allocate(store.Endpoint{Handle: "net." + name, HostVeth: "reef" + name, PodNamespace: ns, PodName: name, State: store.EndpointReady}, testPool)
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	for _, pod := range []string{"a/db-0", "a/web-0", "b/web-1"} {
		if err := p.Cover(allocate(pod)); err != nil {
			t.Fatal(err)
		}
	}
	pass := func(what string) (read bool) {
		t.Helper()
		before := k.reads
		if err := p.reconcile(); err != nil {
			t.Fatalf("%s: pass: %v", what, err)
		}
		return k.reads > before
	}
	kernelTable := func() nft.Table {
		t.Helper()
		have, err := k.Kernel.Read([]nft.TableID{policy.TableID})
		if err != nil || len(have) != 1 {
			t.Fatalf("read table inet reef: %v (%d tables)", err, len(have))
		}
		return have[0]
	}

	// Only reef committed since the first ADD read the table: the ADDs,
	// and a batch of the NAT dataplane's in a table of its own.
	if pass("after the ADDs") && !forceTrust {
		t.Error("pass after reef's own commits only: read the table")
	}
	natTable := nft.Table{ID: nft.TableID{Family: nftables.TableFamilyINet, Name: "reef-nat"}, Chains: []nft.Chain{{Name: "postrouting"}}}
	if err := other.Apply(nft.Diff([]nft.Table{natTable}, nil)); err != nil {
		t.Fatal(err)
	}
	if pass("after the NAT dataplane's batch") {
		t.Error("pass after a batch of the NAT dataplane's: read the table")
	}

	// An element of a set deleted by hand, then an ADD of a pod that
	// leaves that set as it is (its batch fails on no element it deletes).
	want := kernelTable()
	next := allocate("b/db-1")
	eps, err := st.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	in := api.Input()
	in.Local = localEndpoints(eps)
	after := policy.Table(policy.Compile(in))
	i := slices.IndexFunc(want.Sets, func(s nft.Set) bool {
		return !s.Concat && len(s.Elems) > 0 && slices.Equal(s.Elems, tableSet(after, s.Name).Elems)
	})
	if i < 0 {
		t.Fatalf("no set with elements that the ADD leaves alone in table inet reef: %+v", want.Sets)
	}
	set, elem := want.Sets[i].Name, want.Sets[i].Elems[0]
	netnstest.Run(t, n, "nft", "delete", "element", "inet", nft.TableName, set, "{ "+elem.String()+" }")
	if slices.Contains(tableSet(kernelTable(), set).Elems, elem) {
		t.Fatalf("nft delete element %s from set %s: still there", elem, set)
	}
	if err := p.Cover(next); err != nil { // its commit does not hide the deletion
		t.Fatal(err)
	}
	read := pass("after nft deleted an element")
	repaired := slices.Contains(tableSet(kernelTable(), set).Elems, elem)
	switch {
	case !forceTrust && (!read || !repaired):
		t.Errorf("pass after nft deleted element %s of set %s: read the table %v, element back %v; want both", elem, set, read, repaired)
	case forceTrust && repaired:
		t.Errorf("skip forced: element %s of set %s back after the pass; the check cannot fail", elem, set)
	}

	// A rule deleted by hand.
	j := slices.IndexFunc(want.Chains, func(c nft.Chain) bool { return len(c.Rules) > 1 })
	if j < 0 {
		t.Fatalf("no chain with rules in table inet reef")
	}
	chain := want.Chains[j].Name
	listing := netnstest.Run(t, n, "nft", "-a", "list", "chain", "inet", nft.TableName, chain)
	m := regexp.MustCompile(`# handle (\d+)`).FindAllStringSubmatch(listing, -1)
	if len(m) < 2 {
		t.Fatalf("nft -a list chain %s: no rule handles:\n%s", chain, listing)
	}
	netnstest.Run(t, n, "nft", "delete", "rule", "inet", nft.TableName, chain, "handle", m[len(m)-1][1])
	read = pass("after nft deleted a rule")
	repaired = len(tableChain(kernelTable(), chain).Rules) == len(want.Chains[j].Rules)
	switch {
	case !forceTrust && (!read || !repaired):
		t.Errorf("pass after nft deleted a rule of chain %s: read the table %v, rule back %v; want both", chain, read, repaired)
	case forceTrust && repaired:
		t.Errorf("skip forced: the rule of chain %s back after the pass; the check cannot fail", chain)
	}
	if forceTrust {
		return
	}
	// Repaired, and read since: the next pass trusts the generation again.
	if pass("after the repair") {
		t.Error("pass after the repair's own commit: read the table")
	}
}

func tableSet(t nft.Table, name string) nft.Set {
	for _, s := range t.Sets {
		if s.Name == name {
			return s
		}
	}
	return nft.Set{}
}

func tableChain(t nft.Table, name string) nft.Chain {
	for _, c := range t.Chains {
		if c.Name == name {
			return c
		}
	}
	return nft.Chain{}
}
