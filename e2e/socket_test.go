package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	reefv1 "github.com/reefcni/reef/proto"
)

// TestSocketInput: what the daemon refuses for what it is gets a permanent
// CNI code and a message that says what to fix, through reef-cni and
// through a hand-made gRPC client on the socket; raw bytes and HTTP/2
// garbage only cost their connection. The daemon serves a real ADD after.
func TestSocketInput(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	pod, err := n.NewPodNetns("default", "socket")
	if err != nil {
		t.Fatal(err)
	}
	conf := func(socket, extra string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"reef-cni","socket":"` + socket +
			`","pendingDeleteDir":"` + n.PendingDir + `"` + extra + `}`)
	}
	big := `,"x":"` + strings.Repeat("a", 10<<20) + `"`
	env := func(command, args string) map[string]string {
		return map[string]string{"CNI_COMMAND": command, "CNI_CONTAINERID": "socket0001", "CNI_NETNS": lab.NetnsPath(pod.Netns),
			"CNI_IFNAME": "eth0", "CNI_PATH": n.Lab.BinDir, "CNI_ARGS": args}
	}
	goodArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=socket"
	for _, tc := range []struct {
		name     string
		env      map[string]string
		stdin    []byte
		code     int
		contains string
	}{
		{"10 MB netconf", env("ADD", goodArgs), conf(n.Socket, big), 7, "reef accepts at most 1048576"},
		{"10 MB netconf, socket missing", env("ADD", goodArgs), conf(n.Socket+".none", big), 7, "reef accepts at most 1048576"},
		{"10 MB netconf on DEL", env("DEL", goodArgs), conf(n.Socket, big), 7, "reef accepts at most 1048576"},
		{"CNI_ARGS not UTF-8", env("ADD", "K8S_POD_NAME=\xff"), conf(n.Socket, ""), 4, "CNI_ARGS"},
		{"ipam of another plugin", env("ADD", goodArgs), conf(n.Socket, `,"ipam":{"type":"host-local"}`), 2, `"ipam"`},
		{"mtu in the netconf", env("ADD", goodArgs), conf(n.Socket, `,"mtu":1400`), 2, `"mtu"`},
	} {
		out, code, err := n.Shim(tc.env, tc.stdin)
		if err != nil {
			t.Fatal(err)
		}
		var e cniError
		if code == 0 || json.Unmarshal(out, &e) != nil {
			t.Errorf("%s: reef-cni exit %d, stdout %.200q: want a CNI error", tc.name, code, out)
			continue
		}
		if e.Code != tc.code || !strings.Contains(e.Msg, tc.contains) {
			t.Errorf("%s: code %d %q (%s), want code %d mentioning %q", tc.name, e.Code, e.Msg, e.Details, tc.code, tc.contains)
		}
		t.Logf("%s: reef-cni: code %d: %s", tc.name, e.Code, e.Msg)
	}
	if queued, _ := os.ReadDir(n.PendingDir); len(queued) != 0 {
		t.Errorf("a refused DEL was queued: %v", queued)
	}

	// The daemon's own limits, for clients that are not the shim.
	conn, err := grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	marshal := func(r *reefv1.CNIRequest) []byte { b, _ := proto.Marshal(r); return b }
	netconf := conf(n.Socket, "")
	add := &reefv1.CNIRequest{ContainerId: "socket0002", Netns: lab.NetnsPath(pod.Netns), Ifname: "eth0", Args: goodArgs, Netconf: netconf}
	withUnknown := protowire.AppendString(protowire.AppendTag(marshal(add), 99, protowire.BytesType), "from a newer shim")
	for _, tc := range []struct {
		name    string
		method  string
		msg     []byte
		grpc    codes.Code
		cniCode uint32
	}{
		{"3 MiB message", "/reef.v1.CNI/Add", marshal(&reefv1.CNIRequest{ContainerId: "socket0002", Netconf: bytes.Repeat([]byte(" "), 3<<20)}), codes.ResourceExhausted, 0},
		{"netconf over 1 MiB", "/reef.v1.CNI/Add", marshal(&reefv1.CNIRequest{ContainerId: "socket0002", Netconf: bytes.Repeat([]byte(" "), reefv1.MaxNetconfSize+1)}), codes.OK, 7},
		{"garbage for a CNIRequest", "/reef.v1.CNI/Add", []byte{0xff, 0xff, 0xff, 0xff}, codes.Internal, 0},
		{"unknown method", "/reef.v1.CNI/Rename", marshal(add), codes.Unimplemented, 0},
		{"unknown service", "/reef.v2.CNI/Add", marshal(add), codes.Unimplemented, 0},
		{"unknown field", "/reef.v1.CNI/Add", withUnknown, codes.OK, reefv1.CodeVersionMismatch},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var rep reefv1.CNIReply
		err := conn.Invoke(ctx, tc.method, tc.msg, &rep, grpc.ForceCodecV2(rawCodec{}))
		cancel()
		if status.Code(err) != tc.grpc || rep.GetError().GetCode() != tc.cniCode {
			t.Errorf("%s: gRPC %v, CNI code %d (%s); want gRPC %v, CNI code %d", tc.name, err, rep.GetError().GetCode(), rep.GetError().GetMsg(), tc.grpc, tc.cniCode)
		}
		t.Logf("%s: gRPC %s %q, CNI code %d %q", tc.name, status.Code(err), status.Convert(err).Message(), rep.GetError().GetCode(), rep.GetError().GetMsg())
	}
	// Not gRPC at all: the daemon hangs up.
	for name, b := range map[string][]byte{
		"HTTP/1.1":                []byte("GET / HTTP/1.1\r\nHost: reef\r\n\r\n"),
		"HTTP/2 preface, garbage": append([]byte(http2.ClientPreface), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"random bytes":            bytes.Repeat([]byte{0x16, 0x03, 0x01, 0x00}, 64),
	} {
		c, err := net.Dial("unix", n.Socket)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		if err := awaitHangUp(c, 2*time.Minute); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		c.Close()
	}

	if !n.Running() {
		t.Fatal("daemon died")
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations left by refused calls: %v", got)
	}
	if err := pod.Add(); err != nil {
		t.Fatalf("a good ADD after the bad input: %v", err)
	}
}

// TestSocketIdleConnections: 1,000 connections that send nothing, opened
// at once, do not keep a real ADD from being served, and the daemon closes
// each of them by itself (the handshake timeout); so it does connections
// that finished the handshake and then idle (maxConnectionIdle).
func TestSocketIdleConnections(t *testing.T) {
	slowSuite(t)
	timerBound(t)
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	const silent, handshaken = 1000, 20
	conns := make([]net.Conn, silent+handshaken)
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialRetry(n.Socket)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			if i >= silent { // the preface and SETTINGS, then nothing
				_, err := c.Write(append([]byte(http2.ClientPreface), 0, 0, 0, 4, 0, 0, 0, 0, 0))
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	for err := range errs {
		t.Fatalf("open the idle connections: %v", err)
	}
	opened := time.Now()

	p := newPod(t, n, "busy")
	t.Logf("ADD served with %d idle connections opened %s before; %d of them still open after it",
		len(conns), time.Since(opened).Round(time.Millisecond), stillOpen(conns))
	if _, err := n.Status(); err != nil {
		t.Errorf("Node status with the idle connections open: %v", err)
	}

	// The daemon closes every one of them. The bound is generous next to
	// reef's limits, 10 s (silent) and 30 s + 5 s (handshaken), and below
	// gRPC's own default of 120 s for the handshake (idle: none), so it
	// shows that the limits are set.
	results := make(chan error, len(conns))
	for _, c := range conns {
		go func() { results <- awaitHangUp(c, 90*time.Second) }()
	}
	failed := 0
	for range conns {
		if err := <-results; err != nil {
			if failed++; failed <= 5 {
				t.Errorf("idle connection: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d idle connections not closed by the daemon", failed, len(conns))
	} else {
		t.Logf("all %d idle connections closed by the daemon %s after they were opened", len(conns), time.Since(opened).Round(time.Second))
	}
	if !n.Running() {
		t.Fatal("daemon died")
	}
	if err := p.Del(); err != nil {
		t.Errorf("DEL after the idle connections: %v", err)
	}
}

// dialRetry connects to a unix socket, retrying while its backlog is
// full (EAGAIN: a thousand dials at once can outrun the accept loop).
func dialRetry(path string) (net.Conn, error) {
	var c net.Conn
	err := poll.Until(2*time.Second, func() error {
		var err error
		if c, err = net.Dial("unix", path); err != nil && !errors.Is(err, syscall.EAGAIN) {
			return poll.Stop(err)
		}
		return err
	})
	return c, err
}

// awaitHangUp reads c until the peer closes it: nil on EOF or a reset, an
// error when the bound passes first.
func awaitHangUp(c net.Conn, bound time.Duration) error {
	c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return err
}

// stillOpen counts the connections the daemon has not closed yet (a
// non-blocking peek: EOF is 0 bytes, an open silent one EAGAIN).
func stillOpen(conns []net.Conn) int {
	open := 0
	for _, c := range conns {
		raw, err := c.(*net.UnixConn).SyscallConn()
		if err != nil {
			continue
		}
		raw.Control(func(fd uintptr) {
			var b [1]byte
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if n > 0 || errors.Is(err, syscall.EAGAIN) {
				open++
			}
		})
	}
	return open
}

// rawCodec sends []byte as they are, so that a test can send what no
// generated client would, and decodes replies as protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.([]byte); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return nil, errors.New("rawCodec: not []byte")
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}
