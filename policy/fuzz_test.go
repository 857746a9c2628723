package policy

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// fuzzInput is Input as JSON, the API's own encoding of its objects.
type fuzzInput struct {
	Policies   []*networkingv1.NetworkPolicy `json:"policies"`
	Namespaces []*corev1.Namespace           `json:"namespaces"`
	Pods       []*corev1.Pod                 `json:"pods"`
	Local      []struct{ Namespace, Name, IP string }
	// ClusterNetworkPolicies and Nodes: what a cluster policy's node peers
	// stand for.
	Cluster []*cnp.ClusterNetworkPolicy `json:"cluster"`
	Nodes   []*corev1.Node              `json:"nodes"`
}

// FuzzCompile: whatever the API holds, Compile and Table neither panic
// nor produce a rule the kernel's encoding refuses, and isolate only this
// node's pods.
func FuzzCompile(f *testing.F) {
	in := sampleInput()
	fi := fuzzInput{Policies: in.Policies, Namespaces: in.Namespaces, Pods: apiPods(in.Pods)}
	for _, ep := range in.Local {
		fi.Local = append(fi.Local, struct{ Namespace, Name, IP string }{ep.Namespace, ep.Name, ep.IP.String()})
	}
	seed, err := json.Marshal(fi)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"policies":[{"metadata":{"namespace":"x","name":"p"},"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}}}]}`))
	f.Add([]byte(`{"policies":[{"metadata":{"namespace":"x","name":"p"},"spec":{"podSelector":{},"ingress":[{"from":[{"ipBlock":{"cidr":"::ffff:10.0.0.0/104","except":["10.0.0.0/8"]}}],"ports":[{"port":"http","endPort":5},{"protocol":"ICMP"}]}]}}]}`))
	f.Add([]byte(`{"cluster":[null,{"metadata":{"name":"c"},"spec":{"tier":"Admin","priority":-3,"subject":{"pods":{"namespaceSelector":{},"podSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}},"ingress":[{"action":"Pass","from":[{"namespaces":{}},{"nodes":{"matchLabels":{"x":"y"}}}],"protocols":[{"tcp":{"destinationPort":{"number":0}}},{"udp":{"destinationPort":{"range":{"start":9,"end":2}}}},{"destinationNamedPort":""}]}],"egress":[{"action":"Deny","to":[{"networks":["::ffff:10.0.0.0/104","bogus"]},{"domainNames":["*.example"]}]}]}},{"spec":{"tier":"Baseline","subject":{"namespaces":{}}}}],"nodes":[null,{"metadata":{"labels":{"x":"y"}},"status":{"addresses":[{"type":"InternalIP","address":"fe80::1%eth0"},{"type":"InternalIP","address":"10.0.0.1"}]}}],"pods":[{"metadata":{"namespace":"x","name":"a"},"status":{"podIPs":[{"ip":"10.244.0.9"}]}}],"Local":[{"Namespace":"x","Name":"a","IP":"10.244.0.9"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fi fuzzInput
		if json.Unmarshal(data, &fi) != nil {
			return
		}
		in := Input{Policies: fi.Policies, Namespaces: fi.Namespaces, ClusterPolicies: fi.Cluster, Nodes: fi.Nodes}
		for _, p := range fi.Pods {
			if p != nil {
				in.Pods = append(in.Pods, PodFrom(p))
			}
		}
		local := map[netip.Addr]bool{}
		for _, l := range fi.Local {
			a, err := netip.ParseAddr(l.IP)
			if err != nil {
				continue
			}
			in.Local = append(in.Local, Endpoint{Namespace: l.Namespace, Name: l.Name, IP: a})
			local[a.Unmap()] = true
		}
		st := Compile(in)
		for d := range 2 {
			for _, a := range st.Isolated[d] {
				if !local[a] {
					t.Fatalf("%s isolated for %s but not a local endpoint", a, Direction(d))
				}
			}
		}
		tbl := Table(st)
		for _, c := range tbl.Chains {
			for _, r := range c.Rules {
				for _, e := range r.Exprs {
					if _, err := expr.Marshal(byte(TableID.Family), e); err != nil {
						t.Fatalf("chain %s rule %q: %v", c.Name, r.Comment, err)
					}
				}
			}
		}
		for _, s := range tbl.Sets {
			if len(s.Name) > 255 {
				t.Fatalf("set name of %d bytes", len(s.Name))
			}
		}
		Explain(st, in, "")
	})
}

// apiPods turns Pods back into the API's, for the seed corpus.
func apiPods(ps []*Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range ps {
		ap := &corev1.Pod{ObjectMeta: p.ObjectMeta}
		ap.Spec.NodeName, ap.Spec.HostNetwork = p.NodeName, p.HostNetwork
		for _, a := range p.IPs {
			ap.Status.PodIPs = append(ap.Status.PodIPs, corev1.PodIP{IP: a.String()})
		}
		c := corev1.Container{Name: "c"}
		for _, np := range p.Ports {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: np.Name, Protocol: np.Protocol, ContainerPort: np.Port})
		}
		ap.Spec.Containers = []corev1.Container{c}
		out = append(out, ap)
	}
	return out
}
