package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// serviceCIDR is the Service CIDR of the services tests: kubeadm's default.
var serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// Services (docs/bgp.md, "Services"): the ToR lab's three nodes with
// bgp.serviceClusterIPs, the router running BIRD 2 (TestServiceCIDRsBird)
// or FRR (TestServiceCIDRsFRR) with the CIDR in its import filter:
//
//   - the router learns the CIDR from every node, next hop each node, and
//     with multipath (lab.BIRDMultipath, lab.FRRMultipath) routes it in its
//     kernel as one ECMP route over the three nodes;
//   - each node's session to the router sent its blocks and the CIDR, and
//     reef status and the metrics list the CIDR as announced;
//   - no node dropped a path: the CIDR never went over the mesh. (Without the export statement that keeps
//     it from the mesh, each node drops it from both other nodes, and the
//     test fails.)
func TestServiceCIDRsBird(t *testing.T) { testServiceCIDRs(t, "bird") }

func TestServiceCIDRsFRR(t *testing.T) { slowSuite(t); testServiceCIDRs(t, "frr") }

func testServiceCIDRs(t *testing.T, kind string) {
	l := newLab(t)
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN,
		BGPExtra: fmt.Sprintf("  serviceClusterIPs: [%s]\n", serviceCIDR)})
	if err != nil {
		t.Fatal(err)
	}
	// The router takes the blocks and, as an operator configures it for
	// Services, exactly the Service CIDR.
	pools := append(slices.Clone(lab.DefaultToRPools), lab.ToRPool{CIDR: serviceCIDR, BlockSize: serviceCIDR.Bits()})
	tor := startToR(t, l, kind, nodes, pools, "")
	if err := tor.Multipath(); err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	newPod(t, nodes[0], "pa1")
	converge(t, nodes...)
	router := l.Prefix + "-xr"

	var legs []netip.Addr
	for _, n := range nodes {
		legs = append(legs, n.Address)
	}
	slices.SortFunc(legs, netip.Addr.Compare)
	eventually(t, 20*time.Second, func() string {
		hops, err := tor.NextHops(serviceCIDR)
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(hops, legs) {
			return fmt.Sprintf("the router's paths to %s: next hops %v, want one from each node %v", serviceCIDR, hops, legs)
		}
		// One ECMP route over the three nodes (the router's multipath).
		return routerECMP(t, l, serviceCIDR, legs)
	})
	t.Logf("the router's kernel route: %s", strings.TrimSpace(run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())))

	for _, n := range nodes {
		st := mustStatus(t, n)
		if ext := st.GetExternalPeers(); len(ext) != 1 || ext[0].GetSent() != uint64(len(blocksOf(t, n))+1) {
			t.Errorf("%s's external peers: %s; want one that was sent its %d blocks and the Service CIDR", n.Name, ext2s(ext), len(blocksOf(t, n)))
		}
		if got := st.GetServiceCidrs(); !slices.Equal(got, []string{serviceCIDR.String()}) || len(st.GetServiceCidrsWithheld()) != 0 {
			t.Errorf("%s's status: service CIDRs %v, withheld %v; want [%s], none", n.Name, got, st.GetServiceCidrsWithheld(), serviceCIDR)
		}
		if out, err := n.Reef("status"); err != nil || !strings.Contains(out, "Service CIDRs announced to them (bgp.serviceClusterIPs): "+serviceCIDR.String()+"\n") {
			t.Errorf("%s: reef status does not list the Service CIDR (err %v):\n%s", n.Name, err, out)
		}
		if v := scrapeIn(t, n, "reef_bgp_service_cidr_announced"); v != "1" {
			t.Errorf("%s: reef_bgp_service_cidr_announced is %s, want 1", n.Name, v)
		}
		if st.GetBgpDropped() != 0 {
			t.Errorf("%s dropped %d paths from its peers: a Service CIDR went over the mesh?", n.Name, st.GetBgpDropped())
		}
		if !strings.Contains(n.Log(), "announcing service CIDRs to external peers") {
			t.Errorf("%s does not log the Service CIDRs it announces", n.Name)
		}
	}
}
