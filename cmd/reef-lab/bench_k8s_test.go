package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestK8sObserve replays a pod's watch events: each phase keeps the time
// of the first event that shows it, as clusterloader2's PodStartupLatency.
func TestK8sObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pod := func(node string, phase corev1.PodPhase, ip ...string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if len(ip) > 0 {
			p.Status.PodIP = ip[0]
		}
		return p
	}
	type event struct {
		pod *corev1.Pod
		ms  int
	}
	tests := []struct {
		name    string
		events  []event
		want    k8sPodTimes
		startup time.Duration // -1: not Running
	}{
		{"created, scheduled, pending, running, running again", []event{
			{pod("", ""), 0}, {pod("node1", corev1.PodPending), 5}, {pod("node1", corev1.PodPending), 300},
			{pod("node1", corev1.PodRunning, "10.244.0.7"), 1200}, {pod("node1", corev1.PodRunning, "10.244.0.8"), 1500},
		}, k8sPodTimes{create: at(0), schedule: at(5), run: at(1200), node: "node1", ip: "10.244.0.7"}, 1200 * time.Millisecond},
		{"first seen already scheduled (nodeName set at create)", []event{
			{pod("node1", corev1.PodPending), 10}, {pod("node1", corev1.PodRunning, "10.244.11.2"), 900},
		}, k8sPodTimes{create: at(10), schedule: at(10), run: at(900), node: "node1", ip: "10.244.11.2"}, 890 * time.Millisecond},
		{"never Running", []event{
			{pod("", ""), 0}, {pod("node2", corev1.PodPending), 7}, {pod("node2", corev1.PodFailed), 70},
		}, k8sPodTimes{create: at(0), schedule: at(7)}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got k8sPodTimes
			for _, ev := range tt.events {
				k8sObserve(&got, ev.pod, at(ev.ms))
			}
			if got != tt.want {
				t.Fatalf("times %+v, want %+v", got, tt.want)
			}
			ds := (&k8sRun{pods: []k8sPodTimes{got}}).startups()
			if tt.startup < 0 {
				if len(ds) != 0 {
					t.Fatalf("startups %v of a pod never Running", ds)
				}
				return
			}
			if len(ds) != 1 || ds[0] != tt.startup {
				t.Fatalf("startups %v, want [%s]", ds, tt.startup)
			}
		})
	}
}
