package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/lbipam"
)

// lbPool is the LoadBalancer pool of the lbipam test: 192.0.2.1-.6 are
// assignable (the network and broadcast addresses are skipped).
var lbPool = netip.MustParsePrefix("192.0.2.0/29")

// TestLoadBalancerIPAM (docs/lbipam.md): two reef daemons with
// bgp.serviceLoadBalancerIPs and the lab's real API server, reef's RBAC
// from the package. Exactly one holds the Lease and assigns:
//
//   - a Service of type LoadBalancer gets the pool's first free address in
//     status.loadBalancer.ingress, with an event;
//   - a requested address (reefcni.io/loadBalancerIPs) is honoured; one in
//     use, or outside the pool, is refused with a Warning event that says
//     why; a Service of another loadBalancerClass is left alone;
//   - a deleted Service's address is released and given to the next;
//   - the leader is killed (SIGKILL) while Services are being created: the
//     other daemon takes the Lease over and assigns the rest, the pool runs
//     out (an event), and no address was ever shown by two Services: the
//     statuses are watched throughout, every version of every Service;
//   - two daemons lead at once (the Lease written over to the restarted
//     one while the other still holds it) while Services come: each
//     address is still shown by one Service at a time.
func TestLoadBalancerIPAM(t *testing.T) {
	pl := newPolicyLabWith(t, 2, lab.NodeOptions{BGPExtra: fmt.Sprintf("  serviceLoadBalancerIPs: [%s]\n", lbPool)}, false)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	svcs := pl.Admin.CoreV1().Services("default")

	// Every version of every Service's ingress, from a watch that runs
	// for the whole test: two Services never show one address.
	shown := map[string][]string{} // service -> its ingress now
	var violations []string
	w, err := svcs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			var ips []string
			for _, in := range s.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			if ev.Type == "DELETED" {
				ips = nil
			}
			shown[s.Name] = ips
			for other, theirs := range shown {
				for _, ip := range ips {
					if other != s.Name && slices.Contains(theirs, ip) {
						violations = append(violations, fmt.Sprintf("%s shown by %s and %s (resourceVersion %s)", ip, s.Name, other, s.ResourceVersion))
					}
				}
			}
		}
	}()
	stopWatch := func() []string { w.Stop(); <-watchDone; return violations }
	defer stopWatch()

	leader := func() (*lab.Node, *lab.Node) {
		t.Helper()
		var lead, standby *lab.Node
		eventually(t, 30*time.Second, func() string {
			lead, standby = nil, nil
			var roles []string
			for _, n := range pl.Nodes {
				lb := mustStatus(t, n).GetLbIpam()
				if lb == nil {
					return n.Name + ": reef status has no lb_ipam: assignment is off"
				}
				roles = append(roles, fmt.Sprintf("%s leader=%v holder=%q", n.Name, lb.GetLeader(), lb.GetHolder()))
				if lb.GetLeader() {
					lead = n
				} else {
					standby = n
				}
			}
			if lead == nil || standby == nil {
				return fmt.Sprintf("want one leader and one standby: %v", roles)
			}
			return ""
		})
		return lead, standby
	}
	lead, standby := leader()
	t.Logf("leader %s, standby %s", lead.Name, standby.Name)

	lb := &lbServices{t: t, ctx: ctx, admin: pl.Admin}
	createLB, lbService, ingress, waitIngress, waitEvent := lb.create, lb.mustCreate, lb.ingress, lb.waitIngress, lb.waitEvent
	request := lbRequest

	lbService("web")
	waitIngress("web", "192.0.2.1")
	waitEvent("web", "LoadBalancerIPAssigned", "192.0.2.1")
	lbService("asks", request("192.0.2.5"))
	waitIngress("asks", "192.0.2.5")
	lbService("thief", request("192.0.2.5"))
	waitEvent("thief", "LoadBalancerIPInUse", "192.0.2.5 is in use by Service default/asks")
	lbService("outside", request("198.51.100.9"))
	waitEvent("outside", "LoadBalancerIPNotInPool", "198.51.100.9 is outside bgp.serviceLoadBalancerIPs")
	other := "example.com/other"
	lbService("other", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other })
	for _, name := range []string{"thief", "outside", "other"} {
		if got := ingress(name); len(got) != 0 {
			t.Errorf("Service %s was given %v", name, got)
		}
	}

	// Released and reused.
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lbService("next")
	eventually(t, 30*time.Second, func() string {
		if got := ingress("next"); len(got) != 1 {
			return fmt.Sprintf("Service next: ingress %v, want one address", got)
		}
		return ""
	})
	// next got .2 at once (.1 was still recorded to web), or .1 once
	// web's was released: either way, .1 goes back to the pool.
	lbService("after")
	eventually(t, 30*time.Second, func() string {
		got := append(ingress("next"), ingress("after")...)
		if !slices.Contains(got, "192.0.2.1") || len(got) != 2 {
			return fmt.Sprintf("Services next and after: %v, want one of them to reuse web's 192.0.2.1", got)
		}
		return ""
	})

	// The leader killed while Services come: the standby takes over.
	for i := range 4 {
		lbService(fmt.Sprintf("burst-%d", i))
		if i == 1 {
			if err := lead.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the leader %s's reef", lead.Name)
		}
	}
	eventually(t, 60*time.Second, func() string {
		lb := mustStatus(t, standby).GetLbIpam()
		if !lb.GetLeader() {
			return fmt.Sprintf("%s has not taken the Lease over: holder %q", standby.Name, lb.GetHolder())
		}
		return ""
	})
	// 6 addresses: asks, next, after and three of the burst; the fourth
	// gets none.
	var given []string
	eventually(t, 60*time.Second, func() string {
		given = nil
		without := 0
		for i := range 4 {
			got := ingress(fmt.Sprintf("burst-%d", i))
			given = append(given, got...)
			if len(got) == 0 {
				without++
			}
		}
		if len(given) != 3 || without != 1 {
			return fmt.Sprintf("the burst's addresses %v, want 3 given and 1 Service without", given)
		}
		return ""
	})
	for i := range 4 {
		if name := fmt.Sprintf("burst-%d", i); len(ingress(name)) == 0 {
			waitEvent(name, "NoFreeLoadBalancerIP", "no free IPv4 address in bgp.serviceLoadBalancerIPs ("+lbPool.String()+")")
		}
	}
	all := append(append(append(given, ingress("asks")...), ingress("next")...), ingress("after")...)
	slices.Sort(all)
	if want := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"}; !slices.Equal(all, want) {
		t.Errorf("the Services hold %v, want each of the pool's addresses once: %v", all, want)
	}
	st := mustStatus(t, standby).GetLbIpam()
	t.Logf("%s: leader %v, %d assigned, last error %q", standby.Name, st.GetLeader(), st.GetAssigned(), st.GetError())
	if st.GetAssigned() != 6 {
		t.Errorf("the new leader's record holds %d addresses, want 6", st.GetAssigned())
	}
	if got := scrapeIn(t, standby, "reef_lb_ipam_leader") + " " + scrapeIn(t, standby, "reef_lb_ipam_addresses_assigned"); got != "1 6" {
		t.Errorf("%s's metrics: reef_lb_ipam_leader and reef_lb_ipam_addresses_assigned %q, want \"1 6\"", standby.Name, got)
	}

	// Two leaders at once. The killed daemon comes back as the standby;
	// the test then writes the Lease over to it, as a Lease lost to a
	// partition or a clock would be: it takes the lead while the leader,
	// which renewed a moment ago, keeps leading until its renew deadline
	// (10 s). Services created while both lead get addresses from both;
	// none is shown by two.
	if err := lead.Start(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"after", "burst-0", "burst-1", "burst-2", "burst-3"} {
		if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// asks and next keep theirs; 4 addresses come free.
	eventually(t, 60*time.Second, func() string {
		if n := mustStatus(t, standby).GetLbIpam().GetAssigned(); n != 2 {
			return fmt.Sprintf("%s's record holds %d addresses, want 2 once the deleted Services' are released", standby.Name, n)
		}
		return ""
	})
	twoLeaders := func() bool {
		return mustStatus(t, lead).GetLbIpam().GetLeader() && mustStatus(t, standby).GetLbIpam().GetLeader()
	}
	leases := pl.Admin.CoordinationV1().Leases(lbipam.Namespace)
	l, err := leases.Get(ctx, lbipam.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = &lead.Name
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if !twoLeaders() {
			return fmt.Sprintf("%s and %s do not both lead", lead.Name, standby.Name)
		}
		return ""
	})
	// At once, so that the two leaders' rounds overlap as often as they
	// can; which interleavings occur is up to the scheduler (the log
	// below counts the compare-and-swaps lost), and the spin model
	// (lbipam/model) has them all.
	var wg sync.WaitGroup
	createErrs := make([]error, 6)
	for i := range 6 {
		wg.Go(func() { createErrs[i] = createLB(fmt.Sprintf("split-%d", i)) })
	}
	wg.Wait()
	if err := errors.Join(createErrs...); err != nil {
		t.Fatal(err)
	}
	if !twoLeaders() {
		t.Fatalf("%s and %s did not both lead while the Services were created; the test proves nothing", lead.Name, standby.Name)
	}
	t.Logf("both %s and %s lead; 6 Services created for 4 free addresses", lead.Name, standby.Name)
	eventually(t, 60*time.Second, func() string {
		if mustStatus(t, standby).GetLbIpam().GetLeader() {
			return standby.Name + " still leads"
		}
		return ""
	})
	given = nil
	eventually(t, 60*time.Second, func() string {
		given = nil
		without := 0
		for i := range 6 {
			got := ingress(fmt.Sprintf("split-%d", i))
			given = append(given, got...)
			if len(got) == 0 {
				without++
			}
		}
		if len(given) != 4 || without != 2 {
			return fmt.Sprintf("the split Services' addresses %v, want 4 given and 2 Services without", given)
		}
		return ""
	})
	all = append(append(given, ingress("asks")...), ingress("next")...)
	slices.Sort(all)
	if want := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"}; !slices.Equal(all, want) {
		t.Errorf("after two leaders, the Services hold %v, want each of the pool's addresses once: %v", all, want)
	}
	if n := mustStatus(t, lead).GetLbIpam().GetAssigned(); n != 6 {
		t.Errorf("%s's record holds %d addresses, want 6", lead.Name, n)
	}
	for _, n := range []*lab.Node{lead, standby} {
		t.Logf("%s: %d rounds lost a compare-and-swap", n.Name, strings.Count(n.Log(), "lost to another writer"))
	}
	if v := stopWatch(); len(v) > 0 {
		t.Errorf("an address was shown by two Services at once: %v", v)
	}
}

// lbServices creates LoadBalancer Services in namespace default and reads
// what reef gave them.
type lbServices struct {
	t     *testing.T
	ctx   context.Context
	admin *kubernetes.Clientset
}

// create creates a Service of type LoadBalancer, port 80, changed by mods.
func (lb *lbServices) create(name string, mods ...func(*corev1.Service)) error {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, m := range mods {
		m(s)
	}
	_, err := lb.admin.CoreV1().Services("default").Create(lb.ctx, s, metav1.CreateOptions{})
	return err
}

func (lb *lbServices) mustCreate(name string, mods ...func(*corev1.Service)) {
	lb.t.Helper()
	if err := lb.create(name, mods...); err != nil {
		lb.t.Fatal(err)
	}
}

// lbRequest asks for ips (reefcni.io/loadBalancerIPs).
func lbRequest(ips string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations = map[string]string{lbipam.RequestAnnotation: ips} }
}

// ingress is the Service's status.loadBalancer.ingress.
func (lb *lbServices) ingress(name string) []string {
	s, err := lb.admin.CoreV1().Services("default").Get(lb.ctx, name, metav1.GetOptions{})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return ips
}

// waitIngress waits until the Service's ingress is want, in any order.
func (lb *lbServices) waitIngress(name string, want ...string) {
	lb.t.Helper()
	want = slices.Sorted(slices.Values(want))
	eventually(lb.t, 30*time.Second, func() string {
		if got := slices.Sorted(slices.Values(lb.ingress(name))); !slices.Equal(got, want) {
			return fmt.Sprintf("Service %s: ingress %v, want %v", name, got, want)
		}
		return ""
	})
}

// waitEvent waits for an Event on the Service with reason and a message
// that holds text.
func (lb *lbServices) waitEvent(name, reason, text string) {
	lb.t.Helper()
	eventually(lb.t, 30*time.Second, func() string {
		evs, err := lb.admin.CoreV1().Events("default").List(lb.ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Sprintf("Service %s: no event %s with %q; events %v", name, reason, text, seen)
	})
}

// lbPool6 is the IPv6 LoadBalancer pool of TestLoadBalancerIPAMDualStack:
// fd00:10:5::1-::7 are assignable (the first address is skipped).
var lbPool6 = netip.MustParsePrefix("fd00:10:5::/125")

// TestLoadBalancerIPAMDualStack (docs/lbipam.md): a daemon with an IPv4 and
// an IPv6 pool in bgp.serviceLoadBalancerIPs and the lab's API server with
// a dual-stack service range. A dual-stack Service gets an address of each
// family, an IPv6 Service one IPv6 address and an IPv4 one an IPv4 address;
// a requested IPv6 address is honoured, one outside the pools refused with
// an event; a deleted dual-stack Service frees both of its addresses.
func TestLoadBalancerIPAMDualStack(t *testing.T) {
	slowSuite(t)
	// An IPv6 Service address needs an IPv6 pool and node address (its
	// next hop when announced): the dual-stack pools of the netpol lab.
	pl := newPolicyLabAPI(t, 1, lab.NodeOptions{Extra: npStackDual.pools,
		BGPExtra: fmt.Sprintf("  serviceLoadBalancerIPs: [%s, %s]\n", lbPool, lbPool6)}, true,
		lab.KubeAPIOptions{DualStack: true})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	lb := &lbServices{t: t, ctx: ctx, admin: pl.Admin}
	n := pl.Nodes[0]
	eventually(t, 30*time.Second, func() string {
		if !mustStatus(t, n).GetLbIpam().GetLeader() {
			return n.Name + " does not lead LoadBalancer address assignment"
		}
		return ""
	})
	families := func(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, fams }
	}
	both := families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)
	six := families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)

	lb.mustCreate("dual", both)
	lb.waitIngress("dual", "192.0.2.1", "fd00:10:5::1")
	lb.mustCreate("six", six)
	lb.waitIngress("six", "fd00:10:5::2")
	lb.mustCreate("four")
	lb.waitIngress("four", "192.0.2.2")
	lb.mustCreate("asks6", six, lbRequest("fd00:10:5::6"))
	lb.waitIngress("asks6", "fd00:10:5::6")
	lb.waitEvent("asks6", "LoadBalancerIPAssigned", "fd00:10:5::6")
	lb.mustCreate("outside6", six, lbRequest("2001:db8::1"))
	lb.waitEvent("outside6", "LoadBalancerIPNotInPool", "2001:db8::1 is outside bgp.serviceLoadBalancerIPs")
	if got := lb.ingress("outside6"); len(got) != 0 {
		t.Errorf("Service outside6 was given %v", got)
	}
	eventually(t, 30*time.Second, func() string {
		if a := mustStatus(t, n).GetLbIpam().GetAssigned(); a != 5 {
			return fmt.Sprintf("%s's record holds %d addresses, want 5", n.Name, a)
		}
		return ""
	})

	// Both of dual's addresses come free: the next dual-stack Service
	// gets them.
	if err := pl.Admin.CoreV1().Services("default").Delete(ctx, "dual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if a := mustStatus(t, n).GetLbIpam().GetAssigned(); a != 3 {
			return fmt.Sprintf("%s's record holds %d addresses, want 3 once dual's are released", n.Name, a)
		}
		return ""
	})
	lb.mustCreate("again", both)
	lb.waitIngress("again", "192.0.2.1", "fd00:10:5::1")
}

// TestLoadBalancerIPAMReleasedGoesToWaiting (docs/lbipam.md, "Released"):
// with the pool used up, a Service waits for an address; another Service
// that stops being a LoadBalancer, or is deleted, frees its address, and
// the waiting Service gets it from the round after the release, with no
// event of its own. bin/reef-test runs its rounds without an event only
// every hour (REEF_TEST_LB_RESYNC), so that the resync cannot be what
// hands the address on: before the fix the waiting Service got it only
// from the next unrelated event or the 30 s resync.
func TestLoadBalancerIPAMReleasedGoesToWaiting(t *testing.T) {
	pl := newPolicyLabWith(t, 1, lab.NodeOptions{Binary: "reef-test", Env: []string{"REEF_TEST_LB_RESYNC=1h"},
		BGPExtra: "  serviceLoadBalancerIPs: [192.0.2.0/30]\n"}, false)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	lb := &lbServices{t: t, ctx: ctx, admin: pl.Admin}
	n := pl.Nodes[0]
	eventually(t, 30*time.Second, func() string {
		if !mustStatus(t, n).GetLbIpam().GetLeader() {
			return n.Name + " does not lead LoadBalancer address assignment"
		}
		return ""
	})
	lb.mustCreate("one", lbRequest("192.0.2.1"))
	lb.waitIngress("one", "192.0.2.1")
	lb.mustCreate("two", lbRequest("192.0.2.2"))
	lb.waitIngress("two", "192.0.2.2")
	lb.mustCreate("waits")
	lb.waitEvent("waits", "NoFreeLoadBalancerIP", "no free IPv4 address")
	lb.mustCreate("waits-too")
	lb.waitEvent("waits-too", "NoFreeLoadBalancerIP", "no free IPv4 address")

	// "one" turns ClusterIP (the API server clears its status), reef
	// releases 192.0.2.1 and gives it to "waits". The leader is idle
	// first, as when nothing else happens in the cluster: a Service event
	// in the middle of a round brings another round, which would hand the
	// address on by chance (the scenario, not a wait for a pass).
	time.Sleep(time.Second)
	svcs := pl.Admin.CoreV1().Services("default")
	s, err := svcs.Get(ctx, "one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitIngress("one")
	lb.waitIngress("waits", "192.0.2.1")
	// "two" deleted: 192.0.2.2 goes to "waits-too".
	time.Sleep(time.Second)
	if err := svcs.Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.waitIngress("waits-too", "192.0.2.2")
}

// TestLoadBalancerIPAMSkipsClusterIPs (docs/lbipam.md, "Which address"):
// a pool inside the cluster's Service CIDR (the lab's API server's
// 10.96.0.0/16; the kubernetes Service has 10.96.0.1). A Service's
// clusterIP is never given out as another's LoadBalancer address: the
// first Service gets 10.96.0.2, not 10.96.0.1, and a request for 10.96.0.1
// is refused, naming the kubernetes Service. Before the fix the first
// Service got 10.96.0.1.
func TestLoadBalancerIPAMSkipsClusterIPs(t *testing.T) {
	pl := newPolicyLabWith(t, 1, lab.NodeOptions{BGPExtra: "  serviceLoadBalancerIPs: [10.96.0.0/29]\n"}, false)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	lb := &lbServices{t: t, ctx: ctx, admin: pl.Admin}
	k, err := pl.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Spec.ClusterIPs, []string{"10.96.0.1"}) {
		t.Fatalf("the kubernetes Service has %v; the test needs 10.96.0.1, inside its pool", k.Spec.ClusterIPs)
	}
	lb.mustCreate("web")
	lb.waitIngress("web", "10.96.0.2")
	lb.mustCreate("wants", lbRequest("10.96.0.1"))
	lb.waitEvent("wants", "LoadBalancerIPInUse", "10.96.0.1 is in use by Service default/kubernetes")
	if got := lb.ingress("wants"); len(got) != 0 {
		t.Errorf("Service wants was given %v", got)
	}
}
