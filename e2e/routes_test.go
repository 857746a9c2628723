package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestRoutesCommand: `reef routes` lists what reef wants next to the
// kernel, all in sync on a healthy node (exit 0); a pod's route deleted by
// hand shows as missing and a route of reef's protocol added by hand as
// extra before the next pass repairs them (exit 1).
func TestRoutesCommand(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * time.Minute})
	p := newPod(t, n, "web")
	veth := p.Result.Interfaces[0].Name
	out, err := n.Reef("routes")
	if err != nil {
		t.Fatalf("reef routes on a healthy node: %v\n%s", err, out)
	}
	for _, re := range []string{
		`(?m)^route\s+` + regexp.QuoteMeta(p.IP.String()) + `/32\s+in-sync\s+` + regexp.QuoteMeta(p.IP.String()) + `/32 dev ` + veth,
		`(?m)^route\s+10\.244\.\d+\.0/26\s+in-sync\s+blackhole`,
		`(?m)^link\s+` + veth + `\s+in-sync`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("reef routes lacks %s:\n%s", re, out)
		}
	}
	run(t, l, n.Netns, "ip", "route", "del", p.IP.String()+"/32")
	run(t, l, n.Netns, "ip", "route", "add", "blackhole", "10.99.0.0/24", "proto", "238")
	out, err = n.Reef("routes")
	if err == nil || !strings.Contains(out, "not in sync") {
		t.Errorf("reef routes after the route was deleted: %v, want exit status 1 saying what is not in sync:\n%s", err, out)
	}
	for _, re := range []string{
		`(?m)^route\s+` + regexp.QuoteMeta(p.IP.String()) + `/32\s+missing\s+` + regexp.QuoteMeta(p.IP.String()) + `/32 dev ` + veth + `.*\s-$`,
		`(?m)^route\s+10\.99\.0\.0/24\s+extra\s+-\s+blackhole 10\.99\.0\.0/24`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("reef routes lacks %s:\n%s", re, out)
		}
	}
	if out, err := n.Reef("routes", "-o", "json"); !strings.Contains(out, `"state": "missing"`) {
		t.Errorf("reef routes -o json: %v\n%s", err, out)
	}
}
