package policy

import (
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/nft"
)

// testNetns is a throw-away network namespace and an nft.Kernel bound to
// it; nothing here touches the caller's namespace.
func testNetns(t *testing.T) (cnins.NetNS, *nft.Kernel) {
	t.Helper()
	n := netnstest.New(t)
	return n, nft.NewKernel(nftables.WithNetNSFd(int(n.Fd())))
}

func converge(t *testing.T, k *nft.Kernel, want nft.Table) nft.Plan {
	t.Helper()
	have, err := k.Read([]nft.TableID{TableID})
	if err != nil {
		t.Fatal(err)
	}
	p := nft.DiffInPlace([]nft.Table{want}, have)
	if err := k.Apply(p); err != nil {
		t.Fatalf("apply: %v", err)
	}
	have, err = k.Read([]nft.TableID{TableID})
	if err != nil {
		t.Fatal(err)
	}
	if again := nft.DiffInPlace([]nft.Table{want}, have); !again.Empty() {
		for _, c := range again.Changes {
			t.Errorf("after applying, the kernel still differs: %s: %s", c.Kind, c.Why)
		}
		t.FailNow()
	}
	return p
}

// TestTableInKernel: the rendered table is taken by the kernel, read back
// equal, listed by nft; a pod's label change changes elements only.
func TestTableInKernel(t *testing.T) {
	netns, k := testNetns(t)
	in := sampleInput()
	p := converge(t, k, Table(Compile(in)))
	if len(p.Changes) != 1 || p.Changes[0].Kind != nft.CreateTable {
		t.Fatalf("first apply: %+v, want one create", p.Changes)
	}
	if _, err := exec.LookPath("nft"); err == nil {
		out := netnstest.Run(t, netns, "nft", "list", "table", "inet", "reef")
		for _, want := range []string{
			"ip daddr != @in-isolated4 accept",
			"ip daddr @sel4.x.allow-y jump in.x.allow-y",
			" tcp dport 80 counter packets 0 bytes 0 accept comment \"reef: policy x/allow-y ingress[0] port TCP/80\"",
			"ip saddr @peers4.",
			"ip daddr . tcp dport @in4.x.allow-y.1.0",
			" udp dport 5000-5010 counter",
			"192.0.2.0/25",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("nft list table inet reef lacks %q:\n%s", want, out)
			}
		}
	}
	// y/b loses the label the policy selects its peers by: an element goes.
	in.Namespaces[1].Labels["ns"] = "other"
	p = converge(t, k, Table(Compile(in)))
	for _, c := range p.Changes {
		if c.Kind != nft.DelElems && c.Kind != nft.AddElems {
			t.Errorf("a namespace's labels changed: %s (%s), want element changes only", c.Kind, c.Why)
		}
	}
	if len(p.Changes) == 0 {
		t.Error("no change after namespace y lost its label")
	}
}

// TestLargeTableInKernel: 300 policies over 1,000 pods is one batch far
// beyond a netlink socket's default buffer (the kernel answered EMSGSIZE
// until the socket's buffers were raised); it applies and reads back equal.
func TestLargeTableInKernel(t *testing.T) {
	_, k := testNetns(t)
	in := sampleInput()
	for i := range 1000 {
		in.Pods = append(in.Pods, pod("y", fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), []string{"app", fmt.Sprintf("a%d", i%30)}, withPort("http", "TCP", 8080)))
	}
	for i := range 300 {
		p := netpol("x", fmt.Sprintf("p%d", i), sel(), nil)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("app", fmt.Sprintf("a%d", i%30))}},
				Ports: []networkingv1.NetworkPolicyPort{tcp(80 + i), named("TCP", "http")}},
		}
		in.Policies = append(in.Policies, p)
	}
	converge(t, k, Table(Compile(in)))
}

// TestPolicyChangesInPlace: a policy added, changed and removed changes
// its own sets and chains and the base chains' rules, in place; the table
// is never recreated, and the kernel ends equal to the desired table.
func TestPolicyChangesInPlace(t *testing.T) {
	_, k := testNetns(t)
	in := sampleInput()
	converge(t, k, Table(Compile(in)))
	extra := netpol("x", "extra", sel("pod", "b"), nil)
	extra.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "a")}}, Ports: []networkingv1.NetworkPolicyPort{named("TCP", "http")}}}
	steps := []struct {
		name string
		pols []*networkingv1.NetworkPolicy
	}{
		{"added", append(slices.Clone(in.Policies), extra)},
		{"changed", func() []*networkingv1.NetworkPolicy {
			e := extra.DeepCopy()
			e.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{tcp(81), tcp(82)}
			return append(slices.Clone(in.Policies), e)
		}()},
		{"removed", in.Policies[:1]},
	}
	for _, st := range steps {
		in.Policies = st.pols
		p := converge(t, k, Table(Compile(in)))
		kinds := map[nft.ChangeKind]int{}
		for _, c := range p.Changes {
			kinds[c.Kind]++
			if c.Kind == nft.RecreateTable || c.Kind == nft.CreateTable {
				t.Fatalf("policy %s: %s (%s), want changes in place", st.name, c.Kind, c.Why)
			}
		}
		t.Logf("policy %s: %v", st.name, kinds)
	}
}

// dualStackInput is sampleInput with every pod dual-stack (x/a and x/b
// local, with an endpoint per family; y/a and y/b remote, with two
// status.podIPs) and IPv6 ipBlocks beside the IPv4 one: an ingress block
// with an except, and an egress rule to ::/0 but one address, whose
// interval ends at the last IPv6 address.
func dualStackInput() Input {
	in := sampleInput()
	for _, p := range in.Pods {
		if p.Namespace == "y" {
			v6 := "fd00:10:244:1::" + strings.TrimPrefix(p.IPs[0].String(), "10.0.1.")
			p.IPs = append(p.IPs, addr(v6))
		}
	}
	in.Local = append(in.Local, Endpoint{Namespace: "x", Name: "a", IP: addr("fd00:10:244::1")}, Endpoint{Namespace: "x", Name: "b", IP: addr("fd00:10:244::2")})
	allowY := in.Policies[0]
	allowY.Spec.Ingress = append(allowY.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32", Except: []string{"2001:db8:8000::/33"}}}}})
	egress := netpol("x", "egress-v6", sel("pod", "b"), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	egress.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fd00:10:244:1::2/128"}}}}}}
	in.Policies = append(in.Policies, egress)
	return in
}

// TestDualStackTableInKernel: IPv6 pods and IPv6 ipBlocks land in the
// table's IPv6 sets and rules (ip6 saddr/daddr, the address . port set of
// a named port), none of them in an IPv4 set; the kernel takes the
// table, an interval up to the last IPv6 address included, and reads it
// back equal.
func TestDualStackTableInKernel(t *testing.T) {
	netns, k := testNetns(t)
	in := dualStackInput()
	st := Compile(in)
	if len(st.Skipped) > 0 {
		t.Fatalf("skipped: %v", st.Skipped)
	}
	tab := Table(st)
	sets := map[string]nft.Set{}
	for _, s := range tab.Sets {
		sets[s.Name] = s
		for _, e := range s.Elems {
			if e.From.Is4() != (s.KeyType == nftables.TypeIPAddr.Name || s.KeyType == nft.KeyAddrPort4.Name) || e.From.Is4() != e.To.Is4() {
				t.Errorf("set %s (%s) holds %s-%s", s.Name, s.KeyType, e.From, e.To)
			}
		}
	}
	elems := func(name string) string {
		var out []string
		for _, e := range sets[name].Elems {
			s := e.From.String()
			if e.To != e.From {
				s += "-" + e.To.String()
			}
			if e.Port != 0 {
				s += fmt.Sprintf(" . %d", e.Port)
			}
			out = append(out, s)
		}
		return strings.Join(out, ", ")
	}
	for name, want := range map[string]string{
		"in-isolated6":      "fd00:10:244::1",
		"eg-isolated6":      "fd00:10:244::1, fd00:10:244::2",
		"sel6.x.allow-y":    "fd00:10:244::1",
		"sel6.x.egress-v6":  "fd00:10:244::2",
		"in6.x.allow-y.1.0": "fd00:10:244::1 . 8080",
		"sel4.x.egress-v6":  "10.0.0.2",
		"in4.x.allow-y.1.0": "10.0.0.1 . 8080",
		"eg-isolated4":      "10.0.0.1, 10.0.0.2",
	} {
		if got := elems(name); got != want {
			t.Errorf("set %s = %q, want %q", name, got, want)
		}
	}
	// The peer sets of the IPv6 blocks, and y's pods by namespace.
	var peers6 []string
	for name := range sets {
		if strings.HasPrefix(name, "peers6.") {
			peers6 = append(peers6, elems(name))
		}
	}
	slices.Sort(peers6)
	want6 := []string{
		"", // the IPv4 block's set, empty in IPv6
		"2001:db8::-2001:db8:7fff:ffff:ffff:ffff:ffff:ffff",
		"::-fd00:10:244:1::1, fd00:10:244:1::3-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"fd00:10:244:1::1-fd00:10:244:1::2", // y/a and y/b, merged
		"fd00:10:244::2",
	}
	if !slices.Equal(peers6, want6) {
		t.Errorf("IPv6 peer sets:\n  %s\nwant\n  %s", strings.Join(peers6, "\n  "), strings.Join(want6, "\n  "))
	}

	converge(t, k, tab)
	if _, err := exec.LookPath("nft"); err != nil {
		return
	}
	out := netnstest.Run(t, netns, "nft", "list", "table", "inet", "reef")
	t.Logf("nft list table inet reef:\n%s", out)
	for _, want := range []string{
		"ip6 daddr != @in-isolated6 accept",
		"ip6 saddr != @eg-isolated6 accept",
		"ip6 daddr @sel6.x.allow-y jump in.x.allow-y",
		"ip6 saddr @sel6.x.egress-v6 jump eg.x.egress-v6",
		"ip6 saddr @peers6.",
		"ip6 daddr @peers6.",
		"ip6 daddr . tcp dport @in6.x.allow-y.1.0",
		"fd00:10:244::1 . 8080",
		"2001:db8::/33",
		"fd00:10:244:1::3-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("nft list table inet reef lacks %q", want)
		}
	}
}

// TestFamiliesInKernel: a node whose pools are all IPv4 (Input.Families)
// has no IPv6 set or rule, and accepts IPv6 in its base chains (no pod of
// it can be isolated in IPv6); going there from a table of both families
// (an upgrade), and back (a pool of the other family added), changes the
// table in place. An endpoint of a family not rendered is Compile's:
// Recompile refuses it.
func TestFamiliesInKernel(t *testing.T) {
	netns, k := testNetns(t)
	in := sampleInput()
	converge(t, k, Table(Compile(in)))
	for _, fams := range []Families{IPv4, 0} {
		in.Families = fams
		st := Compile(in)
		tab := Table(st)
		p := converge(t, k, tab)
		for _, c := range p.Changes {
			if c.Kind == nft.RecreateTable || c.Kind == nft.CreateTable {
				t.Fatalf("families %s: %s (%s), want changes in place", fams, c.Kind, c.Why)
			}
		}
		v6 := 0
		for _, s := range tab.Sets {
			if s.KeyType == nftables.TypeIP6Addr.Name || s.KeyType == nft.KeyAddrPort6.Name {
				v6++
			}
		}
		if (v6 == 0) != (fams == IPv4) {
			t.Errorf("families %s: %d IPv6 sets", fams, v6)
		}
		if _, err := exec.LookPath("nft"); err == nil && fams == IPv4 {
			out := netnstest.Run(t, netns, "nft", "list", "table", "inet", "reef")
			if n := strings.Count(out, "meta nfproto ipv6 accept"); n != 2 {
				t.Errorf("families ipv4: %d rules accept IPv6, want one in each base chain:\n%s", n, out)
			}
			if strings.Contains(out, "ip6 ") {
				t.Errorf("families ipv4: the table matches IPv6 addresses:\n%s", out)
			}
		}
		if fams == IPv4 {
			local := append(slices.Clone(in.Local), Endpoint{Namespace: "x", Name: "a", IP: addr("fd00:10:244::1")})
			if _, _, ok := Recompile(st, local, nil); ok {
				t.Error("Recompile took an IPv6 endpoint into a table of IPv4 only")
			}
			in2 := in
			in2.Local = local
			if FamiliesOf(in2) != IPv4|IPv6 {
				t.Errorf("FamiliesOf with an IPv6 endpoint = %s", FamiliesOf(in2))
			}
		}
	}
}

// TestRendererFollowsFamilies: a Renderer that rendered a table of both
// families renders one of IPv4 only (an endpoint of IPv6 gone from a
// node whose pools are IPv4) as Table does, and back: its cached rules
// are those of the families rendered. It fails if the cache keeps the
// rules of other families.
func TestRendererFollowsFamilies(t *testing.T) {
	in := dualStackInput()
	var r Renderer
	for _, step := range []struct {
		name  string
		fams  Families
		local []Endpoint
	}{
		{"both", IPv4, in.Local}, // IPv4 pools, IPv6 endpoints: both
		{"IPv4 only", IPv4, slices.DeleteFunc(slices.Clone(in.Local), func(e Endpoint) bool { return e.IP.Is6() })},
		{"both again", IPv4, in.Local},
	} {
		in2 := in
		in2.Families, in2.Local = step.fams, step.local
		st := Compile(in2)
		if got, want := noKeys(r.Table(st)), Table(st); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the Renderer's table differs from Table's", step.name)
		}
	}
}
