package routes

import (
	"net/netip"
	"testing"
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
// the pass: a pod's /32 or /128 (of any shape the kernel holds) is the
// owner's with the veths; blackholes and other nodes' blocks are not.
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
