package tc

import (
	"fmt"
	"strings"
)

// Want is the tc setup a pod's limits need on a veth of MTU MTU: a root
// tbf on the veth for what the pod receives (Ingress), and for what it
// sends (Egress) an ifb with that root tbf, an ingress qdisc on the veth
// and reef's redirect to the ifb. nil is no limit in that direction.
type Want struct {
	MTU             int
	Ingress, Egress *tbfParams
}

// Desired computes the Want of limits bw on a veth of MTU mtu, with tick
// the packet scheduler's ticks per µs (State.Tick). It refuses a limit
// tbf cannot hold (limitFor).
func Desired(bw Bandwidth, mtu int, tick float64) (Want, error) {
	in, err := limitFor("ingress", bw.IngressRate, bw.IngressBurst, mtu, tick)
	if err != nil {
		return Want{}, err
	}
	out, err := limitFor("egress", bw.EgressRate, bw.EgressBurst, mtu, tick)
	if err != nil {
		return Want{}, err
	}
	return Want{MTU: mtu, Ingress: in, Egress: out}, nil
}

// Op is one kind of write of a Plan.
type Op int

const (
	OpCreateIFB     Op = iota // create the ifb, up, with the veth's MTU and name as alias
	OpSetIFBAlias             // claim an ifb nobody claims
	OpSetIFBMTU               // give the ifb the veth's MTU
	OpSetIFBUp                // set the ifb up
	OpSetTbf                  // make Dev's root qdisc the tbf Tbf (Old is what it replaces)
	OpDeleteTbf               // delete Dev's root tbf (Old)
	OpAddIngress              // add the ingress qdisc on the veth
	OpSetRedirect             // delete the filters there (Filters); add reef's redirect to the ifb
	OpDeleteIngress           // delete the ingress qdisc on the veth, and its filters with it
	OpDeleteIFB               // delete the ifb if it is still the veth's
)

var opNames = [...]string{"create-ifb", "set-ifb-alias", "set-ifb-mtu", "set-ifb-up", "set-tbf", "delete-tbf", "add-ingress", "set-redirect", "delete-ingress", "delete-ifb"}

func (o Op) String() string { return opNames[o] }

// Step is one write: what, on which link (the veth's or the ifb's name),
// and the line for the log that says what it changed.
type Step struct {
	Op      Op
	Dev     string
	Tbf     tbfParams // OpSetTbf
	Old     Qdisc     // OpSetTbf, OpDeleteTbf: the root qdisc there now
	Filters []Filter  // OpSetRedirect: the filters there now, deleted first
	Change  string
}

// Plan is what Apply writes to bring one pod's tc setup in line: its
// steps in order, or a refusal (Refused), in which case it writes
// nothing. The egress side comes first so that its refusals (another
// pod's ifb, a clsact qdisc) are found before anything changes, and the
// ifb and its tbf come before the redirect to it, so that no packet is
// redirected to a device not ready.
type Plan struct {
	Veth      string
	VethIndex int
	IFB       string
	IFBIndex  int // 0 if OpCreateIFB makes it
	MTU       int
	Tick      float64 // for the errors' descriptions of a tbf
	Steps     []Step
	Refused   error
}

// Changes are the lines of the plan's steps, for the log.
func (p Plan) Changes() []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Change)
	}
	return out
}

// Diff compares the desired tc setup of a pod with what the kernel has
// (have: what Read reports) and says what to write. A root qdisc not a
// tbf is replaced where a limit is wanted and left alone where none is;
// a clsact qdisc on the veth, and a link of the ifb's name that is not an
// ifb or names another veth, are refused where an egress limit is wanted
// and left alone where none is.
func Diff(want Want, have State) Plan {
	p := Plan{Veth: have.Veth, VethIndex: have.Index, IFB: IFBName(have.Veth), MTU: want.MTU, Tick: have.Tick}
	var err error
	if want.Egress != nil {
		err = p.egress(*want.Egress, have)
	} else {
		p.clearEgress(have)
	}
	if err != nil {
		return Plan{Veth: p.Veth, VethIndex: p.VethIndex, IFB: p.IFB, MTU: p.MTU, Tick: p.Tick, Refused: err}
	}
	p.rootTbf(p.Veth, have.Root, want.Ingress, have.Tick)
	return p
}

func (p *Plan) add(s Step, format string, a ...any) {
	s.Change = fmt.Sprintf(format, a...)
	p.Steps = append(p.Steps, s)
}

func (p *Plan) egress(want tbfParams, have State) error {
	veth, ifb := p.Veth, p.IFB
	if have.Ingress != "" && have.Ingress != "ingress" {
		return fmt.Errorf("veth %s has a %s qdisc at ingress, not reef's: refusing to replace it", veth, have.Ingress)
	}
	var root Qdisc
	if l := have.IFB; l == nil {
		p.add(Step{Op: OpCreateIFB, Dev: ifb}, "ifb %s for %s created", ifb, veth)
	} else {
		if l.Type != "ifb" {
			return fmt.Errorf("link %s is a %s, not the ifb of %s: refusing to use it", ifb, l.Type, veth)
		}
		switch l.Alias {
		case veth:
		case "":
			// Nobody claims it. The kernel takes no alias when it
			// creates a link, so this is also what a SetBandwidth
			// stopped right after the creation leaves.
			p.add(Step{Op: OpSetIFBAlias, Dev: ifb}, "ifb %s: alias %s, was none", ifb, veth)
		default:
			return fmt.Errorf("ifb %s belongs to veth %s, not %s: refusing to take it over", ifb, l.Alias, veth)
		}
		if l.MTU != p.MTU {
			p.add(Step{Op: OpSetIFBMTU, Dev: ifb}, "ifb %s: mtu %d, was %d", ifb, p.MTU, l.MTU)
		}
		if !l.Up {
			p.add(Step{Op: OpSetIFBUp, Dev: ifb}, "ifb %s set up", ifb)
		}
		p.IFBIndex, root = l.Index, l.Root
	}
	p.rootTbf(ifb, root, &want, have.Tick)
	if have.Ingress == "" {
		p.add(Step{Op: OpAddIngress, Dev: veth}, "ingress qdisc on %s added", veth)
	}
	fs := have.Filters
	if p.IFBIndex != 0 && len(fs) == 1 && fs[0].Redirect && fs[0].Target == p.IFBIndex {
		return nil
	}
	p.add(Step{Op: OpSetRedirect, Dev: veth, Filters: fs}, "redirect %s -> %s, was %s", veth, ifb, describeFilters(fs))
	return nil
}

func (p *Plan) clearEgress(have State) {
	if have.Ingress == "ingress" {
		p.add(Step{Op: OpDeleteIngress, Dev: p.Veth}, "ingress qdisc on %s removed", p.Veth)
	}
	if l := have.IFB; l != nil && l.Type == "ifb" && l.Alias == p.Veth {
		p.IFBIndex = l.Index
		p.add(Step{Op: OpDeleteIFB, Dev: p.IFB}, "ifb %s of %s removed", p.IFB, p.Veth)
	}
}

// rootTbf makes dev's root qdisc, now have, the tbf want, or removes a
// root tbf if want is nil.
func (p *Plan) rootTbf(dev string, have Qdisc, want *tbfParams, tick float64) {
	switch {
	case want == nil && have.Kind == "tbf":
		p.add(Step{Op: OpDeleteTbf, Dev: dev, Old: have}, "tbf on %s removed, was %s", dev, have.describe(tick))
	case want == nil:
	case have.Kind == "tbf" && have.Tbf == *want && have.Peakrate == 0:
	default:
		p.add(Step{Op: OpSetTbf, Dev: dev, Tbf: *want, Old: have}, "tbf on %s: %s, was %s", dev, want.describe(tick), have.describe(tick))
	}
}

func describeFilters(fs []Filter) string {
	if len(fs) == 0 {
		return "none"
	}
	var ds []string
	for _, f := range fs {
		ds = append(ds, strings.Join(append([]string{f.Kind}, f.Actions...), " "))
	}
	return strings.Join(ds, ", ")
}
