package main

// The watch that times bench-k8s's pods (clusterloader2's PodStartupLatency:
// created to watch-observed Running).

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// k8sObserver times a run's pods from the watch's events.
type k8sObserver struct {
	want     int
	mu       sync.Mutex
	reopened int // watches reopened
	seen     map[string]*k8sPodTimes
	deleted  map[string]bool
	running  chan struct{} // closed when want pods were seen Running
	gone     chan struct{} // closed when want pods were seen deleted
	failed   chan error
}

func newK8sObserver(want int) *k8sObserver {
	return &k8sObserver{want: want, seen: map[string]*k8sPodTimes{}, deleted: map[string]bool{},
		running: make(chan struct{}), gone: make(chan struct{}), failed: make(chan error, 1)}
}

// consume reads w's events until every pod was seen deleted. When the
// watch ends early (a loaded machine can miss the HTTP/2 health check's
// ping), it reopens one from the last resource version seen, so that no
// event is lost; the events of the gap then arrive late, and reopened
// counts such gaps.
func (o *k8sObserver) consume(w watch.Interface, reopen func(rv string) (watch.Interface, error)) {
	ranDone, rv := false, ""
	for {
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type == watch.Error {
				o.fail(fmt.Errorf("watch: %v", ev.Object))
				return
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = pod.ResourceVersion
			o.mu.Lock()
			if ev.Type == watch.Deleted {
				o.deleted[pod.Name] = true
			} else {
				t := o.seen[pod.Name]
				if t == nil {
					t = &k8sPodTimes{}
					o.seen[pod.Name] = t
				}
				k8sObserve(t, pod, at)
			}
			running := o.countRunningLocked()
			deleted := len(o.deleted)
			o.mu.Unlock()
			if !ranDone && running == o.want {
				ranDone = true
				close(o.running)
			}
			if deleted == o.want {
				close(o.gone)
				return
			}
		}
		w.Stop()
		var err error
		if w, err = reopen(rv); err != nil {
			o.fail(fmt.Errorf("reopen the watch of the pods at resource version %q: %w", rv, err))
			return
		}
		o.mu.Lock()
		o.reopened++
		o.mu.Unlock()
	}
}

func (o *k8sObserver) fail(err error) {
	select {
	case o.failed <- err:
	default:
	}
}

func (o *k8sObserver) countRunningLocked() int {
	n := 0
	for _, t := range o.seen {
		if !t.run.IsZero() {
			n++
		}
	}
	return n
}

func (o *k8sObserver) countRunning() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.countRunningLocked()
}

func (o *k8sObserver) reopenedWatches() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reopened
}

func (o *k8sObserver) times() []k8sPodTimes {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ts []k8sPodTimes
	for _, t := range o.seen {
		ts = append(ts, *t)
	}
	return ts
}
