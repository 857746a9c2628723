package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/reefcni/reef/nat/nft"
	networkingv1 "k8s.io/api/networking/v1"
)

// Range is an inclusive address range.
type Range struct{ From, To netip.Addr }

// blockRanges is an ipBlock's CIDR minus its excepts.
func blockRanges(b *networkingv1.IPBlock) ([]Range, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil, fmt.Errorf("cidr %q: %w", b.CIDR, err)
	}
	cidr = unmapPrefix(cidr).Masked()
	rs := []Range{{cidr.Addr(), nft.LastAddr(cidr)}}
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("except[%d] %q: %w", i, e, err)
		}
		ex = unmapPrefix(ex).Masked()
		if ex.Addr().Is4() != cidr.Addr().Is4() {
			return nil, fmt.Errorf("except[%d] %s: not of the family of cidr %s", i, ex, cidr)
		}
		rs = subtract(rs, Range{ex.Addr(), nft.LastAddr(ex)})
	}
	return rs, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			bits = 0
		}
		return netip.PrefixFrom(p.Addr().Unmap(), bits)
	}
	return p
}

// subtract removes x from every range of rs.
func subtract(rs []Range, x Range) []Range {
	var out []Range
	for _, r := range rs {
		if r.From.Is4() != x.From.Is4() || x.To.Less(r.From) || r.To.Less(x.From) {
			out = append(out, r)
			continue
		}
		if r.From.Less(x.From) {
			out = append(out, Range{r.From, x.From.Prev()})
		}
		if x.To.Less(r.To) {
			out = append(out, Range{x.To.Next(), r.To})
		}
	}
	return out
}

// mergeRanges sorts ranges and joins those that overlap or touch: the
// one form of a set of addresses, as the kernel's interval set holds it.
func mergeRanges(rs []Range) []Range {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Or(a.From.Compare(b.From), a.To.Compare(b.To)) })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].From.Is4() == r.From.Is4() {
			last := &out[n-1]
			next := last.To.Next()
			if !r.From.Less(last.From) && (!last.To.Less(r.From) || (next.IsValid() && next == r.From)) {
				if last.To.Less(r.To) {
					last.To = r.To
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func inRanges(rs []Range, a netip.Addr) bool {
	for _, r := range rs {
		if r.From.Is4() == a.Is4() && !a.Less(r.From) && !r.To.Less(a) {
			return true
		}
	}
	return false
}

// insertAddr is mergeRanges(rs plus a's own range) for rs merged already,
// made without sorting: a new slice, rs unchanged.
func insertAddr(rs []Range, a netip.Addr) []Range {
	i := sort.Search(len(rs), func(i int) bool { return a.Less(rs[i].From) }) // rs[i-1].From <= a
	if i > 0 && !rs[i-1].To.Less(a) {
		return rs // in rs[i-1] already
	}
	joinPrev := i > 0 && rs[i-1].To.Is4() == a.Is4() && rs[i-1].To.Next() == a
	joinNext := i < len(rs) && rs[i].From.Is4() == a.Is4() && a.Next() == rs[i].From
	out := make([]Range, 0, len(rs)+1)
	switch {
	case joinPrev && joinNext:
		out = append(append(out, rs[:i-1]...), Range{rs[i-1].From, rs[i].To})
		return append(out, rs[i+1:]...)
	case joinPrev:
		out = append(append(out, rs[:i-1]...), Range{rs[i-1].From, a})
	case joinNext:
		out = append(append(out, rs[:i]...), Range{a, rs[i].To})
		return append(out, rs[i+1:]...)
	default:
		out = append(append(out, rs[:i]...), Range{a, a})
	}
	return append(out, rs[i:]...)
}
