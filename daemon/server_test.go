package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/reefcni/reef/cniserver"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
)

// TestLimitCalls: a call past the slots waits for one and is served; one
// whose deadline passes first gets "try again later" (CNI) or Unavailable
// (Node); the two services count apart.
func TestLimitCalls(t *testing.T) {
	limit := limitCalls(discardLog(), time.Hour, 1, 1)
	cniInfo := &grpc.UnaryServerInfo{FullMethod: "/reef.v1.CNI/Add"}
	nodeInfo := &grpc.UnaryServerInfo{FullMethod: "/reef.v1.Node/Status"}
	entered, release := make(chan struct{}), make(chan struct{})
	blocking := func(ctx context.Context, req any) (any, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("handler ran without the server's deadline")
		}
		entered <- struct{}{}
		<-release
		return &reefv1.CNIReply{}, nil
	}
	served := func(context.Context, any) (any, error) { return &reefv1.CNIReply{}, nil }
	first := make(chan error, 1)
	go func() { _, err := limit(context.Background(), &reefv1.CNIRequest{}, cniInfo, blocking); first <- err }()
	<-entered // the one CNI slot is taken

	// The Node service has its own slot.
	if _, err := limit(context.Background(), &reefv1.StatusRequest{}, nodeInfo, served); err != nil {
		t.Fatalf("Node call while the CNI slot is taken: %v", err)
	}
	// A CNI call whose deadline passes while it waits.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	resp, err := limit(ctx, &reefv1.CNIRequest{}, cniInfo, served)
	cancel()
	if rep, _ := resp.(*reefv1.CNIReply); err != nil || rep.GetError().GetCode() != uint32(types.ErrTryAgainLater) || !strings.Contains(rep.GetError().GetMsg(), "busy") {
		t.Errorf("CNI call without a slot = %v, %v; want a CNI reply with code 11 saying the daemon is busy", resp, err)
	}
	// A second one waits, and is served once the slot is free.
	second := make(chan error, 1)
	go func() { _, err := limit(context.Background(), &reefv1.CNIRequest{}, cniInfo, served); second <- err }()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Errorf("waiting CNI call: %v, want served", err)
	}

	// The Node service, its one slot taken: Unavailable once the deadline passes.
	release = make(chan struct{})
	go func() { limit(context.Background(), &reefv1.StatusRequest{}, nodeInfo, blocking) }()
	<-entered
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = limit(ctx, &reefv1.StatusRequest{}, nodeInfo, served)
	cancel()
	close(release)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Node call without a slot: %v, want Unavailable", err)
	}
}

// panicWatch is a log sink that remembers whether a handler panicked
// (cniserver.RecoverInterceptor logs it) and discards the rest.
type panicWatch struct{ seen atomic.Bool }

func (p *panicWatch) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("panic")) {
		p.seen.Store(true)
	}
	return len(b), nil
}

// socketServer serves newServer on a unix socket in a temp dir, with a real
// store and a CNI service that is not ready: every call is refused or
// answered from the (empty) store, none reaches the kernel. The Node
// service is the unimplemented one: its real methods need a whole daemon.
func socketServer(tb testing.TB, sink io.Writer) (path string) {
	tb.Helper()
	dir := tb.TempDir()
	log := slog.New(slog.NewTextHandler(sink, nil))
	st, err := store.Open(filepath.Join(dir, "reef.db"), store.Options{Node: "fuzz", Address: netip.MustParseAddr("192.0.2.1")})
	if err != nil {
		tb.Fatal(err)
	}
	cni := cniserver.New(cniserver.Config{Pools: []store.Pool{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}}, MTU: 1500}, cniserver.Deps{Store: st, Log: log})
	path = filepath.Join(dir, "reef.sock")
	var lis net.Listener
	if os.Geteuid() == 0 {
		lis, err = listenSocket(path, log) // the daemon's own, root-only
	} else {
		lis, err = net.Listen("unix", path)
	}
	if err != nil {
		tb.Fatal(err)
	}
	srv := newServer(log, cni, reefv1.UnimplementedNodeServer{})
	go srv.Serve(lis)
	tb.Cleanup(func() { srv.Stop(); st.Close() })
	return path
}

// http2Request is what a gRPC client writes for one unary call: the
// preface, SETTINGS, HEADERS for path, and the message in DATA after its
// 5-byte gRPC prefix (flag, length). flags: 1 sets the compressed flag, 2
// leaves the stream open, 4 names gzip as the encoding, 8 splits the message
// over two DATA frames; declared, when not 0, is the length the prefix
// claims instead of the true one.
func http2Request(path string, flags uint8, declared uint32, msg []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"grpc-timeout", "10S"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if flags&4 != 0 {
		enc.WriteField(hpack.HeaderField{Name: "grpc-encoding", Value: "gzip"})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	n := uint32(len(msg))
	if declared != 0 {
		n = declared
	}
	body := append([]byte{flags & 1, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(body[1:5], n)
	end := flags&2 == 0
	if flags&8 != 0 && len(body) > 1 {
		fr.WriteData(1, false, body[:len(body)/2])
		body = body[len(body)/2:]
	}
	fr.WriteData(1, end, body)
	return buf.Bytes()
}

// FuzzSocket speaks to the daemon's gRPC server (newServer, the socket's
// options and interceptors) the way a broken or hostile client might: raw
// bytes (mode 0), the HTTP/2 preface and raw frames (mode 1), or a gRPC
// call with a fuzzed path, prefix and message (mode 2). After each, the
// server must still answer a well-formed call, and no handler may have
// panicked.
func FuzzSocket(f *testing.F) {
	good := func(m proto.Message) []byte { b, _ := proto.Marshal(m); return b }
	netconf := []byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"reef-cni"}`)
	add := good(&reefv1.CNIRequest{ContainerId: "c1", Netns: "/var/run/netns/none", Ifname: "eth0", Netconf: netconf})
	settings := http2Request("/reef.v1.CNI/Status", 0, 0, nil)[len(http2.ClientPreface):]
	for _, s := range []struct {
		mode     uint8
		path     string
		flags    uint8
		declared uint32
		payload  []byte
	}{
		{0, "", 0, 0, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{0, "", 0, 0, []byte(http2.ClientPreface[:10])},
		{1, "", 0, 0, settings},
		{1, "", 0, 0, []byte{0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}}, // WINDOW_UPDATE on stream 0
		{2, "/reef.v1.CNI/Add", 0, 0, add},
		{2, "/reef.v1.CNI/Del", 0, 0, add},
		{2, "/reef.v1.CNI/Check", 8, 0, add},
		{2, "/reef.v1.CNI/GC", 0, 0, good(&reefv1.CNIRequest{Netconf: netconf})},
		{2, "/reef.v1.CNI/Status", 0, 0, nil},
		{2, "/reef.v1.CNI/Add", 0, 3 << 20, add},
		{2, "/reef.v1.CNI/Add", 1, 0, add},
		{2, "/reef.v1.CNI/Add", 4 | 1, 0, add},
		{2, "/reef.v1.CNI/Add", 2, 0, add},
		{2, "/reef.v1.CNI/Add", 0, 0, protowire.AppendString(protowire.AppendTag(add, 99, protowire.BytesType), "x")},
		{2, "/reef.v1.CNI/Add", 0, 0, []byte{0xff, 0xff, 0xff}},
		{2, "/reef.v1.CNI/Nope", 0, 0, add},
		{2, "/reef.v1.Node/Status", 0, 0, nil},
		{2, "/x", 0, 0, nil},
	} {
		f.Add(s.mode, s.path, s.flags, s.declared, s.payload)
	}
	watch := &panicWatch{}
	path := socketServer(f, watch)
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	client := reefv1.NewCNIClient(conn)

	f.Fuzz(func(t *testing.T, mode uint8, method string, flags uint8, declared uint32, payload []byte) {
		var out []byte
		switch mode % 3 {
		case 0:
			out = payload
		case 1:
			out = append([]byte(http2.ClientPreface), payload...)
		case 2:
			out = http2Request(method, flags, declared, payload)
		}
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		c.Write(out) // a server that hung up early makes it fail: its right
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if mode%3 == 2 && flags&2 == 0 {
			// A whole call: read until the server has answered it.
			awaitAnswer(c)
		}
		// Then half-close: the server reads to the end and hangs up, which
		// ends the drain.
		c.(*net.UnixConn).CloseWrite()
		io.Copy(io.Discard, c)
		c.Close()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := client.Add(ctx, &reefv1.CNIRequest{Ifname: "eth0", Netns: "/var/run/netns/none", Netconf: netconf})
		if err != nil {
			t.Fatalf("after %d bytes (mode %d): the server no longer answers: %v", len(out), mode%3, err)
		}
		if rep.GetError().GetCode() != uint32(types.ErrInvalidEnvironmentVariables) {
			t.Fatalf("after %d bytes (mode %d): an ADD without container ID got %v, want code 4", len(out), mode%3, rep)
		}
		if watch.seen.Load() {
			t.Fatalf("a handler panicked on %q", out)
		}
	})
}

// awaitAnswer reads HTTP/2 frames from c until stream 1 ends (its trailers,
// or a reset) or the connection does (GOAWAY, EOF, the read deadline).
func awaitAnswer(c net.Conn) {
	fr := http2.NewFramer(nil, c)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return
		case *http2.RSTStreamFrame:
			return
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return
			}
		}
	}
}

// TestSocketRefusals runs the seeds' kinds of call through a real gRPC
// client and checks what each gets back from newServer.
func TestSocketRefusals(t *testing.T) {
	path := socketServer(t, io.Discard)
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	netconf := []byte(`{"cniVersion":"1.0.0","name":"n"}`)
	call := func(method string, msg []byte) (*reefv1.CNIReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var rep reefv1.CNIReply
		err := conn.Invoke(ctx, method, msg, &rep, grpc.ForceCodecV2(rawCodec{}))
		return &rep, err
	}
	req := func(r *reefv1.CNIRequest) []byte { b, _ := proto.Marshal(r); return b }
	for _, tc := range []struct {
		name    string
		method  string
		msg     []byte
		grpc    codes.Code
		cniCode uint32
	}{
		{"message over the limit", "/reef.v1.CNI/Add", req(&reefv1.CNIRequest{Netconf: bytes.Repeat([]byte(" "), reefv1.MaxMessageSize)}), codes.ResourceExhausted, 0},
		{"netconf over its limit", "/reef.v1.CNI/Add", req(&reefv1.CNIRequest{Netconf: bytes.Repeat([]byte(" "), reefv1.MaxNetconfSize+1)}), codes.OK, 7},
		{"not protobuf", "/reef.v1.CNI/Add", []byte{0xff, 0xff, 0xff}, codes.Internal, 0},
		{"unknown method", "/reef.v1.CNI/Nope", req(&reefv1.CNIRequest{}), codes.Unimplemented, 0},
		{"unknown field", "/reef.v1.CNI/Status", protowire.AppendString(protowire.AppendTag(req(&reefv1.CNIRequest{Netconf: netconf}), 99, protowire.BytesType), "x"), codes.OK, reefv1.CodeVersionMismatch},
		{"not ready", "/reef.v1.CNI/Status", req(&reefv1.CNIRequest{Netconf: netconf}), codes.OK, uint32(types.ErrPluginNotAvailable)},
	} {
		rep, err := call(tc.method, tc.msg)
		if status.Code(err) != tc.grpc || rep.GetError().GetCode() != tc.cniCode {
			t.Errorf("%s: gRPC %v, CNI code %d (%s); want gRPC %v, CNI code %d", tc.name, err, rep.GetError().GetCode(), rep.GetError().GetMsg(), tc.grpc, tc.cniCode)
		}
	}
}

// rawCodec sends []byte as they are and decodes replies as protobuf.
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
