package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/policy/kube"
)

// unsyncedPolicyAPI is the API as policyDataplane reads it, with a status
// of the test's choosing.
type unsyncedPolicyAPI struct {
	fakePolicyAPI
	status kube.Status
}

func (a *unsyncedPolicyAPI) Synced() bool        { return a.status.Synced }
func (a *unsyncedPolicyAPI) Status() kube.Status { return a.status }

// TestReadyz: /readyz says 503 while the daemon starts and, with
// NetworkPolicy on, while its informers have not synced (every ADD answers
// code 11 then), naming the API and why it is away; 200 once ADD is served.
func TestReadyz(t *testing.T) {
	away := kube.Status{Server: "https://192.0.2.1:6443", Since: time.Unix(0, 0), LastError: "connect: no route to host"}
	for _, tc := range []struct {
		name     string
		cniReady bool
		api      *kube.Status // nil: NetworkPolicy off
		code     int
		want     []string
	}{
		{"starting", false, nil, 503, []string{"reef daemon is starting"}},
		{"ready, policy off", true, nil, 200, []string{"ok"}},
		{"policy not synced, API away", true, &away, 503, []string{"not read NetworkPolicy", "https://192.0.2.1:6443 is unreachable", "no route to host"}},
		{"policy not synced, API there", true, &kube.Status{Reachable: true}, 503, []string{"not read NetworkPolicy"}},
		{"policy synced", true, &kube.Status{Synced: true, Reachable: true}, 200, []string{"ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Daemon{cni: cniserver.New(cniserver.Config{}, cniserver.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})}
			d.cni.SetReady(tc.cniReady)
			if tc.api != nil {
				d.policy = &policyDataplane{watch: &unsyncedPolicyAPI{status: *tc.api}}
			}
			rec := httptest.NewRecorder()
			metrics.New().Handler(nil, d.ready).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.code {
				t.Errorf("/readyz: %d %q, want %d", rec.Code, rec.Body, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("/readyz: %q, want it to say %q", rec.Body, w)
				}
			}
		})
	}
}
