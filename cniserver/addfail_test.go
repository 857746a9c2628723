package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/blockproto"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// fakeNode stands for every owner an ADD asks (Pods, PodFilter, Policy):
// it keeps what they would have in the kernel and prints it as sorted
// text. fail names the one step that fails next ("cover", "up", "addpod",
// "limit"; "" none).
type fakeNode struct {
	mu     sync.Mutex
	fail   string
	veths  map[string]bool       // veth pairs (with their routes)
	limits map[string]bool       // tc and the ifb, by veth
	filter map[string]string     // ARP-filter and hostPort elements, by veth
	policy map[netip.Addr]string // covered addresses, by handle
	wired  map[string]veth.Spec  // veth -> the spec it was wired with
	calls  []string              // "up", "cover", "addpod" as called
	// forgotten are the addresses whose conntrack entries Forget had
	// deleted.
	forgotten []netip.Addr
	// deleted are the elements DelPod was given, as filter's values;
	// onDel, if set, runs at each.
	deleted []string
	onDel   func()
	// pending are the handles covered and not settled nor uncovered:
	// none is left once an ADD has returned.
	pending map[string]bool
	// upEntered is closed by Up with fail "up panics", coverDone by
	// the Cover then.
	upEntered, coverDone chan struct{}
}

func newFakeNode() *fakeNode {
	return &fakeNode{veths: map[string]bool{}, limits: map[string]bool{}, filter: map[string]string{},
		policy: map[netip.Addr]string{}, wired: map[string]veth.Spec{}, pending: map[string]bool{},
		upEntered: make(chan struct{}), coverDone: make(chan struct{})}
}

var errInjected = errors.New("injected failure")

// failing says whether step fails: fail names it, or is "cover+netns"
// (the cover fails, and the wiring finds the netns gone) or "cover
// panics" (the cover panics).
func (f *fakeNode) failing(step string) bool {
	return f.fail == step || f.fail == "cover+netns" && (step == "cover" || step == "up")
}

// Up is the wiring: "up" when the pair is made, spec.BeforeRoutes (the
// lock not held: a cover runs meanwhile), "routes" when the node's routes
// to the pod are written.
func (f *fakeNode) Up(spec veth.Spec) (veth.Pair, error) {
	if f.fail == "up panics" {
		close(f.upEntered) // the cover records its pod only now
		panic("injected panic in the wiring")
	}
	f.mu.Lock()
	if f.failing("up") {
		// Wire undoes what it did: the pair is gone, with its qdiscs.
		delete(f.veths, spec.HostVeth)
		delete(f.limits, spec.HostVeth)
		f.mu.Unlock()
		if f.fail == "cover+netns" {
			return veth.Pair{}, fmt.Errorf("netns %s: %w", spec.Netns, veth.ErrNetnsGone)
		}
		return veth.Pair{}, errInjected
	}
	f.calls = append(f.calls, "up")
	f.veths[spec.HostVeth] = true
	f.wired[spec.HostVeth] = spec
	f.mu.Unlock()
	if spec.BeforeRoutes != nil {
		if err := spec.BeforeRoutes(); err != nil {
			f.mu.Lock()
			delete(f.veths, spec.HostVeth)
			delete(f.limits, spec.HostVeth)
			f.mu.Unlock()
			return veth.Pair{}, err
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, "routes")
	f.mu.Unlock()
	return veth.Pair{}, nil
}

func (f *fakeNode) Limit(veth string, _ tc.Bandwidth) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.veths[veth] {
		return nil, fmt.Errorf("limit: no veth %s", veth)
	}
	f.limits[veth] = true // set, even when the call then fails half-way
	if f.failing("limit") {
		return nil, errInjected
	}
	return nil, nil
}

func (f *fakeNode) Down(veth string, still func() bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if still != nil && !still() {
		return nil
	}
	delete(f.veths, veth)
	delete(f.limits, veth)
	return nil
}

func (f *fakeNode) AddPod(ep store.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "addpod")
	f.filter[ep.HostVeth] = fmt.Sprintf("%s ports=%v", ep.AddrsString(), ep.PortMappings) // added, then the commit fails
	if f.failing("addpod") {
		return errInjected
	}
	return nil
}

func (f *fakeNode) DelPod(ep store.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, fmt.Sprintf("%s ports=%v", ep.AddrsString(), ep.PortMappings))
	delete(f.filter, ep.HostVeth)
	if f.onDel != nil {
		f.onDel()
	}
	return nil
}

func (f *fakeNode) Admit(context.Context, string, string) *types.Error { return nil }

func (f *fakeNode) Cover(ep store.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "cover")
	if f.fail == "up panics" {
		// As a cover that waits for the dataplane's lock: it records
		// its pod after the wiring has begun (and panicked).
		f.mu.Unlock()
		<-f.upEntered
		f.mu.Lock()
		defer close(f.coverDone)
	}
	f.pending[ep.Handle] = true
	for _, a := range ep.Addrs() {
		f.policy[a] = ep.Handle
	}
	if f.failing("cover") {
		return errInjected
	}
	if f.fail == "cover panics" {
		panic("injected panic")
	}
	return nil
}

func (f *fakeNode) Settle(ep store.Endpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, ep.Handle)
}

func (f *fakeNode) Uncover(ep store.Endpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, ep.Handle)
	for _, a := range ep.Addrs() {
		if f.policy[a] == ep.Handle {
			delete(f.policy, a)
		}
	}
}

// String is the fake kernel's state, one object a line, sorted.
func (f *fakeNode) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for v := range f.veths {
		lines = append(lines, "veth "+v)
	}
	for v := range f.limits {
		lines = append(lines, "tc+ifb "+v)
	}
	for v, e := range f.filter {
		lines = append(lines, "filter "+v+" "+e)
	}
	for a, h := range f.policy {
		lines = append(lines, "policy "+a.String()+" "+h)
	}
	for h := range f.pending {
		lines = append(lines, "pending cover "+h)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

var addFailPool = store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}

// newAddFailServer is a ready server on a fresh store whose NeedBlock
// claims and confirms the pool's first block at once (a lone node).
func newAddFailServer(t *testing.T) (*Server, *store.Store, *fakeNode) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "node-a", Address: netip.MustParseAddr("192.0.2.1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	claimed := false
	need := func(_ context.Context, pools []store.Pool) *types.Error {
		if claimed {
			return types.NewError(types.ErrTryAgainLater, "one block in this test", "")
		}
		claimed = true
		b := netip.MustParsePrefix("10.244.0.0/26")
		if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: b, Pool: addFailPool.CIDR}}}); err != nil {
			return types.NewError(types.ErrInternal, "claim", err.Error())
		}
		if err := st.ApplyProtocol(blockproto.Changes{Confirm: []netip.Prefix{b}}); err != nil {
			return types.NewError(types.ErrInternal, "confirm", err.Error())
		}
		return nil
	}
	f := newFakeNode()
	s := New(Config{Pools: []store.Pool{addFailPool}, MTU: 1450}, Deps{Store: st, Log: slog.New(slog.DiscardHandler),
		NeedBlock: need, Pods: f, PodFilter: f, Policy: f})
	s.SetReady(true)
	return s, st, f
}

// podRequest is an ADD (or DEL) of pod name, container id, with
// hostPort and a bandwidth limit.
func podRequest(id, name, netns string, hostPort int) *reefv1.CNIRequest {
	return goodRequest(func(in *reefv1.CNIRequest) {
		in.ContainerId = id
		in.Netns = netns
		in.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + name
		in.Netconf = []byte(`{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"reef-cni","runtimeConfig":` +
			`{"portMappings":[{"hostPort":` + fmt.Sprint(hostPort) + `,"containerPort":80,"protocol":"tcp"}],` +
			`"bandwidth":{"ingressRate":1000000,"ingressBurst":80000}}}`)
	})
}

func endpoints(t *testing.T, st *store.Store) map[string]store.Endpoint {
	t.Helper()
	eps, err := st.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]store.Endpoint{}
	for _, ep := range eps {
		m[ep.Handle] = ep
	}
	return m
}

// addFailSteps are the steps of an ADD that can fail after something of
// the pod was written: NetworkPolicy's cover, the wiring, the ARP-filter
// and hostPort elements, the bandwidth limits (tc, ifb).
var addFailSteps = []string{"cover", "up", "addpod", "limit"}

// TestAddCoversBeforeRoutes: a new pod is covered by its policies while
// its veth is wired, and before the node's routes to it are written, so
// before anything reaches it and before the ADD returns; a repeated ADD
// covers before it wires again (TestFailedRepeatedAddKeepsAddressPending).
func TestAddCoversBeforeRoutes(t *testing.T) {
	s, st, f := newAddFailServer(t)
	for i := range 20 {
		f.calls = nil
		id, name, netns := fmt.Sprintf("c%d", i), fmt.Sprintf("web-%d", i), fmt.Sprintf("/run/netns/p%d", i)
		if _, cerr := s.add(context.Background(), podRequest(id, name, netns, 8080+i)); cerr != nil {
			t.Fatalf("ADD: %v", cerr)
		}
		// "up" (the pair made) may come before or after the cover.
		got := slices.DeleteFunc(slices.Clone(f.calls), func(c string) bool { return c == "up" })
		if strings.Join(got, " ") != "cover routes addpod" || !slices.Contains(f.calls, "up") {
			t.Fatalf("calls of ADD %d: %q, want up, and cover, routes, addpod in this order", i, f.calls)
		}
		if f.policy[endpoints(t, st)["k8s-pod-network."+id].IP] != "k8s-pod-network."+id {
			t.Fatalf("ADD %d returned before its pod was covered by its policies", i)
		}
	}
	f.calls = nil
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1b", 8081)); cerr != nil {
		t.Fatalf("repeated ADD: %v", cerr)
	}
	if got := strings.Join(f.calls, " "); got != "cover up routes addpod" {
		t.Errorf("calls of the repeated ADD: %q, want \"cover up routes addpod\"", got)
	}
}

// TestRepeatedAddDropsOldHostPorts: an ADD that repeats a known
// attachment with other hostPorts deletes the elements of the ones it
// had before it adds this call's; one with the same hostPorts deletes
// nothing. Without, the old hostPort stayed mapped to the pod until the
// next whole pass removed it, logged as drift ("repairing nftables").
func TestRepeatedAddDropsOldHostPorts(t *testing.T) {
	s, st, f := newAddFailServer(t)
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080)); cerr != nil {
		t.Fatalf("ADD: %v", cerr)
	}
	first := endpoints(t, st)["k8s-pod-network.c1"]
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1b", 8080)); cerr != nil {
		t.Fatalf("repeated ADD: %v", cerr)
	}
	if len(f.deleted) != 0 {
		t.Errorf("a repeated ADD with the same hostPorts deleted %q", f.deleted)
	}
	// The elements of 8080 go while the store holds the port for c1:
	// after, another pod could have claimed it and added its own.
	var heldAtDel []store.PortMapping
	f.onDel = func() { heldAtDel = endpoints(t, st)["k8s-pod-network.c1"].PortMappings }
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1c", 9090)); cerr != nil {
		t.Fatalf("repeated ADD with another hostPort: %v", cerr)
	}
	if want := []string{fmt.Sprintf("%s ports=%v", first.AddrsString(), first.PortMappings)}; !slices.Equal(f.deleted, want) {
		t.Errorf("the repeated ADD with hostPort 9090 deleted %q, want the elements of 8080: %q", f.deleted, want)
	}
	if !slices.Equal(heldAtDel, first.PortMappings) {
		t.Errorf("the elements of 8080 were deleted with the store holding %v for the pod, want %v: the port was free to another pod's ADD", heldAtDel, first.PortMappings)
	}
	if got := f.filter[first.HostVeth]; !strings.Contains(got, "9090") {
		t.Errorf("the pod's elements after the repeated ADD: %q, want hostPort 9090's", got)
	}
}

// TestRepeatedAddPortTakenKeepsOldHostPorts: a repeated ADD that asks
// for a hostPort another pod holds fails (code 10x, port taken) and the
// pod keeps the hostPorts it had, in the store and in the kernel.
func TestRepeatedAddPortTakenKeepsOldHostPorts(t *testing.T) {
	s, st, f := newAddFailServer(t)
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080)); cerr != nil {
		t.Fatalf("ADD: %v", cerr)
	}
	if _, cerr := s.add(context.Background(), podRequest("c2", "web-2", "/run/netns/p2", 9090)); cerr != nil {
		t.Fatalf("ADD: %v", cerr)
	}
	first := endpoints(t, st)["k8s-pod-network.c1"]
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1b", 9090)); cerr == nil {
		t.Fatal("a repeated ADD asking for web-2's hostPort 9090 succeeded")
	}
	if got := endpoints(t, st)["k8s-pod-network.c1"].PortMappings; !slices.Equal(got, first.PortMappings) {
		t.Errorf("the pod's hostPorts in the store after the refused ADD: %v, want %v", got, first.PortMappings)
	}
	if got, want := f.filter[first.HostVeth], fmt.Sprintf("%s ports=%v", first.AddrsString(), first.PortMappings); got != want {
		t.Errorf("the pod's elements after the refused ADD: %q, want %q", got, want)
	}
}

// TestAddCoverFailsWithWiring: a new pod's cover and wiring run at once.
// When both fail, the ADD answers with the wiring's error (a netns gone is
// code 3, "unknown container"), the cover's in its details; a cover that
// panics fails the ADD with an error, not the daemon. Neither leaves
// anything of the pod.
func TestAddCoverFailsWithWiring(t *testing.T) {
	for _, tc := range []struct {
		fail     string
		code     uint
		msg, det string
	}{
		{"cover+netns", types.ErrUnknownContainer, "CNI_NETNS /run/netns/p1 is gone", "the NetworkPolicy cover also failed: " + errInjected.Error()},
		{"cover panics", types.ErrInternal, "apply NetworkPolicy for pod", "cover panicked: injected panic"},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			s, st, f := newAddFailServer(t)
			f.fail = tc.fail
			_, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080))
			if cerr == nil || cerr.Code != tc.code || !strings.Contains(cerr.Msg, tc.msg) || !strings.Contains(cerr.Details, tc.det) {
				t.Fatalf("ADD: %+v; want code %d, %q in the message, %q in the details", cerr, tc.code, tc.msg, tc.det)
			}
			if got := f.String(); got != "" {
				t.Errorf("objects left by the failed ADD:\n%s", got)
			}
			if eps := endpoints(t, st); len(eps) != 0 {
				t.Errorf("records left by the failed ADD: %v", eps)
			}
		})
	}
}

// TestFailedAddLeavesNothing: an ADD that fails at any step leaves none
// of the pod's objects (veth, tc and ifb, ARP-filter and hostPort
// elements, NetworkPolicy coverage) and no record; the address goes to
// the next pod.
func TestFailedAddLeavesNothing(t *testing.T) {
	for _, step := range addFailSteps {
		t.Run(step, func(t *testing.T) {
			s, st, f := newAddFailServer(t)
			f.fail = step
			if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080)); cerr == nil {
				t.Fatalf("ADD with %s failing succeeded", step)
			}
			if got := f.String(); got != "" {
				t.Errorf("objects left by the failed ADD:\n%s", got)
			}
			if eps := endpoints(t, st); len(eps) != 0 {
				t.Errorf("records left by the failed ADD: %v", eps)
			}
			f.fail = ""
			if _, cerr := s.add(context.Background(), podRequest("c2", "web-2", "/run/netns/p2", 8081)); cerr != nil {
				t.Fatalf("ADD after the failed one: %v", cerr)
			}
			if ep := endpoints(t, st)["k8s-pod-network.c2"]; ep.IP != netip.MustParseAddr("10.244.0.0") {
				t.Errorf("next pod got %s, want the failed ADD's 10.244.0.0 (freed)", ep.IP)
			}
		})
	}
}

// TestFailedRepeatedAddKeepsAddressPending: an ADD that repeats a
// successful one (same container, a new netns) and fails at any step
// keeps the pod's address, pending: no other pod gets it meanwhile. The
// runtime's DEL after the failure frees it and leaves nothing of the pod.
func TestFailedRepeatedAddKeepsAddressPending(t *testing.T) {
	const handle = "k8s-pod-network.c1"
	for _, step := range addFailSteps {
		t.Run(step, func(t *testing.T) {
			s, st, f := newAddFailServer(t)
			if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080)); cerr != nil {
				t.Fatalf("first ADD: %v", cerr)
			}
			first := endpoints(t, st)[handle]
			f.fail = step
			if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1b", 8080)); cerr == nil {
				t.Fatalf("repeated ADD with %s failing succeeded", step)
			}
			f.fail = ""
			ep, ok := endpoints(t, st)[handle]
			if !ok || ep.IP != first.IP || ep.State != store.EndpointPending {
				t.Fatalf("after the failed repeated ADD: record %+v (found %v), want %s pending", ep, ok, first.IP)
			}
			// What of the pod stays until the DEL (docs/cni.md): the
			// steps after the wiring undo it; a failed wiring leaves the
			// earlier ADD's filter elements; a refused cover all of the
			// earlier ADD. The policy elements go with the address.
			if got, want := kinds(f.String()), leftUntilDel[step]; got != want {
				t.Errorf("kinds of objects of the pod after the failed repeated ADD: %q, want %q:\n%s", got, want, f)
			}
			if _, cerr := s.add(context.Background(), podRequest("c2", "web-2", "/run/netns/p2", 8081)); cerr != nil {
				t.Fatalf("second pod's ADD: %v", cerr)
			}
			if other := endpoints(t, st)["k8s-pod-network.c2"]; other.IP == first.IP {
				t.Fatalf("second pod got %s, the pending address of the failed repeated ADD: one address on two pods", other.IP)
			}
			if cerr := s.Delete(podRequest("c1", "web-1", "/run/netns/p1b", 8080)); cerr != nil {
				t.Fatalf("DEL after the failed repeated ADD: %v", cerr)
			}
			if _, ok := endpoints(t, st)[handle]; ok {
				t.Errorf("DEL left the record of %s", first.IP)
			}
			if got := f.String(); strings.Contains(got, first.HostVeth) || strings.Contains(got, " "+handle) {
				t.Errorf("objects of the pod left after its DEL:\n%s", got)
			}
			if _, cerr := s.add(context.Background(), podRequest("c3", "web-3", "/run/netns/p3", 8082)); cerr != nil {
				t.Fatalf("third pod's ADD: %v", cerr)
			}
			if third := endpoints(t, st)["k8s-pod-network.c3"]; third.IP != first.IP {
				t.Errorf("third pod got %s, want %s freed by the DEL", third.IP, first.IP)
			}
		})
	}
}

// leftUntilDel are the kinds of objects (fakeNode.String's first words) a
// failed repeated ADD leaves until the DEL, by the step that failed.
var leftUntilDel = map[string]string{
	"cover":  "filter policy tc+ifb veth",
	"up":     "filter policy",
	"addpod": "policy",
	"limit":  "policy",
}

// kinds are the distinct first words of state's lines, sorted.
func kinds(state string) string {
	var ks []string
	for _, l := range strings.Split(state, "\n") {
		if k, _, _ := strings.Cut(l, " "); k != "" && !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return strings.Join(ks, " ")
}

// TestAddPanicSettlesAfterCover: a wiring that panics while the new pod's
// cover is still on its way (waiting for the dataplane's lock) leaves no
// pending cover behind once the ADD has unwound: the ADD waits for the
// cover before it settles it. It fails if the ADD settles first.
func TestAddPanicSettlesAfterCover(t *testing.T) {
	s, _, f := newAddFailServer(t)
	f.fail = "up panics"
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the ADD did not panic")
			}
		}()
		s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080))
	}()
	<-f.coverDone // the cover's own end, however late
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) > 0 {
		t.Errorf("covers left pending after the ADD's panic: %v", f.pending)
	}
}
