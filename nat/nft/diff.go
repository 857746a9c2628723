package nft

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ChangeKind is what one Change does.
type ChangeKind int

// The kinds of change, in the order Apply batches them.
const (
	// CreateTable creates a missing table whole: sets with their
	// elements, chains, rules.
	CreateTable ChangeKind = iota
	// RecreateTable deletes a table whose shape is not reef's (a set or
	// chain missing, extra or of another type, hook or priority) and
	// creates it whole, in the same batch: no packet sees it half-built.
	RecreateTable
	// AddSet creates a missing set with its elements, AddChain a missing
	// chain (its rules come with a ReplaceRules): DiffInPlace's way to a
	// shape that grows.
	AddSet
	AddChain
	// ReplaceRules makes the rules of a chain that differ reef's: in
	// place, rule by rule, where Apply can read the kernel's (edit.go),
	// else by a flush and all of reef's.
	ReplaceRules
	// DelChain and DelSet remove what the desired shape no longer has,
	// after the rules that referred to them are gone (DiffInPlace).
	DelChain
	DelSet
	// DelElems removes elements from a set.
	DelElems
	// AddElems adds elements to a set.
	AddElems
	// DeleteTable deletes a table reef no longer wants (Retire).
	DeleteTable
)

func (k ChangeKind) String() string {
	switch k {
	case CreateTable:
		return "create table"
	case RecreateTable:
		return "recreate table"
	case AddSet:
		return "add set"
	case AddChain:
		return "add chain"
	case DelChain:
		return "delete chain"
	case DelSet:
		return "delete set"
	case ReplaceRules:
		return "replace rules"
	case DelElems:
		return "delete elements"
	case AddElems:
		return "add elements"
	case DeleteTable:
		return "delete table"
	}
	return fmt.Sprintf("change%d", int(k))
}

// Change is one step of a Plan.
type Change struct {
	Kind  ChangeKind
	Table Table  // the desired table: whole for CreateTable and RecreateTable
	Chain string // ReplaceRules, AddChain, DelChain: the chain, whose rules are in Table
	Set   string // DelElems, AddElems, AddSet, DelSet: the set
	Elems []Elem // DelElems, AddElems
	Why   string // what differs, for the log
}

// Plan is what Apply does, in one batch.
type Plan struct {
	Changes []Change
}

// Empty reports whether the kernel already matches.
func (p Plan) Empty() bool { return len(p.Changes) == 0 }

// Diff compares the desired tables with the kernel's (have: what Read
// returned for the same IDs; a table absent from have is missing) and
// returns the changes that make the kernel match. A table of have that
// want does not name is left alone: reef only ever reads its own.
func Diff(want, have []Table) Plan { return diff(want, have, shapeProblems, nil) }

// Retire returns the changes that delete the tables of retired that have
// holds: tables reef made and no longer wants (the NDP filter once no pool
// is IPv6, an earlier version's masquerade tables). Their Table carries
// only the ID.
func Retire(retired []TableID, have []Table) []Change {
	var out []Change
	for _, h := range have {
		if slices.Contains(retired, h.ID) {
			out = append(out, Change{Kind: DeleteTable, Table: Table{ID: h.ID}, Why: "table " + h.ID.String() + " is no longer wanted"})
		}
	}
	return out
}

// DiffInPlace is Diff for a table whose shape follows its input (package
// policy: a chain and sets per NetworkPolicy). Sets and chains that are
// missing or extra are added and deleted in place, and chains whose rules
// differ are replaced, so a policy that comes or goes costs its own sets
// and chains, not the whole table. Only what cannot change in place (a
// set's type or flags, a base chain's hook, priority or policy, the
// table's flags) recreates the table. One batch, as Diff.
func DiffInPlace(want, have []Table) Plan { return diff(want, have, conflicts, growShape) }

// diff is Diff and DiffInPlace: recreate the tables with the problems
// that recreate names, grow the shape of the others (if grow is given),
// then compare their rules and elements.
func diff(want, have []Table, recreate func(w, h Table) []string, grow func(w, h Table) []Change) Plan {
	var p Plan
	byID := map[TableID]Table{}
	for _, h := range have {
		byID[h.ID] = h
	}
	for _, w := range want {
		h, ok := byID[w.ID]
		if !ok {
			p.Changes = append(p.Changes, Change{Kind: CreateTable, Table: w, Why: "table " + w.ID.String() + " is missing"})
			continue
		}
		if problems := recreate(w, h); len(problems) > 0 {
			p.Changes = append(p.Changes, Change{Kind: RecreateTable, Table: w,
				Why: "table " + w.ID.String() + ": " + strings.Join(problems, "; ")})
			continue
		}
		if grow != nil {
			p.Changes = append(p.Changes, grow(w, h)...)
		}
		p.Changes = append(p.Changes, diffContents(w, h)...)
	}
	// Stable by kind: deletions of elements before additions, so that an
	// interval replaced by an overlapping one never overlaps in the batch;
	// sets and chains added before the rules that use them, deleted after.
	slices.SortStableFunc(p.Changes, func(a, b Change) int { return int(a.Kind) - int(b.Kind) })
	return p
}

// conflicts are the shape differences that no in-place change mends:
// the table's flags, a set's type or flags, a chain's type, hook,
// priority or policy.
func conflicts(w, h Table) []string {
	var out []string
	if h.Flags != w.Flags {
		out = append(out, fmt.Sprintf("flags %#x, want %#x", h.Flags, w.Flags))
	}
	hs := map[string]Set{}
	for _, s := range h.Sets {
		hs[s.Name] = s
	}
	for _, ws := range w.Sets {
		s, ok := hs[ws.Name]
		switch {
		case !ok:
		case s.KeyType != ws.KeyType || s.KeyLen != ws.KeyLen:
			out = append(out, fmt.Sprintf("set %s has type %s (%d bytes), want %s (%d bytes)", ws.Name, s.KeyType, s.KeyLen, ws.KeyType, ws.KeyLen))
		case s.DataType != ws.DataType || s.DataLen != ws.DataLen:
			out = append(out, fmt.Sprintf("set %s maps to %q (%d bytes), want %q (%d bytes)", ws.Name, s.DataType, s.DataLen, ws.DataType, ws.DataLen))
		case s.Interval != ws.Interval || s.Concat != ws.Concat || s.Foreign != ws.Foreign:
			out = append(out, fmt.Sprintf("set %s has other flags (interval %t, concat %t, other %t)", ws.Name, s.Interval, s.Concat, s.Foreign))
		}
	}
	hc := map[string]Chain{}
	for _, c := range h.Chains {
		hc[c.Name] = c
	}
	for _, wc := range w.Chains {
		if c, ok := hc[wc.Name]; ok && (c.Type != wc.Type || c.Hooked != wc.Hooked || c.Hook != wc.Hook || c.Priority != wc.Priority || c.Policy != wc.Policy) {
			out = append(out, fmt.Sprintf("chain %s is type %s hook %d priority %d policy %d, want type %s hook %d priority %d policy %d",
				wc.Name, c.Type, c.Hook, c.Priority, c.Policy, wc.Type, wc.Hook, wc.Priority, wc.Policy))
		}
	}
	slices.Sort(out)
	return out
}

// growShape adds the sets and chains h lacks and deletes those w does not
// name. A new chain's rules, and those of the chains that jump to it, are
// diffContents' ReplaceRules.
func growShape(w, h Table) []Change {
	var out []Change
	hs := map[string]bool{}
	for _, s := range h.Sets {
		hs[s.Name] = true
	}
	for _, ws := range w.Sets {
		if !hs[ws.Name] {
			out = append(out, Change{Kind: AddSet, Table: w, Set: ws.Name, Why: "set " + w.ID.String() + " " + ws.Name + " is missing"})
		}
		delete(hs, ws.Name)
	}
	hc := map[string]bool{}
	hooked := map[string]bool{}
	for _, c := range h.Chains {
		hc[c.Name] = true
		hooked[c.Name] = c.Hooked
	}
	for _, wc := range w.Chains {
		if !hc[wc.Name] {
			out = append(out, Change{Kind: AddChain, Table: w, Chain: wc.Name, Why: "chain " + w.ID.String() + " " + wc.Name + " is missing"})
		}
		delete(hc, wc.Name)
	}
	// Base chains first: a chain a rule still jumps to cannot be deleted
	// (EBUSY), and the base chains are what jumps.
	dels := slices.Sorted(maps.Keys(hc))
	slices.SortStableFunc(dels, func(a, b string) int {
		switch {
		case hooked[a] == hooked[b]:
			return 0
		case hooked[a]:
			return -1
		}
		return 1
	})
	for _, c := range dels {
		out = append(out, Change{Kind: DelChain, Table: w, Chain: c, Why: "chain " + w.ID.String() + " " + c + " is not wanted"})
	}
	for _, s := range slices.Sorted(maps.Keys(hs)) {
		out = append(out, Change{Kind: DelSet, Table: w, Set: s, Why: "set " + w.ID.String() + " " + s + " is not wanted"})
	}
	return out
}

// DiffElements compares only the elements of the sets want and have both
// have: for a caller that knows the shapes equal (package policy, between
// two states of the same policies). ok is false when a set of want is
// missing from have; the caller then needs DiffInPlace.
func DiffElements(want, have Table) (p Plan, ok bool) {
	hs := map[string]Set{}
	for _, s := range have.Sets {
		hs[s.Name] = s
	}
	for _, ws := range want.Sets {
		s, found := hs[ws.Name]
		if !found {
			return Plan{}, false
		}
		p.Changes = append(p.Changes, diffSet(want, ws, s)...)
	}
	slices.SortStableFunc(p.Changes, func(a, b Change) int { return int(a.Kind) - int(b.Kind) })
	return p, true
}

// shapeProblems lists how h's shape (flags, sets, chains; not rules or
// elements) differs from w's: the conflicts, and a set or chain missing
// or extra. Any difference means recreating the table.
func shapeProblems(w, h Table) []string {
	out := conflicts(w, h)
	for _, c := range growShape(w, h) {
		switch c.Kind {
		case AddSet:
			out = append(out, "set "+c.Set+" is missing")
		case AddChain:
			out = append(out, "chain "+c.Chain+" is missing")
		case DelSet:
			out = append(out, "set "+c.Set+" is not reef's")
		case DelChain:
			out = append(out, "chain "+c.Chain+" is not reef's")
		}
	}
	slices.Sort(out)
	return out
}

// diffContents compares rules and elements of two tables of the same shape.
func diffContents(w, h Table) []Change {
	var out []Change
	hc := map[string]Chain{}
	for _, c := range h.Chains {
		hc[c.Name] = c
	}
	for _, wc := range w.Chains {
		c := hc[wc.Name]
		if why := rulesDiffer(w.ID, wc, c); why != "" {
			out = append(out, Change{Kind: ReplaceRules, Table: w, Chain: wc.Name, Why: why})
		}
	}
	hs := map[string]Set{}
	for _, s := range h.Sets {
		hs[s.Name] = s
	}
	for _, ws := range w.Sets {
		out = append(out, diffSet(w, ws, hs[ws.Name])...)
	}
	return out
}

// diffSet is the element changes that make s (of the kernel) ws.
func diffSet(w Table, ws, s Set) []Change {
	var out []Change
	if slices.Equal(ws.Elems, s.Elems) {
		return nil
	}
	have := map[Elem]bool{}
	for _, e := range s.Elems {
		have[e] = true
	}
	var add, del []Elem
	for _, e := range ws.Elems {
		if !have[e] {
			add = append(add, e)
		}
		delete(have, e)
	}
	for _, e := range s.Elems {
		if have[e] {
			del = append(del, e)
		}
	}
	where := "set " + w.ID.String() + " " + ws.Name
	if len(del) > 0 {
		out = append(out, Change{Kind: DelElems, Table: w, Set: ws.Name, Elems: del,
			Why: fmt.Sprintf("%s has %d element(s) reef does not want: %s", where, len(del), elemList(del))})
	}
	if len(add) > 0 {
		out = append(out, Change{Kind: AddElems, Table: w, Set: ws.Name, Elems: add,
			Why: fmt.Sprintf("%s lacks %d element(s): %s", where, len(add), elemList(add))})
	}
	return out
}

func rulesDiffer(id TableID, w, h Chain) string {
	where := "chain " + id.String() + " " + w.Name
	if len(h.Rules) != len(w.Rules) {
		return fmt.Sprintf("%s has %d rule(s), want %d", where, len(h.Rules), len(w.Rules))
	}
	for i := range w.Rules {
		if w.Rules[i].key(id.Family) != h.Rules[i].key(id.Family) {
			return fmt.Sprintf("%s: rule %d differs from reef's (%q)", where, i+1, w.Rules[i].Comment)
		}
	}
	return ""
}

// elemList writes up to five elements, then a count of the rest.
func elemList(es []Elem) string {
	const show = 5
	var parts []string
	for i, e := range es {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(es)-show))
			break
		}
		parts = append(parts, e.String())
	}
	return strings.Join(parts, ", ")
}
