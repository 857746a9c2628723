package e2e

import (
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// TestPackageUpgradeServiceBird and TestPackageUpgradeServiceFRR are
// TestPlannedRestartBird and TestPlannedRestartFRR with a package upgrade
// in place of the restart (issue 30): a1 of the ToR lab runs reef from
// the installed .deb (version N), as reef.service runs it
// (installAsUnit), beside the lab's daemons on a2 and b1. While the
// client behind the router asks the Service address every 10 ms and the
// laptop pings a pod on a1 (wired through the installed conflist),
// version N+1 is installed over N with dpkg (maintainer scripts, with
// systemd played: the postinst asks for a try-restart) and the test plays
// the try-restart: SIGTERM to the old daemon, the new /usr/bin/reef
// started. plannedStop checks what it checks for a restart: a1's Service
// path marked GRACEFUL_SHUTDOWN and out of the router's route while the
// session is up, the stand-ins for a1's block, not one request lost or
// refused (a reset only where the router's ECMP set changed), every ping
// answered, a1 back in the router's route; then dpkg has N+1 and the
// daemon on the installed socket reports N+1.
func TestPackageUpgradeServiceBird(t *testing.T) { testPackageUpgradeService(t, "bird") }

func TestPackageUpgradeServiceFRR(t *testing.T) {
	slowSuite(t)
	testPackageUpgradeService(t, "frr")
}

func testPackageUpgradeService(t *testing.T, kind string) {
	needTools(t, "dpkg", "dpkg-deb", "setpriv", "unshare", "make", "git")
	oldPkg, newPkg := upgradePackages(t, packages)
	var env *pkgEnv
	var notify *notifySocket
	l, nodes, laptop, tor := serviceToRLab(t, kind, plannedStopNodes, plannedStopToR, func(nodes []*lab.Node) {
		env, notify = installAsUnit(t, nodes[0].Lab, nodes[0], oldPkg)
	})
	pa1, err := newInstalledPod(t, l, "pa1")
	if err != nil {
		t.Fatal(err)
	}
	plannedStop(t, plannedStopCase{kind: kind, l: l, nodes: nodes, laptop: laptop, tor: tor, pod: pa1.ip, restart: true, what: "package upgrade",
		beforeStop: func() { installOver(t, env, newPkg) }})
	checkUpgraded(t, newPkg)
	if n, _ := notify.count("READY=1"); n != 2 {
		t.Errorf("%d READY=1 from the installed daemons, want 2 (N, then N+1)", n)
	}
}
