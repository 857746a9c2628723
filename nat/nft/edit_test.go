package nft

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/nftables"
)

// commentRules are rules known by their comments alone (no expressions:
// the key is the comment), with handles from first when first > 0.
func commentRules(first uint64, names ...string) []Rule {
	out := make([]Rule, len(names))
	for i, n := range names {
		out[i] = Rule{Comment: n}
		if first > 0 {
			out[i].Handle = first + uint64(i)
		}
	}
	return out
}

// playEdit applies e to have as the kernel would: deletes by handle, then
// each insert before its handle (or at the end), in order.
func playEdit(t *testing.T, have []Rule, e ruleEdit) []string {
	t.Helper()
	type rule struct {
		name   string
		handle uint64
	}
	var chain []rule
	for _, h := range have {
		if !slices.Contains(e.del, h.Handle) {
			chain = append(chain, rule{h.Comment, h.Handle})
		}
	}
	for _, in := range e.ins {
		if in.before == 0 {
			chain = append(chain, rule{in.rule.Comment, 0})
			continue
		}
		i := slices.IndexFunc(chain, func(r rule) bool { return r.handle == in.before })
		if i < 0 {
			t.Fatalf("insert of %q before handle %d, which is not in the chain (deleted or never there)", in.rule.Comment, in.before)
		}
		chain = slices.Insert(chain, i, rule{in.rule.Comment, 0})
	}
	out := make([]string, len(chain))
	for i, r := range chain {
		out[i] = r.name
	}
	return out
}

// TestEditRules: an edit of random rule lists into random others, played
// as the kernel plays it, gives the wanted list; it keeps a longest run of
// common rules (here: at least as many as the common prefix and suffix,
// and exactly as many as a brute-force count on short lists); and it
// refuses a kernel list without handles.
func TestEditRules(t *testing.T) {
	fam := nftables.TableFamilyINet
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "d", "e", "f"}
	random := func() []string {
		out := make([]string, rng.IntN(9))
		for i := range out {
			out[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return out
	}
	for n := range 2000 {
		want, have := random(), random()
		e, ok := editRules(fam, commentRules(0, want...), commentRules(100, have...))
		if !ok {
			t.Fatalf("case %d: no edit for %v -> %v", n, have, want)
		}
		if got := playEdit(t, commentRules(100, have...), e); !slices.Equal(got, want) {
			t.Fatalf("case %d: %v edited by %+v is %v, want %v", n, have, e, got, want)
		}
		if kept, lcs := len(have)-len(e.del), bruteLCS(want, have); kept != lcs {
			t.Fatalf("case %d: %v -> %v keeps %d rules, a longest common run has %d", n, have, want, kept, lcs)
		}
	}
	if _, ok := editRules(fam, commentRules(0, "a"), commentRules(0, "a", "b")); ok {
		t.Error("an edit of rules without handles (not read from the kernel)")
	}
	e, _ := editRules(fam, commentRules(0, "a", "x", "b", "c"), commentRules(10, "a", "b", "c"))
	if len(e.del) != 0 || len(e.ins) != 1 || e.ins[0].before != 11 {
		t.Errorf("one rule inserted between a and b: edit %+v, want one insert before handle 11 and no delete", e)
	}
}

// bruteLCS is the length of a longest common subsequence, by recursion.
func bruteLCS(a, b []string) int {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if a[0] == b[0] {
		return 1 + bruteLCS(a[1:], b[1:])
	}
	return max(bruteLCS(a[1:], b), bruteLCS(a, b[1:]))
}

func BenchmarkEditRules(b *testing.B) {
	var want, have []string
	for i := range 300 {
		have = append(have, fmt.Sprint("rule", i))
		if i != 150 {
			want = append(want, fmt.Sprint("rule", i))
		}
	}
	w, h := commentRules(0, want...), commentRules(1, have...)
	for b.Loop() {
		editRules(nftables.TableFamilyINet, w, h)
	}
}
