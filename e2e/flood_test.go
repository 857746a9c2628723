package e2e

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
)

// TestExternalPeerFlood: an external peer (Debian's gobgpd) gets the
// node's block and sends routes of its own, which two feeders (reef-lab
// speaker, iBGP to gobgpd) give it; below maxPrefixes (the default 1000)
// they are held, counted and installed nowhere; a flood of 100,000 cuts
// the session off, reef status, the log and reef_bgp_peer_cut_off say
// why, and the daemon's anonymous memory (RssAnon) grows by less than 10
// MiB. Then reef peer reset: with the flood still there the session is
// cut off again; once gobgpd has only the 500 routes, it comes back.
func TestExternalPeerFlood(t *testing.T) {
	l := newLab(t)
	feeders := []netip.Addr{netip.MustParseAddr("192.168.77.61"), netip.MustParseAddr("192.168.77.62")}
	n, g := nodeWithGobgpd(t, l, feeders)
	// feed runs feeder i with count routes for gobgpd to pass on.
	feed := func(i, count int) {
		t.Helper()
		ns, err := l.AddHost(fmt.Sprintf("feeder%d", i), feeders[i])
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(l.Dir, fmt.Sprintf("feeder%d.routes", i))
		if err := lab.FloodFile(file, count, feeders[i]); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Spawn(ns, fmt.Sprintf("feeder%d.log", i), filepath.Join(binDir, "reef-lab"), "speaker", "--asn", "65001",
			"--router-id", feeders[i].String(), "--peers", g.Address.String(), "--announce-file", file); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, n, "p1")
	block := netip.MustParsePrefix(p.IP.String() + "/26").Masked().String()
	external := func() *reefv1.ExternalPeer {
		ext := mustStatus(t, n).GetExternalPeers()
		if len(ext) != 1 {
			t.Fatalf("external peers: %s", ext2s(ext))
		}
		return ext[0]
	}
	eventually(t, 20*time.Second, func() string {
		if e := external(); e.GetState() != "established" || e.GetSent() != 1 {
			return "gobgpd's session: " + e.String()
		}
		if rib, _ := g.CLI("global", "rib"); !strings.Contains(rib, block) {
			return "gobgpd's table has no " + block + ":\n" + rib
		}
		return ""
	})

	// Below the limit: held and counted, installed nowhere.
	routesBefore := reefRoutes(t, n)
	feed(0, 500)
	eventually(t, 20*time.Second, func() string {
		if e := external(); e.GetState() != "established" || e.GetReceived() != 500 || e.GetDropped()[bgp.DropOther] != 500 {
			return "after 500 routes: " + e.String()
		}
		return ""
	})
	if out := run(t, l, n.Netns, "ip", "-4", "route", "show", "100.64.0.0/10", "root", "100.64.0.0/10"); out != "" {
		t.Errorf("the node installed routes from its external peer:\n%s", out)
	}
	before, err := n.Memory()
	if err != nil {
		t.Fatal(err)
	}

	// The flood.
	feed(1, 100000)
	eventually(t, 60*time.Second, func() string {
		if e := external(); !strings.HasPrefix(e.GetState(), "cut off: sent more than maxPrefixes 1000") {
			return "after the flood: " + e.String()
		}
		return ""
	})
	// gobgpd had the whole flood to send.
	eventually(t, 60*time.Second, func() string {
		if sum, _ := g.CLI("global", "rib", "summary"); !strings.Contains(sum, "Destination: 100000,") {
			return "gobgpd's table: " + sum
		}
		return ""
	})
	// What is tested is a duration: the session stays cut off for 5 s
	// while gobgpd keeps trying. Nothing here waits for the daemon.
	time.Sleep(5 * time.Second)
	e := external()
	if !strings.HasPrefix(e.GetState(), "cut off") || e.GetSent() != 0 {
		t.Errorf("5s after the flood: %s", e)
	}
	after, err := n.Memory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon RssAnon %d kB before the flood of 100,000 routes, %d kB after; RSS %d kB before, %d kB after (peak %d kB)",
		before.Anon, after.Anon, before.RSS, after.RSS, after.HWM)
	if grew := after.Anon - before.Anon; grew >= 10*1024 {
		t.Errorf("RssAnon grew by %d kB over the flood, want less than 10 MiB", grew)
	}
	if !strings.Contains(n.Log(), "BGP peer sent more routes than the session's prefix limit") {
		t.Errorf("the daemon log does not say why the session closed")
	}
	if got := reefRoutes(t, n); strings.Join(got, "\n") != strings.Join(routesBefore, "\n") {
		t.Errorf("the node's routes changed over the flood:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(routesBefore, "\n"))
	}
	if _, err := l.Ping(p.Netns, n.Address); err != nil {
		t.Errorf("the pod cannot reach its node after the flood: %v", err)
	}

	// reef peer reset. The metric an operator alerts on says cut off.
	cutOff := `reef_bgp_peer_cut_off{peer="` + g.Address.String() + `",type="external"}`
	if v := scrapeIn(t, n, cutOff); v != "1" {
		t.Errorf("%s is %s while the session is cut off, want 1", cutOff, v)
	}
	cutOffs := func() int { return strings.Count(n.Log(), "BGP peer sent more routes than the session's prefix limit") }
	reset := func() string {
		t.Helper()
		out, err := n.Reef("peer", "reset", g.Address.String())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// gobgpd still has the flood: let in, it sends it and is cut off
	// again (the limit holds).
	if out := reset(); !strings.Contains(out, "may connect again") {
		t.Errorf("reef peer reset of the peer cut off says %q", out)
	}
	eventually(t, 60*time.Second, func() string {
		if c, e := cutOffs(), external(); c != 2 || !strings.HasPrefix(e.GetState(), "cut off") {
			return fmt.Sprintf("%d cut-offs after the reset, want 2; %s", c, e)
		}
		return ""
	})
	// gobgpd drops the flood's feeder: 500 routes left to send.
	if out, err := g.CLI("neighbor", feeders[1].String(), "disable"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		if sum, _ := g.CLI("global", "rib", "summary"); !strings.Contains(sum, "Destination: 500,") {
			return "gobgpd's table: " + sum
		}
		return ""
	})
	reset()
	eventually(t, 30*time.Second, func() string {
		if e := external(); e.GetState() != "established" || e.GetReceived() != 500 || e.GetSent() != 1 {
			return "after the reset, with 500 routes to send: " + e.String()
		}
		if v := scrapeIn(t, n, cutOff); v != "0" {
			return cutOff + " is " + v + " with the session up"
		}
		return ""
	})
	if c := cutOffs(); c != 2 {
		t.Errorf("cut off %d times, want 2", c)
	}
	if out := reset(); !strings.Contains(out, "is not cut off by its prefix limit (state established): nothing to do") {
		t.Errorf("reef peer reset of a session that is up says %q", out)
	}
	if out, err := n.Reef("peer", "reset", "192.168.77.99"); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(out, "no BGP peer of this node") {
		t.Errorf("reef peer reset of an address that is no peer: %v, %q; want exit status 1 and why", err, out)
	}
}
