package nft

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/google/nftables"
)

// decodeElems reads a set's elements back into Elems. Interval sets come
// as start keys and end keys (the address after the range, flagged
// "interval end"); a start without an end runs to the top of the address
// space. Elements of a key reef does not use are skipped: such a set's
// type already differs from reef's.
func decodeElems(s *nftables.Set, raw []nftables.SetElement) []Elem {
	out := make([]Elem, 0, len(raw))
	switch {
	case s.Interval && (s.KeyType.Bytes == 4 || s.KeyType.Bytes == 16):
		out = decodeIntervals(raw)
	case !s.Interval && (s.KeyType.Bytes == 4 || s.KeyType.Bytes == 16) && !s.Concatenation:
		for _, e := range raw {
			if a, ok := netip.AddrFromSlice(e.Key); ok {
				out = append(out, Elem{From: a, To: a})
			}
		}
	case !s.Interval && (s.KeyType.Name == KeyIfnameAddr4.Name && s.KeyType.Bytes == KeyIfnameAddr4.Bytes ||
		s.KeyType.Name == KeyIfnameAddr6.Name && s.KeyType.Bytes == KeyIfnameAddr6.Bytes):
		for _, e := range raw {
			if len(e.Key) != int(s.KeyType.Bytes) {
				continue
			}
			name, _, _ := bytes.Cut(e.Key[:IfNameSize], []byte{0})
			a, _ := netip.AddrFromSlice(e.Key[IfNameSize:])
			out = append(out, Elem{Iface: string(name), From: a, To: a})
		}
	case !s.Interval && (s.KeyType.Name == KeyAddrPort4.Name && s.KeyType.Bytes == KeyAddrPort4.Bytes ||
		s.KeyType.Name == KeyAddrPort6.Name && s.KeyType.Bytes == KeyAddrPort6.Bytes):
		n := int(s.KeyType.Bytes) - 4 // the address; the port is padded to 4 bytes
		for _, e := range raw {
			if len(e.Key) != int(s.KeyType.Bytes) {
				continue
			}
			a, _ := netip.AddrFromSlice(e.Key[:n])
			out = append(out, Elem{From: a, To: a, Port: binary.BigEndian.Uint16(e.Key[n:])})
		}
	case !s.Interval && s.KeyType.Name == KeyProtoPort.Name && s.KeyType.Bytes == KeyProtoPort.Bytes:
		for _, e := range raw {
			if len(e.Key) == int(KeyProtoPort.Bytes) {
				out = append(out, Elem{Proto: e.Key[0], Port: binary.BigEndian.Uint16(e.Key[4:]), Value: decodeAddrPort(e.Val)})
			}
		}
	case !s.Interval && (s.KeyType.Name == KeyAddrProtoPort4.Name && s.KeyType.Bytes == KeyAddrProtoPort4.Bytes ||
		s.KeyType.Name == KeyAddrProtoPort6.Name && s.KeyType.Bytes == KeyAddrProtoPort6.Bytes):
		n := int(s.KeyType.Bytes) - 8 // the address; protocol and port padded to 4 bytes each
		for _, e := range raw {
			if len(e.Key) != int(s.KeyType.Bytes) {
				continue
			}
			a, _ := netip.AddrFromSlice(e.Key[:n])
			out = append(out, Elem{From: a, To: a, Proto: e.Key[n], Port: binary.BigEndian.Uint16(e.Key[n+4:]), Value: decodeAddrPort(e.Val)})
		}
	case !s.Interval && (s.KeyType.Name == KeyAddrAddr4.Name && s.KeyType.Bytes == KeyAddrAddr4.Bytes ||
		s.KeyType.Name == KeyAddrAddr6.Name && s.KeyType.Bytes == KeyAddrAddr6.Bytes):
		n := int(s.KeyType.Bytes) / 2
		for _, e := range raw {
			if len(e.Key) != int(s.KeyType.Bytes) {
				continue
			}
			a, _ := netip.AddrFromSlice(e.Key[:n])
			b, _ := netip.AddrFromSlice(e.Key[n:])
			out = append(out, Elem{From: a, To: b})
		}
	}
	slices.SortFunc(out, CompareElems)
	return out
}

// decodeIntervals turns an interval set's raw elements (a start, and an
// end one past the range) into ranges, From to To inclusive.
func decodeIntervals(raw []nftables.SetElement) []Elem {
	var out []Elem
	type bound struct {
		a   netip.Addr
		end bool
	}
	var bs []bound
	for _, e := range raw {
		if a, ok := netip.AddrFromSlice(e.Key); ok {
			bs = append(bs, bound{a, e.IntervalEnd})
		}
	}
	// Ends before starts at the same address: adjacent ranges.
	slices.SortFunc(bs, func(x, y bound) int {
		if c := x.a.Compare(y.a); c != 0 {
			return c
		}
		if x.end == y.end {
			return 0
		}
		if x.end {
			return -1
		}
		return 1
	})
	var open *netip.Addr
	for _, b := range bs {
		switch {
		case !b.end:
			if open != nil { // a start without an end, then another start
				out = append(out, Elem{From: *open, To: b.a.Prev()})
			}
			a := b.a
			open = &a
		case open != nil:
			out = append(out, Elem{From: *open, To: b.a.Prev()})
			open = nil
		}
		// An end with no start before it: nft's "0.0.0.0 interval end"
		// marker, which bounds nothing.
	}
	if open != nil {
		out = append(out, Elem{From: *open, To: LastAddr(netip.PrefixFrom(*open, 0))})
	}
	return out
}

// decodeAddrPort reads a map value of type address . inet_service (the
// port padded to 4 bytes).
func decodeAddrPort(v []byte) netip.AddrPort {
	if len(v) != 8 && len(v) != 20 {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(v[:len(v)-4])
	return netip.AddrPortFrom(a, binary.BigEndian.Uint16(v[len(v)-4:]))
}

// encodeAddrPort is decodeAddrPort's inverse.
func encodeAddrPort(ap netip.AddrPort) []byte {
	return append(binary.BigEndian.AppendUint16(ap.Addr().AsSlice(), ap.Port()), 0, 0)
}

// encodeElems turns Elems into the kernel's elements of set s.
func encodeElems(s Set, es []Elem) []nftables.SetElement {
	var out []nftables.SetElement
	for _, e := range es {
		switch {
		case s.Concat && (s.KeyType == KeyIfnameAddr4.Name || s.KeyType == KeyIfnameAddr6.Name):
			key := make([]byte, IfNameSize, IfNameSize+16)
			copy(key, e.Iface)
			key = append(key, e.From.AsSlice()...)
			out = append(out, nftables.SetElement{Key: key})
		case s.Concat && s.KeyType == KeyProtoPort.Name: // inet_proto . inet_service
			key := binary.BigEndian.AppendUint16([]byte{e.Proto, 0, 0, 0}, e.Port)
			out = append(out, nftables.SetElement{Key: append(key, 0, 0), Val: encodeAddrPort(e.Value)})
		case s.Concat && (s.KeyType == KeyAddrProtoPort4.Name || s.KeyType == KeyAddrProtoPort6.Name):
			key := append(e.From.AsSlice(), e.Proto, 0, 0, 0)
			key = binary.BigEndian.AppendUint16(key, e.Port)
			out = append(out, nftables.SetElement{Key: append(key, 0, 0), Val: encodeAddrPort(e.Value)})
		case s.Concat && (s.KeyType == KeyAddrAddr4.Name || s.KeyType == KeyAddrAddr6.Name):
			out = append(out, nftables.SetElement{Key: append(e.From.AsSlice(), e.To.AsSlice()...)})
		case s.Concat: // address . inet_service, the port padded to 4 bytes
			key := binary.BigEndian.AppendUint16(e.From.AsSlice(), e.Port)
			out = append(out, nftables.SetElement{Key: append(key, 0, 0)})
		case s.Interval:
			out = append(out, nftables.SetElement{Key: e.From.AsSlice()})
			if next := e.To.Next(); next.IsValid() && next.BitLen() == e.To.BitLen() {
				out = append(out, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
			}
		default:
			out = append(out, nftables.SetElement{Key: e.From.AsSlice()})
		}
	}
	return out
}
