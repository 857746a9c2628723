package routes

import (
	"testing"

	"github.com/reefcni/reef/routes/sysctl"
)

// The sysctl owner takes the links reef names as its own, and only those.
func TestSysctlOwnerKnowsReefLinks(t *testing.T) {
	if _, err := sysctl.Desired([]sysctl.Pod{{HostVeth: HostVethName("default", "web", "")}}); err != nil {
		t.Errorf("a pod's veth: %v", err)
	}
	if _, err := sysctl.Desired([]sysctl.Pod{{HostVeth: "eth0"}}); err == nil {
		t.Error("eth0 taken for a reef link")
	}
}
