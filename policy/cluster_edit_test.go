package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/nat/nft"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// TestClusterChangeTouchesItsRules: in a throw-away network namespace,
// with three Admin-tier ClusterNetworkPolicies, a change of the middle
// one's port replaces only its rule in the tier chain adm-in: the other
// policies' rules keep their kernel handles (and so their counters): only
// the middle one's rules (one per family) are written again. (issue 31: "a change touches
// only the elements and rules it affects".)
func TestClusterChangeTouchesItsRules(t *testing.T) {
	_, k := testNetns(t)
	in := sampleInput()
	mk := func(name string, prio, port int32) *cnp.ClusterNetworkPolicy {
		p := clusterPolicy(name, cnp.AdminTier, prio, nsSubject("ns", "x"))
		p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Deny", From: fromNS("ns", "y"), Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(port)}}}
		return p
	}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{mk("first", 10, 1000), mk("middle", 20, 2000), mk("last", 30, 3000)}
	converge(t, k, Table(Compile(in)))
	before := admIn(t, k)
	in.ClusterPolicies[1] = mk("middle", 20, 2001)
	plan := converge(t, k, Table(Compile(in)))
	after := admIn(t, k)
	if len(before) != len(after) || len(after) < 3 {
		t.Fatalf("adm-in has %d rules before and %d after, want the same, 3 at least", len(before), len(after))
	}
	changed := 0
	for i := range after {
		switch {
		case after[i].Handle == before[i].Handle:
		case strings.Contains(after[i].Comment, "ClusterNetworkPolicy middle "):
			changed++
		default:
			t.Errorf("rule %d, %q, was written again (handle %d, was %d): it is not the changed policy's", i+1, after[i].Comment, after[i].Handle, before[i].Handle)
		}
	}
	if changed == 0 {
		t.Errorf("no rule of adm-in was written again; plan %v", kinds(plan))
	}
}

// admIn is the kernel's rules of chain adm-in, with their handles.
func admIn(t *testing.T, k *nft.Kernel) []nft.Rule {
	t.Helper()
	have, err := k.Read([]nft.TableID{TableID})
	if err != nil || len(have) != 1 {
		t.Fatalf("read %s: %v", TableID, err)
	}
	i := slices.IndexFunc(have[0].Chains, func(c nft.Chain) bool { return c.Name == "adm-in" })
	if i < 0 {
		t.Fatal("no chain adm-in")
	}
	return have[0].Chains[i].Rules
}

func kinds(p nft.Plan) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Kind.String()+": "+c.Why)
	}
	return out
}
