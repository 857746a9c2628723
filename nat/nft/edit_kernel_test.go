package nft

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/reefcni/reef/internal/netnstest"
)

// markRule is a rule of the test chain: meta mark n, a counter, accept.
func markRule(n int) Rule {
	return Rule{Comment: fmt.Sprint("rule ", n), Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(uint32(n))},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}}
}

// TestEditRulesInKernel: in a throw-away network namespace, a chain is
// changed 40 times at random (rules deleted, inserted anywhere, moved) by
// DiffInPlace and Apply. Each time the kernel's chain is then exactly the
// wanted one, in order, and the rules both had kept their handles: they
// were edited in place, not flushed and added again (which gives every
// rule a new handle). A rule added with a set in the same batch looks the
// new set up.
func TestEditRulesInKernel(t *testing.T) {
	n := netnstest.New(t)
	k := NewKernel(nftables.WithNetNSFd(int(n.Fd())))
	id := TableID{Family: nftables.TableFamilyINet, Name: TableName}
	table := func(rules []Rule, sets ...Set) Table {
		return Table{ID: id, Sets: sets, Chains: []Chain{{Name: "edited", Rules: rules}}}
	}
	read := func() Table {
		t.Helper()
		have, err := k.Read([]TableID{id})
		if err != nil || len(have) != 1 {
			t.Fatalf("read %s: %v (%d tables)", id, err, len(have))
		}
		return have[0]
	}
	var want []Rule
	for i := range 20 {
		want = append(want, markRule(i))
	}
	if err := k.Apply(Diff([]Table{table(want)}, nil)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	next := 100
	for step := range 40 {
		before := read()
		w := slices.Clone(want)
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(w) + 1); rng.IntN(3) {
			case 0:
				if i < len(w) {
					w = slices.Delete(w, i, i+1)
				}
			case 1:
				w = slices.Insert(w, i, markRule(next))
				next++
			default:
				if j := rng.IntN(len(w) + 1); i < len(w) && j < len(w) {
					w[i], w[j] = w[j], w[i]
				}
			}
		}
		want = w
		plan := DiffInPlace([]Table{table(want)}, []Table{before})
		if len(plan.Changes) > 0 && plan.Changes[0].Kind != ReplaceRules {
			t.Fatalf("step %d: the plan is %+v, want rules replaced", step, plan.Changes)
		}
		if err := k.Apply(plan); err != nil {
			t.Fatalf("step %d: apply %+v: %v", step, plan.Changes, err)
		}
		after := read()
		got, wantKeys := ruleKeys(id.Family, after.Chains[0].Rules), ruleKeys(id.Family, want)
		if !slices.Equal(got, wantKeys) {
			t.Fatalf("step %d: the kernel's chain is\n%v\nwant\n%v", step, comments(after.Chains[0].Rules), comments(want))
		}
		kept := 0
		for _, r := range after.Chains[0].Rules {
			if slices.ContainsFunc(before.Chains[0].Rules, func(b Rule) bool { return b.Handle == r.Handle }) {
				kept++
			}
		}
		lcs := 0
		for _, j := range commonRun(wantKeys, ruleKeys(id.Family, before.Chains[0].Rules)) {
			if j >= 0 {
				lcs++
			}
		}
		if kept != lcs {
			t.Fatalf("step %d: %d rules kept their handles, want %d (the rules both lists have in order): the chain was not edited in place\nbefore %v\nwant %v\nafter %v", step, kept, lcs, comments(before.Chains[0].Rules), comments(want), comments(after.Chains[0].Rules))
		}
	}

	// A new set and a rule that looks it up, in one batch, inserted
	// between two rules that stay.
	set := Set{Name: "marks", KeyType: "ipv4_addr", KeyLen: 4} // a mark looked up as 4 bytes
	lookup := Rule{Comment: "lookup", Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: "marks"},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}}
	want = slices.Insert(want, 1, lookup)
	before := read()
	if err := k.Apply(DiffInPlace([]Table{table(want, set)}, []Table{before})); err != nil {
		t.Fatalf("a set and a rule that looks it up: %v", err)
	}
	after := read()
	if again := DiffInPlace([]Table{table(want, set)}, []Table{after}); !again.Empty() {
		t.Errorf("after the set and its rule, the kernel still differs: %+v", again.Changes)
	}
	if after.Chains[0].Rules[0].Handle != before.Chains[0].Rules[0].Handle {
		t.Errorf("the first rule was replaced, not kept, when a rule was inserted after it")
	}
}

func comments(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Comment
	}
	return out
}
