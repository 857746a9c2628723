package policy

import (
	"fmt"
	"os/exec"
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
