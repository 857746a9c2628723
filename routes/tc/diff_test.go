package tc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// Diff without a kernel: States written by hand, the plan rendered as one
// line per step (its op, its link, its change line).
func TestDiff(t *testing.T) {
	const veth, mtu = "reef5d1e08b2c4a", 1400
	ifb := IFBName(veth)
	tbf := func(rate, burst uint64) tbfParams {
		p, err := tbfFor(rate, burst, tick)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	root := func(rate, burst uint64) Qdisc {
		return Qdisc{Kind: "tbf", Handle: 0x10000, Tbf: tbf(rate, burst)}
	}
	redirect := func(target int) Filter {
		return Filter{Kind: "u32", Priority: 1, Protocol: unix.ETH_P_ALL, Redirect: true, Target: target, Actions: []string{fmt.Sprint("redirect to ifindex ", target)}}
	}
	both := Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 20e6, EgressBurst: 160e3}
	// inLine is the kernel as it is after SetBandwidth(both).
	inLine := func() State {
		return State{Veth: veth, Index: 5, MTU: mtu, Tick: tick, Root: root(10e6, 80e3), Ingress: "ingress",
			Filters: []Filter{redirect(9)},
			IFB:     &IFB{Name: ifb, Type: "ifb", Alias: veth, Index: 9, MTU: mtu, Up: true, Root: root(20e6, 160e3)}}
	}
	with := func(f func(*State)) State { s := inLine(); f(&s); return s }
	bare := State{Veth: veth, Index: 5, MTU: mtu, Tick: tick}

	for _, c := range []struct {
		name    string
		bw      Bandwidth
		have    State
		want    []string
		refused string // a word the refusal has
	}{
		{"nothing to limits both ways", both, bare, []string{
			"create-ifb " + ifb + " | ifb " + ifb + " for " + veth + " created",
			"set-tbf " + ifb + " old=none | tbf on " + ifb + ": rate 20Mbit burst 160kbit limit 82500b, was none",
			"add-ingress " + veth + " | ingress qdisc on " + veth + " added",
			"set-redirect " + veth + " del=0 | redirect " + veth + " -> " + ifb + ", was none",
			"set-tbf " + veth + " old=none | tbf on " + veth + ": rate 10Mbit burst 80kbit limit 41250b, was none",
		}, ""},
		{"limits in line", both, inLine(), nil, ""},
		{"no limits, none there", Bandwidth{}, bare, nil, ""},
		{"ingress rate changed", Bandwidth{IngressRate: 20e6, IngressBurst: 80e3, EgressRate: 20e6, EgressBurst: 160e3}, inLine(), []string{
			"set-tbf " + veth + " old=tbf | tbf on " + veth + ": rate 20Mbit burst 80kbit limit 72500b, was rate 10Mbit burst 80kbit limit 41250b",
		}, ""},
		{"egress burst changed", Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 20e6, EgressBurst: 320e3}, inLine(), []string{
			"set-tbf " + ifb + " old=tbf | tbf on " + ifb + ": rate 20Mbit burst 320kbit limit 102500b, was rate 20Mbit burst 160kbit limit 82500b",
		}, ""},
		{"egress limit removed", Bandwidth{IngressRate: 10e6, IngressBurst: 80e3}, inLine(), []string{
			"delete-ingress " + veth + " | ingress qdisc on " + veth + " removed",
			"delete-ifb " + ifb + " | ifb " + ifb + " of " + veth + " removed",
		}, ""},
		{"ingress limit removed", Bandwidth{EgressRate: 20e6, EgressBurst: 160e3}, inLine(), []string{
			"delete-tbf " + veth + " old=tbf | tbf on " + veth + " removed, was rate 10Mbit burst 80kbit limit 41250b",
		}, ""},
		{"all removed", Bandwidth{}, inLine(), []string{
			"delete-ingress " + veth + " | ingress qdisc on " + veth + " removed",
			"delete-ifb " + ifb + " | ifb " + ifb + " of " + veth + " removed",
			"delete-tbf " + veth + " old=tbf | tbf on " + veth + " removed, was rate 10Mbit burst 80kbit limit 41250b",
		}, ""},
		{"foreign root qdisc, limit wanted", both, with(func(s *State) { s.Root = Qdisc{Kind: "htb", Handle: 0x10000} }), []string{
			"set-tbf " + veth + " old=htb | tbf on " + veth + ": rate 10Mbit burst 80kbit limit 41250b, was htb",
		}, ""},
		{"foreign root qdisc, no limit wanted", Bandwidth{}, with(func(s *State) {
			s.Root = Qdisc{Kind: "htb", Handle: 0x10000}
			s.Ingress, s.Filters, s.IFB = "", nil, nil
		}), nil, ""},
		{"tbf with a peakrate", both, with(func(s *State) { s.Root.Peakrate = 1e6 }), []string{
			"set-tbf " + veth + " old=tbf | tbf on " + veth + ": rate 10Mbit burst 80kbit limit 41250b, was rate 10Mbit burst 80kbit limit 41250b peakrate 8Mbit",
		}, ""},
		// The kernel drops a deleted device from the mirred action.
		{"ifb missing, redirect there", both, with(func(s *State) { s.IFB, s.Filters = nil, []Filter{redirect(0)} }), []string{
			"create-ifb " + ifb + " | ifb " + ifb + " for " + veth + " created",
			"set-tbf " + ifb + " old=none | tbf on " + ifb + ": rate 20Mbit burst 160kbit limit 82500b, was none",
			"set-redirect " + veth + " del=1 | redirect " + veth + " -> " + ifb + ", was u32 redirect to ifindex 0",
		}, ""},
		{"redirect to another device, and a second filter", both, with(func(s *State) {
			s.Filters = []Filter{redirect(7), {Kind: "basic", Priority: 2, Protocol: unix.ETH_P_IP}}
		}), []string{
			"set-redirect " + veth + " del=2 | redirect " + veth + " -> " + ifb + ", was u32 redirect to ifindex 7, basic",
		}, ""},
		{"ingress qdisc missing", both, with(func(s *State) { s.Ingress, s.Filters = "", nil }), []string{
			"add-ingress " + veth + " | ingress qdisc on " + veth + " added",
			"set-redirect " + veth + " del=0 | redirect " + veth + " -> " + ifb + ", was none",
		}, ""},
		{"ifb unclaimed, down, other MTU", both, with(func(s *State) { s.IFB.Alias, s.IFB.Up, s.IFB.MTU = "", false, 1500 }), []string{
			"set-ifb-alias " + ifb + " | ifb " + ifb + ": alias " + veth + ", was none",
			"set-ifb-mtu " + ifb + " | ifb " + ifb + ": mtu 1400, was 1500",
			"set-ifb-up " + ifb + " | ifb " + ifb + " set up",
		}, ""},
		{"another pod's ifb", both, with(func(s *State) { s.IFB.Alias = "reef00000000b01" }), nil, "belongs to veth reef00000000b01"},
		{"another pod's ifb, no egress limit", Bandwidth{}, with(func(s *State) { s.IFB.Alias = "reef00000000b01"; s.Ingress, s.Filters = "", nil }), []string{
			"delete-tbf " + veth + " old=tbf | tbf on " + veth + " removed, was rate 10Mbit burst 80kbit limit 41250b",
		}, ""},
		{"a link of the ifb's name not an ifb", both, with(func(s *State) { s.IFB.Type = "veth" }), nil, "is a veth, not the ifb"},
		{"clsact on the veth", both, with(func(s *State) { s.Ingress, s.Filters = "clsact", nil }), nil, "clsact"},
		{"clsact on the veth, no egress limit", Bandwidth{}, with(func(s *State) {
			s.Ingress, s.Filters, s.IFB, s.Root = "clsact", nil, nil, Qdisc{}
		}), nil, ""},
	} {
		want, err := Desired(c.bw, c.have.MTU, c.have.Tick)
		if err != nil {
			t.Fatalf("%s: Desired: %v", c.name, err)
		}
		p := Diff(want, c.have)
		if diff := cmp.Diff(c.want, renderPlan(p)); diff != "" {
			t.Errorf("%s: plan (-want +got):\n%s", c.name, diff)
		}
		switch {
		case c.refused == "" && p.Refused != nil:
			t.Errorf("%s: refused: %v", c.name, p.Refused)
		case c.refused != "" && (p.Refused == nil || !strings.Contains(p.Refused.Error(), c.refused)):
			t.Errorf("%s: refusal %v, want one with %q", c.name, p.Refused, c.refused)
		}
		if p.Refused != nil {
			// A refused plan writes nothing: Apply needs no kernel.
			if changes, err := Apply(netlinksafe.Handle{}, p); err != p.Refused || changes != nil {
				t.Errorf("%s: Apply of a refused plan = %q, %v", c.name, changes, err)
			}
		}
	}
}

func TestDesired(t *testing.T) {
	w, err := Desired(Bandwidth{EgressRate: 10e6, EgressBurst: 80e3}, 1500, tick)
	if err != nil || w.Ingress != nil || w.Egress == nil || *w.Egress != (tbfParams{Rate: 1_250_000, Buffer: 125_000, Limit: 41_250}) || w.MTU != 1500 {
		t.Errorf("Desired(egress 10Mbit) = %+v, %v", w, err)
	}
	// 1000 B of burst: less than one frame of MTU 1400.
	if _, err := Desired(Bandwidth{IngressRate: 10e6, IngressBurst: 8000}, 1400, tick); err == nil || !strings.Contains(err.Error(), "ingress") {
		t.Errorf("Desired(burst below a frame) = %v, want a refusal", err)
	}
}

func renderPlan(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		line := s.Op.String() + " " + s.Dev
		switch s.Op {
		case OpSetTbf, OpDeleteTbf:
			line += " old=" + s.Old.describeKind()
		case OpSetRedirect:
			line += fmt.Sprint(" del=", len(s.Filters))
		}
		out = append(out, line+" | "+s.Change)
	}
	return out
}

func (q Qdisc) describeKind() string {
	if q.Kind == "" {
		return "none"
	}
	return q.Kind
}
