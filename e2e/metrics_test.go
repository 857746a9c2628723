package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// scrape fetches a path of a node's metrics listener (on its address).
func scrape(t *testing.T, from string, n *lab.Node, path string) (int, string) {
	t.Helper()
	resp, err := lab.HTTPClientIn(from).Get(fmt.Sprintf("http://%s:9099%s", n.Address, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsPrometheus: Debian's Prometheus scrapes two meshed nodes
// (metrics: 0.0.0.0:9099); its query API shows both targets up and reef's
// series; promtool check metrics passes on the exposition; /healthz and
// /readyz answer; a partition shows in the peer's session metric, and a
// table deleted by hand as an nftables repair.
func TestMetricsPrometheus(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not installed (the prometheus package; make test installs it)")
	}
	l := newLab(t)
	out, err := l.AddOutside() // its router, on the underlay, runs Prometheus
	if err != nil {
		t.Fatal(err)
	}
	nodes := startMesh(t, l, 2, "metrics: 0.0.0.0:9099\n")
	n1, n2 := nodes[0], nodes[1]
	newPod(t, n1, "a")
	newPod(t, n1, "b")
	newPod(t, n2, "c")
	converge(t, n1, n2)

	t.Run("/healthz and /readyz", func(t *testing.T) {
		if code, body := scrape(t, out.Router, n1, "/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz: %d %q", code, body)
		}
		if code, body := scrape(t, out.Router, n1, "/readyz"); code != 200 {
			t.Errorf("/readyz of a ready node: %d %q", code, body)
		}
	})
	t.Run("promtool check metrics", func(t *testing.T) {
		_, body := scrape(t, out.Router, n1, "/metrics")
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, o)
		}
		for _, want := range []string{`reef_cni_operations_total{command="ADD",result="ok"} 2`, `reef_blocks{state="confirmed"} 1`,
			`reef_bgp_session_up{peer="` + n2.Address.String() + `",type="mesh"} 1`, "reef_reconcile_passes_total", "go_goroutines"} {
			if !strings.Contains(body, want) {
				t.Errorf("node1's /metrics lacks %q", want)
			}
		}
	})

	prom, err := l.StartPrometheus(out.Router, []string{n1.Address.String() + ":9099", n2.Address.String() + ":9099"},
		filepath.Join("..", "packaging", "prometheus", "reef-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop()
	query := func(expr string) []lab.PrometheusSample {
		t.Helper()
		r, err := prom.Query(expr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// value is the one sample of expr whose label key has val.
	value := func(expr, key, val string) (float64, bool) {
		for _, s := range query(expr) {
			if s.Metric[key] == val {
				return s.Value, true
			}
		}
		return 0, false
	}
	t.Run("both targets up, reef's series in the query API", func(t *testing.T) {
		eventually(t, 30*time.Second, func() string {
			up := query(`up{job="reef"} == 1`)
			if len(up) != 2 {
				return fmt.Sprintf("%d targets up, want 2: %v", len(up), up)
			}
			if s := query(`reef_bgp_session_up == 1`); len(s) != 2 {
				return fmt.Sprintf("established sessions: %v, want one on each node", s)
			}
			if s := query(`sum(reef_pool_addresses_in_use)`); len(s) != 1 || s[0].Value < 3 {
				return fmt.Sprintf("addresses in use: %v, want at least the 3 pods", s)
			}
			if s := query(`reef_bgp_updates_received_total > 0`); len(s) != 2 {
				return fmt.Sprintf("sessions with UPDATEs received: %v, want one on each node", s)
			}
			return ""
		})
	})
	t.Run("every alert and dashboard query runs, on series that exist", func(t *testing.T) {
		exprs, names := shippedQueries(t)
		for _, e := range exprs {
			if _, err := prom.Query(e); err != nil {
				t.Errorf("%v", err)
			}
		}
		for _, name := range names {
			if len(query(`count({__name__="`+name+`"})`)) == 0 {
				t.Errorf("the shipped rules or dashboard name %s, which neither node exposes", name)
			}
		}
		eventually(t, 10*time.Second, func() string {
			health, err := prom.RuleHealth()
			if err != nil {
				return err.Error()
			}
			if want := shippedAlerts(t); len(health) != want {
				return fmt.Sprintf("%d rules loaded, want the %d of reef-alerts.yml: %v", len(health), want, health)
			}
			for rule, h := range health {
				if h != "ok" {
					return rule + ": " + h
				}
			}
			return ""
		})
	})
	t.Run("a partition shows in the peer's session metric", func(t *testing.T) {
		if err := l.CutNode(n2, true); err != nil { // node2's switch port down: node1 sees its hold time run out
			t.Fatal(err)
		}
		defer l.CutNode(n2, false)
		eventually(t, 60*time.Second, func() string {
			if v, ok := value(`reef_bgp_session_up{instance="`+n1.Address.String()+`:9099"}`, "peer", n2.Address.String()); !ok || v != 0 {
				return fmt.Sprintf("node1's session with node2: %v (present %v), want 0", v, ok)
			}
			if s := query(`up{instance="` + n2.Address.String() + `:9099"} == 0`); len(s) != 1 {
				return "node2's target still up"
			}
			return ""
		})
	})
	t.Run("a table deleted by hand shows as an nftables repair", func(t *testing.T) {
		before, _ := value(`reef_reconcile_repairs_total{instance="`+n1.Address.String()+`:9099"}`, "kind", "nftables")
		run(t, l, n1.Netns, "nft", "delete", "table", "inet", "reef-nat")
		eventually(t, 20*time.Second, func() string {
			if v, _ := value(`reef_reconcile_repairs_total{instance="`+n1.Address.String()+`:9099"}`, "kind", "nftables"); v <= before {
				return fmt.Sprintf("nftables repairs %v, was %v", v, before)
			}
			return ""
		})
	})
}

// metricName is a metric name in a PromQL expression: reef's, Go's and the
// process collector's.
var metricName = regexp.MustCompile(`\b(reef_[a-z_]+|go_goroutines|process_resident_memory_bytes)\b`)

// shippedQueries are the expressions of the shipped alert rules and
// dashboard panels, and the metric names they use.
// shippedAlerts is how many alert rules packaging/prometheus/reef-alerts.yml has.
func shippedAlerts(t *testing.T) int {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join("..", "packaging", "prometheus", "reef-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(rules), "- alert: ")
}

func shippedQueries(t *testing.T) (exprs, names []string) {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join("..", "packaging", "prometheus", "reef-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr: "); ok {
			exprs = append(exprs, e)
		}
	}
	dash, err := os.ReadFile(filepath.Join("..", "packaging", "grafana", "reef-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("found %d expressions in the shipped rules and dashboard", len(exprs))
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			m = strings.TrimSuffix(m, "_bucket")
			if m == "reef_cni_operation_duration_seconds" || m == "reef_reconcile_pass_duration_seconds" {
				m += "_bucket"
			}
			if !seen[m] {
				seen[m] = true
				names = append(names, m)
			}
		}
	}
	return exprs, names
}

// TestAlertRules: promtool check rules and promtool test rules pass on the
// shipped alert rules.
func TestAlertRules(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not installed (the prometheus package; make test installs it)")
	}
	dir := filepath.Join("..", "packaging", "prometheus")
	for _, args := range [][]string{{"check", "rules", "reef-alerts.yml"}, {"test", "rules", "reef-alerts_test.yml"}} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
