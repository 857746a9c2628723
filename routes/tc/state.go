package tc

import (
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/vishvananda/netlink"
)

// State is what the kernel has for one pod's limits, as Read reports it:
// the node-side veth, its root qdisc, what sits at its ingress hook and
// the filters there, and the link of the pod's ifb name. Diff compares it
// with a Want; it holds plain values, so a test writes one by hand.
type State struct {
	Veth  string
	Index int     // the veth's ifindex
	MTU   int     // the veth's MTU, which its ifb gets
	Tick  float64 // the packet scheduler's ticks per µs (/proc/net/psched)
	Root  Qdisc   // the veth's root qdisc
	// Ingress is the kind of the qdisc at the veth's ingress hook:
	// "ingress" (reef's), "clsact" (someone else's), "" for none.
	Ingress string
	Filters []Filter // on the ingress qdisc (ffff:), if it is "ingress"
	IFB     *IFB     // the link named IFBName(Veth); nil if there is none
}

// Qdisc is a root qdisc: Kind "" is the kernel's default (handle 0,
// noqueue or pfifo_fast), which is nobody's.
type Qdisc struct {
	Kind     string
	Handle   uint32
	Tbf      tbfParams // Kind "tbf" only
	Peakrate uint64    // bytes per second; reef's tbfs have none
}

// Filter is one entry of a filter list on the veth's ingress. A u32
// filter lists one entry per key node.
type Filter struct {
	Kind               string
	Priority, Protocol uint16
	// Redirect: it is a filter as reef writes it (isRedirect), sending
	// everything to ifindex Target.
	Redirect bool
	Target   int
	Actions  []string // a u32 filter's actions, for a change's "was"
}

// IFB is the link of a pod's ifb name, whatever its type.
type IFB struct {
	Name, Type, Alias string
	Index, MTU        int
	Up                bool
	Root              Qdisc // type "ifb" only
}

// Read reports the tc setup of hostVeth and of its ifb.
func Read(h netlinksafe.Handle, hostVeth string) (State, error) {
	if !linkname.Ours(hostVeth) {
		return State{}, fmt.Errorf("refusing to read %q: not a reef link", hostVeth)
	}
	veth, err := h.LinkByName(hostVeth)
	if err != nil {
		return State{}, fmt.Errorf("find veth %s: %w", hostVeth, err)
	}
	s := State{Veth: hostVeth, Index: veth.Attrs().Index, MTU: veth.Attrs().MTU, Tick: netlink.TickInUsec()}
	root, err := rootQdisc(h, veth)
	if err != nil {
		return State{}, err
	}
	s.Root = qdiscOf(root)
	ing, err := ingressQdisc(h, veth)
	if err != nil {
		return State{}, err
	}
	if ing != nil {
		s.Ingress = ing.Type()
	}
	if s.Ingress == "ingress" {
		fs, err := h.FilterList(veth, ingressParent)
		if err != nil {
			return State{}, fmt.Errorf("list filters on ingress of %s: %w", hostVeth, err)
		}
		for _, f := range fs {
			s.Filters = append(s.Filters, filterOf(f))
		}
	}
	s.IFB, err = readIFB(h, IFBName(hostVeth))
	return s, err
}

func readIFB(h netlinksafe.Handle, name string) (*IFB, error) {
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find ifb %s: %w", name, err)
	}
	a := l.Attrs()
	ifb := &IFB{Name: name, Type: l.Type(), Alias: a.Alias, Index: a.Index, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0}
	if ifb.Type == "ifb" {
		root, err := rootQdisc(h, l)
		if err != nil {
			return nil, err
		}
		ifb.Root = qdiscOf(root)
	}
	return ifb, nil
}

func qdiscOf(q netlink.Qdisc) Qdisc {
	switch q := q.(type) {
	case nil:
		return Qdisc{}
	case *netlink.Tbf:
		return Qdisc{Kind: "tbf", Handle: q.Handle, Tbf: tbfOf(q), Peakrate: q.Peakrate}
	default:
		return Qdisc{Kind: q.Type(), Handle: q.Attrs().Handle}
	}
}

func filterOf(f netlink.Filter) Filter {
	a := f.Attrs()
	out := Filter{Kind: f.Type(), Priority: a.Priority, Protocol: a.Protocol}
	u, ok := f.(*netlink.U32)
	if !ok {
		return out
	}
	for _, act := range u.Actions {
		if m, ok := act.(*netlink.MirredAction); ok {
			out.Actions = append(out.Actions, fmt.Sprintf("redirect to ifindex %d", m.Ifindex))
		} else {
			out.Actions = append(out.Actions, act.Type())
		}
	}
	if len(u.Actions) == 1 {
		out.Target = redirectTarget(u)
		out.Redirect = isRedirect(u, out.Target)
	}
	return out
}

// describe says what a root qdisc is, for a change's "was".
func (q Qdisc) describe(tick float64) string {
	switch q.Kind {
	case "":
		return "none"
	case "tbf":
		s := q.Tbf.describe(tick)
		if q.Peakrate != 0 {
			s += " peakrate " + bitString(q.Peakrate*8)
		}
		return s
	default:
		return q.Kind
	}
}
