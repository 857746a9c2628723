package lbipam

import (
	"encoding/json"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// fuzzRound is one round's input as the API gives it: the Services, the
// record ConfigMap's data (JSON that anyone with write access to the
// ConfigMap may have edited) and the pools.
type fuzzRound struct {
	Services []*corev1.Service `json:"services"`
	Record   string            `json:"record"`
	Pools    []string          `json:"pools"`
}

// FuzzAssign: whatever the API holds (any Service object, any record),
// serviceFrom and Assign neither panic nor break the round's promises: an
// address in the record does not change hands in a round, a new one lies
// in the pools, a Service is shown only addresses the record gives it,
// and no address is given to two Services.
func FuzzAssign(f *testing.F) {
	seed, err := json.Marshal(fuzzRound{
		Services: []*corev1.Service{
			{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}}},
		},
		Record: `{"192.0.2.1":{"uid":"u1","service":"a/1"}}`,
		Pools:  []string{"192.0.2.0/30", "2001:db8:5::/126"},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"services":[{"metadata":{"namespace":"a","name":"1","uid":"u1","annotations":{"reefcni.io/loadBalancerIPs":"192.0.2.1, ::ffff:192.0.2.2,zz"}},"spec":{"type":"LoadBalancer","loadBalancerIP":"192.0.2.9"},"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"},{"ip":"bogus"}]}}},{"metadata":{"namespace":"a","name":"2","uid":"u2"},"spec":{"type":"LoadBalancer","loadBalancerClass":"other"}}],"record":"{\"192.0.2.1\":{\"uid\":\"u2\",\"service\":\"a/2\"}}","pools":["192.0.2.0/31","0.0.0.0/0","::/0"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var in fuzzRound
		if json.Unmarshal(data, &in) != nil {
			return
		}
		var svcs []Service
		uids := map[string]bool{}
		for _, s := range in.Services {
			if s == nil {
				continue
			}
			sv := serviceFrom(s)
			if uids[sv.UID] {
				continue // the API never holds two objects with one UID
			}
			uids[sv.UID] = true
			svcs = append(svcs, sv)
		}
		rec := Record{}
		if json.Unmarshal([]byte(in.Record), &rec) != nil {
			rec = Record{} // readRecord refuses it and says so
		}
		var pools []netip.Prefix
		for _, p := range in.Pools {
			if pf, err := netip.ParsePrefix(p); err == nil && pf.Bits() >= pf.Addr().BitLen()-16 {
				pools = append(pools, pf.Masked()) // at most 2^16 addresses: bounds the fuzzer's work per round
			}
		}
		p := Assign(svcs, rec, pools)
		inPools := func(a netip.Addr) bool {
			for _, pf := range pools {
				if pf.Contains(a) {
					return true
				}
			}
			return false
		}
		for a, o := range p.Record {
			if prev, ok := rec[a]; ok && prev != o {
				t.Fatalf("%s moved from %v to %v in one round", a, prev, o)
			}
			if _, ok := rec[a]; !ok && !inPools(a) {
				t.Fatalf("%s assigned outside the pools %v", a, pools)
			}
		}
		shown := map[netip.Addr]string{}
		for _, st := range p.Status {
			for _, a := range st.Ingress {
				if o, ok := p.Record[a]; !ok || o.UID != st.UID {
					t.Fatalf("%s is to show %s, which the record gives to %v", st.Service, a, o)
				}
				if other, ok := shown[a]; ok && other != st.UID {
					t.Fatalf("%s is to be shown by %s and %s", a, other, st.UID)
				}
				shown[a] = st.UID
			}
		}
	})
}
