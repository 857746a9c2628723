// Package sysctl owns the node's sysctls that reef needs: IPv4 forwarding,
// and on each pod's node-side veth proxy ARP (the node answers for the
// pod's gateway) and, for a pod with hostPorts, route_localnet (DNAT to the
// pod from 127.0.0.1). Desired computes the values from the pods, purely;
// an Owner reads what the kernel holds and writes only what differs. It is
// the only writer of these values: ADD asks it for one pod's (Owner.Pod),
// the reconcile pass for the node's (Owner.Sync).
//
// The owner has an opinion only on the pods it is told of: a veth of a pod
// that is not in the pass's snapshot (an ADD half-way, an orphan that the
// links' owner removes), or that a CNI operation is busy with, is left
// alone, so a pass never races an ADD, and a value reef does not need is
// never reset (route_localnet of a pod
// without hostPorts keeps what the node's default gave it).
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/reefcni/reef/routes/podlink"
)

// Forwarding is the key of IPv4 forwarding in the daemon's namespace.
const Forwarding = "net/ipv4/ip_forward"

// ProxyARP and RouteLocalnet are the keys of a link's settings.
func ProxyARP(link string) string      { return "net/ipv4/conf/" + link + "/proxy_arp" }
func RouteLocalnet(link string) string { return "net/ipv4/conf/" + link + "/route_localnet" }

// Pod is what the settings of one pod depend on.
type Pod struct {
	HostVeth  string
	HostPorts bool
}

// Setting is one sysctl and the value reef wants: Key is its path under
// /proc/sys ("net/ipv4/conf/reef0123456789a/proxy_arp").
type Setting struct{ Key, Value string }

// Change is a setting the owner wrote, and what the kernel held before.
type Change struct {
	Setting
	Was string
}

func (c Change) String() string { return fmt.Sprintf("%s %s -> %s", c.Key, c.Was, c.Value) }

// Kernel reads and writes sysctls; Get and Set of a key whose link is
// gone fail with an error that matches fs.ErrNotExist.
type Kernel interface {
	Get(key string) (string, error)
	Set(key, value string) error
}

// Desired is what the node's sysctls must hold for these pods: forwarding
// on; proxy ARP on every pod's veth; route_localnet on the veths of pods
// with hostPorts. The settings are sorted by key, forwarding first.
func Desired(pods []Pod) ([]Setting, error) {
	want := []Setting{{Forwarding, "1"}}
	var errs []error
	var links []Setting
	for _, p := range pods {
		// A veth without reef's prefix is refused: reef never touches
		// another link's settings.
		if !podlink.Ours(p.HostVeth) {
			errs = append(errs, fmt.Errorf("refusing the sysctls of %q: not a reef link", p.HostVeth))
			continue
		}
		links = append(links, Setting{ProxyARP(p.HostVeth), "1"})
		if p.HostPorts {
			links = append(links, Setting{RouteLocalnet(p.HostVeth), "1"})
		}
	}
	slices.SortFunc(links, func(a, b Setting) int { return strings.Compare(a.Key, b.Key) })
	return append(want, slices.Compact(links)...), errors.Join(errs...)
}

// Owner brings the kernel's sysctls in line with Desired. It keeps no state
// of its own, so ADDs and passes may call it at the same time: each writes
// only the values Desired gives, which never conflict.
type Owner struct{ k Kernel }

// New returns the owner of the sysctls that k reads and writes.
func New(k Kernel) *Owner { return &Owner{k: k} }

// Sync is the pass: the node's forwarding and the settings of every pod in
// the snapshot. A pod's are written under its veth's lock (podlink), and
// not at all if busy names the veth: a CNI operation may be replacing the
// veth with a new sandbox's, whose settings its ADD sets. A pod whose veth
// is gone is skipped (the links' owner deals with it). It returns what it
// changed: each change is a repair.
func (o *Owner) Sync(pods []Pod, busy podlink.Busy) ([]Change, error) {
	busy = podlink.OrNotBusy(busy)
	want, err := Desired(pods)
	errs := []error{err}
	changes, aerr := o.apply(want[:1], true)
	errs = append(errs, aerr)
	for _, p := range pods {
		pw, perr := Desired([]Pod{p})
		if perr != nil {
			continue // refused: in err already
		}
		unlock := podlink.LockLink(p.HostVeth)
		if !busy.Link(p.HostVeth) {
			c, aerr := o.apply(pw[1:], true)
			changes, errs = append(changes, c...), append(errs, aerr)
		}
		unlock()
	}
	return changes, errors.Join(errs...)
}

// Pod is ADD's request: one pod's settings, before its veth is up. Its veth
// must exist.
func (o *Owner) Pod(p Pod) ([]Change, error) {
	want, err := Desired([]Pod{p})
	if err != nil {
		return nil, err
	}
	changes, err := o.apply(want[1:], false)
	if errors.Is(err, fs.ErrNotExist) {
		return changes, fmt.Errorf("veth %s is gone: %w", p.HostVeth, err)
	}
	return changes, err
}

// apply writes each setting whose value differs. With linkGoneOK, a
// setting whose link is gone is skipped: for a pass, its pod is being
// deleted.
func (o *Owner) apply(want []Setting, linkGoneOK bool) ([]Change, error) {
	var changes []Change
	var errs []error
	for _, s := range want {
		cur, err := o.k.Get(s.Key)
		if err == nil && cur == s.Value {
			continue
		}
		if err == nil {
			err = o.k.Set(s.Key, s.Value)
		}
		switch {
		case err == nil:
			changes = append(changes, Change{s, cur})
		case linkGoneOK && errors.Is(err, fs.ErrNotExist) && s.Key != Forwarding:
		default:
			errs = append(errs, err)
		}
	}
	return changes, errors.Join(errs...)
}
