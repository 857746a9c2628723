package sysctl_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/sysctl/sysctltest"
)

// A state of the node: what the pass is told (the pods of its snapshot,
// an IPv6 pool), the links the kernel has (a pod's veth, and others: an
// ADD half-way, an ifb), values the node holds that reef has no opinion
// on, and what the kernel must hold after a pass, as the fake prints it:
// the values that are not a new node's or link's defaults (forwarding
// off; proxy_arp, route_localnet and addr_gen_mode 0, accept_dad 1, IPv6
// on). A value left at, or put back to, its default is not listed.
type state struct {
	name   string
	node   sysctl.Node
	links  []string
	preset map[string]string
	want   string
}

var (
	podA = sysctl.Pod{HostVeth: "reefaaaaaaaaaaa"}
	podB = sysctl.Pod{HostVeth: "reefbbbbbbbbbbb", HostPorts: true}
	podC = sysctl.Pod{HostVeth: "reefccccccccccc"}
	podD = sysctl.Pod{HostVeth: "reefddddddddddd", IPv6: true}
	podE = sysctl.Pod{HostVeth: "reefeeeeeeeeeee", IPv6: true, HostPorts: true} // dual-stack, hostPorts
)

var states = []state{
	{name: "no pods", want: `
net/ipv4/ip_forward = 1
`},
	{name: "one pod", node: sysctl.Node{Pods: []sysctl.Pod{podA}}, links: []string{podA.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/ip_forward = 1
`},
	{name: "a pod with hostPorts", node: sysctl.Node{Pods: []sysctl.Pod{podA, podB}}, links: []string{podA.HostVeth, podB.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/conf/reefbbbbbbbbbbb/proxy_arp = 1
net/ipv4/conf/reefbbbbbbbbbbb/route_localnet = 1
net/ipv4/ip_forward = 1
`},
	{name: "an ADD half-way: its veth is not the snapshot's and is left alone", node: sysctl.Node{Pods: []sysctl.Pod{podA}}, links: []string{podA.HostVeth, podC.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/ip_forward = 1
`},
	{name: "a DEL half-way: the snapshot's pod has no veth any more", node: sysctl.Node{Pods: []sysctl.Pod{podA, podB}}, links: []string{podB.HostVeth}, want: `
net/ipv4/conf/reefbbbbbbbbbbb/proxy_arp = 1
net/ipv4/conf/reefbbbbbbbbbbb/route_localnet = 1
net/ipv4/ip_forward = 1
`},
	{name: "without IPv6, the node's IPv6 settings are not reef's: an IPv4 pod's veth and forwarding keep what the node has",
		node: sysctl.Node{Pods: []sysctl.Pod{podA}}, links: []string{podA.HostVeth},
		preset: map[string]string{sysctl.Forwarding6: "1", sysctl.DisableIPv6(podA.HostVeth): "1", sysctl.AddrGenMode(podA.HostVeth): "1"}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
net/ipv6/conf/reefaaaaaaaaaaa/addr_gen_mode = 1
net/ipv6/conf/reefaaaaaaaaaaa/disable_ipv6 = 1
`},
	{name: "an IPv6 pool and no pod yet: the node forwards IPv6", node: sysctl.Node{IPv6Pool: true}, want: `
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
`},
	{name: "an IPv6 pod: IPv6 forwarding, and its veth's link-local at once (no DAD)", node: sysctl.Node{Pods: []sysctl.Pod{podD}}, links: []string{podD.HostVeth}, want: `
net/ipv4/conf/reefddddddddddd/proxy_arp = 1
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
net/ipv6/conf/reefddddddddddd/accept_dad = 0
`},
	{name: "a dual-stack pod with hostPorts beside an IPv4 pod", node: sysctl.Node{Pods: []sysctl.Pod{podA, podE}, IPv6Pool: true},
		links: []string{podA.HostVeth, podE.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/conf/reefeeeeeeeeeee/proxy_arp = 1
net/ipv4/conf/reefeeeeeeeeeee/route_localnet = 1
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
net/ipv6/conf/reefeeeeeeeeeee/accept_dad = 0
`},
	{name: "vxlan.reef carries IPv6: IPv6 on, its EUI-64 link-local", node: sysctl.Node{IPv6Pool: true, VXLAN6: true},
		links: []string{sysctl.TunnelDevice}, want: `
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
`},
	{name: "vxlan.reef not made yet: nothing to set", node: sysctl.Node{IPv6Pool: true, VXLAN6: true}, want: `
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
`},
	{name: "vxlan.reef carries IPv4 only: its IPv6 settings are the node's", node: sysctl.Node{IPv6Pool: true},
		links:  []string{sysctl.TunnelDevice},
		preset: map[string]string{sysctl.DisableIPv6(sysctl.TunnelDevice): "1", sysctl.AddrGenMode(sysctl.TunnelDevice): "1"}, want: `
net/ipv4/ip_forward = 1
net/ipv6/conf/all/forwarding = 1
net/ipv6/conf/vxlan.reef/addr_gen_mode = 1
net/ipv6/conf/vxlan.reef/disable_ipv6 = 1
`},
}

// wantsIPv6 says whether the node must forward IPv6 in st.
func wantsIPv6(n sysctl.Node) bool {
	return n.IPv6Pool || slices.ContainsFunc(n.Pods, func(p sysctl.Pod) bool { return p.IPv6 })
}

// kernelIn is a fake node with the state's links and preset values, the
// values reef has an opinion on drifted at random: what the owner finds
// is not what it last wrote.
func kernelIn(st state, rng *rand.Rand) *sysctltest.Kernel {
	k := sysctltest.New()
	k.Put(sysctl.Forwarding, fmt.Sprint(rng.IntN(2)))
	if wantsIPv6(st.node) {
		k.Put(sysctl.Forwarding6, fmt.Sprint(rng.IntN(2)))
	}
	for _, l := range st.links {
		k.AddLink(l)
	}
	for key, v := range st.preset {
		k.Put(key, v)
	}
	if _, err := k.Get(sysctl.DisableIPv6(sysctl.TunnelDevice)); err == nil && st.node.VXLAN6 {
		k.Put(sysctl.AddrGenMode(sysctl.TunnelDevice), fmt.Sprint(rng.IntN(4)))
		k.Put(sysctl.DisableIPv6(sysctl.TunnelDevice), fmt.Sprint(rng.IntN(2)))
	}
	for _, p := range st.node.Pods {
		if _, err := k.Get(sysctl.ProxyARP(p.HostVeth)); err == nil {
			k.Put(sysctl.ProxyARP(p.HostVeth), fmt.Sprint(rng.IntN(2)))
			if p.HostPorts { // without hostPorts, the owner has no opinion
				k.Put(sysctl.RouteLocalnet(p.HostVeth), fmt.Sprint(rng.IntN(2)))
			}
			if p.IPv6 { // nor on the IPv6 settings of an IPv4 pod
				k.Put(sysctl.AcceptDAD(p.HostVeth), fmt.Sprint(rng.IntN(3)))
				k.Put(sysctl.AddrGenMode(p.HostVeth), fmt.Sprint(rng.IntN(4)))
				k.Put(sysctl.DisableIPv6(p.HostVeth), fmt.Sprint(rng.IntN(2)))
			}
		}
	}
	return k
}

// The owner reaches each state's text from any drift, in any order of the
// states, and a second pass writes nothing.
func TestSyncStates(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		for _, i := range rng.Perm(len(states)) {
			st := states[i]
			k := kernelIn(st, rng)
			o := sysctl.New(k)
			if _, err := o.Sync(st.node, nil); err != nil {
				t.Fatalf("seed %d, %s: %v", seed, st.name, err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(st.want, "\n"), k.Changed()); diff != "" {
				t.Fatalf("seed %d, %s: kernel after a pass (-want +got):\n%s", seed, st.name, diff)
			}
			writes := k.Writes()
			if changes, err := o.Sync(st.node, nil); err != nil || len(changes) != 0 || k.Writes() != writes {
				t.Fatalf("seed %d, %s: a second pass changed %v (err %v)", seed, st.name, changes, err)
			}
		}
	}
}

// What a pass reports is exactly what differed: on a node that forwards
// IPv4 and a veth with proxy ARP, an IPv4 pod's route_localnet for its
// hostPorts; an IPv6 pod's IPv6 forwarding and DAD off on its veth.
func TestSyncReportsRepairs(t *testing.T) {
	change := func(key, value, was string) sysctl.Change {
		return sysctl.Change{Setting: sysctl.Setting{Key: key, Value: value}, Was: was}
	}
	for _, tt := range []struct {
		pod  sysctl.Pod
		want []sysctl.Change
	}{
		{podB, []sysctl.Change{change(sysctl.RouteLocalnet(podB.HostVeth), "1", "0")}},
		{podD, []sysctl.Change{change(sysctl.Forwarding6, "1", "0"), change(sysctl.AcceptDAD(podD.HostVeth), "0", "1")}},
	} {
		k := sysctltest.New()
		k.AddLink(tt.pod.HostVeth)
		k.Put(sysctl.Forwarding, "1")
		k.Put(sysctl.ProxyARP(tt.pod.HostVeth), "1")
		changes, err := sysctl.New(k).Sync(sysctl.Node{Pods: []sysctl.Pod{tt.pod}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, changes); diff != "" {
			t.Errorf("%+v: changes (-want +got):\n%s", tt.pod, diff)
		}
	}
}

// recorder is a fake kernel that remembers the order of the writes.
type recorder struct {
	*sysctltest.Kernel
	keys []string
}

func (r *recorder) Set(key, value string) error {
	r.keys = append(r.keys, key)
	return r.Kernel.Set(key, value)
}

// On a veth that is up, IPv6 turned on makes the link-local at once: the
// mode that derives it from the MAC and DAD's setting must be in place
// before, in ADD and in a pass's repair alike.
func TestIPv6TurnedOnLast(t *testing.T) {
	drifted := func() *recorder {
		k := sysctltest.New()
		k.AddLink(podE.HostVeth)
		k.Put(sysctl.DisableIPv6(podE.HostVeth), "1")
		k.Put(sysctl.AddrGenMode(podE.HostVeth), "3")
		return &recorder{Kernel: k}
	}
	want := []string{sysctl.ProxyARP(podE.HostVeth), sysctl.RouteLocalnet(podE.HostVeth),
		sysctl.AcceptDAD(podE.HostVeth), sysctl.AddrGenMode(podE.HostVeth), sysctl.DisableIPv6(podE.HostVeth)}
	r := drifted()
	if _, err := sysctl.New(r).Pod(podE); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, r.keys); diff != "" {
		t.Errorf("ADD's writes (-want +got):\n%s", diff)
	}
	r = drifted()
	if _, err := sysctl.New(r).Sync(sysctl.Node{Pods: []sysctl.Pod{podE}}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append([]string{sysctl.Forwarding, sysctl.Forwarding6}, want...), r.keys); diff != "" {
		t.Errorf("a pass's writes (-want +got):\n%s", diff)
	}
	all, err := sysctl.Desired(sysctl.Node{Pods: []sysctl.Pod{podE}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range all {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff(append([]string{sysctl.Forwarding, sysctl.Forwarding6}, want...), keys); diff != "" {
		t.Errorf("Desired (-want +got):\n%s", diff)
	}
}

// ADD asks the owner for its pod while passes that do not know the pod yet
// run: the pod ends with its settings, whatever the interleaving.
func TestAddRacesPass(t *testing.T) {
	for range 50 {
		k := sysctltest.New()
		k.AddLink(podA.HostVeth)
		k.AddLink(podB.HostVeth)
		o := sysctl.New(k)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := o.Pod(podB); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := o.Sync(sysctl.Node{Pods: []sysctl.Pod{podA}}, nil); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if v, _ := k.Get(sysctl.RouteLocalnet(podB.HostVeth)); v != "1" {
			t.Fatalf("route_localnet of the added pod = %s after the race:\n%s", v, k)
		}
	}
}

// ADD on a veth that vanished says so; a pass does not fail on it.
func TestPodVethGone(t *testing.T) {
	k := sysctltest.New()
	o := sysctl.New(k)
	if _, err := o.Pod(podA); err == nil || !strings.Contains(err.Error(), "veth reefaaaaaaaaaaa is gone") {
		t.Errorf("Pod on a missing veth: %v", err)
	}
	if _, err := o.Sync(sysctl.Node{Pods: []sysctl.Pod{podA}}, nil); err != nil {
		t.Errorf("Sync with a missing veth: %v", err)
	}
}

// Never another link's settings.
func TestRefusesOtherLinks(t *testing.T) {
	for _, name := range []string{"eth0", "reef", "lo"} {
		k := sysctltest.New()
		k.AddLink(name)
		_, err := sysctl.New(k).Sync(sysctl.Node{Pods: []sysctl.Pod{{HostVeth: name, HostPorts: true, IPv6: true}}}, nil)
		if err == nil || !strings.Contains(err.Error(), "not a reef link") {
			t.Errorf("%s: %v", name, err)
		}
		if v, _ := k.Get(sysctl.ProxyARP(name)); v != "0" {
			t.Errorf("%s: proxy_arp written", name)
		}
		if v, _ := k.Get(sysctl.AcceptDAD(name)); v != "1" {
			t.Errorf("%s: accept_dad written", name)
		}
	}
}

// busyLinks is the pods' owner as the pass's Sync asks it (sysctl.Links):
// busy veths are not written, the others are, each inside With.
type busyLinks struct {
	busy  map[string]bool
	asked []string
}

func (l *busyLinks) With(veth string, write func()) {
	l.asked = append(l.asked, veth)
	if !l.busy[veth] {
		write()
	}
}

// The pass writes each veth's settings through the veths' owner, and
// nothing of a veth it says is busy; the node's own settings need no
// veth's owner.
func TestSyncThroughLinks(t *testing.T) {
	k := sysctltest.New()
	a, b := sysctl.Pod{HostVeth: "reefa"}, sysctl.Pod{HostVeth: "reefb", HostPorts: true}
	k.AddLink(a.HostVeth)
	k.AddLink(b.HostVeth)
	links := &busyLinks{busy: map[string]bool{b.HostVeth: true}}
	change := func(key, value, was string) sysctl.Change {
		return sysctl.Change{Setting: sysctl.Setting{Key: key, Value: value}, Was: was}
	}
	changes, err := sysctl.New(k).Sync(sysctl.Node{Pods: []sysctl.Pod{a, b}}, links)
	if err != nil {
		t.Fatal(err)
	}
	want := []sysctl.Change{change(sysctl.Forwarding, "1", "0"), change(sysctl.ProxyARP(a.HostVeth), "1", "0")}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a.HostVeth, b.HostVeth}, links.asked); diff != "" {
		t.Errorf("veths asked (-want +got):\n%s", diff)
	}
}
