package cniserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"

	reefv1 "github.com/reefcni/reef/proto"
)

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

// TestStatusUnavailable: STATUS is code 50 while the daemon starts, and
// while Unavailable says no ADD can succeed (a forgotten node), with its
// reason; it succeeds when ready and nothing stands in the way.
func TestStatusUnavailable(t *testing.T) {
	why := ""
	s := New(Config{}, Deps{Log: slog.New(slog.DiscardHandler), Unavailable: func() string { return why }})
	in := &reefv1.CNIRequest{Netconf: []byte(`{"cniVersion":"1.1.0","name":"n"}`)}
	status := func() *reefv1.CNIError {
		rep, err := s.Status(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return rep.GetError()
	}
	if e := status(); e.GetCode() != uint32(types.ErrPluginNotAvailable) || e.GetMsg() != NotReadyReason {
		t.Errorf("STATUS while starting: %v, want code 50 %q", e, NotReadyReason)
	}
	s.SetReady(true)
	if e := status(); e != nil {
		t.Errorf("STATUS when ready: %v, want success", e)
	}
	why = "this node was forgotten by the cluster"
	if e := status(); e.GetCode() != uint32(types.ErrPluginNotAvailable) || e.GetMsg() != why {
		t.Errorf("STATUS of a forgotten node: %v, want code 50 %q", e, why)
	}
}
