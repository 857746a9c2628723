package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/policy"
)

// bench-policy's throughput figure: iperf3 across nodes, isolated by
// policies that allow the flow, alternating with no policy.

// throughput runs iperf3 from a pod on node1 to a pod on node2, in turn
// with no policy selecting them and with an egress policy on the client
// and an ingress policy on the server that allow the flow.
func (b *policyBench) throughput() {
	if err := b.runThroughput(); err != nil {
		b.report.tputErr = err.Error()
	}
}

func (b *policyBench) runThroughput() error {
	cli, err := b.api.RunPod(b.on[0], "bench", "iperf-client", map[string]string{"role": "iperf-client"}, nil)
	if err != nil {
		return err
	}
	srv, err := b.api.RunPod(b.on[1], "bench", "iperf-server", map[string]string{"role": "iperf-server"}, nil)
	if err != nil {
		return err
	}
	stop, err := b.l.Spawn(srv.Netns, "iperf3-server.log", "iperf3", "-s", "-B", srv.IP.String())
	if err != nil {
		return err
	}
	defer stop()
	if err := poll.Until(5*time.Second, func() error {
		out, _ := b.l.Run(srv.Netns, "ss", "-Htln", "sport", "= :5201")
		if !strings.Contains(out, net.JoinHostPort(srv.IP.String(), "5201")) {
			return fmt.Errorf("iperf3 server on %s not listening", srv.IP)
		}
		return nil
	}); err != nil {
		return err
	}
	pols := iperfPolicies()
	for round := range 3 {
		for _, on := range []bool{false, true} {
			if err := b.tputRound(cli, srv, pols, round, on); err != nil {
				return err
			}
		}
	}
	return nil
}

// iperfPolicies are an egress policy on the iperf client and an ingress
// policy on the server that allow the flow.
func iperfPolicies() []*networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(5201)
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "iperf-egress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-server"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
	ingress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "iperf-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "iperf-client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
	return []*networkingv1.NetworkPolicy{egress, ingress}
}

// isolated is whether the client is isolated for egress on its node
// and the server for ingress on its own.
func (b *policyBench) isolated() (bool, bool, error) {
	view := func(n *lab.Node, pod string) (policy.PodView, error) {
		var views []policy.PodView
		out, err := n.Reef("policy", "show", pod, "-o", "json")
		if err != nil {
			return policy.PodView{}, err
		}
		if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != 1 {
			return policy.PodView{}, fmt.Errorf("reef policy show %s on %s: %v: %s", pod, n.Name, err, out)
		}
		return views[0], nil
	}
	c, err := view(b.on[0], "bench/iperf-client")
	if err != nil {
		return false, false, err
	}
	s, err := view(b.on[1], "bench/iperf-server")
	return c.IsolatedEgress, s.IsolatedIngress, err
}

// tputRound measures one iperf3 run, with pols in place when on (created
// before and deleted after) and with none otherwise.
func (b *policyBench) tputRound(cli, srv *lab.KubePod, pols []*networkingv1.NetworkPolicy, round int, on bool) error {
	if on {
		for _, p := range pols {
			if _, err := b.c.NetworkingV1().NetworkPolicies("bench").Create(b.ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	if err := poll.Until(10*time.Second, func() error {
		egress, ingress, err := b.isolated()
		if err != nil {
			return err
		}
		if egress != on || ingress != on {
			return fmt.Errorf("the client isolated for egress: %t, the server for ingress: %t", egress, ingress)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("round %d: isolation never became %t: %w", round, on, err)
	}
	out, err := b.l.Run(cli.Netns, "iperf3", "-c", srv.IP.String(), "-t", "5", "-J")
	if err != nil {
		return fmt.Errorf("iperf3: %w", err)
	}
	var res struct {
		End struct {
			SumReceived struct {
				Bps float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.End.SumReceived.Bps == 0 {
		return fmt.Errorf("iperf3 output: %v: %s", err, tputFirstLine(out))
	}
	if !on {
		b.report.tputOff = append(b.report.tputOff, res.End.SumReceived.Bps/1e9)
		return nil
	}
	b.report.tputOn = append(b.report.tputOn, res.End.SumReceived.Bps/1e9)
	for _, p := range pols {
		if err := b.c.NetworkingV1().NetworkPolicies("bench").Delete(b.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return nil
}
