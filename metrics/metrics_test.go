package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testState() State {
	return State{
		Peers: []Peer{
			{Address: "192.168.77.12", Type: "mesh", Up: true, Since: time.Now().Add(-time.Minute), Received: 4, Accepted: 3, Dropped: map[string]uint64{"import-filter": 1},
				UpdatesIn: 7, UpdatesOut: 5, Updates: true},
			{Address: "192.168.77.13", Type: "mesh"},
			{Address: "192.168.77.60", Type: "external", CutOff: true},
		},
		Blocks:         map[string]int{"confirmed": 1, "remote": 2},
		Pools:          []Pool{{CIDR: "10.244.0.0/16", InUse: 3, Capacity: 64, Blocks: 1024, Claimed: 3}},
		PendingDeletes: 2,
		ServiceCIDRs:   map[string]bool{"10.96.0.0/12": true, "fd00:10:96::/112": false},
		ServiceAddresses: []ServiceAddress{{Address: "203.0.113.7", Service: "default/web", Source: "loadBalancer", Reason: "local"},
			{Address: "203.0.113.7", Service: "default/api", Source: "externalIP", Reason: "cluster"}},
		LBIPAM:       &LBIPAM{Leader: true, Assigned: 6},
		BFD:          map[string]bool{"192.168.77.1": true, "192.168.78.1": false},
		StandIns:     map[string]int{"ipv4": 2},
		BlocksMarked: map[string]int{"ipv6": 1},
	}
}

// TestExposition: what a scrape returns follows Prometheus' naming rules
// (testutil's lint, as promtool check metrics), has HELP for every family
// and carries the state and the counters.
func TestExposition(t *testing.T) {
	m := New()
	m.CNI("ADD", "ok", 12*time.Millisecond)
	m.CNI("ADD", "11", time.Millisecond)
	m.Pass(3*time.Millisecond, nil)
	m.Pass(3*time.Millisecond, []string{"kernel"})
	m.Repaired(RepairNFTables, 2)
	problems, err := testutil.GatherAndLint(m.gatherer(testState))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	srv := httptest.NewServer(m.Handler(testState, func() (bool, string) { return true, "" }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`reef_cni_operations_total{command="ADD",result="ok"} 1`,
		`reef_cni_operations_total{command="ADD",result="11"} 1`,
		`reef_cni_add_try_again_total 1`,
		`reef_cni_operation_duration_seconds_count{command="ADD"} 2`,
		`reef_reconcile_passes_total{result="ok"} 1`,
		`reef_reconcile_passes_total{result="error"} 1`,
		`reef_reconcile_errors_total{kind="kernel"} 1`,
		`reef_reconcile_errors_total{kind="blocks"} 0`,
		"reef_reconcile_errors_total Reconcile passes that failed, by the part that failed (kernel, blocks).",
		`reef_reconcile_repairs_total{kind="nftables"} 2`,
		`reef_reconcile_repairs_total{kind="route"} 0`,
		`reef_bgp_session_up{peer="192.168.77.12",type="mesh"} 1`,
		`reef_bgp_session_up{peer="192.168.77.13",type="mesh"} 0`,
		`reef_bgp_peer_cut_off{peer="192.168.77.12",type="mesh"} 0`,
		`reef_bgp_peer_cut_off{peer="192.168.77.60",type="external"} 1`,
		`reef_bgp_session_uptime_seconds{peer="192.168.77.13",type="mesh"} 0`,
		`reef_bgp_paths_dropped{peer="192.168.77.12",reason="import-filter",type="mesh"} 1`,
		`reef_blocks{state="remote"} 2`,
		`reef_bgp_updates_received_total{peer="192.168.77.12",type="mesh"} 7`,
		`reef_bgp_updates_sent_total{peer="192.168.77.12",type="mesh"} 5`,
		`reef_pool_addresses_in_use{pool="10.244.0.0/16"} 3`,
		`reef_pool_blocks{pool="10.244.0.0/16"} 1024`,
		`reef_cni_pending_deletes 2`,
		`reef_bgp_service_cidr_announced{cidr="10.96.0.0/12"} 1`,
		`reef_bgp_service_cidr_announced{cidr="fd00:10:96::/112"} 0`,
		`reef_bgp_service_address_announced{address="203.0.113.7",reason="local",service="default/web",source="loadBalancer"} 1`,
		`reef_bgp_service_address_announced{address="203.0.113.7",reason="cluster",service="default/api",source="externalIP"} 1`,
		`reef_lb_ipam_leader 1`,
		`reef_lb_ipam_addresses_assigned 6`,
		`reef_bgp_bfd_up{peer="192.168.77.1"} 1`,
		`reef_bgp_bfd_up{peer="192.168.78.1"} 0`,
		`reef_bgp_stand_ins{family="ipv4"} 2`,
		`reef_bgp_stand_ins{family="ipv6"} 0`,
		`reef_bgp_blocks_marked{family="ipv4"} 0`,
		`reef_bgp_blocks_marked{family="ipv6"} 1`,
		"go_goroutines", "process_resident_memory_bytes", "reef_process_anon_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# TYPE reef_") {
			name := strings.Fields(line)[2]
			if !strings.Contains(text, "# HELP "+name+" ") {
				t.Errorf("%s has no HELP", name)
			}
		}
	}
}

func TestHealthAndReady(t *testing.T) {
	ready := false
	srv := httptest.NewServer(New().Handler(nil, func() (bool, string) { return ready, "starting" }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	ready = true
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d", code)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.CNI("ADD", "ok", time.Millisecond)
	m.Pass(time.Millisecond, nil)
	m.Repaired(RepairRoute, 1)
	m.Claim("10.244.0.0/16", "made")
}

// The anonymous memory gauge reads RssAnon, in bytes, and this process has
// some.
func TestRSSAnon(t *testing.T) {
	if got := rssAnon("/proc/self/status"); got < 1<<20 {
		t.Errorf("rssAnon(/proc/self/status) = %d, want at least 1 MiB for a running Go test", got)
	}
	if got := rssAnon("/nonexistent"); got != 0 {
		t.Errorf("rssAnon of a missing file = %d, want 0", got)
	}
}
