package policy

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/nat/nft"
)

// TableID is reef's policy table: table inet reef.
var TableID = nft.TableID{Family: nftables.TableFamilyINet, Name: nft.TableName}

// Names of the base chains and the sets every table has.
const (
	ChainIngress = "ingress"
	ChainEgress  = "egress"
)

// Priorities of the base chains on the forward hook: egress (the source's
// policies) then ingress (the destination's), both at filter.
const (
	EgressPriority  nftables.ChainPriority = 0
	IngressPriority nftables.ChainPriority = 1
)

// family is one IP family of the table: its sets carry the suffix, its
// rules start with `meta nfproto`.
type family struct {
	suffix   string // "4", "6"
	nfproto  byte
	addr     nftables.SetDatatype
	addrPort nftables.SetDatatype
	src, dst uint32 // offsets in the network header
}

var families = []family{
	{"4", unix.NFPROTO_IPV4, nftables.TypeIPAddr, nft.KeyAddrPort4, 12, 16},
	{"6", unix.NFPROTO_IPV6, nftables.TypeIP6Addr, nft.KeyAddrPort6, 8, 24},
}

func (f family) holds(a netip.Addr) bool { return a.Is4() == (f.suffix == "4") }

// renders reports whether st has f's sets and rules.
func (st State) renders(f family) bool {
	return slices.ContainsFunc(st.families(), func(g family) bool { return g.suffix == f.suffix })
}

// offset of the pod's address in a packet of direction d: the destination
// for ingress, the source for egress; peer is the other end.
func (f family) offset(d Direction, peer bool) uint32 {
	if (d == Ingress) != peer {
		return f.dst
	}
	return f.src
}

// Names of a policy's chain and sets. A Kubernetes namespace has no dots,
// so "<ns>.<name>" is unambiguous; names too long for nftables (255
// bytes) are cut and made unique by a hash.
func chainName(d Direction, c *Compiled) string {
	return limitName(dirTag(d) + "." + c.Namespace + "." + c.Name)
}
func selSet(f family, c *Compiled) string {
	return limitName("sel" + f.suffix + "." + c.Namespace + "." + c.Name)
}

// peerSet is a rule's peer set, named by its key: the rules of a
// namespace with the same peers share one.
func peerSet(f family, r Rule) string { return "peers" + f.suffix + "." + r.PeerKey }
func namedSet(f family, d Direction, c *Compiled, rule, port int) string {
	return limitName(fmt.Sprintf("%s%s.%s.%s.%d.%d", dirTag(d), f.suffix, c.Namespace, c.Name, rule, port))
}
func isolatedSet(f family, d Direction) string { return dirTag(d) + "-isolated" + f.suffix }

func dirTag(d Direction) string {
	if d == Egress {
		return "eg"
	}
	return "in"
}

const maxName = 200

// maxComment bounds a comment (NFT_USERDATA_MAXLEN is 256 bytes with its
// header); a long policy name is cut.
const maxComment = 240

func cut(s string) string {
	if len(s) <= maxComment {
		return s
	}
	return s[:maxComment-3] + "..."
}

func limitName(s string) string {
	if len(s) <= maxName {
		return s
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("%s~%016x", s[:maxName-17], h.Sum64())
}

// Table renders the desired state as table inet reef.
func Table(st State) nft.Table { return render(st, true, nil) }

// Sets renders only the sets of Table(st): for a caller that has the
// chains already, those of a State of the same policies (same Shape).
func Sets(st State) []nft.Set { return render(st, false, nil).Sets }

// Renderer is Table with a memory: a policy's rules depend on its spec
// only, so they are rendered (and their keys for comparison computed)
// once per resourceVersion and reused. One goroutine at a time.
type Renderer struct {
	rules map[string]cachedRules // chain name @ spec
	used  map[string]bool
}

type cachedRules struct {
	jumps []nft.Rule // the base chain's jumps to the chain, one per family
	rules []nft.Rule
}

// Table is Table(st), reusing the rules of policies rendered before.
func (r *Renderer) Table(st State) nft.Table {
	if r.rules == nil {
		r.rules = map[string]cachedRules{}
	}
	r.used = map[string]bool{}
	t := render(st, true, r)
	for k := range r.rules {
		if !r.used[k] {
			delete(r.rules, k)
		}
	}
	return t
}

func specKey(c *Compiled) string {
	if c.src != nil && c.src.ResourceVersion != "" {
		return c.src.ResourceVersion
	}
	return fmt.Sprintf("%v", c.src) // not from the API (tests)
}

func render(st State, withChains bool, cache *Renderer) nft.Table {
	t := nft.Table{ID: TableID}
	emitted := map[string]bool{} // shared peer sets, rendered once
	base := baseChains(st, &t)
	fams := st.families()
	for _, c := range st.Policies {
		for _, f := range fams {
			t.Sets = append(t.Sets, addrSet(f, selSet(f, c), cut("reef: this node's pods policy "+c.Key()+" selects"), false, c.Selected))
		}
		for d := Ingress; d <= Egress; d++ {
			if !c.Covers[d] {
				continue
			}
			ch := nft.Chain{Name: chainName(d, c)}
			var key string
			var hit bool
			var cached cachedRules
			if cache != nil {
				// The rules are those of the families rendered.
				key = ch.Name + "@" + specKey(c) + "@" + st.fams.String()
				cached, hit = cache.rules[key]
				cache.used[key] = true
			}
			for _, f := range fams {
				if !hit {
					cached.jumps = append(cached.jumps, nft.Rule{Comment: cut(fmt.Sprintf("reef: policy %s (%s)", c.Key(), d)),
						Exprs: append(match(f, f.offset(d, false), selSet(f, c), false), &expr.Verdict{Kind: expr.VerdictJump, Chain: ch.Name})})
				}
				for i, r := range c.Rules[d] {
					sets, rules := ruleRules(&st, emitted, f, d, c, i, r, withChains && !hit)
					t.Sets = append(t.Sets, sets...)
					cached.rules = append(cached.rules, rules...)
				}
			}
			if cache != nil && !hit {
				for i := range cached.jumps {
					cached.jumps[i] = cached.jumps[i].WithKey(TableID.Family)
				}
				for i := range cached.rules {
					cached.rules[i] = cached.rules[i].WithKey(TableID.Family)
				}
				cache.rules[key] = cached
			}
			base[d].Rules = append(base[d].Rules, cached.jumps...)
			ch.Rules = cached.rules
			t.Chains = append(t.Chains, ch)
		}
	}
	for d := Ingress; d <= Egress; d++ {
		base[d].Rules = append(base[d].Rules, nft.Rule{Comment: fmt.Sprintf("reef: isolated for %s and no policy allows it", d),
			Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	}
	t.Chains = append(t.Chains, base[:]...)
	renderCluster(st, &t, withChains, cache)
	if !withChains {
		t.Chains = nil
	}
	slices.SortFunc(t.Chains, func(a, b nft.Chain) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(t.Sets, func(a, b nft.Set) int { return strings.Compare(a.Name, b.Name) })
	return t
}

// baseChains are the two hooked chains' first rules: replies and allowed
// connections, the jump to the Admin tier, and for each family pods no
// policy isolates (accepted, or handed to the Baseline tier); the
// isolated-pods sets go into t.
func baseChains(st State, t *nft.Table) [2]nft.Chain {
	base := [2]nft.Chain{
		{Name: ChainIngress, Type: nftables.ChainTypeFilter, Hooked: true, Hook: *nftables.ChainHookForward,
			Priority: IngressPriority, Policy: nftables.ChainPolicyAccept},
		{Name: ChainEgress, Type: nftables.ChainTypeFilter, Hooked: true, Hook: *nftables.ChainHookForward,
			Priority: EgressPriority, Policy: nftables.ChainPolicyAccept},
	}
	for d := Ingress; d <= Egress; d++ {
		base[d].Rules = append(base[d].Rules, established())
		if hasTier(st, cnp.AdminTier, d) {
			base[d].Rules = append(base[d].Rules, nft.Rule{Comment: "reef: ClusterNetworkPolicy Admin tier; Pass returns here",
				Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: adminChain(d)}}})
		}
		for _, f := range families {
			if !st.renders(f) {
				// No pod of this node has an address of f: none is
				// isolated.
				base[d].Rules = append(base[d].Rules, nft.Rule{Comment: fmt.Sprintf("reef: no pod of this node has an IPv%s address", f.suffix),
					Exprs: append(nfproto(f), &expr.Verdict{Kind: expr.VerdictAccept})})
				continue
			}
			set := isolatedSet(f, d)
			t.Sets = append(t.Sets, addrSet(f, set, fmt.Sprintf("reef: this node's pods isolated for %s", d), false, st.Isolated[d]))
			if hasTier(st, cnp.BaselineTier, d) {
				base[d].Rules = append(base[d].Rules, nft.Rule{Comment: fmt.Sprintf("reef: pods no policy isolates for %s: ClusterNetworkPolicy Baseline tier", d),
					Exprs: append(match(f, f.offset(d, false), set, true), &expr.Verdict{Kind: expr.VerdictGoto, Chain: baselineChain(d)})})
				continue
			}
			base[d].Rules = append(base[d].Rules, nft.Rule{Comment: fmt.Sprintf("reef: pods no policy isolates for %s", d),
				Exprs: append(match(f, f.offset(d, false), set, true), &expr.Verdict{Kind: expr.VerdictAccept})})
		}
	}
	return base
}

// established accepts replies and connections already allowed.
func established() nft.Rule {
	return nft.Rule{Comment: "reef: replies and connections already allowed",
		Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}}
}

// ruleRules renders rule i of a policy in family f: its sets and one
// accept rule per port entry (one rule when it has no ports).
// With withRules false only the sets are made.
func ruleRules(st *State, emitted map[string]bool, f family, d Direction, c *Compiled, i int, r Rule, withRules bool) ([]nft.Set, []nft.Rule) {
	var sets []nft.Set
	var peer []expr.Any
	if !r.AnyPeer {
		name := peerSet(f, r)
		if !emitted[name] {
			emitted[name] = true
			peers := r.Peers
			if p, ok := st.Peers[r.PeerKey]; ok {
				peers = p
			}
			var elems []nft.Elem
			for _, rg := range peers {
				if f.holds(rg.From) {
					elems = append(elems, nft.Elem{From: rg.From, To: rg.To})
				}
			}
			sets = append(sets, nft.Set{Name: name, KeyType: f.addr.Name, KeyLen: f.addr.Bytes, Interval: true,
				Comment: cut(fmt.Sprintf("reef: peers of policy %s %s[%d], and of every rule with the same peers", c.Key(), d, i)), Elems: elems})
		}
		peer = match(f, f.offset(d, true), name, false)
	} else {
		peer = nfproto(f)
	}
	if !withRules {
		for j, p := range r.Ports {
			if p.Name != "" {
				sets = append(sets, namedPortSet(f, d, c, i, j, p))
			}
		}
		return sets, nil
	}
	comment := fmt.Sprintf("reef: policy %s %s[%d]", c.Key(), d, i)
	if len(r.Ports) == 0 {
		return sets, []nft.Rule{{Comment: cut(comment), Exprs: append(slices.Clone(peer), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})}}
	}
	var rules []nft.Rule
	for j, p := range r.Ports {
		ex := append(slices.Clone(peer), l4proto(p.Proto)...)
		switch {
		case p.Any:
		case p.Name != "":
			name := namedSet(f, d, c, i, j)
			sets = append(sets, namedPortSet(f, d, c, i, j, p))
			// The destination's address and port: the selected pod's for
			// ingress, the peer's for egress.
			// The port goes right after the address: NFT_REG32_01 after
			// an IPv4 address in NFT_REG_1, NFT_REG_2 after an IPv6 one
			// (the numbers the kernel dumps them with).
			ex = append(ex, namedMatch(f, name)...)
		default:
			ex = append(ex, dportIn(p.From, p.To)...)
		}
		ex = append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
		rules = append(rules, nft.Rule{Comment: cut(fmt.Sprintf("%s port %s", comment, p)), Exprs: ex})
	}
	return sets, rules
}

// namedMatch is `ip daddr . th dport @set` in family f.
func namedMatch(f family, set string) []expr.Any {
	// The port goes right after the address: NFT_REG32_01 after an IPv4
	// address in NFT_REG_1, NFT_REG_2 after an IPv6 one (the numbers the
	// kernel dumps them with).
	portReg := uint32(9)
	if f.addr.Bytes == 16 {
		portReg = 2
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.dst, Len: f.addr.Bytes},
		&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set},
	}
}

func namedPortSet(f family, d Direction, c *Compiled, i, j int, p Port) nft.Set {
	var elems []nft.Elem
	for _, ap := range p.Named {
		if f.holds(ap.Addr) {
			elems = append(elems, nft.Elem{From: ap.Addr, To: ap.Addr, Port: ap.Port})
		}
	}
	return nft.Set{Name: namedSet(f, d, c, i, j), KeyType: f.addrPort.Name, KeyLen: f.addrPort.Bytes, Concat: true,
		Comment: cut(fmt.Sprintf("reef: policy %s %s[%d] port %q: address . port", c.Key(), d, i, p.Name)), Elems: elems}
}

func addrSet(f family, name, comment string, interval bool, addrs []netip.Addr) nft.Set {
	s := nft.Set{Name: name, KeyType: f.addr.Name, KeyLen: f.addr.Bytes, Interval: interval, Comment: comment}
	for _, a := range addrs {
		if f.holds(a) {
			s.Elems = append(s.Elems, nft.Elem{From: a, To: a})
		}
	}
	return s
}

func nfproto(f family) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
	}
}

// match is `ip saddr|daddr [!=] @set` in family f.
func match(f family, offset uint32, set string, invert bool) []expr.Any {
	return append(nfproto(f),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: f.addr.Bytes},
		&expr.Lookup{SourceRegister: 1, SetName: set, Invert: invert})
}

func l4proto(p uint8) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func dport() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}}
}

// dportIn matches a destination port from..to (one port when equal),
// after l4proto.
func dportIn(from, to uint16) []expr.Any {
	if from == to {
		return append(dport(), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(from)})
	}
	return append(dport(),
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: binaryutil.BigEndian.PutUint16(from)},
		&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: binaryutil.BigEndian.PutUint16(to)})
}

// String writes a port as a policy does: "TCP/80", "UDP/80-90", "SCTP",
// "TCP/http".
func (p Port) String() string {
	proto := map[uint8]string{protoTCP: "TCP", protoUDP: "UDP", protoSCTP: "SCTP"}[p.Proto]
	switch {
	case p.Any:
		return proto
	case p.Name != "":
		return proto + "/" + p.Name
	case p.From == p.To:
		return fmt.Sprintf("%s/%d", proto, p.From)
	}
	return fmt.Sprintf("%s/%d-%d", proto, p.From, p.To)
}
