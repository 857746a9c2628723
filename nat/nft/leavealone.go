package nft

import "slices"

// LeaveAlone returns want with the elements that touched picks taken as
// have holds them, so that the Diff that follows neither adds nor removes
// them: the elements of pods that a CNI operation is adding or deleting
// while a reconcile pass runs, which the pass's snapshot cannot describe
// (see cniserver/activity). A want element with the key of one taken from
// have gives way to it. Only sets that want and have both hold, under the
// same name in the same table, change; want itself is not modified.
func LeaveAlone(want, have []Table, touched func(Elem) bool) []Table {
	haveSets := map[TableID]map[string]Set{}
	for _, t := range have {
		m := map[string]Set{}
		for _, s := range t.Sets {
			m[s.Name] = s
		}
		haveSets[t.ID] = m
	}
	out := slices.Clone(want)
	for i, t := range out {
		t.Sets = slices.Clone(t.Sets)
		for j, s := range t.Sets {
			h, ok := haveSets[t.ID][s.Name]
			if !ok {
				continue
			}
			kept := map[Elem]bool{}
			var elems []Elem
			for _, e := range h.Elems {
				if touched(e) {
					elems = append(elems, e)
					kept[e.KeyOnly()] = true
				}
			}
			for _, e := range s.Elems {
				if !touched(e) && !kept[e.KeyOnly()] {
					elems = append(elems, e)
				}
			}
			slices.SortFunc(elems, CompareElems)
			s.Elems = slices.Compact(elems)
			t.Sets[j] = s
		}
		out[i] = t
	}
	return out
}
