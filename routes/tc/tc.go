package tc

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Apply writes a Plan's steps in order and says what it changed, one line
// per step done. A refused plan writes nothing and returns its refusal;
// on a failure it returns the changes made before it.
func Apply(h netlinksafe.Handle, p Plan) (changes []string, err error) {
	if p.Refused != nil {
		return nil, p.Refused
	}
	if !linkname.Ours(p.Veth) {
		return nil, fmt.Errorf("refusing to touch %q: not a reef link", p.Veth)
	}
	a := &applier{h: h, p: p, ifbIndex: p.IFBIndex}
	for _, s := range p.Steps {
		done, err := a.step(s)
		if err != nil {
			return changes, err
		}
		if done {
			changes = append(changes, s.Change)
		}
	}
	return changes, nil
}

// applier applies one Plan; ifbIndex follows the ifb a step creates.
type applier struct {
	h        netlinksafe.Handle
	p        Plan
	ifbIndex int
}

func (a *applier) ifb() netlink.Link {
	return &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: a.p.IFB, Index: a.ifbIndex}}
}

func (a *applier) index(dev string) int {
	if dev == a.p.Veth {
		return a.p.VethIndex
	}
	return a.ifbIndex
}

// step writes s; done is false for a deletion someone else already made.
func (a *applier) step(s Step) (done bool, err error) {
	h, veth, ifb := a.h, a.p.Veth, a.p.IFB
	switch s.Op {
	case OpCreateIFB:
		return true, a.createIFB()
	case OpSetIFBAlias:
		if err := h.LinkSetAlias(a.ifb(), veth); err != nil {
			return false, fmt.Errorf("set alias %s on ifb %s: %w", veth, ifb, err)
		}
	case OpSetIFBMTU:
		if err := h.LinkSetMTU(a.ifb(), a.p.MTU); err != nil {
			return false, fmt.Errorf("set MTU %d on ifb %s: %w", a.p.MTU, ifb, err)
		}
	case OpSetIFBUp:
		if err := h.LinkSetUp(a.ifb()); err != nil {
			return false, fmt.Errorf("set ifb %s up: %w", ifb, err)
		}
	case OpSetTbf:
		return true, a.setTbf(s)
	case OpDeleteTbf:
		q := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.index(s.Dev), Handle: s.Old.Handle, Parent: netlink.HANDLE_ROOT}}
		if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) {
			return false, fmt.Errorf("delete tbf on %s: %w", s.Dev, err)
		}
	case OpAddIngress:
		if err := h.QdiscAdd(a.ingress()); err != nil {
			return false, fmt.Errorf("add ingress qdisc on %s: %w", veth, err)
		}
	case OpSetRedirect:
		return true, a.setRedirect(s.Filters)
	case OpDeleteIngress:
		if err := h.QdiscDel(a.ingress()); err != nil && !errors.Is(err, unix.ENOENT) {
			return false, fmt.Errorf("delete ingress qdisc on %s: %w", veth, err)
		}
	case OpDeleteIFB:
		// DeletePodIFB looks again: an ifb that names another veth
		// by now stays.
		return DeletePodIFB(h, veth)
	default:
		return false, fmt.Errorf("tc plan for %s: unknown step %d", veth, s.Op)
	}
	return true, nil
}

func (a *applier) ingress() *netlink.Ingress {
	return &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.p.VethIndex, Handle: ingressParent, Parent: netlink.HANDLE_INGRESS}}
}

// createIFB creates the pod's ifb. What a new ifb lacks (the alias, which
// the kernel does not take at creation) is part of its creation, not a
// change of its own.
func (a *applier) createIFB() error {
	h, veth, name := a.h, a.p.Veth, a.p.IFB
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU, attrs.Flags = name, a.p.MTU, net.FlagUp
	if err := h.LinkAdd(&netlink.Ifb{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("create ifb %s for %s: %w", name, veth, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find ifb %s: %w", name, err)
	}
	a.ifbIndex = l.Attrs().Index
	if err := h.LinkSetAlias(l, veth); err != nil {
		return fmt.Errorf("set alias %s on ifb %s: %w", veth, name, err)
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set ifb %s up: %w", name, err)
		}
	}
	return nil
}

// setTbf makes s.Dev's root qdisc the tbf s.Tbf: a tbf there is changed
// in place, keeping its queue; another kind may hold handle 1:, which a
// tbf cannot replace, so it is deleted first.
func (a *applier) setTbf(s Step) error {
	idx := a.index(s.Dev)
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       s.Tbf.Rate, Buffer: s.Tbf.Buffer, Limit: s.Tbf.Limit,
	}
	var err error
	switch s.Old.Kind {
	case "tbf":
		q.Handle = s.Old.Handle
		err = a.h.QdiscReplace(q)
	case "":
		err = a.h.QdiscAdd(q)
	default:
		old := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: s.Old.Handle, Parent: netlink.HANDLE_ROOT}, QdiscType: s.Old.Kind}
		if err := a.h.QdiscDel(old); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s qdisc on %s: %w", s.Old.Kind, s.Dev, err)
		}
		err = a.h.QdiscAdd(q)
	}
	if err != nil {
		return fmt.Errorf("set tbf %s on %s: %w", s.Tbf.describe(a.p.Tick), s.Dev, err)
	}
	return nil
}

// setRedirect deletes the filters on the veth's ingress and adds reef's
// redirect to the ifb.
func (a *applier) setRedirect(fs []Filter) error {
	veth := a.p.Veth
	// A u32 filter lists one entry per key node; deleting by priority and
	// protocol with handle 0 removes the whole filter at once.
	type tp struct {
		prio, proto uint16
		kind        string
	}
	done := map[tp]bool{}
	for _, f := range fs {
		k := tp{f.Priority, f.Protocol, f.Kind}
		if done[k] {
			continue
		}
		done[k] = true
		del := &netlink.GenericFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: a.p.VethIndex, Parent: ingressParent, Priority: f.Priority, Protocol: f.Protocol},
			FilterType:  f.Kind,
		}
		if err := a.h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s filter prio %d on ingress of %s: %w", f.Kind, f.Priority, veth, err)
		}
	}
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: a.p.VethIndex, Parent: ingressParent, Priority: redirectPriority, Protocol: unix.ETH_P_ALL},
		// A nil Sel is netlink's match-all: one empty key, terminal.
		Actions: []netlink.Action{netlink.NewMirredAction(a.ifbIndex)},
	}
	if err := a.h.FilterAdd(f); err != nil {
		return fmt.Errorf("add redirect from %s to %s: %w", veth, a.p.IFB, err)
	}
	return nil
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

// DeletePodIFB removes hostVeth's ifb if it is there and names hostVeth; an
// ifb of that name that names another veth is that pod's and stays. Its
// callers are the pods' owner (routes.Pods: Up, Down), under the pod's
// locks, and Apply.
func DeletePodIFB(h netlinksafe.Handle, hostVeth string) (removed bool, err error) {
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
