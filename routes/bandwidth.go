package routes

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A pod's limits follow the CNI bandwidth convention (as the reference
// bandwidth plugin): traffic into the pod leaves the node through the
// node-side veth, so a tbf root qdisc there limits it; traffic from the pod
// arrives on that veth, where an ingress qdisc redirects all of it to an
// ifb device whose root tbf limits it before the ifb hands it back to the
// veth's receive path. Everything is written through netlink: no tc binary
// runs.

// Bandwidth is a pod's limits: rates in bits per second, bursts in bits; 0 is
// no limit in that direction.
type Bandwidth struct{ IngressRate, IngressBurst, EgressRate, EgressBurst uint64 }

// IFBPrefix starts the name of every ifb device reef creates. It starts with
// HostVethPrefix, so everything that guards reef's links guards these too;
// a veth may also be named so (HostVethName can give "reefb..."), which is
// why reef takes a link for its ifb only if it is of type ifb.
const IFBPrefix = "reefb"

// tbfLatencyDivisor sets how long a packet may wait in a pod's tbf before it
// is dropped: 1/40 s, the reference plugin's 25 ms. The queue holds that
// many seconds of the rate on top of the burst.
const tbfLatencyDivisor = 40

// ethHeader is what a frame carries on top of the MTU when a tbf sees it:
// on the veth's transmit side and, after mirred pushed the header back, on
// the ifb.
const ethHeader = 14

// ingressParent is the handle of the ingress qdisc (ffff:), the parent of
// its filters.
var ingressParent = netlink.MakeHandle(0xffff, 0)

// redirectPriority is the priority of reef's one filter on a veth's ingress.
const redirectPriority = 1

// IFBName is the ifb device of a pod's egress limit: "reefb" and the 10 hex
// digits that follow "reef" in the node-side veth name (HostVethName gives
// "reef" and 11), 15 characters at most (IFNAMSIZ-1). It carries the veth's
// name as its alias (IFLA_IFALIAS), so ownership can be checked.
func IFBName(hostVeth string) string {
	rest := strings.TrimPrefix(hostVeth, HostVethPrefix)
	if len(rest) > 10 {
		rest = rest[:10]
	}
	return IFBPrefix + rest
}

// tbfParams is a tbf as the kernel takes and reports it (tc_tbf_qopt and
// TCA_TBF_RATE64).
type tbfParams struct {
	Rate   uint64 // bytes per second
	Buffer uint32 // ticks of the packet scheduler's clock to send the burst at Rate
	Limit  uint32 // bytes that may wait in the queue
}

// tbfFor computes the tbf that holds traffic to rateBits per second with a
// burst of burstBits. tick is the scheduler's ticks per microsecond
// (netlink.TickInUsec, from /proc/net/psched).
//
// The rate is rateBits/8 bytes per second; netlink sends it as the 64-bit
// TCA_TBF_RATE64 when it does not fit the 32-bit field. The burst is
// burstBits/8 bytes, which tbf knows only as a time: the buffer, the ticks
// it takes to send the burst at the rate, rounded up so the bucket holds at
// least the burst. The buffer field is 32 bits of ticks (64 ns each on
// current kernels, so at most ~275 s): a burst that takes longer than that
// to send is cut to the bytes that time sends, math.MaxUint32 ticks, which
// the kernel keeps and reports back unchanged, so the next comparison finds
// it equal. The limit is the reference plugin's: the rate over 25 ms plus
// the burst (the burst the bucket holds, if it was cut), at most
// math.MaxUint32 bytes.
func tbfFor(rateBits, burstBits uint64, tick float64) (tbfParams, error) {
	rate, burst := rateBits/8, burstBits/8
	switch {
	case tick <= 0:
		return tbfParams{}, errors.New("the packet scheduler's clock is unknown (/proc/net/psched unreadable)")
	case rate == 0:
		return tbfParams{}, fmt.Errorf("rate %d bit/s is less than one byte per second", rateBits)
	case burst == 0:
		return tbfParams{}, fmt.Errorf("burst %d bit is less than one byte", burstBits)
	}
	// The small epsilon keeps float error from rounding an exact tick count up.
	ticks := math.Ceil(float64(burst)*1e6/float64(rate)*tick - 1e-6)
	held := burst
	if ticks > math.MaxUint32 {
		ticks = math.MaxUint32
		held = burstHeld(rate, math.MaxUint32, tick)
	}
	limit := rate/tbfLatencyDivisor + held
	if limit > math.MaxUint32 || limit < held {
		limit = math.MaxUint32
	}
	return tbfParams{Rate: rate, Buffer: uint32(ticks), Limit: uint32(limit)}, nil
}

// burstHeld is the bytes a bucket of buffer ticks holds at rate bytes/s.
func burstHeld(rate uint64, buffer uint32, tick float64) uint64 {
	return uint64(float64(rate)*float64(buffer)/tick/1e6 + 1e-6)
}

// tbfBandwidth turns a kernel's tbf back into a rate and burst in bits: the
// ones tbfFor turns into exactly this tbf if there are such (the burst is in
// the limit), otherwise the burst the bucket holds.
func tbfBandwidth(p tbfParams, tick float64) (rateBits, burstBits uint64) {
	if tick <= 0 || p.Rate == 0 {
		return p.Rate * 8, 0
	}
	if lat := p.Rate / tbfLatencyDivisor; uint64(p.Limit) > lat {
		cand := uint64(p.Limit) - lat
		if q, err := tbfFor(p.Rate*8, cand*8, tick); err == nil && q == p {
			return p.Rate * 8, cand * 8
		}
	}
	return p.Rate * 8, burstHeld(p.Rate, p.Buffer, tick) * 8
}

// limitFor is the tbf of one direction on a device of mtu: nil for no
// limit. A burst smaller than one full frame is refused: tbf drops every
// packet larger than its bucket, so the pod would lose all full-size
// packets without a word.
func limitFor(dir string, rateBits, burstBits uint64, mtu int, tick float64) (*tbfParams, error) {
	if rateBits == 0 {
		return nil, nil
	}
	p, err := tbfFor(rateBits, burstBits, tick)
	if err != nil {
		return nil, fmt.Errorf("%s limit: %w", dir, err)
	}
	if frame := uint64(mtu + ethHeader); burstBits/8 < frame {
		return nil, fmt.Errorf("%s limit: burst %s is less than one frame of MTU %d (%d bytes): tbf would drop every full-size packet", dir, bitString(burstBits), mtu, frame)
	}
	return &p, nil
}

// bitString writes bits with tc's SI units: 10Mbit, 80kbit, 1500bit.
func bitString(v uint64) string {
	for _, u := range []struct {
		div  uint64
		name string
	}{{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "kbit"}} {
		if v >= u.div {
			return strconv.FormatFloat(float64(v)/float64(u.div), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "bit"
}

func (p tbfParams) describe(tick float64) string {
	rate, burst := tbfBandwidth(p, tick)
	return fmt.Sprintf("rate %s burst %s limit %db", bitString(rate), bitString(burst), p.Limit)
}

// describeQdisc says what a root qdisc is, for a change's "was".
func describeQdisc(q netlink.Qdisc, tick float64) string {
	switch q := q.(type) {
	case nil:
		return "none"
	case *netlink.Tbf:
		s := tbfOf(q).describe(tick)
		if q.Peakrate != 0 {
			s += " peakrate " + bitString(q.Peakrate*8)
		}
		return s
	default:
		return q.Type()
	}
}

func tbfOf(q *netlink.Tbf) tbfParams {
	return tbfParams{Rate: q.Rate, Buffer: q.Buffer, Limit: q.Limit}
}

// MinBurstBits is the smallest burst SetBandwidth takes on a link of MTU
// mtu: one full frame, in bits.
func MinBurstBits(mtu int) uint64 { return uint64(mtu+ethHeader) * 8 }

// SetBandwidth brings the tc setup of a pod's node-side veth, and of its
// ifb, in line with bw, changing only what differs from what the kernel
// has, and says what it changed, one short line per change, for the log.
// A zero bw removes reef's limits: the veth's root tbf, its ingress qdisc
// and the ifb. It may be called again with the same bw (it then changes
// nothing) and repairs what someone removed or changed. It refuses a link
// not named reef*, an ifb of the pod's ifb name whose alias names another
// veth, and a clsact qdisc on the veth (not reef's). Refusals come before
// any change; on a later failure it returns what it did change.
func SetBandwidth(hostVeth string, bw Bandwidth) (changes []string, err error) {
	if !isOurs(hostVeth) {
		return nil, fmt.Errorf("refusing to touch %q: not a reef link", hostVeth)
	}
	h, err := netlinksafe.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	veth, err := h.LinkByName(hostVeth)
	if err != nil {
		return nil, fmt.Errorf("find veth %s: %w", hostVeth, err)
	}
	tick := netlink.TickInUsec()
	mtu := veth.Attrs().MTU
	in, err := limitFor("ingress", bw.IngressRate, bw.IngressBurst, mtu, tick)
	if err != nil {
		return nil, fmt.Errorf("bandwidth of %s: %w", hostVeth, err)
	}
	out, err := limitFor("egress", bw.EgressRate, bw.EgressBurst, mtu, tick)
	if err != nil {
		return nil, fmt.Errorf("bandwidth of %s: %w", hostVeth, err)
	}
	b := &tcWriter{h: h, tick: tick}
	// Egress first: its refusals (another pod's ifb, a clsact) then come
	// before anything has changed.
	if out != nil {
		err = b.setEgress(veth, *out)
	} else {
		err = b.clearEgress(veth)
	}
	if err == nil {
		err = b.setRootTbf(veth, in)
	}
	return b.changes, err
}

// tcWriter applies one SetBandwidth and records what it changed.
type tcWriter struct {
	h       netlinksafe.Handle
	tick    float64
	changes []string
}

func (b *tcWriter) changed(format string, a ...any) {
	b.changes = append(b.changes, fmt.Sprintf(format, a...))
}

// rootQdisc returns the root qdisc someone set on link: nil for the
// kernel's default (handle 0, noqueue or pfifo_fast), which is nobody's.
func rootQdisc(h netlinksafe.Handle, link netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Handle != 0 {
			return q, nil
		}
	}
	return nil, nil
}

// ingressQdisc returns the qdisc at link's ingress hook (ingress or
// clsact), nil if there is none.
func ingressQdisc(h netlinksafe.Handle, link netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			return q, nil
		}
	}
	return nil, nil
}

// setRootTbf makes link's root qdisc the tbf want, or removes a root tbf if
// want is nil. A root of another kind is replaced when a limit is wanted
// (the link is reef's) and left alone otherwise.
func (b *tcWriter) setRootTbf(link netlink.Link, want *tbfParams) error {
	name := link.Attrs().Name
	cur, err := rootQdisc(b.h, link)
	if err != nil {
		return err
	}
	tbf, isTbf := cur.(*netlink.Tbf)
	if want == nil {
		if !isTbf {
			return nil
		}
		if err := b.h.QdiscDel(tbf); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete tbf on %s: %w", name, err)
		}
		b.changed("tbf on %s removed, was %s", name, describeQdisc(cur, b.tick))
		return nil
	}
	if isTbf && tbfOf(tbf) == *want && tbf.Peakrate == 0 {
		return nil
	}
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       want.Rate, Buffer: want.Buffer, Limit: want.Limit,
	}
	switch {
	case isTbf:
		// Same kind: the kernel changes it in place, keeping its queue.
		q.Handle = tbf.Handle
		err = b.h.QdiscReplace(q)
	case cur != nil:
		// Another kind may hold handle 1:, which a tbf cannot replace.
		if err := b.h.QdiscDel(cur); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s qdisc on %s: %w", cur.Type(), name, err)
		}
		err = b.h.QdiscAdd(q)
	default:
		err = b.h.QdiscAdd(q)
	}
	if err != nil {
		return fmt.Errorf("set tbf %s on %s: %w", want.describe(b.tick), name, err)
	}
	b.changed("tbf on %s: %s, was %s", name, want.describe(b.tick), describeQdisc(cur, b.tick))
	return nil
}

// setEgress limits what the pod sends: the ifb with its tbf first, then the
// redirect to it, so that no packet is redirected to a device not ready.
func (b *tcWriter) setEgress(veth netlink.Link, want tbfParams) error {
	name := veth.Attrs().Name
	cur, err := ingressQdisc(b.h, veth)
	if err != nil {
		return err
	}
	if cur != nil && cur.Type() != "ingress" {
		return fmt.Errorf("veth %s has a %s qdisc at ingress, not reef's: refusing to replace it", name, cur.Type())
	}
	ifb, err := b.ensureIFB(veth)
	if err != nil {
		return err
	}
	if err := b.setRootTbf(ifb, &want); err != nil {
		return err
	}
	if cur == nil {
		q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth.Attrs().Index, Handle: ingressParent, Parent: netlink.HANDLE_INGRESS}}
		if err := b.h.QdiscAdd(q); err != nil {
			return fmt.Errorf("add ingress qdisc on %s: %w", name, err)
		}
		b.changed("ingress qdisc on %s added", name)
	}
	return b.setRedirect(veth, ifb)
}

// ensureIFB finds or creates the pod's ifb and repairs its alias, MTU and
// state. An ifb of that name that names another veth is refused.
func (b *tcWriter) ensureIFB(veth netlink.Link) (netlink.Link, error) {
	vname, mtu := veth.Attrs().Name, veth.Attrs().MTU
	name := IFBName(vname)
	l, err := b.h.LinkByName(name)
	created := false
	if isNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.Flags = name, mtu, net.FlagUp
		if err := b.h.LinkAdd(&netlink.Ifb{LinkAttrs: attrs}); err != nil {
			return nil, fmt.Errorf("create ifb %s for %s: %w", name, vname, err)
		}
		b.changed("ifb %s for %s created", name, vname)
		created = true
		if l, err = b.h.LinkByName(name); err != nil {
			return nil, fmt.Errorf("find ifb %s: %w", name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("find ifb %s: %w", name, err)
	}
	a := l.Attrs()
	if l.Type() != "ifb" {
		return nil, fmt.Errorf("link %s is a %s, not the ifb of %s: refusing to use it", name, l.Type(), vname)
	}
	// What a new ifb lacks is part of its creation, not a repair.
	fix := func(format string, args ...any) {
		if !created {
			b.changed(format, args...)
		}
	}
	switch a.Alias {
	case vname:
	case "":
		// Nobody claims it. The kernel takes no alias when it creates a
		// link, so this is also what a SetBandwidth stopped right after
		// the creation leaves.
		if err := b.h.LinkSetAlias(l, vname); err != nil {
			return nil, fmt.Errorf("set alias %s on ifb %s: %w", vname, name, err)
		}
		fix("ifb %s: alias %s, was none", name, vname)
	default:
		return nil, fmt.Errorf("ifb %s belongs to veth %s, not %s: refusing to take it over", name, a.Alias, vname)
	}
	if a.MTU != mtu {
		if err := b.h.LinkSetMTU(l, mtu); err != nil {
			return nil, fmt.Errorf("set MTU %d on ifb %s: %w", mtu, name, err)
		}
		fix("ifb %s: mtu %d, was %d", name, mtu, a.MTU)
	}
	if a.Flags&net.FlagUp == 0 {
		if err := b.h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set ifb %s up: %w", name, err)
		}
		fix("ifb %s set up", name)
	}
	return l, nil
}

// isRedirect reports whether f is reef's filter: u32 matching every packet
// of every protocol, with one action, mirred egress redirect to ifindex.
func isRedirect(f netlink.Filter, ifindex int) bool {
	u, ok := f.(*netlink.U32)
	if !ok || u.Protocol != unix.ETH_P_ALL || u.Sel == nil || u.Sel.Flags&nl.TC_U32_TERMINAL == 0 || u.Police != nil || len(u.Actions) != 1 {
		return false
	}
	for _, k := range u.Sel.Keys {
		if k.Mask != 0 {
			return false
		}
	}
	m, ok := u.Actions[0].(*netlink.MirredAction)
	return ok && m.MirredAction == netlink.TCA_EGRESS_REDIR && m.Ifindex == ifindex && m.Attrs().Action == netlink.TC_ACT_STOLEN
}

func describeFilters(fs []netlink.Filter) string {
	if len(fs) == 0 {
		return "none"
	}
	var ds []string
	for _, f := range fs {
		d := f.Type()
		if u, ok := f.(*netlink.U32); ok {
			for _, act := range u.Actions {
				if m, ok := act.(*netlink.MirredAction); ok {
					d += fmt.Sprintf(" redirect to ifindex %d", m.Ifindex)
				} else {
					d += " " + act.Type()
				}
			}
		}
		ds = append(ds, d)
	}
	return strings.Join(ds, ", ")
}

// setRedirect makes reef's redirect the only filter on veth's ingress.
func (b *tcWriter) setRedirect(veth, ifb netlink.Link) error {
	name, ifbName, ifindex := veth.Attrs().Name, ifb.Attrs().Name, ifb.Attrs().Index
	fs, err := b.h.FilterList(veth, ingressParent)
	if err != nil {
		return fmt.Errorf("list filters on ingress of %s: %w", name, err)
	}
	if len(fs) == 1 && isRedirect(fs[0], ifindex) {
		return nil
	}
	// A u32 filter lists one entry per key node; deleting by priority and
	// protocol with handle 0 removes the whole filter at once.
	type tp struct {
		prio, proto uint16
		kind        string
	}
	done := map[tp]bool{}
	for _, f := range fs {
		a := f.Attrs()
		k := tp{a.Priority, a.Protocol, f.Type()}
		if done[k] {
			continue
		}
		done[k] = true
		del := &netlink.GenericFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: veth.Attrs().Index, Parent: ingressParent, Priority: a.Priority, Protocol: a.Protocol},
			FilterType:  f.Type(),
		}
		if err := b.h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s filter prio %d on ingress of %s: %w", f.Type(), a.Priority, name, err)
		}
	}
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: veth.Attrs().Index, Parent: ingressParent, Priority: redirectPriority, Protocol: unix.ETH_P_ALL},
		// A nil Sel is netlink's match-all: one empty key, terminal.
		Actions: []netlink.Action{netlink.NewMirredAction(ifindex)},
	}
	if err := b.h.FilterAdd(f); err != nil {
		return fmt.Errorf("add redirect from %s to %s: %w", name, ifbName, err)
	}
	b.changed("redirect %s -> %s, was %s", name, ifbName, describeFilters(fs))
	return nil
}

// clearEgress removes the redirect, then the ifb, if they are there.
func (b *tcWriter) clearEgress(veth netlink.Link) error {
	name := veth.Attrs().Name
	cur, err := ingressQdisc(b.h, veth)
	if err != nil {
		return err
	}
	if cur != nil && cur.Type() == "ingress" {
		if err := b.h.QdiscDel(cur); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete ingress qdisc on %s: %w", name, err)
		}
		b.changed("ingress qdisc on %s removed", name)
	}
	removed, err := deletePodIFB(b.h, name)
	if err != nil {
		return err
	}
	if removed {
		b.changed("ifb %s of %s removed", IFBName(name), name)
	}
	return nil
}

// deletePodIFB removes hostVeth's ifb if it is there and names hostVeth; an
// ifb of that name that names another veth is that pod's and stays.
func deletePodIFB(h netlinksafe.Handle, hostVeth string) (removed bool, err error) {
	name := IFBName(hostVeth)
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" || l.Attrs().Alias != hostVeth {
		return false, nil
	}
	if err := h.LinkDel(l); err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("delete ifb %s of %s: %w", name, hostVeth, err)
	}
	return true, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return err != nil && (errors.As(err, &nf) || errors.Is(err, unix.ENODEV))
}

// ReadBandwidth returns the limits the kernel has on a pod's veth, for
// `reef ipam show` and tests: a root tbf on the veth, and the root tbf of
// the ifb its ingress redirects to. It is best effort: the bw SetBandwidth
// would have been given, with bursts as the kernel holds them (a burst cut
// to what tbf holds reads back cut, bits below a byte are lost).
func ReadBandwidth(hostVeth string) (Bandwidth, error) {
	var bw Bandwidth
	if !isOurs(hostVeth) {
		return bw, fmt.Errorf("refusing to read %q: not a reef link", hostVeth)
	}
	h, err := netlinksafe.NewHandle()
	if err != nil {
		return bw, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	veth, err := h.LinkByName(hostVeth)
	if err != nil {
		return bw, fmt.Errorf("find veth %s: %w", hostVeth, err)
	}
	tick := netlink.TickInUsec()
	root, err := rootQdisc(h, veth)
	if err != nil {
		return bw, err
	}
	if t, ok := root.(*netlink.Tbf); ok {
		bw.IngressRate, bw.IngressBurst = tbfBandwidth(tbfOf(t), tick)
	}
	ing, err := ingressQdisc(h, veth)
	if err != nil || ing == nil || ing.Type() != "ingress" {
		return bw, err
	}
	fs, err := h.FilterList(veth, ingressParent)
	if err != nil {
		return bw, fmt.Errorf("list filters on ingress of %s: %w", hostVeth, err)
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || len(u.Actions) != 1 || !isRedirect(f, redirectTarget(u)) {
			continue
		}
		ifb, err := h.LinkByIndex(redirectTarget(u))
		if err != nil {
			continue // the ifb is gone: nothing limits the pod
		}
		root, err := rootQdisc(h, ifb)
		if err != nil {
			return bw, err
		}
		if t, ok := root.(*netlink.Tbf); ok {
			bw.EgressRate, bw.EgressBurst = tbfBandwidth(tbfOf(t), tick)
		}
		break
	}
	return bw, nil
}

func redirectTarget(u *netlink.U32) int {
	if m, ok := u.Actions[0].(*netlink.MirredAction); ok {
		return m.Ifindex
	}
	return 0
}

// OrphanIFBs lists reef's ifb devices (type ifb, name prefix IFBPrefix)
// whose alias is not in live, the node-side veths that should have an
// egress limit, or whose name is not that veth's IFBName; sorted.
func OrphanIFBs(live map[string]bool) ([]string, error) {
	h, err := netlinksafe.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		if l.Type() != "ifb" || !strings.HasPrefix(a.Name, IFBPrefix) {
			continue
		}
		if !live[a.Alias] || IFBName(a.Alias) != a.Name {
			out = append(out, a.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteIFB removes one of reef's ifb devices. Absent is success; a name
// without IFBPrefix, or a link of that name that is not an ifb (a pod's
// veth may be named reefb...), is refused.
func DeleteIFB(name string) error {
	if !strings.HasPrefix(name, IFBPrefix) || len(name) == len(IFBPrefix) {
		return fmt.Errorf("refusing to delete %q: not a reef ifb", name)
	}
	h, err := netlinksafe.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" {
		return fmt.Errorf("refusing to delete %s: a %s, not an ifb", name, l.Type())
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete ifb %s: %w", name, err)
	}
	return nil
}
