package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tc"
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
	// An interface the sandbox has already, not reef's.
	if out, err := pod.Run("ip", "link", "add", "taken0", "type", "veth", "peer", "name", "taken1"); err != nil {
		t.Fatalf("ip link add taken0: %v\n%s", err, out)
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
		{"CNI_NETNS is a mount namespace", env(map[string]string{"CNI_NETNS": "/proc/self/ns/mnt"}), conf("1.1.0", ""), 3, "not a network namespace"},
		{"CNI_NETNS is a plain file", env(map[string]string{"CNI_NETNS": n.Config}), conf("1.1.0", ""), 3, "not a network namespace"},
		{"CNI_IFNAME too long", env(map[string]string{"CNI_IFNAME": "abcdefghijklmnop"}), conf("1.1.0", ""), 4, "too long"},
		{"CNI_IFNAME is lo", env(map[string]string{"CNI_IFNAME": "lo"}), conf("1.1.0", ""), 4, "loopback"},
		{"CNI_IFNAME exists in the netns", env(map[string]string{"CNI_IFNAME": "taken0"}), conf("1.1.0", ""), 4, `"taken0" already exists`},
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
	// The runtime's DEL of the refused lo finds nothing and leaves the pod.
	if out, code, err := n.Shim(env(map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": pod.ContainerID, "CNI_IFNAME": "lo"}), []byte(conf("1.1.0", ""))); err != nil || code != 0 {
		t.Errorf("DEL of CNI_IFNAME lo: exit %d %v: %s", code, err, out)
	}
	if err := pod.Check(); err != nil {
		t.Errorf("CHECK after the DEL of lo: %v", err)
	}
	// A runtime that lost its cache of results sends CHECK without
	// prevResult: refused, as the reference plugins do.
	if err := pod.ForgetCNICache(); err != nil {
		t.Fatal(err)
	}
	var e *types.Error
	if err := pod.Check(); !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, "CHECK needs prevResult") {
		t.Errorf("CHECK without prevResult: %v, want code 7 saying CHECK needs prevResult", err)
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

// podLeftovers lists what of a pod (its host veth, its address) is on the
// node: the veth, its ifb, a route to the address, an element of table
// inet reef-hostport or of set arp reef pod-addrs naming either, the
// address's allocation.
func podLeftovers(t *testing.T, n *lab.Node, veth, ip string) []string {
	t.Helper()
	var left []string
	for _, v := range reefVeths(t, n) {
		if v == veth {
			left = append(left, "veth "+v)
		}
	}
	ifb := tc.IFBName(veth)
	if out, err := n.Lab.Run(n.Netns, "ip", "-br", "link", "show", "type", "ifb"); err != nil {
		t.Fatalf("ip link show type ifb: %v\n%s", err, out)
	} else if strings.Contains(out, ifb) {
		left = append(left, "ifb "+ifb)
	}
	for _, r := range reefRoutes(t, n) {
		if strings.HasPrefix(r, ip+" ") {
			left = append(left, "route "+r)
		}
	}
	hp := run(t, n.Lab, n.Netns, "nft", "list", "table", "inet", "reef-hostport")
	if strings.Contains(hp, " "+ip+" ") {
		left = append(left, "table inet reef-hostport names "+ip+":\n"+hp)
	}
	for e := range nftPodSet(t, n) {
		if strings.Contains(e, veth) || strings.HasSuffix(e, " "+ip) {
			left = append(left, "set arp reef pod-addrs: "+e)
		}
	}
	if st, ok := allocations(t, n)[ip]; ok {
		left = append(left, "allocation "+ip+" "+st)
	}
	return left
}

// TestFailedAddRollsBackHostPortAndBandwidth: a pod with a hostPort and
// a bandwidth limit whose netns vanishes mid-ADD (bin/reef-test pausing
// after the veth) leaves nothing: no veth, ifb, route, hostPort or
// ARP-filter element, allocation. A repeated ADD of a running pod of the
// same kind, in a new netns that vanishes mid-ADD, keeps its address
// pending (`reef ipam show` says so), no other pod gets it, and the DEL
// after it frees it and leaves nothing of the pod.
func TestFailedAddRollsBackHostPortAndBandwidth(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	// No pass but those the block claim triggers: a pass frees a pending
	// address whose netns is gone, which the test must see kept.
	n := startNode(t, l, "node1", lab.NodeOptions{Binary: "reef-test", Env: []string{"REEF_TEST_PAUSE_AFTER_VETH=1s"},
		ReconcileInterval: 10 * time.Minute})
	caps := func(port int) map[string]any {
		return map[string]any{
			"portMappings": []lab.PortMapping{{HostPort: port, ContainerPort: 80, Protocol: "tcp"}},
			"bandwidth":    lab.Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3},
		}
	}
	// addVanishing runs p's ADD and deletes its netns once the veth's
	// peer is in it (the daemon pauses there); the ADD's error.
	addVanishing := func(p *lab.Pod) error {
		done := make(chan error, 1)
		go func() { done <- p.Add() }()
		eventually(t, 10*time.Second, func() string {
			if _, err := l.Run(p.Netns, "ip", "link", "show", "eth0"); err != nil {
				return "no eth0 in " + p.Netns + " yet"
			}
			return ""
		})
		if err := p.Remove(); err != nil {
			t.Fatal(err)
		}
		return <-done
	}

	keep, err := n.NewPodNetns("default", "keep")
	if err != nil {
		t.Fatal(err)
	}
	keep.CapabilityArgs = caps(8080)
	if err := keep.Add(); err != nil {
		t.Fatal(err)
	}
	veth := keep.Result.Interfaces[0].Name
	ip := keep.IP.String()
	if left := podLeftovers(t, n, veth, ip); len(left) < 5 {
		t.Fatalf("a running pod with a hostPort and a limit shows only %v; the checks would see nothing", left)
	}

	t.Run("first ADD", func(t *testing.T) {
		p, err := n.NewPodNetns("default", "vanishing")
		if err != nil {
			t.Fatal(err)
		}
		p.CapabilityArgs = caps(8081)
		var e *types.Error
		if err := addVanishing(p); !errors.As(err, &e) || e.Code != types.ErrUnknownContainer {
			t.Fatalf("ADD whose netns vanished: %v, want CNI code 3", err)
		}
		if a := allocations(t, n); len(a) != 1 || a[ip] != "ready" {
			t.Errorf("allocations after the failed ADD: %v, want only %s ready", a, ip)
		}
		pv := routes.HostVethName(p.Namespace, p.Name, p.ContainerID)
		if left := podLeftovers(t, n, pv, "none"); len(left) != 0 {
			t.Errorf("left by the failed ADD: %v", left)
		}
	})

	t.Run("repeated ADD", func(t *testing.T) {
		again, err := n.NewPodNetns("default", "keep")
		if err != nil {
			t.Fatal(err)
		}
		again.ContainerID, again.CapabilityArgs = keep.ContainerID, caps(8080)
		var e *types.Error
		if err := addVanishing(again); !errors.As(err, &e) || e.Code != types.ErrUnknownContainer {
			t.Fatalf("repeated ADD whose netns vanished: %v, want CNI code 3", err)
		}
		if st := allocations(t, n)[ip]; st != "pending" {
			t.Errorf("%s after the failed repeated ADD: %q, want pending", ip, st)
		}
		out, err := n.Reef("ipam", "show", "--show-allocations")
		if err != nil || !regexp.MustCompile(`(?m)^\s*`+regexp.QuoteMeta(ip)+`\s.*pending`).MatchString(out) {
			t.Errorf("reef ipam show --show-allocations does not show %s pending (%v):\n%s", ip, err, out)
		}
		// Its veth, ifb and route are gone with the failed wiring; its
		// ARP-filter and hostPort elements stay until the DEL (they name
		// an address no other pod can get meanwhile).
		for _, o := range podLeftovers(t, n, veth, ip) {
			if strings.HasPrefix(o, "veth ") || strings.HasPrefix(o, "ifb ") || strings.HasPrefix(o, "route ") {
				t.Errorf("left by the failed repeated ADD: %s", o)
			}
		}
		other, err := n.NewPodNetns("default", "other")
		if err != nil {
			t.Fatal(err)
		}
		other.CapabilityArgs = caps(8082)
		if err := other.Add(); err != nil {
			t.Fatal(err)
		}
		if other.IP == keep.IP {
			t.Fatalf("another pod got %s, the failed repeated ADD's pending address", ip)
		}
		if err := again.Del(); err != nil {
			t.Fatalf("DEL after the failed repeated ADD: %v", err)
		}
		if left := podLeftovers(t, n, veth, ip); len(left) != 0 {
			t.Errorf("left after the DEL: %v", left)
		}
		if left := podLeftovers(t, n, other.Result.Interfaces[0].Name, other.IP.String()); len(left) < 5 {
			t.Errorf("the other pod lost objects: has only %v", left)
		}
	})
}

// TestSecondInterfaceRefused: the spec lets a runtime add a container to a
// network again under another CNI_IFNAME. reef gives a sandbox one
// interface, so the ADD of eth1 fails with code 106; the runtime's DEL of
// eth1 that follows a failed ADD leaves eth0, its veth, its route and its
// address as they were, and CHECK of eth0 still passes.
func TestSecondInterfaceRefused(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p, err := n.NewPod("default", "two-ifs")
	if err != nil {
		t.Fatal(err)
	}
	list, err := n.NetworkList()
	if err != nil {
		t.Fatal(err)
	}
	veths := reefVeths(t, n)
	eth1 := p.RuntimeConf()
	eth1.IfName = "eth1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = n.CNI().AddNetworkList(ctx, list, eth1)
	var e *types.Error
	if !errors.As(err, &e) || e.Code != 106 || !strings.Contains(e.Msg, "eth0") {
		t.Fatalf("ADD eth1: %v, want CNI code 106 naming eth0", err)
	}
	if err := n.CNI().DelNetworkList(ctx, list, eth1); err != nil {
		t.Fatalf("DEL eth1: %v", err)
	}
	if out, err := p.Run("ip", "-4", "-br", "addr", "show", "dev", "eth0"); err != nil || !strings.Contains(out, p.IP.String()+"/32") {
		t.Errorf("eth0 in the pod after the refused ADD of eth1 and its DEL: %q (%v), want %s on it", out, err, p.IP)
	}
	if got := reefVeths(t, n); !slices.Equal(got, veths) {
		t.Errorf("node's veths: %v, want %v", got, veths)
	}
	if got := allocations(t, n); len(got) != 1 || got[p.IP.String()] != "ready" {
		t.Errorf("allocations: %v, want %s ready", got, p.IP)
	}
	if err := p.Check(); err != nil {
		t.Errorf("CHECK eth0: %v", err)
	}
	if err := p.Del(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations after DEL eth0: %v", got)
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("veths after DEL eth0: %v", got)
	}
}
