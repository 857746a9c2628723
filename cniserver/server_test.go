package cniserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"

	reefv1 "github.com/reefcni/reef/proto"
)

// deadlock bounds waits that only a bug makes long; it is a failure, never
// a pause that a passing run depends on.
const deadlock = 10 * time.Second

// waiters reports how many lock holders and waiters key has.
func (k *keyedMutex) waiters(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.m[key]; e != nil {
		return e.refs
	}
	return 0
}

// waitFor spins until cond holds, failing the test if it never does.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadlock)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

func TestKeyedMutexSameKeySerialises(t *testing.T) {
	var k keyedMutex
	unlockA := k.lock("c1")

	acquired := make(chan func())
	go func() { acquired <- k.lock("c1") }()

	// The second caller is queued on the key's lock, not yet through.
	waitFor(t, "the second lock of c1 is queued", func() bool { return k.waiters("c1") == 2 })
	select {
	case <-acquired:
		t.Fatal("second lock of c1 was granted while the first is held")
	default:
	}

	unlockA()
	var unlockB func()
	select {
	case unlockB = <-acquired:
	case <-time.After(deadlock):
		t.Fatal("second lock of c1 not granted after the first was released")
	}
	if n := k.waiters("c1"); n != 1 {
		t.Errorf("refs of c1 = %d with one holder, want 1", n)
	}
	unlockB()
	if len(k.m) != 0 {
		t.Errorf("map keeps %d entries after every unlock, want 0", len(k.m))
	}
}

func TestKeyedMutexDifferentKeysInParallel(t *testing.T) {
	var k keyedMutex
	unlockA := k.lock("c1")
	defer unlockA()

	done := make(chan struct{})
	go func() {
		unlock := k.lock("c2")
		unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadlock):
		t.Fatal("lock of c2 blocked while only c1 was held")
	}
}

func TestKeyedMutexExclusion(t *testing.T) {
	var k keyedMutex
	var wg sync.WaitGroup
	var inside [2]atomic.Int32
	counters := [2]int{} // unsynchronised on purpose: the race detector checks the lock
	keys := [2]string{"a", "b"}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := i % 2
			unlock := k.lock(keys[n])
			defer unlock()
			if c := inside[n].Add(1); c != 1 {
				t.Errorf("%d holders of key %s at once", c, keys[n])
			}
			counters[n]++
			inside[n].Add(-1)
		}()
	}
	wg.Wait()
	if counters != [2]int{100, 100} {
		t.Errorf("counters = %v, want [100 100]", counters)
	}
	if len(k.m) != 0 {
		t.Errorf("map keeps %d entries after every unlock, want 0", len(k.m))
	}
}

// lockedBuffer is a log sink safe for the handler's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRecoverInterceptor(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/reef.v1.CNI/Add"}
	boom := func(ctx context.Context, req any) (any, error) { panic("boom in handler") }

	t.Run("CNI request", func(t *testing.T) {
		var logs lockedBuffer
		ic := RecoverInterceptor(slog.New(slog.NewTextHandler(&logs, nil)))
		resp, err := ic(context.Background(), &reefv1.CNIRequest{ContainerId: "abc"}, info, boom)
		if err != nil {
			t.Fatalf("gRPC error = %v, want nil (the error travels in the CNI reply)", err)
		}
		rep, ok := resp.(*reefv1.CNIReply)
		if !ok {
			t.Fatalf("reply is %T, want *reefv1.CNIReply", resp)
		}
		if rep.GetError() == nil {
			t.Fatalf("reply %v carries no CNI error", rep)
		}
		if got := rep.GetError().GetCode(); got != 999 || uint(got) != types.ErrInternal {
			t.Errorf("CNI error code = %d, want 999", got)
		}
		if !strings.Contains(rep.GetError().GetDetails(), "boom in handler") {
			t.Errorf("details %q do not carry the panic", rep.GetError().GetDetails())
		}
		if len(rep.GetResult()) != 0 {
			t.Errorf("reply carries a result %q with the error", rep.GetResult())
		}
		if l := logs.String(); !strings.Contains(l, "panic in handler") || !strings.Contains(l, "/reef.v1.CNI/Add") {
			t.Errorf("log does not name the panic and method:\n%s", l)
		}
	})

	t.Run("other request", func(t *testing.T) {
		ic := RecoverInterceptor(slog.New(slog.DiscardHandler))
		resp, err := ic(context.Background(), "not a CNI request", info, boom)
		if err == nil || !strings.Contains(err.Error(), "boom in handler") {
			t.Errorf("error = %v, want one naming the panic", err)
		}
		if resp != nil {
			t.Errorf("reply = %v, want nil", resp)
		}
	})

	t.Run("no panic", func(t *testing.T) {
		ic := RecoverInterceptor(slog.New(slog.DiscardHandler))
		want := &reefv1.CNIReply{Result: []byte("{}")}
		wantErr := errors.New("handler error")
		resp, err := ic(context.Background(), &reefv1.CNIRequest{}, info, func(context.Context, any) (any, error) {
			return want, wantErr
		})
		if resp != want || err != wantErr {
			t.Errorf("interceptor = %v, %v; want the handler's %v, %v", resp, err, want, wantErr)
		}
	})
}
