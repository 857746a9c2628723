package main

// The NetworkPolicy probe agent: the lab's pods are bare network namespaces,
// so what the upstream Netpol suite does with agnhost (porter to serve,
// connect to probe) is done by reef-lab itself, run in a pod's netns:
//
//	reef-lab serve-ports --tcp 80,81 --udp 80,81 [--sctp 80,81]
//	reef-lab probe [--timeout 1s] [--json] [--udp-source-port N] tcp:10.244.1.5:80 udp:10.244.1.5:81 ...
//
// internal/lab (netpol.go) starts and reads them.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
)

// agentCommands are the agent's subcommands, each with flags of its own.
var agentCommands = map[string]func(args []string) error{
	"serve-ports": servePorts,
	"probe":       probe,
}

// servePorts listens on all addresses until SIGINT or SIGTERM: a TCP or
// SCTP connection gets one line naming the server and is closed; a UDP
// datagram is sent back as it came. SCTP is served when the kernel has it;
// without, a warning, and TCP and UDP are served still.
func servePorts(args []string) error {
	fs := flag.NewFlagSet("reef-lab serve-ports", flag.ContinueOnError)
	tcpFlag := fs.String("tcp", "", "comma-separated TCP ports")
	udpFlag := fs.String("udp", "", "comma-separated UDP ports")
	sctpFlag := fs.String("sctp", "", "comma-separated SCTP ports")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ports [3][]int
	for i, f := range []struct{ name, val string }{{"tcp", *tcpFlag}, {"udp", *udpFlag}, {"sctp", *sctpFlag}} {
		ps, err := parsePorts(f.val)
		if err != nil {
			return fmt.Errorf("--%s: %w", f.name, err)
		}
		ports[i] = ps
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()

	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for _, p := range ports[0] {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			return err
		}
		closers = append(closers, func() { ln.Close() })
		go serveTCP(ln, host)
	}
	for _, p := range ports[1] {
		pc, err := net.ListenPacket("udp", ":"+strconv.Itoa(p))
		if err != nil {
			return err
		}
		closers = append(closers, func() { pc.Close() })
		go serveUDP(pc)
	}
	var sctp []int
	for _, p := range ports[2] {
		fd, err := sctpListen(p)
		if errors.Is(err, lab.ErrNoSCTP) {
			fmt.Fprintf(os.Stderr, "serve-ports: warning: %v: not serving SCTP %v\n", err, ports[2])
			break
		}
		if err != nil {
			return fmt.Errorf("sctp port %d: %w", p, err)
		}
		go serveSCTP(fd, host)
		sctp = append(sctp, p)
	}
	// lab.ServePorts waits for this line.
	fmt.Printf("%s: tcp %v udp %v sctp %v\n", lab.ServePortsReady, ports[0], ports[1], sctp)
	<-ctx.Done()
	return nil
}

func parsePorts(s string) ([]int, error) {
	var ps []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// serverLine is what a TCP or SCTP client reads: who answered, on which
// address, and whom it saw (a policy test wants to know nothing rewrote
// the source).
func serverLine(host string, local, remote any) string {
	return fmt.Sprintf("%s %v %v\n", host, local, remote)
}

func serveTCP(ln net.Listener, host string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte(serverLine(host, c.LocalAddr(), c.RemoteAddr())))
		}()
	}
}

func serveUDP(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// The echo, and whom the server saw (a hostPort test wants to
		// know the source was kept).
		pc.WriteTo(append(buf[:n:n], " from "+from.String()...), from)
	}
}

// sctpSocket is a one-to-one style (SOCK_STREAM) SCTP socket; the net
// package has no SCTP. The agent's SCTP is IPv4 only, as the lab's pods.
func sctpSocket(flags int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|flags, unix.IPPROTO_SCTP)
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
		return -1, lab.ErrNoSCTP
	}
	if err != nil {
		return -1, fmt.Errorf("sctp socket: %w", err)
	}
	return fd, nil
}

func sctpListen(port int) (int, error) {
	fd, err := sctpSocket(0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen: %w", err)
	}
	return fd, nil
}

// serveSCTP accepts in blocking calls, on a thread of its own, until the
// process ends.
func serveSCTP(fd int, host string) {
	sa, _ := unix.Getsockname(fd)
	local := sockaddrString(sa)
	for {
		nfd, sa, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) {
			continue
		}
		if err != nil {
			return
		}
		unix.Write(nfd, []byte(serverLine(host, local, sockaddrString(sa))))
		unix.Close(nfd)
	}
}

func sockaddrString(sa unix.Sockaddr) string {
	if sa4, ok := sa.(*unix.SockaddrInet4); ok {
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), uint16(sa4.Port)).String()
	}
	return fmt.Sprint(sa)
}

// probe probes every target in parallel, each within --timeout, and prints
// the results in the order of the targets: a JSON array of lab.ProbeResult
// with --json, one line each without. It fails only on bad arguments; a
// target that does not answer is a result.
func probe(args []string) error {
	fs := flag.NewFlagSet("reef-lab probe", flag.ContinueOnError)
	timeout := fs.Duration("timeout", time.Second, "per target: connect and read the reply within this")
	asJSON := fs.Bool("json", false, "print a JSON array of {target, ok, err, reply}")
	sport := fs.Int("udp-source-port", 0, "send UDP from this port (one UDP target at a time): the flow of an earlier probe from it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	udpSourcePort = *sport
	targets := make([]probeTarget, fs.NArg())
	for i, a := range fs.Args() {
		t, err := parseTarget(a)
		if err != nil {
			return err
		}
		targets[i] = t
	}
	results := make([]lab.ProbeResult, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			reply, err := t.probe(*timeout)
			results[i] = lab.ProbeResult{Target: t.raw, OK: err == nil, Reply: reply}
			if err != nil {
				results[i].Err = err.Error()
			}
		})
	}
	wg.Wait()
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(results)
	}
	for _, r := range results {
		if r.OK {
			fmt.Printf("%s ok: %s\n", r.Target, r.Reply)
		} else {
			fmt.Printf("%s FAIL: %s\n", r.Target, r.Err)
		}
	}
	return nil
}

// probeTarget is proto:addr:port.
type probeTarget struct {
	raw   string
	proto string
	addr  netip.AddrPort
}

func parseTarget(s string) (probeTarget, error) {
	proto, hostport, ok := strings.Cut(s, ":")
	if !ok {
		return probeTarget{}, fmt.Errorf("target %q: want proto:addr:port", s)
	}
	switch proto {
	case "tcp", "udp", "sctp":
	default:
		return probeTarget{}, fmt.Errorf("target %q: protocol %q: want tcp, udp or sctp", s, proto)
	}
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return probeTarget{}, fmt.Errorf("target %q: %w", s, err)
	}
	return probeTarget{raw: s, proto: proto, addr: ap}, nil
}

func (t probeTarget) probe(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	switch t.proto {
	case "tcp":
		return probeTCP(t.addr, deadline)
	case "udp":
		return probeUDP(t.addr, deadline)
	}
	return probeSCTP(t.addr, deadline)
}

// probeTCP: ok once connected and the server's line is read.
func probeTCP(addr netip.AddrPort, deadline time.Time) (string, error) {
	c, err := net.DialTimeout("tcp", addr.String(), time.Until(deadline))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("connected to %s, no reply: %w", addr, err)
	}
	return strings.TrimSpace(line), nil
}

// udpSourcePort is probe's --udp-source-port: 0, any.
var udpSourcePort int

// udpTries is how many datagrams a UDP probe sends within its timeout: a
// single lost one must not read as "denied".
const udpTries = 4

// probeUDP: ok once the echo of a datagram comes back, sent again a few
// times within the timeout. ICMP port unreachable ends it early (connection
// refused).
func probeUDP(addr netip.AddrPort, deadline time.Time) (string, error) {
	var local *net.UDPAddr
	if udpSourcePort != 0 {
		local = &net.UDPAddr{Port: udpSourcePort}
	}
	c, err := net.DialUDP("udp", local, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return "", err
	}
	defer c.Close()
	nonce := make([]byte, 8)
	rand.Read(nonce)
	msg := "reef-lab probe " + hex.EncodeToString(nonce)
	buf := make([]byte, 512)
	interval := time.Until(deadline) / udpTries
	for sent := 1; ; sent++ {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		next := time.Now().Add(interval)
		if next.After(deadline) {
			next = deadline
		}
		c.SetReadDeadline(next)
		for {
			n, err := c.Read(buf)
			if reply := string(buf[:n]); err == nil && (reply == msg || strings.HasPrefix(reply, msg+" from ")) {
				return reply, nil
			}
			if err == nil {
				continue // not our echo
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return "", err
			}
			break
		}
		if !time.Now().Before(deadline) {
			return "", fmt.Errorf("udp %s: no echo within the timeout (%d datagrams sent)", addr, sent)
		}
	}
}

// probeSCTP is probeTCP over a one-to-one SCTP socket: a non-blocking
// connect and poll, since the net package has no SCTP.
func probeSCTP(addr netip.AddrPort, deadline time.Time) (string, error) {
	if !addr.Addr().Is4() {
		return "", fmt.Errorf("sctp %s: the agent's SCTP is IPv4 only", addr)
	}
	fd, err := sctpSocket(unix.SOCK_NONBLOCK)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrInet4{Addr: addr.Addr().As4(), Port: int(addr.Port())})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return "", fmt.Errorf("sctp connect %s: %w", addr, err)
	}
	if err := pollFD(fd, unix.POLLOUT, deadline); err != nil {
		return "", fmt.Errorf("sctp connect %s: %w", addr, err)
	}
	if soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soErr != 0 {
		if err == nil {
			err = unix.Errno(soErr)
		}
		return "", fmt.Errorf("sctp connect %s: %w", addr, err)
	}
	var line []byte
	buf := make([]byte, 512)
	for !strings.Contains(string(line), "\n") {
		if err := pollFD(fd, unix.POLLIN, deadline); err != nil {
			return "", fmt.Errorf("sctp %s: connected, no reply: %w", addr, err)
		}
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("sctp %s: connected, no reply: %w", addr, err)
		}
		if n == 0 {
			return "", fmt.Errorf("sctp %s: connected, closed without a reply", addr)
		}
		line = append(line, buf[:n]...)
	}
	return strings.TrimSpace(string(line)), nil
}

// pollFD waits for events on fd until deadline.
func pollFD(fd int, events int16, deadline time.Time) error {
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return os.ErrDeadlineExceeded
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}
