package main

// The probe of bench-policy's change figures: TCP connection attempts from
// one pod to another at a fixed interval, each a new connection, each
// remembered with the time its SYN left. Each attempt has a source port
// no attempt of the run had before: with a port used again, the SYN can
// meet the conntrack entry of an earlier connection, closed but still
// there, and be let through as part of it, whatever the policy says (seen
// here: one attempt in a few while denied). A policy change is enforced at
// the first attempt after the change whose outcome is the new one and
// from which on every attempt's is: the first packet decided the new way.
//
// reef's policies drop (they never reject), so an attempt is allowed when
// it connects and denied when nothing answers within the timeout; a
// refusal or any other error is neither, and is counted apart.

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
)

// probePorts are the attempts' source ports, in turn: 40,000 of them,
// more than a run's attempts (about 200 a second while a series runs).
const probePortFirst, probePorts = 20000, 40000

var probePortNext atomic.Int64

// probeRec is one attempt: when its SYN left and whether it connected.
type probeRec struct {
	sent time.Time
	ok   bool
	port int // the attempt's source port
}

type prober struct {
	mu       sync.Mutex
	recs     []probeRec
	pendFrom time.Time // every attempt sent before this has an outcome
	errs     int       // attempts neither connected nor unanswered
	lastErr  string
	runErr   error
	stop     chan struct{}
	done     chan struct{}
}

// startProber probes dst from the lab namespace netns every interval,
// each attempt given timeout to connect, until stop.
func startProber(netns string, dst netip.AddrPort, every, timeout time.Duration) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{}), pendFrom: time.Now()}
	go func() {
		defer close(p.done)
		err := ns.WithNetNSPath(lab.NetnsPath(netns), func(ns.NetNS) error { return p.run(dst, every, timeout) })
		p.mu.Lock()
		p.runErr = err
		p.mu.Unlock()
	}()
	return p
}

// Stop ends the probing and returns why it ended early, if it did.
func (p *prober) Stop() error {
	close(p.stop)
	<-p.done
	return p.runErr
}

// run is the probe loop, on one thread in the client's namespace: a socket
// made here stays in the namespace.
func (p *prober) run(dst netip.AddrPort, every, timeout time.Duration) error {
	var pending []probePend
	defer func() {
		for _, q := range pending {
			closeProbeFd(q.fd)
		}
	}()
	sa := &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	next := time.Now()
	for {
		select {
		case <-p.stop:
			return nil
		default:
		}
		if now := time.Now(); !now.Before(next) {
			q, err := sendProbe(sa, dst)
			if err != nil {
				return err
			}
			pending = append(pending, q)
			// After a stall, on at the interval, not a burst.
			if next = next.Add(every); next.Before(now) {
				next = now.Add(every)
			}
		}
		fds := make([]unix.PollFd, len(pending))
		for i, q := range pending {
			fds[i] = unix.PollFd{Fd: int32(q.fd), Events: unix.POLLOUT}
		}
		wait := int((time.Until(next) + time.Millisecond - 1) / time.Millisecond)
		if _, err := unix.Poll(fds, max(0, wait)); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("probe: poll: %w", err)
		}
		pending = p.collect(pending, fds, timeout)
	}
}

// probePend is an attempt whose outcome is not known yet.
type probePend struct {
	fd   int
	sent time.Time
	port int
}

func closeProbeFd(fd int) {
	// No TIME_WAIT: the attempts would run the client out of ports.
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
}

// sendProbe starts a non-blocking connect to sa (dst) from the next
// source port of the probes' range.
func sendProbe(sa *unix.SockaddrInet4, dst netip.AddrPort) (probePend, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return probePend{}, fmt.Errorf("probe: socket: %w", err)
	}
	port := probePortFirst + int(probePortNext.Add(1)-1)%probePorts
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		closeProbeFd(fd)
		return probePend{}, fmt.Errorf("probe: bind to port %d: %w", port, err)
	}
	sent := time.Now()
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		closeProbeFd(fd)
		return probePend{}, fmt.Errorf("probe: connect to %s: %w", dst, err)
	}
	return probePend{fd, sent, port}, nil
}

// collect records the outcome of each pending attempt that has one (fds:
// the poll of pending): connected, failed otherwise, or unanswered for
// timeout. It returns the attempts still pending.
func (p *prober) collect(pending []probePend, fds []unix.PollFd, timeout time.Duration) []probePend {
	var keep []probePend
	var done []probeRec
	errs, lastErr := 0, ""
	for i, q := range pending {
		switch {
		case fds[i].Revents != 0:
			soerr, err := unix.GetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && soerr == 0 {
				done = append(done, probeRec{q.sent, true, q.port})
			} else {
				errs++
				lastErr = fmt.Sprintf("%v %v", err, unix.Errno(soerr))
			}
			closeProbeFd(q.fd)
		case time.Since(q.sent) >= timeout:
			done = append(done, probeRec{q.sent, false, q.port})
			closeProbeFd(q.fd)
		default:
			keep = append(keep, q)
		}
	}
	p.mu.Lock()
	p.recs = append(p.recs, done...)
	p.errs += errs
	if lastErr != "" {
		p.lastErr = lastErr
	}
	if len(keep) > 0 {
		p.pendFrom = keep[0].sent
	} else {
		p.pendFrom = time.Now()
	}
	p.mu.Unlock()
	return keep
}

// decided is when the attempts sent after t0 began to decide want (true:
// connected), and for good: the first attempt after the last that decided
// otherwise, once every attempt sent over settle after it has an outcome
// and decided want. ok is false until then. flapped says an attempt
// decided want before one that did not, both after t0.
func (p *prober) decided(t0 time.Time, want bool, settle time.Duration) (at time.Time, flapped, ok bool) {
	p.mu.Lock()
	var recs []probeRec
	for _, r := range p.recs {
		if !r.sent.Before(t0) {
			recs = append(recs, r)
		}
	}
	until := p.pendFrom
	p.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].sent.Before(recs[j].sent) })
	last := -1
	for i, r := range recs {
		if r.sent.Before(until) && r.ok != want {
			last = i
		}
	}
	for i := range last {
		if recs[i].ok == want {
			flapped = true
		}
	}
	if last+1 >= len(recs) || !recs[last+1].sent.Before(until) {
		return time.Time{}, flapped, false
	}
	at = recs[last+1].sent
	return at, flapped, until.Sub(at) >= settle
}

// counts returns the attempts with an outcome and those that had neither.
func (p *prober) counts() (int, int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recs), p.errs, p.lastErr
}

// runs describes the outcomes of the attempts sent from t0 to until as
// runs ("+" connected, "-" not) with the send time of each run's first,
// for a change that flapped.
func (p *prober) runs(t0, until time.Time) string {
	p.mu.Lock()
	var recs []probeRec
	for _, r := range p.recs {
		if !r.sent.Before(t0) && r.sent.Before(until) {
			recs = append(recs, r)
		}
	}
	p.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].sent.Before(recs[j].sent) })
	var out []string
	for i := 0; i < len(recs); {
		j := i
		for j < len(recs) && recs[j].ok == recs[i].ok {
			j++
		}
		sign := "-"
		if recs[i].ok {
			sign = "+"
		}
		out = append(out, fmt.Sprintf("%s%d@%s(port %d)", sign, j-i, recs[i].sent.Sub(t0).Round(time.Millisecond), recs[i].port))
		i = j
	}
	return strings.Join(out, " ")
}
