package nft

import "github.com/google/nftables"

// A chain whose rules differ is edited in place, rule by rule, where the
// kernel's rules are known with their handles: the rules both have stay
// (with their counters, and no packet sees the chain between a flush and
// its new rules), the kernel's others are deleted and want's others are
// inserted before the next rule that stays. A change to one policy then
// touches the rules it affects, not its whole chain.

// maxEditCells bounds the comparison of the differing middles of two rule
// lists (their product): beyond it the chain is flushed and written again,
// which is what a change of most of a long chain costs anyway.
const maxEditCells = 1 << 20

// ruleInsert is a rule to insert before the kernel's rule with handle
// before, or at the chain's end when before is 0.
type ruleInsert struct {
	rule   Rule
	before uint64
}

// ruleEdit turns a chain's rules into another list of rules.
type ruleEdit struct {
	del []uint64     // handles of the rules to delete
	ins []ruleInsert // in the order of the wanted list
}

// editRules is how to make have (the kernel's rules, with their handles)
// want, keeping the longest run of rules, in order, that both have. ok is
// false when a rule of have has no handle or the lists are too long to
// compare: the caller then replaces the chain's rules whole.
func editRules(fam nftables.TableFamily, want, have []Rule) (e ruleEdit, ok bool) {
	for _, h := range have {
		if h.Handle == 0 {
			return ruleEdit{}, false
		}
	}
	wk, hk := ruleKeys(fam, want), ruleKeys(fam, have)
	pre := 0
	for pre < len(wk) && pre < len(hk) && wk[pre] == hk[pre] {
		pre++
	}
	suf := 0
	for suf < len(wk)-pre && suf < len(hk)-pre && wk[len(wk)-1-suf] == hk[len(hk)-1-suf] {
		suf++
	}
	wm, hm := wk[pre:len(wk)-suf], hk[pre:len(hk)-suf]
	if len(wm)*len(hm) > maxEditCells {
		return ruleEdit{}, false
	}
	match := commonRun(wm, hm) // match[i]: the index in hm kept as wm[i], or -1
	kept := make([]bool, len(hm))
	for _, j := range match {
		if j >= 0 {
			kept[j] = true
		}
	}
	for j, k := range kept {
		if !k {
			e.del = append(e.del, have[pre+j].Handle)
		}
	}
	// Each rule to insert goes before the next rule of want that stays:
	// inserted in want's order, they end up in want's order.
	next := uint64(0)
	if suf > 0 {
		next = have[len(have)-suf].Handle
	}
	befores := make([]uint64, len(wm))
	for i := len(wm) - 1; i >= 0; i-- {
		if match[i] >= 0 {
			next = have[pre+match[i]].Handle
		}
		befores[i] = next
	}
	for i, j := range match {
		if j < 0 {
			e.ins = append(e.ins, ruleInsert{rule: want[pre+i], before: befores[i]})
		}
	}
	return e, true
}

func ruleKeys(fam nftables.TableFamily, rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.key(fam)
	}
	return out
}

// commonRun is a longest common subsequence of a and b: for each element
// of a, the index of the element of b it is matched with, or -1.
func commonRun(a, b []string) []int {
	n, m := len(a), len(b)
	// l[i][j]: the length of the longest common subsequence of a[i:], b[j:].
	l := make([][]int32, n+1)
	for i := range l {
		l[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				l[i][j] = l[i+1][j+1] + 1
			case l[i+1][j] >= l[i][j+1]:
				l[i][j] = l[i+1][j]
			default:
				l[i][j] = l[i][j+1]
			}
		}
	}
	match := make([]int, n)
	i, j := 0, 0
	for i < n {
		switch {
		case j < m && a[i] == b[j]:
			match[i] = j
			i, j = i+1, j+1
		case j < m && l[i][j+1] > l[i+1][j]:
			j++
		default:
			match[i] = -1
			i++
		}
	}
	return match
}
