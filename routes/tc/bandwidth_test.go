package tc

import (
	"fmt"
	"math"
	"net"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
)

// tick is the packet scheduler's clock of every current kernel
// (/proc/net/psched "000003e8 00000040 ...": 1000/64 ticks per µs).
const tick = 15.625

func TestIFBName(t *testing.T) {
	veth := "reef3f2a9c01d7e" // as routes.HostVethName names a pod's
	for _, c := range []struct{ veth, want string }{
		{veth, "reefb" + veth[4:14]},
		{"reef0123456789a", "reefb0123456789"},
		{"reefb123456789a", "reefbb123456789"}, // a veth may itself start reefb
		{"reefkeep1", "reefbkeep1"},
	} {
		got := IFBName(c.veth)
		if got != c.want {
			t.Errorf("IFBName(%q) = %q, want %q", c.veth, got, c.want)
		}
		if len(got) > unix.IFNAMSIZ-1 {
			t.Errorf("IFBName(%q) = %q: %d characters, more than IFNAMSIZ-1", c.veth, got, len(got))
		}
	}
	if len(IFBName(veth)) != 15 {
		t.Errorf("IFBName(%q) = %q, want 15 characters", veth, IFBName(veth))
	}
}

func TestTbfFor(t *testing.T) {
	for _, c := range []struct {
		name              string
		rateBits, burstBt uint64
		want              tbfParams
	}{
		// 10 kB at 1.25 MB/s is 8 ms = 125000 ticks; the queue is 25 ms of
		// the rate (31250 B) plus the burst.
		{"10Mbit burst 80kbit", 10e6, 80e3, tbfParams{Rate: 1_250_000, Buffer: 125_000, Limit: 41_250}},
		// Bits below a byte are dropped, as by the reference plugin.
		{"odd bits", 10e6 + 7, 80e3 + 7, tbfParams{Rate: 1_250_000, Buffer: 125_000, Limit: 41_250}},
		// 125 kB at 12.5 GB/s is 10 µs = 156.25 ticks, rounded up so the
		// bucket holds the whole burst; the rate needs TCA_TBF_RATE64.
		{"100Gbit rate64", 100e9, 1e6, tbfParams{Rate: 12_500_000_000, Buffer: 157, Limit: 312_625_000}},
		// containerd's "no burst" (math.MaxUint32 bits, 512 MiB) at 10
		// Mbit/s takes 429 s to send: the buffer is cut to what 32 bits of
		// ticks hold (274.9 s, 343597383 B at the rate), and the limit
		// counts what the bucket holds.
		{"burst clamped", 10e6, math.MaxUint32, tbfParams{Rate: 1_250_000, Buffer: math.MaxUint32, Limit: 31_250 + 343_597_383}},
		// 1 Tbit/s: 25 ms alone is 3.1 GB; with a 4 GB burst the limit is
		// cut to its 32 bits.
		{"limit clamped", 1e12, 8 * math.MaxUint32, tbfParams{Rate: 125e9, Buffer: 536871, Limit: math.MaxUint32}},
	} {
		got, err := tbfFor(c.rateBits, c.burstBt, tick)
		if err != nil {
			t.Errorf("%s: tbfFor(%d, %d) error %v", c.name, c.rateBits, c.burstBt, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: tbfFor(%d, %d) = %+v, want %+v", c.name, c.rateBits, c.burstBt, got, c.want)
		}
	}
	for _, c := range []struct {
		rate, burst uint64
		tick        float64
		want        string
	}{
		{7, 80e3, tick, "less than one byte per second"},
		{10e6, 7, tick, "less than one byte"},
		{10e6, 80e3, 0, "clock"},
	} {
		if _, err := tbfFor(c.rate, c.burst, c.tick); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tbfFor(%d, %d, tick %v) = %v, want an error with %q", c.rate, c.burst, c.tick, err, c.want)
		}
	}
}

// What the kernel holds reads back as what SetBandwidth was given, and a
// tbf reef did not write reads back as the burst its bucket holds.
func TestTbfBandwidth(t *testing.T) {
	for _, c := range []struct{ rate, burst uint64 }{
		{10e6, 80e3}, {1e6, 12_000}, {100e9, 1e6}, {123_456_784, 987_648}, {8000, 12_000},
	} {
		p, err := tbfFor(c.rate, c.burst, tick)
		if err != nil {
			t.Fatal(err)
		}
		if r, b := tbfBandwidth(p, tick); r != c.rate || b != c.burst {
			t.Errorf("tbfBandwidth(tbfFor(%d, %d)) = %d, %d, want them back", c.rate, c.burst, r, b)
		}
	}
	// Cut: the bucket's bytes.
	p, _ := tbfFor(10e6, math.MaxUint32, tick)
	if r, b := tbfBandwidth(p, tick); r != 10e6 || b != 8*343_597_383 {
		t.Errorf("tbfBandwidth of a cut burst = %d, %d, want 10000000, %d", r, b, 8*343_597_383)
	}
	// Someone else's: 1 Mbit/s, buffer 8 ms (1000 B), limit 3000 B.
	if r, b := tbfBandwidth(tbfParams{Rate: 125_000, Buffer: 125_000, Limit: 3000}, tick); r != 1e6 || b != 8000 {
		t.Errorf("tbfBandwidth of a foreign tbf = %d, %d, want 1000000, 8000", r, b)
	}
}

func TestLimitFor(t *testing.T) {
	if p, err := limitFor("ingress", 0, 1234, 1500, tick); p != nil || err != nil {
		t.Errorf("limitFor(rate 0) = %v, %v, want no limit", p, err)
	}
	// One full frame of MTU 1400 is 1414 bytes.
	if p, err := limitFor("egress", 10e6, 8*1414, 1400, tick); err != nil || p == nil {
		t.Errorf("limitFor(burst of one frame) = %v, %v, want a limit", p, err)
	}
	_, err := limitFor("egress", 10e6, 8*1413, 1400, tick)
	if err == nil || !strings.Contains(err.Error(), "egress") || !strings.Contains(err.Error(), "MTU 1400") {
		t.Errorf("limitFor(burst below one frame) = %v, want a refusal naming the direction and the MTU", err)
	}
	if _, err := limitFor("ingress", 10e6, 0, 1400, tick); err == nil || !strings.Contains(err.Error(), "ingress") {
		t.Errorf("limitFor(rate without burst) = %v, want an error", err)
	}
}

func TestBitString(t *testing.T) {
	for v, want := range map[uint64]string{0: "0bit", 1500: "1.5kbit", 80e3: "80kbit", 10e6: "10Mbit", 1_500_000_000: "1.5Gbit", 2e12: "2Tbit", 999: "999bit"} {
		if got := bitString(v); got != want {
			t.Errorf("bitString(%d) = %q, want %q", v, got, want)
		}
	}
}

// Kernel tests.

// newPodVeth makes a node and a pod namespace joined by a veth pair:
// hostVeth in the node, eth0 in the pod, both up, with the given MTU.
func newPodVeth(t *testing.T, hostVeth string, mtu int) (node ns.NetNS, nodeH netlinksafe.Handle, pod ns.NetNS) {
	t.Helper()
	node, pod = netnstest.New(t), netnstest.New(t)
	netnstest.Run(t, node, "ip", "link", "add", hostVeth, "mtu", fmt.Sprint(mtu), "type", "veth", "peer", "name", "eth0", "netns", pod.Path())
	netnstest.Run(t, node, "ip", "link", "set", hostVeth, "up")
	netnstest.Run(t, pod, "ip", "link", "set", "eth0", "up")
	return node, netnsHandle(t, node.Path()), pod
}

// tcState renders the tc setup of veth and its ifb as sorted lines.
func tcState(t *testing.T, h netlinksafe.Handle, veth string) []string {
	t.Helper()
	var out []string
	root := func(l netlink.Link) string {
		q, err := rootQdisc(h, l)
		if err != nil {
			t.Fatal(err)
		}
		if tb, ok := q.(*netlink.Tbf); ok {
			return fmt.Sprintf("tbf %s rate=%d buffer=%d limit=%d peakrate=%d", netlink.HandleStr(tb.Handle), tb.Rate, tb.Buffer, tb.Limit, tb.Peakrate)
		}
		if q == nil {
			return "default"
		}
		return q.Type()
	}
	l, err := h.LinkByName(veth)
	if err != nil {
		t.Fatalf("find %s: %v", veth, err)
	}
	out = append(out, veth+" root: "+root(l))
	ing, err := ingressQdisc(h, l)
	if err != nil {
		t.Fatal(err)
	}
	if ing != nil {
		out = append(out, fmt.Sprintf("%s ingress: %s %s", veth, ing.Type(), netlink.HandleStr(ing.Attrs().Handle)))
		fs, err := h.FilterList(l, ingressParent)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			d := fmt.Sprintf("%s filter: %s prio %d proto %#x", veth, f.Type(), f.Attrs().Priority, f.Attrs().Protocol)
			if u, ok := f.(*netlink.U32); ok {
				target := redirectTarget(u)
				tl, err := h.LinkByIndex(target)
				name := fmt.Sprint("ifindex ", target)
				if err == nil {
					name = tl.Attrs().Name
				}
				d += fmt.Sprintf(" match-all=%v redirect -> %s", isRedirect(u, target), name)
			}
			out = append(out, d)
		}
	}
	ls, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		a := l.Attrs()
		if l.Type() != "ifb" {
			continue
		}
		out = append(out, fmt.Sprintf("ifb %s: alias=%s mtu=%d up=%v", a.Name, a.Alias, a.MTU, a.Flags&net.FlagUp != 0))
		out = append(out, fmt.Sprintf("ifb %s root: %s", a.Name, root(l)))
	}
	sort.Strings(out)
	return out
}

func setBandwidthIn(t *testing.T, node ns.NetNS, veth string, bw Bandwidth) ([]string, error) {
	t.Helper()
	var changes []string
	err := in(t, node, func() (err error) { changes, err = SetBandwidth(veth, bw); return err })
	return changes, err
}

func mustSet(t *testing.T, node ns.NetNS, veth string, bw Bandwidth) []string {
	t.Helper()
	changes, err := setBandwidthIn(t, node, veth, bw)
	if err != nil {
		t.Fatalf("SetBandwidth(%s, %+v): %v (changes %q)", veth, bw, err, changes)
	}
	return changes
}

func readBandwidthIn(t *testing.T, node ns.NetNS, veth string) Bandwidth {
	t.Helper()
	var bw Bandwidth
	if err := in(t, node, func() (err error) { bw, err = ReadBandwidth(veth); return err }); err != nil {
		t.Fatalf("ReadBandwidth(%s): %v", veth, err)
	}
	return bw
}

// tcShow runs tc in the node namespace, if the machine has tc; "" if not.
func tcShow(t *testing.T, node ns.NetNS, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("tc"); err != nil {
		return ""
	}
	return netnstest.Run(t, node, append([]string{"tc"}, args...)...)
}

func TestSetBandwidth(t *testing.T) {
	requireRoot(t)
	veth := "reef5d1e08b2c4a"
	ifb := IFBName(veth)
	node, nodeH, _ := newPodVeth(t, veth, 1400)
	// 8 ms of burst at either rate, in the kernel's ticks.
	buf := uint32(8000 * netlink.TickInUsec())

	bw := Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 20e6, EgressBurst: 160e3}
	changes := mustSet(t, node, veth, bw)
	wantChanges := []string{
		"ifb " + ifb + " for " + veth + " created",
		"tbf on " + ifb + ": rate 20Mbit burst 160kbit limit 82500b, was none",
		"ingress qdisc on " + veth + " added",
		"redirect " + veth + " -> " + ifb + ", was none",
		"tbf on " + veth + ": rate 10Mbit burst 80kbit limit 41250b, was none",
	}
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("first SetBandwidth changes (-want +got):\n%s", diff)
	}
	want := []string{
		"ifb " + ifb + " root: tbf 1:0 rate=2500000 buffer=" + fmt.Sprint(buf) + " limit=82500 peakrate=0",
		"ifb " + ifb + ": alias=" + veth + " mtu=1400 up=true",
		veth + " filter: u32 prio 1 proto 0x3 match-all=true redirect -> " + ifb,
		veth + " ingress: ingress ffff:0",
		veth + " root: tbf 1:0 rate=1250000 buffer=" + fmt.Sprint(buf) + " limit=41250 peakrate=0",
	}
	if diff := cmp.Diff(want, tcState(t, nodeH, veth)); diff != "" {
		t.Fatalf("kernel after SetBandwidth (-want +got):\n%s", diff)
	}
	if got := readBandwidthIn(t, node, veth); got != bw {
		t.Errorf("ReadBandwidth = %+v, want %+v", got, bw)
	}
	// What iproute2 sees, if it is there: 10 kB of burst, 25 ms of queue.
	if out := tcShow(t, node, "-s", "qdisc", "show", "dev", veth); out != "" {
		for _, re := range []string{
			`qdisc tbf 1: root refcnt \d+ rate 10Mbit burst 10000b lat 25(\.0)?ms`,
			`qdisc ingress ffff: parent ffff:fff1`,
			`Sent \d+ bytes`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("tc -s qdisc show dev %s does not match %q:\n%s", veth, re, out)
			}
		}
		out = tcShow(t, node, "-s", "qdisc", "show", "dev", ifb)
		if re := `qdisc tbf 1: root refcnt \d+ rate 20Mbit burst 20000b lat 25(\.0)?ms`; !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("tc -s qdisc show dev %s does not match %q:\n%s", ifb, re, out)
		}
		out = tcShow(t, node, "filter", "show", "dev", veth, "ingress")
		if re := `mirred \(Egress Redirect to device ` + ifb + `\) stolen`; !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("tc filter show dev %s ingress does not match %q:\n%s", veth, re, out)
		}
	} else {
		t.Log("tc (iproute2) not installed: checked through netlink only")
	}

	// Idempotent.
	if changes := mustSet(t, node, veth, bw); len(changes) != 0 {
		t.Errorf("second SetBandwidth changed %q, want nothing", changes)
	}

	// A new rate changes that tbf only, in place.
	ifbLink, _ := nodeH.LinkByName(ifb)
	bw.IngressRate = 20e6
	changes = mustSet(t, node, veth, bw)
	if diff := cmp.Diff([]string{"tbf on " + veth + ": rate 20Mbit burst 80kbit limit 72500b, was rate 10Mbit burst 80kbit limit 41250b"}, changes); diff != "" {
		t.Errorf("changes for a new ingress rate (-want +got):\n%s", diff)
	}
	want[4] = veth + " root: tbf 1:0 rate=2500000 buffer=" + fmt.Sprint(buf/2) + " limit=72500 peakrate=0"
	if diff := cmp.Diff(want, tcState(t, nodeH, veth)); diff != "" {
		t.Errorf("kernel after a new ingress rate (-want +got):\n%s", diff)
	}
	if l, err := nodeH.LinkByName(ifb); err != nil || l.Attrs().Index != ifbLink.Attrs().Index {
		t.Errorf("ifb %s after a new ingress rate: %v, %v; want it untouched", ifb, l, err)
	}
	bw.EgressRate = 40e6
	changes = mustSet(t, node, veth, bw)
	if diff := cmp.Diff([]string{"tbf on " + ifb + ": rate 40Mbit burst 160kbit limit 145000b, was rate 20Mbit burst 160kbit limit 82500b"}, changes); diff != "" {
		t.Errorf("changes for a new egress rate (-want +got):\n%s", diff)
	}
	want[0] = "ifb " + ifb + " root: tbf 1:0 rate=5000000 buffer=" + fmt.Sprint(buf/2) + " limit=145000 peakrate=0"
	if diff := cmp.Diff(want, tcState(t, nodeH, veth)); diff != "" {
		t.Errorf("kernel after a new egress rate (-want +got):\n%s", diff)
	}
	if got := readBandwidthIn(t, node, veth); got != bw {
		t.Errorf("ReadBandwidth = %+v, want %+v", got, bw)
	}

	// Repairs, each named.
	for _, c := range []struct {
		name   string
		damage func()
		want   []string
	}{
		{"ifb deleted", func() { netnstest.Run(t, node, "ip", "link", "del", ifb) }, []string{
			"ifb " + ifb + " for " + veth + " created",
			"tbf on " + ifb + ": rate 40Mbit burst 160kbit limit 145000b, was none",
			// The kernel dropped the dead device from the action.
			"redirect " + veth + " -> " + ifb + ", was u32 redirect to ifindex 0",
		}},
		{"root qdisc deleted", func() {
			l, _ := nodeH.LinkByName(veth)
			q, _ := rootQdisc(nodeH, l)
			if err := nodeH.QdiscDel(q); err != nil {
				t.Fatal(err)
			}
		}, []string{"tbf on " + veth + ": rate 20Mbit burst 80kbit limit 72500b, was none"}},
		{"root qdisc of another kind", func() {
			l, _ := nodeH.LinkByName(veth)
			q, _ := rootQdisc(nodeH, l)
			if err := nodeH.QdiscDel(q); err != nil {
				t.Fatal(err)
			}
			htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
			if err := nodeH.QdiscAdd(htb); err != nil {
				t.Fatal(err)
			}
		}, []string{"tbf on " + veth + ": rate 20Mbit burst 80kbit limit 72500b, was htb"}},
		{"ingress qdisc deleted", func() {
			l, _ := nodeH.LinkByName(veth)
			q, _ := ingressQdisc(nodeH, l)
			if err := nodeH.QdiscDel(q); err != nil {
				t.Fatal(err)
			}
		}, []string{"ingress qdisc on " + veth + " added", "redirect " + veth + " -> " + ifb + ", was none"}},
		{"ifb changed", func() {
			netnstest.Run(t, node, "ip", "link", "set", ifb, "down", "mtu", "1500", "alias", "")
		}, []string{"ifb " + ifb + ": alias " + veth + ", was none", "ifb " + ifb + ": mtu 1400, was 1500", "ifb " + ifb + " set up"}},
		{"veth MTU changed", func() { netnstest.Run(t, node, "ip", "link", "set", veth, "mtu", "1300") }, []string{"ifb " + ifb + ": mtu 1300, was 1400"}},
	} {
		c.damage()
		changes := mustSet(t, node, veth, bw)
		if diff := cmp.Diff(c.want, changes); diff != "" {
			t.Errorf("%s: repair (-want +got):\n%s", c.name, diff)
		}
		if c.name == "veth MTU changed" {
			want[1] = "ifb " + ifb + ": alias=" + veth + " mtu=1300 up=true"
		}
		if diff := cmp.Diff(want, tcState(t, nodeH, veth)); diff != "" {
			t.Errorf("%s: kernel after repair (-want +got):\n%s", c.name, diff)
		}
		if changes := mustSet(t, node, veth, bw); len(changes) != 0 {
			t.Errorf("%s: SetBandwidth after repair changed %q, want nothing", c.name, changes)
		}
	}

	// Refusals, before any change.
	if _, err := setBandwidthIn(t, node, "lo", bw); err == nil || !strings.Contains(err.Error(), "not a reef link") {
		t.Errorf("SetBandwidth(lo) = %v, want a refusal", err)
	}
	small := bw
	small.EgressBurst = 8000 // 1000 B, less than a frame of MTU 1300
	if changes, err := setBandwidthIn(t, node, veth, small); err == nil || len(changes) != 0 {
		t.Errorf("SetBandwidth with a burst below one frame = %q, %v, want a refusal and no change", changes, err)
	}

	// Zero removes everything, once.
	changes = mustSet(t, node, veth, Bandwidth{})
	wantChanges = []string{
		"ingress qdisc on " + veth + " removed",
		"ifb " + ifb + " of " + veth + " removed",
		"tbf on " + veth + " removed, was rate 20Mbit burst 80kbit limit 72500b",
	}
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("SetBandwidth(zero) changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{veth + " root: default"}, tcState(t, nodeH, veth)); diff != "" {
		t.Errorf("kernel after SetBandwidth(zero) (-want +got):\n%s", diff)
	}
	if got := readBandwidthIn(t, node, veth); got != (Bandwidth{}) {
		t.Errorf("ReadBandwidth after zero = %+v, want zero", got)
	}
	if changes := mustSet(t, node, veth, Bandwidth{}); len(changes) != 0 {
		t.Errorf("second SetBandwidth(zero) changed %q", changes)
	}

	// One direction only.
	mustSet(t, node, veth, Bandwidth{EgressRate: 1e6, EgressBurst: 16e3})
	if got := readBandwidthIn(t, node, veth); got != (Bandwidth{EgressRate: 1e6, EgressBurst: 16e3}) {
		t.Errorf("ReadBandwidth of an egress limit = %+v", got)
	}

	// DeletePodIFB (DEL's, with the veth: veth.Teardown) removes the
	// ifb, and may be repeated.
	delIFB := func() error {
		h, err := netlinksafe.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		_, err = DeletePodIFB(h, veth)
		return err
	}
	if err := in(t, node, delIFB); err != nil {
		t.Fatalf("DeletePodIFB: %v", err)
	}
	if _, err := nodeH.LinkByName(ifb); err == nil {
		t.Errorf("ifb %s still exists after DeletePodIFB", ifb)
	}
	if err := in(t, node, delIFB); err != nil {
		t.Errorf("second DeletePodIFB: %v", err)
	}
}

// Another pod's ifb is never taken over, changed or removed, and the GC
// finds reef's ifbs whose veth is gone and nothing else.
func TestIFBOwnership(t *testing.T) {
	requireRoot(t)
	vethA, vethB := "reef00000000a01", "reef00000000b01"
	node, nodeH, pod := newPodVeth(t, vethA, 1500)
	netnstest.Run(t, node, "ip", "link", "add", vethB, "type", "veth", "peer", "name", "eth1", "netns", pod.Path())
	ifbA := IFBName(vethA)
	// An ifb with A's ifb name that says it is B's.
	netnstest.Run(t, node, "ip", "link", "add", ifbA, "type", "ifb")
	netnstest.Run(t, node, "ip", "link", "set", ifbA, "alias", vethB)
	before := tcState(t, nodeH, vethA)

	changes, err := setBandwidthIn(t, node, vethA, Bandwidth{EgressRate: 1e6, EgressBurst: 80e3})
	if err == nil || !strings.Contains(err.Error(), ifbA) || !strings.Contains(err.Error(), vethA) || !strings.Contains(err.Error(), vethB) {
		t.Errorf("SetBandwidth with another pod's ifb = %v, want an error naming %s, %s and %s", err, ifbA, vethA, vethB)
	}
	if len(changes) != 0 {
		t.Errorf("SetBandwidth with another pod's ifb changed %q", changes)
	}
	if diff := cmp.Diff(before, tcState(t, nodeH, vethA)); diff != "" {
		t.Errorf("kernel after the refusal (-before +after):\n%s", diff)
	}
	if changes := mustSet(t, node, vethA, Bandwidth{}); len(changes) != 0 {
		t.Errorf("SetBandwidth(zero) with another pod's ifb changed %q", changes)
	}
	if err := in(t, node, func() error {
		h, err := netlinksafe.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		_, err = DeletePodIFB(h, vethA)
		return err
	}); err != nil {
		t.Fatalf("DeletePodIFB: %v", err)
	}
	if l, err := nodeH.LinkByName(ifbA); err != nil || l.Attrs().Alias != vethB {
		t.Errorf("another pod's ifb after DeletePodIFB of %s: %v, %v; want it untouched", vethA, l, err)
	}
	if err := in(t, node, func() error { _, err := DeleteIFB(ifbA, nil); return err }); err != nil {
		t.Fatal(err)
	}

	// A clsact qdisc on a veth is someone else's (a BPF program's).
	vl, _ := nodeH.LinkByName(vethB)
	clsact := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: vl.Attrs().Index, Handle: ingressParent, Parent: netlink.HANDLE_CLSACT}}
	if err := nodeH.QdiscAdd(clsact); err != nil {
		t.Fatalf("add clsact on %s: %v", vethB, err)
	}
	beforeB := tcState(t, nodeH, vethB)
	changes, err = setBandwidthIn(t, node, vethB, Bandwidth{EgressRate: 1e6, EgressBurst: 80e3})
	if err == nil || !strings.Contains(err.Error(), "clsact") || len(changes) != 0 {
		t.Errorf("SetBandwidth on a veth with clsact = %q, %v, want a refusal naming clsact and no change", changes, err)
	}
	if changes := mustSet(t, node, vethB, Bandwidth{}); len(changes) != 0 {
		t.Errorf("SetBandwidth(zero) on a veth with clsact changed %q", changes)
	}
	if diff := cmp.Diff(beforeB, tcState(t, nodeH, vethB)); diff != "" {
		t.Errorf("kernel after the clsact refusal (-before +after):\n%s", diff)
	}

	// GC: X keeps its limit, Y's veth is gone, a veth named like an ifb and
	// an ifb not named reef's are not reef's ifbs.
	vethX, vethY, lookalike := "reef00000000c01", "reef00000000d01", "reefb0000000001"
	for _, v := range []string{vethX, vethY, lookalike} {
		netnstest.Run(t, node, "ip", "link", "add", v, "type", "veth", "peer", "name", "p"+v[len(v)-6:], "netns", pod.Path())
	}
	netnstest.Run(t, node, "ip", "link", "add", "ifb9", "type", "ifb")
	for _, v := range []string{vethX, vethY} {
		mustSet(t, node, v, Bandwidth{EgressRate: 1e6, EgressBurst: 80e3})
	}
	netnstest.Run(t, node, "ip", "link", "del", vethY)
	orphans := func(live map[string]bool) []string {
		var got []string
		if err := in(t, node, func() (err error) { got, err = OrphanIFBs(live); return err }); err != nil {
			t.Fatalf("OrphanIFBs: %v", err)
		}
		return got
	}
	if diff := cmp.Diff([]string{IFBName(vethY)}, orphans(map[string]bool{vethX: true})); diff != "" {
		t.Errorf("OrphanIFBs(live X) (-want +got):\n%s", diff)
	}
	if got := orphans(map[string]bool{vethX: true, vethY: true}); len(got) != 0 {
		t.Errorf("OrphanIFBs(live X, Y) = %q, want none", got)
	}
	if diff := cmp.Diff([]string{IFBName(vethX), IFBName(vethY)}, orphans(nil)); diff != "" {
		t.Errorf("OrphanIFBs(none live) (-want +got):\n%s", diff)
	}
	// An ifb whose veth a CNI operation is busy with stays.
	busyY := func(veth string) bool { return veth == vethY }
	if err := in(t, node, func() error { _, err := DeleteIFB(IFBName(vethY), busyY); return err }); err != nil {
		t.Fatalf("DeleteIFB of a busy veth's ifb: %v", err)
	}
	if _, err := nodeH.LinkByName(IFBName(vethY)); err != nil {
		t.Errorf("DeleteIFB removed %s, whose veth a CNI operation was busy with: %v", IFBName(vethY), err)
	}
	del := func(name string) error {
		return in(t, node, func() error { _, err := DeleteIFB(name, nil); return err })
	}
	if err := del(IFBName(vethY)); err != nil {
		t.Fatalf("DeleteIFB: %v", err)
	}
	if _, err := nodeH.LinkByName(IFBName(vethY)); err == nil {
		t.Errorf("%s still exists after DeleteIFB", IFBName(vethY))
	}
	if err := del(IFBName(vethY)); err != nil {
		t.Errorf("second DeleteIFB = %v, want nil", err)
	}
	for _, name := range []string{"ifb9", lookalike, "reefb"} {
		if err := del(name); err == nil {
			t.Errorf("DeleteIFB(%s) = nil, want a refusal", name)
		}
	}
	for _, name := range []string{"ifb9", lookalike, IFBName(vethX)} {
		if _, err := nodeH.LinkByName(name); err != nil {
			t.Errorf("%s after the GC: %v", name, err)
		}
	}
}

// TestCheckBandwidth: CheckBandwidth (CNI CHECK) names what differs from
// the pod's limits, a tbf deleted by hand, and writes nothing.
func TestCheckBandwidth(t *testing.T) {
	requireRoot(t)
	veth := "reef5d1e08b2c4c"
	node, nodeH, _ := newPodVeth(t, veth, 1400)
	bw := Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 20e6, EgressBurst: 160e3}
	checkIn := func() []string {
		t.Helper()
		var diffs []string
		if err := in(t, node, func() (err error) { diffs, err = CheckBandwidth(veth, bw); return err }); err != nil {
			t.Fatalf("CheckBandwidth: %v", err)
		}
		return diffs
	}
	mustSet(t, node, veth, bw)
	if got := checkIn(); len(got) != 0 {
		t.Errorf("CheckBandwidth after SetBandwidth: %q, want nothing", got)
	}
	l, err := nodeH.LinkByName(veth)
	if err != nil {
		t.Fatal(err)
	}
	root, err := rootQdisc(nodeH, l)
	if err != nil || root == nil {
		t.Fatalf("root qdisc of %s: %v, %v", veth, root, err)
	}
	if err := nodeH.QdiscDel(root); err != nil {
		t.Fatal(err)
	}
	before := tcState(t, nodeH, veth)
	want := []string{"tbf on " + veth + ": rate 10Mbit burst 80kbit limit 41250b, was none"}
	if diff := cmp.Diff(want, checkIn()); diff != "" {
		t.Errorf("CheckBandwidth without the veth's tbf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, tcState(t, nodeH, veth)); diff != "" {
		t.Errorf("CheckBandwidth changed the kernel (-before +after):\n%s", diff)
	}
}
