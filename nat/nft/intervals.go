package nft

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
)

// Intervals turns prefixes into the elements of an interval set: masked,
// sorted, without duplicates and without prefixes inside another (the
// kernel refuses overlapping intervals).
func Intervals(ps []netip.Prefix) []Elem {
	ms := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			ms = append(ms, p.Masked())
		}
	}
	slices.SortFunc(ms, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits() // the wider first, so it swallows the narrower
	})
	var out []Elem
	var last netip.Prefix
	for _, p := range ms {
		if last.IsValid() && last.Contains(p.Addr()) {
			continue
		}
		out = append(out, Elem{From: p.Addr(), To: LastAddr(p)})
		last = p
	}
	return out
}

// CompareElems orders elements as Elem.less, in one pass over the fields:
// a drift check sorts thousands of them.
func CompareElems(a, b Elem) int {
	if c := strings.Compare(a.Iface, b.Iface); c != 0 {
		return c
	}
	if c := a.From.Compare(b.From); c != 0 {
		return c
	}
	if c := a.To.Compare(b.To); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Proto, b.Proto); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return a.Value.Compare(b.Value)
}
