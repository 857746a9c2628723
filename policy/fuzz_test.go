package policy

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/nftables/expr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// fuzzInput is Input as JSON, the API's own encoding of its objects.
type fuzzInput struct {
	Policies   []*networkingv1.NetworkPolicy `json:"policies"`
	Namespaces []*corev1.Namespace           `json:"namespaces"`
	Pods       []*corev1.Pod                 `json:"pods"`
	Local      []struct{ Namespace, Name, IP string }
}

// FuzzCompile: whatever the API holds, Compile and Table neither panic
// nor produce a rule the kernel's encoding refuses, and isolate only this
// node's pods.
func FuzzCompile(f *testing.F) {
	in := sampleInput()
	fi := fuzzInput{Policies: in.Policies, Namespaces: in.Namespaces, Pods: in.Pods}
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
	f.Fuzz(func(t *testing.T, data []byte) {
		var fi fuzzInput
		if json.Unmarshal(data, &fi) != nil {
			return
		}
		in := Input{Policies: fi.Policies, Namespaces: fi.Namespaces, Pods: fi.Pods}
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
