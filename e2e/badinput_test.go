package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
)

type cniError struct {
	Code    int    `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// TestBadInputs feeds reef-cni what a broken runtime or config could send.
// Each gets a CNI error with the spec's code and a message that names the
// problem; afterwards the daemon still serves and nothing is left behind.
func TestBadInputs(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	pod, err := n.NewPodNetns("default", "target")
	if err != nil {
		t.Fatal(err)
	}
	// The shim gets one plugin's config, as libcni hands it over.
	conf := func(version, extra string) string {
		return `{"cniVersion":"` + version + `","name":"k8s-pod-network","type":"reef-cni","socket":"` + n.Socket +
			`","pendingDeleteDir":"` + n.PendingDir + `"` + extra + `}`
	}
	env := func(over map[string]string) map[string]string {
		e := map[string]string{
			"CNI_COMMAND":     "ADD",
			"CNI_CONTAINERID": "badinput0001",
			"CNI_NETNS":       lab.NetnsPath(pod.Netns),
			"CNI_IFNAME":      "eth0",
			"CNI_PATH":        n.Lab.BinDir,
			"CNI_ARGS":        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=target",
		}
		for k, v := range over {
			if v == "<unset>" {
				delete(e, k)
			} else {
				e[k] = v
			}
		}
		return e
	}
	cases := []struct {
		name     string
		env      map[string]string
		stdin    string
		code     int
		contains string
	}{
		{"malformed JSON", env(nil), `{"cniVersion": "1.1.0", "name": `, 6, "network config"},
		{"unknown cniVersion", env(nil), conf("9.9.9", ""), 1, "9.9.9"},
		{"missing CNI_CONTAINERID", env(map[string]string{"CNI_CONTAINERID": "<unset>"}), conf("1.1.0", ""), 4, "CNI_CONTAINERID"},
		{"invalid CNI_CONTAINERID", env(map[string]string{"CNI_CONTAINERID": "-bad/id"}), conf("1.1.0", ""), 4, "-bad/id"},
		{"CNI_NETNS does not exist", env(map[string]string{"CNI_NETNS": "/var/run/netns/" + n.Lab.Prefix + "-nope"}), conf("1.1.0", ""), 3, n.Lab.Prefix + "-nope"},
		{"CNI_NETNS is a plain file", env(map[string]string{"CNI_NETNS": n.Config}), conf("1.1.0", ""), 3, "not a network namespace"},
		{"CNI_IFNAME too long", env(map[string]string{"CNI_IFNAME": "abcdefghijklmnop"}), conf("1.1.0", ""), 4, "too long"},
		{"unknown pool", env(nil), conf("1.1.0", `,"pool":"10.99.0.0/16"`), 7, "10.99.0.0/16"},
		{"pool not a CIDR", env(nil), conf("1.1.0", `,"pool":"ten"`), 7, `"ten"`},
		{"malformed CNI_ARGS", env(map[string]string{"CNI_ARGS": "K8S_POD_NAME"}), conf("1.1.0", ""), 4, "K8S_POD_NAME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code, err := n.Shim(tc.env, []byte(tc.stdin))
			if err != nil {
				t.Fatal(err)
			}
			if code == 0 {
				t.Fatalf("reef-cni succeeded: %s", out)
			}
			var e cniError
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("stdout is not a CNI error: %q", out)
			}
			if e.Code != tc.code || !strings.Contains(e.Msg+" "+e.Details, tc.contains) {
				t.Errorf("got code %d %q (%s), want code %d mentioning %q", e.Code, e.Msg, e.Details, tc.code, tc.contains)
			}
		})
	}

	// The daemon's own validation, for callers that are not the shim.
	cni, closeConn, err := n.CNIClient()
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	direct := []struct {
		name string
		req  *reefv1.CNIRequest
		code uint32
	}{
		{"empty container id", &reefv1.CNIRequest{Netns: lab.NetnsPath(pod.Netns), Ifname: "eth0", Netconf: []byte(conf("1.1.0", ""))}, 4},
		{"ifname with slash", &reefv1.CNIRequest{ContainerId: "x1", Netns: lab.NetnsPath(pod.Netns), Ifname: "a/b", Netconf: []byte(conf("1.1.0", ""))}, 4},
		{"relative netns", &reefv1.CNIRequest{ContainerId: "x1", Netns: "netns/x", Ifname: "eth0", Netconf: []byte(conf("1.1.0", ""))}, 4},
		{"no netconf", &reefv1.CNIRequest{ContainerId: "x1", Netns: lab.NetnsPath(pod.Netns), Ifname: "eth0"}, 6},
		{"empty cniVersion", &reefv1.CNIRequest{ContainerId: "x1", Netns: lab.NetnsPath(pod.Netns), Ifname: "eth0", Netconf: []byte(`{"name":"n"}`)}, 1},
	}
	for _, tc := range direct {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := cni.Add(ctx, tc.req)
		cancel()
		if err != nil {
			t.Fatalf("%s: gRPC error %v", tc.name, err)
		}
		if rep.GetError().GetCode() != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, rep.GetError().GetCode(), rep.GetError().GetMsg(), tc.code)
		}
	}

	// Nothing was left behind, and the daemon still serves.
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations left by refused ADDs: %v", got)
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("veths left by refused ADDs: %v", got)
	}
	if !n.Running() {
		t.Fatal("daemon died")
	}
	if err := pod.Add(); err != nil {
		t.Fatalf("a good ADD after the bad ones: %v", err)
	}
}

// TestNetnsVanishesDuringAdd removes the pod's netns while the daemon is
// half-way through wiring it: the ADD fails with "container unknown" and
// leaves no veth, route or allocation.
func TestNetnsVanishesDuringAdd(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Binary: "reef-test", Env: []string{"REEF_TEST_PAUSE_AFTER_VETH=1s"}})
	p, err := n.NewPodNetns("default", "vanishing")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Add() }()
	// Wait until the veth exists (the daemon is in its pause), then pull
	// the netns away.
	eventually(t, 5*time.Second, func() string {
		if len(reefVeths(t, n)) == 0 {
			return "veth never appeared"
		}
		return ""
	})
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err == nil {
		t.Fatal("ADD succeeded although its netns vanished")
	}
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrUnknownContainer || !strings.Contains(e.Msg, "is gone") {
		t.Errorf("ADD error = %v, want CNI code 3 saying the netns is gone", err)
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations left: %v", got)
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("veths left: %v", got)
	}
	for _, r := range reefRoutes(t, n) {
		if !strings.HasPrefix(r, "blackhole") {
			t.Errorf("route left: %s", r)
		}
	}
}
