package policy

import "testing"

// TestByNamespaceCoversAffects: whatever a pod can affect (affects,
// clusterAffects), the policies its namespace can affect include
// (byNamespace, what Recompile asks about): for every pod and policy of
// the bench's load (NetworkPolicies naming other namespaces' pods by
// namespace selectors, named ports, ipBlocks; cluster policies of both
// tiers) and of the samples. It also fails when the filter is no filter.
func TestByNamespaceCoversAffects(t *testing.T) {
	for name, in := range map[string]Input{"bench": benchClusterInput(), "sample": sampleInput(), "dual-stack": dualStackInput(), "recompile": recompileClusterInput()} {
		st := Compile(in)
		ix := st.ix
		skipped := 0
		for _, pod := range in.Pods {
			r := ix.affected.of(ix, st, pod.Namespace)
			in := func(is []int, i int) bool {
				for _, j := range is {
					if j == i {
						return true
					}
				}
				return false
			}
			for i, c := range st.Policies {
				if !in(r.policies, i) {
					skipped++
					if affects(ix, c.src, pod) {
						t.Errorf("%s: pod %s/%s affects NetworkPolicy %s, not among its namespace's", name, pod.Namespace, pod.Name, c.Key())
					}
				}
			}
			for i, c := range st.Cluster {
				if !in(r.cluster, i) {
					skipped++
					if clusterAffects(ix, c.src, pod) {
						t.Errorf("%s: pod %s/%s affects ClusterNetworkPolicy %s, not among its namespace's", name, pod.Namespace, pod.Name, c.Name)
					}
				}
			}
		}
		if name == "bench" && skipped == 0 {
			t.Errorf("%s: no policy left out for any namespace: no filter", name)
		}
	}
}
