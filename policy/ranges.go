package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

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
