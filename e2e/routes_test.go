package e2e

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// Healthy once the pass that follows the ADD (and the block's claim)
	// has run: it writes the block's blackhole.
	eventually(t, 20*time.Second, func() string {
		out, err := n.Reef("routes")
		if err != nil {
			return fmt.Sprintf("reef routes on a healthy node: %v\n%s", err, out)
		}
		for _, re := range []string{
			`(?m)^route\s+` + regexp.QuoteMeta(p.IP.String()) + `/32\s+in-sync\s+` + regexp.QuoteMeta(p.IP.String()) + `/32 dev ` + veth,
			`(?m)^route\s+10\.244\.\d+\.0/26\s+in-sync\s+blackhole`,
			`(?m)^link\s+` + veth + `\s+in-sync`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				return fmt.Sprintf("reef routes lacks %s:\n%s", re, out)
			}
		}
		return ""
	})
	// A pass still to come would repair the drift: it is made again
	// until reef routes has shown it. No other pass comes for ten
	// minutes.
	eventually(t, 20*time.Second, func() string {
		l.Run(n.Netns, "ip", "route", "del", p.IP.String()+"/32")                         // gone already after the first try: fine
		l.Run(n.Netns, "ip", "route", "add", "blackhole", "10.99.0.0/24", "proto", "238") // there already: fine
		out, err := n.Reef("routes")
		if err == nil || !strings.Contains(out, "not in sync") {
			return fmt.Sprintf("reef routes after the route was deleted: %v, want exit status 1 saying what is not in sync:\n%s", err, out)
		}
		for _, re := range []string{
			`(?m)^route\s+` + regexp.QuoteMeta(p.IP.String()) + `/32\s+missing\s+` + regexp.QuoteMeta(p.IP.String()) + `/32 dev ` + veth + `.*\s-$`,
			`(?m)^route\s+10\.99\.0\.0/24\s+extra\s+-\s+blackhole 10\.99\.0\.0/24`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				return fmt.Sprintf("reef routes lacks %s:\n%s", re, out)
			}
		}
		return ""
	})
	if out, err := n.Reef("routes", "-o", "json"); !strings.Contains(out, `"state": "missing"`) {
		t.Errorf("reef routes -o json: %v\n%s", err, out)
	}
}

// TestRoutesForeignInTheWay: a route of another protocol put in the place
// of a pod's route of reef's (`ip route replace`, IPv4 and IPv6) is not
// overwritten by any pass, and `reef routes` and `reef ipam check` say so:
// state in-the-way with the foreign route, and a fix that deletes it,
// instead of "missing" and "the next reconcile pass repairs it". Once
// the operator deletes it, the next pass puts reef's route back.
func TestRoutesForeignInTheWay(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: " + dualPool4.String() + "\n  - cidr: " + dualPool6.String() + "\n"})
	p := newPod(t, n, "web")
	v4, v6 := dualPod(t, l, p, dualPool4, dualPool6)
	run(t, l, n.Netns, "ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1")
	run(t, l, n.Netns, "ip", "link", "set", "other0", "up")
	run(t, l, n.Netns, "ip", "route", "replace", v4.String()+"/32", "dev", "other0", "proto", "static")
	run(t, l, n.Netns, "ip", "-6", "route", "replace", v6.String()+"/128", "dev", "other0", "proto", "static")
	waitPass(t, n) // a pass that would repair a missing route
	out, err := n.Reef("routes")
	t.Logf("reef routes:\n%s", out)
	if err == nil || !strings.Contains(out, "which reef does not overwrite") {
		t.Errorf("reef routes with foreign routes in reef's place: %v, want exit status 1 saying reef does not overwrite them", err)
	}
	for _, dst := range []string{v4.String() + "/32", v6.String() + "/128"} {
		re := `(?m)^route\s+` + regexp.QuoteMeta(dst) + `\s+in-the-way\s+.*\s` + regexp.QuoteMeta(dst) + ` proto static$`
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("reef routes lacks %s", re)
		}
	}
	check, err := n.Reef("ipam", "check")
	t.Logf("reef ipam check:\n%s", check)
	if err == nil || strings.Count(check, "route-in-the-way ") != 2 || !strings.Contains(check, "ip route del "+v4.String()+"/32 proto static") {
		t.Errorf("reef ipam check: %v, want both routes in the way, with the fix that deletes them", err)
	}
	if r := run(t, l, n.Netns, "ip", "route", "show", v4.String()+"/32"); !strings.Contains(r, "other0 proto static") {
		t.Errorf("the static route was overwritten: %q", r)
	}
	run(t, l, n.Netns, "ip", "route", "del", v4.String()+"/32", "proto", "static")
	run(t, l, n.Netns, "ip", "-6", "route", "del", v6.String()+"/128", "proto", "static")
	eventually(t, 20*time.Second, func() string {
		if out, err := n.Reef("routes"); err != nil {
			return fmt.Sprintf("reef routes once the foreign routes are gone: %v\n%s", err, out)
		}
		return ""
	})
}

// TestIPAMCheckRelease: `reef ipam check` exits 0 on a healthy node and
// names a leak made on purpose (a sandbox gone while the daemon was
// stopped); `reef ipam release` frees it and check exits 0 again; a live
// pod's address needs --force.
func TestIPAMCheckRelease(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * time.Minute})
	live := newPod(t, n, "live")
	leak := newPod(t, n, "leak")
	if out, err := n.Reef("ipam", "check"); err != nil || !strings.HasPrefix(out, "ok: 2 endpoints") {
		t.Fatalf("reef ipam check on a healthy node: %v\n%s", err, out)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := l.DelNetns(leak.Netns); err != nil { // the sandbox goes, no DEL
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := n.Reef("ipam", "check")
	if err == nil || !strings.Contains(out, "no-live-sandbox "+leak.IP.String()+": pod default/leak") || !strings.Contains(out, "fix: reef ipam release "+leak.IP.String()) {
		t.Fatalf("reef ipam check with a leaked address: %v, want exit 1 naming %s and the fix:\n%s", err, leak.IP, out)
	}
	if out, err := n.Reef("ipam", "check", "-o", "json"); err == nil || !strings.Contains(out, `"kind": "no-live-sandbox"`) {
		t.Errorf("reef ipam check -o json: %v\n%s", err, out)
	}
	if out, err := n.Reef("ipam", "release", leak.IP.String()); err != nil || !strings.Contains(out, "released "+leak.IP.String()) {
		t.Fatalf("reef ipam release %s: %v\n%s", leak.IP, err, out)
	}
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check after the release: %v\n%s", err, out)
	}
	out, err = n.Reef("ipam", "release", live.IP.String())
	if err == nil || !strings.Contains(out, "is live") || !strings.Contains(out, "--force") {
		t.Errorf("reef ipam release of a live pod's address: %v, want a refusal naming --force:\n%s", err, out)
	}
	if a := allocations(t, n); len(a) != 1 {
		t.Errorf("allocations after the refused release: %v, want the live pod's", a)
	}
	if out, err := n.Reef("ipam", "release", live.IP.String(), "--force"); err != nil || !strings.Contains(out, "forced") {
		t.Errorf("reef ipam release --force: %v\n%s", err, out)
	}
	if a := allocations(t, n); len(a) != 0 {
		t.Errorf("allocations after the forced release: %v, want none", a)
	}
	if v := reefVeths(t, n); len(v) != 0 {
		t.Errorf("veths after the forced release: %v, want none", v)
	}
}

// TestRuntimeWarnings: `reef status` and reef_runtime_config_problem say
// when the runtime will not use reef: another conflist sorting before
// reef's in the CNI config dir.
func TestRuntimeWarnings(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	metric := func() string {
		resp, err := lab.HTTPClientIn(n.Netns).Get("http://127.0.0.1:9099/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, `reef_runtime_config_problem{problem="conflist-shadowed"}`) {
				return line
			}
		}
		return ""
	}
	if st, err := n.Reef("status"); err != nil || strings.Contains(st, "WARNING") {
		t.Errorf("reef status of a node whose runtime uses reef: %v\n%s", err, st)
	}
	if m := metric(); !strings.HasSuffix(m, " 0") {
		t.Errorf("metric %q, want 0", m)
	}
	other := filepath.Join(n.CNIConfDir(), "05-flannel.conflist")
	if err := os.WriteFile(other, []byte(`{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := n.Reef("status")
	if err != nil || !strings.Contains(st, "WARNING:    05-flannel.conflist sorts before reef's 10-reef.conflist") || !strings.Contains(st, "max_conf_num = 1") {
		t.Errorf("reef status with another conflist first: %v\n%s", err, st)
	}
	if m := metric(); !strings.HasSuffix(m, " 1") {
		t.Errorf("metric %q, want 1", m)
	}
	os.Remove(other)
	if st, _ := n.Reef("status"); strings.Contains(st, "WARNING") {
		t.Errorf("reef status after the other conflist went:\n%s", st)
	}
}

// TestDiagnose: `reef diagnose` writes one tar.gz with the files
// docs/ipam.md lists, and the BGP password appears in none of them.
func TestDiagnose(t *testing.T) {
	l := newLab(t)
	const secret = "s3cret-diag-42"
	n := startNode(t, l, "node1", lab.NodeOptions{BGP: "  asn: 64512\n  password: " + secret + "\n"})
	newPod(t, n, "web")
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	// In the node's namespace, as on a node: nft and ip read its tables.
	if out, err := l.Run(n.Netns, filepath.Join(l.BinDir, "reef"), "diagnose", "-o", path, "--config", n.Config); err != nil || !strings.Contains(out, "wrote "+path) {
		t.Fatalf("reef diagnose: %v\n%s", err, out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[filepath.Base(h.Name)] = string(b)
	}
	for _, name := range []string{"MANIFEST.txt", "status.txt", "status.json", "ipam-show.txt", "ipam-show.json", "ipam-check.txt", "routes.txt",
		"version.txt", "config.yaml", "links.txt", "ip-routes.txt", "ip6-routes.txt", "journal.txt",
		"nftables-inet-reef-nat.txt", "nftables-arp-reef.txt", "nftables-inet-reef.txt", "nftables-inet-reef-hostport.txt",
		"nftables-ip6-reef-ndp.txt"} {
		if _, ok := files[name]; !ok {
			t.Errorf("the bundle lacks %s (it has %d files)", name, len(files))
		}
	}
	for name, body := range files {
		if strings.Contains(body, secret) {
			t.Errorf("%s holds the BGP password", name)
		}
	}
	for name, want := range map[string]string{"config.yaml": "password: REDACTED", "status.txt": "endpoints:", "routes.txt": "in-sync",
		"nftables-inet-reef-nat.txt": "masq-pools4", "ipam-check.txt": "ok: 1 endpoints", "MANIFEST.txt": "status.txt"} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q:\n%s\nMANIFEST:\n%s", name, want, files[name], files["MANIFEST.txt"])
		}
	}
}

// TestIPAMCheckMesh: on two meshed nodes that see each other's blocks,
// `reef ipam check` is clean on both: their own blocks, as the cluster
// announces them, are not taken for blocks claimed twice.
func TestIPAMCheckMesh(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 2, "")
	newPod(t, nodes[0], "a")
	newPod(t, nodes[1], "b")
	converge(t, nodes...)
	for _, n := range nodes {
		if out, err := n.Reef("ipam", "check"); err != nil || !strings.HasPrefix(out, "ok: ") {
			t.Errorf("reef ipam check on %s: %v\n%s", n.Name, err, out)
		}
	}
}
