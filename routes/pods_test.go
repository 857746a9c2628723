package routes

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
)

// A dual-stack pod's addresses are locked together, each by its own key
// (what the pass's lock of one of them waits for), a repeated one once,
// and all are free after the unlock.
func TestPodsLockAddrs(t *testing.T) {
	p := NewPods(nil, nil)
	v4, v6 := netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244::5")
	unlock := p.lockAddrs([]netip.Addr{v6, v4, v6})
	for _, ip := range []netip.Addr{v4, v6} {
		if u, ok := p.locks.TryLock("addr " + ip.String()); ok {
			u()
			t.Errorf("lockAddrs left %s unlocked", ip)
		}
	}
	unlock()
	if n := p.locks.Len(); n != 0 {
		t.Errorf("%d keys held after the unlock", n)
	}
}

// PodObjects and BlockRoutes split a State between the pods' owner and
// the blocks' owner: a pod's /32 or /128 (of any shape the kernel holds) is the
// pods' owner's with the veths; blackholes and other nodes' blocks are the
// blocks' owner's.
func TestStateSplit(t *testing.T) {
	pfx := netip.MustParsePrefix
	pod := Route{Dst: pfx("10.244.1.5/32"), Kind: PodRoute, Dev: "reefa"}
	odd := Route{Dst: pfx("10.244.1.6/32"), Kind: PodRoute, Dev: "?eth9"}
	hole := Route{Dst: pfx("10.244.1.0/26"), Kind: Blackhole}
	remote := Route{Dst: pfx("10.244.2.0/26"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.0.2.2"), OnLink: true}
	st := State{Routes: map[netip.Prefix]Route{pod.Dst: pod, odd.Dst: odd, hole.Dst: hole, remote.Dst: remote},
		Links: map[string]bool{"reefa": true}, MTUs: map[string]PodMTU{"reefa": {HostVeth: "reefa", MTU: 1500}}}
	pods, blocks := st.PodObjects(), st.BlockRoutes()
	if len(pods.Routes) != 2 || pods.Routes[pod.Dst] != pod || pods.Routes[odd.Dst] != odd || !pods.Links["reefa"] || pods.MTUs["reefa"].MTU != 1500 {
		t.Errorf("PodObjects = %+v", pods)
	}
	if len(blocks.Routes) != 2 || blocks.Routes[hole.Dst] != hole || blocks.Routes[remote.Dst] != remote || len(blocks.Links) != 0 || len(blocks.MTUs) != 0 {
		t.Errorf("BlockRoutes = %+v", blocks)
	}
}

// recKernel is a PodKernel that records what the owner asks of it.
type recKernel struct {
	calls []string
	ifbs  map[string]string // ifb -> its veth
}

func (k *recKernel) Wire(spec veth.Spec, _ func(string) error) (veth.Pair, error) {
	k.calls = append(k.calls, "wire "+spec.HostVeth)
	return veth.Pair{}, nil
}
func (k *recKernel) Unwire(veth string) error { k.calls = append(k.calls, "unwire "+veth); return nil }
func (k *recKernel) Apply(p Plan) error {
	for _, r := range p.Replace {
		k.calls = append(k.calls, "replace "+r.String())
	}
	for _, r := range p.DeleteRoute {
		k.calls = append(k.calls, "delete "+r.String())
	}
	for _, m := range p.SetMTU {
		k.calls = append(k.calls, fmt.Sprintf("mtu %s %d", m.HostVeth, m.MTU))
	}
	for _, l := range p.DeleteLink {
		k.calls = append(k.calls, "delete link "+l)
	}
	return nil
}
func (k *recKernel) SetBandwidth(veth string, _ tc.Bandwidth) ([]string, error) {
	k.calls = append(k.calls, "limit "+veth)
	return nil, nil
}
func (k *recKernel) RepairBandwidth(veth string, _ tc.Bandwidth) ([]string, error) {
	k.calls = append(k.calls, "repair limit "+veth)
	return nil, nil
}
func (k *recKernel) OrphanIFBs(live map[string]bool) ([]string, error) {
	var out []string
	for ifb, veth := range k.ifbs {
		if !live[veth] {
			out = append(out, ifb)
		}
	}
	slices.Sort(out)
	return out, nil
}
func (k *recKernel) DeleteIFB(name string, inUse func(string) bool) (bool, error) {
	if inUse(k.ifbs[name]) {
		return false, nil
	}
	k.calls = append(k.calls, "delete ifb "+name)
	return true, nil
}

// Down is repeatable, and with still it takes the veth down only while
// still says the veth is the pod's (a newer sandbox may have taken it).
func TestPodsDown(t *testing.T) {
	k := &recKernel{}
	p := NewPods(k, nil)
	for _, still := range []func() bool{nil, func() bool { return true }, func() bool { return false }} {
		if err := p.Down("reefa", still); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"unwire reefa", "unwire reefa"}, k.calls); diff != "" {
		t.Errorf("kernel calls (-want +got):\n%s", diff)
	}
	if n := p.locks.Len(); n != 0 {
		t.Errorf("%d locks held after Down", n)
	}
}

// Sync diffs the pods' part of the kernel's state against the pods it is
// given and applies the difference, leaving alone every object busy names:
// the blocks' routes are not its own.
func TestPodsSync(t *testing.T) {
	pfx := netip.MustParsePrefix
	a := Pod{Endpoint: Endpoint{IPs: addrs("10.244.1.5"), HostVeth: "reefa", Netns: "/run/netns/a", IfName: "eth0", MTU: 1400},
		Bandwidth: &tc.Bandwidth{EgressRate: 1e6, EgressBurst: 1e5}}
	b := Pod{Endpoint: Endpoint{IPs: addrs("10.244.1.6"), HostVeth: "reefb", Netns: "/run/netns/b", IfName: "eth0", MTU: 1400}}
	have := State{
		Routes: map[netip.Prefix]Route{
			pfx("10.244.1.0/26"): {Dst: pfx("10.244.1.0/26"), Kind: Blackhole},
			pfx("10.244.1.9/32"): {Dst: pfx("10.244.1.9/32"), Kind: PodRoute, Dev: "reefgone"},
			pfx("10.244.1.8/32"): {Dst: pfx("10.244.1.8/32"), Kind: PodRoute, Dev: "reefnew"},
		},
		Links: map[string]bool{"reefa": true, "reefb": true, "reefgone": true, "reefnew": true},
		MTUs: map[string]PodMTU{"reefa": {HostVeth: "reefa", MTU: 1500}, "reefb": {HostVeth: "reefb", MTU: 1500},
			"reefgone": {HostVeth: "reefgone", MTU: 1500}, "reefnew": {HostVeth: "reefnew", MTU: 1500}},
	}
	// reefnew and its address are an ADD's that began after the pass read
	// the store, and reefb a DEL's: busy.
	busy := testBusy{links: map[string]bool{"reefnew": true, "reefb": true}, addrs: map[netip.Addr]bool{netip.MustParseAddr("10.244.1.8"): true}}
	k := &recKernel{ifbs: map[string]string{"reefbnew": "reefnew", "reefbgone": "reefgone", "reefba": "reefa"}}
	got, err := NewPods(k, nil).Sync([]Pod{a, b}, have, busy)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"replace 10.244.1.5/32 dev reefa scope link proto reef",
		"delete 10.244.1.9/32 dev reefgone scope link proto reef",
		"mtu reefa 1400",
		"delete link reefgone",
		"repair limit reefa",
		"delete ifb reefbgone",
	}
	if diff := cmp.Diff(want, k.calls); diff != "" {
		t.Errorf("kernel calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"reefa": 1400, "reefb": 1500, "reefgone": 1500, "reefnew": 1500}, got.MTUs); diff != "" {
		t.Errorf("MTUs after (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"reefbgone"}, got.IFBs); diff != "" {
		t.Errorf("ifbs removed (-want +got):\n%s", diff)
	}
}
