package sysctl_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/sysctl/sysctltest"
)

// A state of the node: the pods of the pass's snapshot, the links the
// kernel has (a pod's veth, and others: an ADD half-way, an ifb), and what
// the kernel must hold after a pass, as the fake prints it.
type state struct {
	name  string
	pods  []sysctl.Pod
	links []string
	want  string
}

var (
	podA = sysctl.Pod{HostVeth: "reefaaaaaaaaaaa"}
	podB = sysctl.Pod{HostVeth: "reefbbbbbbbbbbb", HostPorts: true}
	podC = sysctl.Pod{HostVeth: "reefccccccccccc"}
)

var states = []state{
	{name: "no pods", want: `
net/ipv4/ip_forward = 1
`},
	{name: "one pod", pods: []sysctl.Pod{podA}, links: []string{podA.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/conf/reefaaaaaaaaaaa/route_localnet = 0
net/ipv4/ip_forward = 1
`},
	{name: "a pod with hostPorts", pods: []sysctl.Pod{podA, podB}, links: []string{podA.HostVeth, podB.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/conf/reefaaaaaaaaaaa/route_localnet = 0
net/ipv4/conf/reefbbbbbbbbbbb/proxy_arp = 1
net/ipv4/conf/reefbbbbbbbbbbb/route_localnet = 1
net/ipv4/ip_forward = 1
`},
	{name: "an ADD half-way: its veth is not the snapshot's and is left alone", pods: []sysctl.Pod{podA}, links: []string{podA.HostVeth, podC.HostVeth}, want: `
net/ipv4/conf/reefaaaaaaaaaaa/proxy_arp = 1
net/ipv4/conf/reefaaaaaaaaaaa/route_localnet = 0
net/ipv4/conf/reefccccccccccc/proxy_arp = 0
net/ipv4/conf/reefccccccccccc/route_localnet = 0
net/ipv4/ip_forward = 1
`},
	{name: "a DEL half-way: the snapshot's pod has no veth any more", pods: []sysctl.Pod{podA, podB}, links: []string{podB.HostVeth}, want: `
net/ipv4/conf/reefbbbbbbbbbbb/proxy_arp = 1
net/ipv4/conf/reefbbbbbbbbbbb/route_localnet = 1
net/ipv4/ip_forward = 1
`},
}

// kernelIn is a fake node with the state's links, the values of the
// snapshot's pods drifted at random: what the owner finds is not what it
// last wrote.
func kernelIn(st state, rng *rand.Rand) *sysctltest.Kernel {
	k := sysctltest.New()
	k.Put(sysctl.Forwarding, fmt.Sprint(rng.IntN(2)))
	for _, l := range st.links {
		k.AddLink(l)
	}
	for _, p := range st.pods {
		if _, err := k.Get(sysctl.ProxyARP(p.HostVeth)); err == nil {
			k.Put(sysctl.ProxyARP(p.HostVeth), fmt.Sprint(rng.IntN(2)))
			if p.HostPorts { // without hostPorts, the owner has no opinion
				k.Put(sysctl.RouteLocalnet(p.HostVeth), fmt.Sprint(rng.IntN(2)))
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
			if _, err := o.Sync(st.pods, nil); err != nil {
				t.Fatalf("seed %d, %s: %v", seed, st.name, err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(st.want, "\n"), k.String()); diff != "" {
				t.Fatalf("seed %d, %s: kernel after a pass (-want +got):\n%s", seed, st.name, diff)
			}
			writes := k.Writes()
			if changes, err := o.Sync(st.pods, nil); err != nil || len(changes) != 0 || k.Writes() != writes {
				t.Fatalf("seed %d, %s: a second pass changed %v (err %v)", seed, st.name, changes, err)
			}
		}
	}
}

// What a pass reports is exactly what differed.
func TestSyncReportsRepairs(t *testing.T) {
	k := sysctltest.New()
	k.AddLink(podB.HostVeth)
	k.Put(sysctl.Forwarding, "1")
	k.Put(sysctl.ProxyARP(podB.HostVeth), "1")
	changes, err := sysctl.New(k).Sync([]sysctl.Pod{podB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []sysctl.Change{{Setting: sysctl.Setting{Key: sysctl.RouteLocalnet(podB.HostVeth), Value: "1"}, Was: "0"}}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
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
			if _, err := o.Sync([]sysctl.Pod{podA}, nil); err != nil {
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
	if _, err := o.Sync([]sysctl.Pod{podA}, nil); err != nil {
		t.Errorf("Sync with a missing veth: %v", err)
	}
}

// Never another link's settings.
func TestRefusesOtherLinks(t *testing.T) {
	for _, name := range []string{"eth0", "reef", "lo"} {
		k := sysctltest.New()
		k.AddLink(name)
		_, err := sysctl.New(k).Sync([]sysctl.Pod{{HostVeth: name, HostPorts: true}}, nil)
		if err == nil || !strings.Contains(err.Error(), "not a reef link") {
			t.Errorf("%s: %v", name, err)
		}
		if v, _ := k.Get(sysctl.ProxyARP(name)); v != "0" {
			t.Errorf("%s: proxy_arp written", name)
		}
	}
}
