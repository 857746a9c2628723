package routes

import (
	"testing"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
)

// A new sandbox of the same pod starts without the old one's ifb, and DEL
// takes the ifb with the veth.
func TestSetupPodRemovesStaleIFB(t *testing.T) {
	requireRoot(t)
	node, pod := netnstest.New(t), netnstest.New(t)
	nodeH := netnsHandle(t, node.Path())
	spec := veth.Spec{Netns: pod.Path(), IfName: "eth0", HostVeth: HostVethName("default", "bw-2", ""), IPs: addrs("10.244.1.9"), MTU: 1400}
	ifb := tc.IFBName(spec.HostVeth)
	if err := in(t, node, func() (err error) { _, err = veth.Setup(spec, nil); return err }); err != nil {
		t.Fatalf("veth.Setup: %v", err)
	}
	if err := in(t, node, func() error {
		_, err := tc.SetBandwidth(spec.HostVeth, tc.Bandwidth{EgressRate: 1e6, EgressBurst: 80e3})
		return err
	}); err != nil {
		t.Fatalf("SetBandwidth: %v", err)
	}
	if _, err := nodeH.LinkByName(ifb); err != nil {
		t.Fatalf("ifb %s after SetBandwidth: %v", ifb, err)
	}
	if err := in(t, node, func() (err error) { _, err = veth.Setup(spec, nil); return err }); err != nil {
		t.Fatalf("second veth.Setup: %v", err)
	}
	if _, err := nodeH.LinkByName(ifb); err == nil {
		t.Errorf("ifb %s of the stale pair survived veth.Setup", ifb)
	}
	var got tc.Bandwidth
	if err := in(t, node, func() (err error) { got, err = tc.ReadBandwidth(spec.HostVeth); return err }); err != nil {
		t.Fatalf("ReadBandwidth: %v", err)
	}
	if got != (tc.Bandwidth{}) {
		t.Errorf("ReadBandwidth of the new pair = %+v, want no limits", got)
	}
	// DEL takes the ifb with the veth.
	if err := in(t, node, func() error {
		_, err := tc.SetBandwidth(spec.HostVeth, tc.Bandwidth{EgressRate: 1e6, EgressBurst: 80e3})
		return err
	}); err != nil {
		t.Fatalf("SetBandwidth: %v", err)
	}
	if err := in(t, node, func() error { return veth.Teardown(spec.HostVeth) }); err != nil {
		t.Fatalf("veth.Teardown: %v", err)
	}
	if _, err := nodeH.LinkByName(ifb); err == nil {
		t.Errorf("ifb %s still exists after veth.Teardown", ifb)
	}
}
