// Package tc is a pod's bandwidth limits: tc qdiscs on its node-side veth
// and an ifb device for what the pod sends. Its functions are kernel
// primitives without locks: the owner of the pods' kernel objects
// (routes.Pods) is their one caller, for ADD (SetBandwidth), DEL
// (DeletePodIFB) and the reconcile pass (RepairBandwidth, OrphanIFBs,
// DeleteIFB), and orders them with its own locks.
//
// A pod's limits follow the CNI bandwidth convention (as the reference
// bandwidth plugin): traffic into the pod leaves the node through the
// node-side veth, so a tbf root qdisc there limits it; traffic from the pod
// arrives on that veth, where an ingress qdisc redirects all of it to an
// ifb device whose root tbf limits it before the ifb hands it back to the
// veth's receive path. Everything is written through netlink: no tc binary
// runs.
//
// Like reef's other owners, SetBandwidth reads the kernel (Read: one pod's
// State), computes what the limits need (Desired), diffs the two purely
// (Diff: a Plan of steps, or a refusal) and writes the plan (Apply).
package tc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Bandwidth is a pod's limits: rates in bits per second, bursts in bits; 0 is
// no limit in that direction.
type Bandwidth struct{ IngressRate, IngressBurst, EgressRate, EgressBurst uint64 }

// IFBPrefix starts the name of every ifb device reef creates. It starts with
// linkname.Prefix, so everything that guards reef's links guards these too;
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
	rest := strings.TrimPrefix(hostVeth, linkname.Prefix)
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

func tbfOf(q *netlink.Tbf) tbfParams {
	return tbfParams{Rate: q.Rate, Buffer: q.Buffer, Limit: q.Limit}
}

// MinBurstBits is the smallest burst SetBandwidth takes on a link of MTU
// mtu: one full frame, in bits.
func MinBurstBits(mtu int) uint64 { return uint64(mtu+ethHeader) * 8 }

// SetBandwidth brings the tc setup of a pod's node-side veth, and of its
// ifb, in line with bw, changing only what differs from what the kernel
// has, and says what it changed, one short line per change, for the log:
// it reads the kernel (Read), computes what bw needs (Desired), diffs the
// two (Diff) and writes the plan (Apply).
// A zero bw removes reef's limits: the veth's root tbf, its ingress qdisc
// and the ifb. It may be called again with the same bw (it then changes
// nothing) and repairs what someone removed or changed. It refuses a link
// not named reef*, an ifb of the pod's ifb name whose alias names another
// veth, and a clsact qdisc on the veth (not reef's). Refusals come before
// any change; on a later failure it returns what it did change.
func SetBandwidth(hostVeth string, bw Bandwidth) (changes []string, err error) {
	err = withPlan("touch", hostVeth, bw, func(h netlinksafe.Handle, p Plan) error {
		changes, err = Apply(h, p)
		return err
	})
	return changes, err
}

// withPlan reads hostVeth's tc setup, diffs it against what bw needs and
// hands the plan to do, with the handle it read through. verb is what is
// refused for a link that is not reef's.
func withPlan(verb, hostVeth string, bw Bandwidth, do func(netlinksafe.Handle, Plan) error) error {
	if !linkname.Ours(hostVeth) {
		return fmt.Errorf("refusing to %s %q: not a reef link", verb, hostVeth)
	}
	h, err := nl.NewHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	have, err := Read(h, hostVeth)
	if err != nil {
		return err
	}
	want, err := Desired(bw, have.MTU, have.Tick)
	if err != nil {
		return fmt.Errorf("bandwidth of %s: %w", hostVeth, err)
	}
	return do(h, Diff(want, have))
}

// CheckBandwidth says how the tc setup of a pod's node-side veth differs
// from bw, one line per difference (what SetBandwidth would change, or
// why it would refuse to); none is a setup in line. It only reads.
func CheckBandwidth(hostVeth string, bw Bandwidth) (diffs []string, err error) {
	err = withPlan("read", hostVeth, bw, func(_ netlinksafe.Handle, p Plan) error {
		if p.Refused != nil {
			diffs = []string{p.Refused.Error()}
		} else {
			diffs = p.Changes()
		}
		return nil
	})
	return diffs, err
}

// RepairBandwidth is SetBandwidth for the reconcile pass: a veth that is
// gone (its pod's netns ended, or a DEL removed it since the pass read
// the kernel) is no failure; the links' owner deals with it.
func RepairBandwidth(hostVeth string, bw Bandwidth) (changes []string, err error) {
	changes, err = SetBandwidth(hostVeth, bw)
	if isNotFound(err) && len(changes) == 0 {
		return nil, nil
	}
	return changes, err
}

// ReadBandwidth returns the limits the kernel has on a pod's veth, for
// `reef ipam show` and tests: a root tbf on the veth, and the root tbf of
// the ifb its ingress redirects to. It is best effort: the bw SetBandwidth
// would have been given, with bursts as the kernel holds them (a burst cut
// to what tbf holds reads back cut, bits below a byte are lost).
func ReadBandwidth(hostVeth string) (Bandwidth, error) {
	var bw Bandwidth
	if !linkname.Ours(hostVeth) {
		return bw, fmt.Errorf("refusing to read %q: not a reef link", hostVeth)
	}
	h, err := nl.NewHandle()
	if err != nil {
		return bw, err
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
	h, err := nl.NewHandle()
	if err != nil {
		return nil, err
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

// DeleteIFB removes one of reef's ifb devices, and says whether it did.
// Absent is success; a name without IFBPrefix, or a link of that name that
// is not an ifb (a pod's veth may be named reefb...), is refused. An ifb
// whose veth (its alias) inUse names is left alone: the caller holds the
// ifb's lock and asks whether a CNI operation is busy with the veth. nil
// names none.
func DeleteIFB(name string, inUse func(veth string) bool) (bool, error) {
	if !strings.HasPrefix(name, IFBPrefix) || len(name) == len(IFBPrefix) {
		return false, fmt.Errorf("refusing to delete %q: not a reef ifb", name)
	}
	h, err := nl.NewHandle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" {
		return false, fmt.Errorf("refusing to delete %s: a %s, not an ifb", name, l.Type())
	}
	if veth := l.Attrs().Alias; veth != "" && inUse != nil && inUse(veth) {
		return false, nil
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("delete ifb %s: %w", name, err)
	}
	return true, nil
}
