// Package nft is reef's nftables engine: tables in a form that compares
// (Table, Set, Elem, Chain, Rule), the diff of a desired table against the
// kernel's (Diff, DiffInPlace, DiffElements) into a Plan, and the Kernel
// that reads tables and applies a plan in one atomic batch, or a CNI
// operation's elements in a batch of their own (EditElems). It knows no
// table of reef's but their name (TableName): packages nat/masq,
// nat/arpfilter and nat/hostport build the masquerade, ARP-filter and
// hostPort tables on it, package policy the NetworkPolicy table.
package nft

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// TableID names a table: a family and a name.
type TableID struct {
	Family nftables.TableFamily
	Name   string
}

// TableName is the name of reef's tables in every family (arp reef, inet
// reef; tables inet reef-nat, inet reef-hostport and ip6 reef-ndp start
// with it; ip reef and ip6 reef were the masquerade of earlier versions).
// The name is reef's mark: a table of another name is never read or
// written.
const TableName = "reef"

// String is the table as nft names it: "inet reef-nat", "arp reef".
func (id TableID) String() string { return FamilyName(id.Family) + " " + id.Name }

// FamilyName is nft's name of a table family.
func FamilyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family%d", f)
}

// Table is one nftables table in a form that compares: what Desired builds
// and what Kernel.Read finds. Sets and chains are sorted by name.
type Table struct {
	ID     TableID
	Flags  uint32 // NFTA_TABLE_FLAGS; reef's tables have none (1 is "dormant")
	Sets   []Set
	Chains []Chain
}

// Set is a named set. Comment is written but not read back (the nftables
// library does not decode it), so it takes no part in comparisons.
type Set struct {
	Name     string
	KeyType  string // nft's name of the key type: "ipv4_addr", "ifname . ipv4_addr"
	KeyLen   uint32 // bytes
	Interval bool
	Concat   bool
	// DataType and DataLen make the set a map: each element has a Value
	// of this type (nft's name, "ipv4_addr . inet_service").
	DataType string
	DataLen  uint32
	// Foreign: the set has flags reef never sets (constant, verdict map,
	// timeout, dynamic), so it is not reef's shape.
	Foreign bool
	Comment string
	Elems   []Elem // sorted
}

// Elem is one set element: an address range (From == To for one address)
// and, in a concatenated set, the interface name before it (ifname .
// ipv4_addr) or the port after it (ipv4_addr . inet_service), or a
// protocol and a port (inet_proto . inet_service, after an address or
// alone). In a set of address pairs (ipv4_addr . ipv4_addr) From and To
// are the two addresses. In a map, Value is the element's data (ipv4_addr
// . inet_service).
type Elem struct {
	Iface    string
	From, To netip.Addr
	Proto    uint8
	Port     uint16
	Value    netip.AddrPort
}

// KeyOnly is e without its map value: the part the kernel keys on.
func (e Elem) KeyOnly() Elem {
	e.Value = netip.AddrPort{}
	return e
}

// String writes the element as nft does.
func (e Elem) String() string {
	var s string
	switch {
	case e.From == e.To:
		s = e.From.String()
	case isPrefix(e.From, e.To):
		s = rangePrefix(e.From, e.To).String()
	default:
		s = e.From.String() + "-" + e.To.String()
	}
	if e.Iface != "" {
		s = fmt.Sprintf("%q . %s", e.Iface, s)
	}
	if !e.From.IsValid() {
		s = ""
	}
	if e.Proto != 0 {
		s = strings.TrimPrefix(s+" . "+ProtoName(e.Proto), " . ")
	}
	if e.Port != 0 {
		s = strings.TrimPrefix(fmt.Sprintf("%s . %d", s, e.Port), " . ")
	}
	if e.Value.IsValid() {
		s += " : " + e.Value.Addr().String() + " . " + fmt.Sprint(e.Value.Port())
	}
	return s
}

// Chain is a base chain with its rules in order.
type Chain struct {
	Name     string
	Type     nftables.ChainType
	Hooked   bool // a base chain: Hook, Priority and Policy apply
	Hook     nftables.ChainHook
	Priority nftables.ChainPriority
	Policy   nftables.ChainPolicy
	Rules    []Rule
}

// Rule is a rule's expressions and comment. Two rules are the same when
// their keys are: expressions as the kernel would receive them, counters
// and set IDs left out.
type Rule struct {
	Comment string
	Exprs   []expr.Any
	// Key, when set, is Key(family) of the rule computed before: a
	// renderer that reuses a rule keeps its key, so that comparing it
	// costs no encoding. Rules read from the kernel have none.
	Key string
	// Handle is the kernel's handle of a rule Read returns (0 for a
	// desired rule); it takes no part in comparisons.
	Handle uint64
}

// WithKey returns r with its Key computed for family fam.
func (r Rule) WithKey(fam nftables.TableFamily) Rule {
	r.Key = ""
	r.Key = r.key(fam)
	return r
}

// key is the rule in bytes, for comparing a desired rule with a kernel one.
// A rule whose expressions cannot be encoded gets a key no rule of reef's
// has, so that it is replaced.
func (r Rule) key(fam nftables.TableFamily) string {
	if r.Key != "" {
		return r.Key
	}
	var b strings.Builder
	b.WriteString(r.Comment)
	for _, e := range r.Exprs {
		switch v := e.(type) {
		case *expr.Counter:
			e = &expr.Counter{}
		case *expr.Lookup:
			c := *v
			c.SetID = 0
			e = &c
		}
		enc, err := expr.Marshal(byte(fam), e)
		if err != nil {
			return "!unencodable " + err.Error()
		}
		b.WriteString("|" + hex.EncodeToString(enc))
	}
	return b.String()
}

// userData is the rule's comment as nft stores it, so `nft list ruleset`
// prints it.
func (r Rule) userData() []byte {
	if r.Comment == "" {
		return nil
	}
	return userdata.AppendString(nil, userdata.TypeComment, r.Comment)
}

func commentOf(ud []byte) string {
	c, _ := userdata.GetString(ud, userdata.TypeComment)
	return c
}

// isPrefix reports whether [from, to] is exactly one CIDR.
func isPrefix(from, to netip.Addr) bool {
	p := rangePrefix(from, to)
	return p.IsValid() && p.Addr() == from && LastAddr(p) == to
}

// rangePrefix is the longest prefix starting at from that ends at or
// before to: the whole range when it is one CIDR.
func rangePrefix(from, to netip.Addr) netip.Prefix {
	for bits := 0; bits <= from.BitLen(); bits++ {
		p := netip.PrefixFrom(from, bits).Masked()
		if p.Addr() == from && LastAddr(p).Compare(to) <= 0 {
			return p
		}
	}
	return netip.Prefix{}
}

// LastAddr is the highest address in p.
func LastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
