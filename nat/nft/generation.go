package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Generations follows the nftables ruleset generation of one network
// namespace (NFT_MSG_GETGEN) through reef's own commits. The kernel bumps
// the generation on every committed batch, of any writer; a batch that
// changes nothing is not committed and bumps nothing. So while every
// generation since a Mark is one of reef's commits, made by a Kernel of
// these Generations, the kernel's tables are what those commits left, and
// a check for drift need not read them (Unchanged). Any other writer's
// commit (nft, iptables-nft, a reef Kernel that does not share these
// Generations) makes a generation that is not reef's, and Unchanged is
// false from then on, for every Mark taken before it.
//
// Commits of the Kernels sharing it are made one at a time, each between
// two GETGENs under the same lock: a generation one past the one before
// it, itself the last one accounted, is that commit's.
type Generations struct {
	netns int // fd of the namespace, 0: the caller's thread's at the first use
	mu    sync.Mutex
	conn  *netlink.Conn
	known bool   // last holds
	last  uint32 // the generation of reef's last commit, or of the last Mark
	// epoch counts the breaks in the chain: a generation that is not
	// reef's, or a commit or GETGEN whose outcome is not known.
	epoch uint64
}

// Mark is a point in the chain of reef's commits: the generation before a
// read of the kernel's tables.
type Mark struct {
	of    *Generations
	epoch uint64
	gen   uint32
	ok    bool
}

// NewGenerations follows the generation of the namespace opts name
// (nftables.WithNetNSFd; none: the caller's).
func NewGenerations(opts ...nftables.ConnOption) *Generations {
	var c nftables.Conn
	for _, o := range opts {
		o(&c)
	}
	return &Generations{netns: c.NetNS}
}

// next is the generation after g: the kernel skips 0 when it wraps.
func next(g uint32) uint32 {
	if g+1 == 0 {
		return 1
	}
	return g + 1
}

// commit runs flush, a batch of reef's, and accounts for the generation
// it made, read before and after it: a batch may commit nothing (adding
// elements that are there), so the generation after it is its own only if
// the one before it was the last accounted. A batch that failed made none
// if the generation did not move; otherwise what it made is unknown and
// the chain breaks.
func (g *Generations) commit(flush func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	before, berr := g.get()
	err := flush()
	after, aerr := g.get()
	switch {
	case berr != nil || aerr != nil:
		g.known = false
		g.epoch++
	case g.known && before == g.last && (after == before || err == nil && after == next(before)):
		g.last = after
	default:
		g.epoch++
		g.known, g.last = true, after
	}
	return err
}

// Mark is taken before a read of the tables whose result reef then makes
// its record of them: Unchanged(m) holds while no commit but reef's
// accounted ones came after it. Its zero value (GETGEN failed) never
// holds.
func (g *Generations) Mark() Mark {
	if g == nil {
		return Mark{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now, err := g.get()
	if err != nil {
		g.known = false
		g.epoch++
		return Mark{}
	}
	if !g.known || now != g.last {
		g.epoch++
		g.known, g.last = true, now
	}
	return Mark{of: g, epoch: g.epoch, gen: now, ok: true}
}

// Unchanged reports whether every generation since m is one of reef's
// commits and none came after the last of them: the kernel's tables are
// what reef read at m and wrote since. False when it cannot tell.
func (g *Generations) Unchanged(m Mark) bool {
	if g == nil || !m.ok || m.of != g {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.known || g.epoch != m.epoch {
		return false
	}
	now, err := g.get()
	if err != nil {
		g.known = false
		g.epoch++
		return false
	}
	return now == g.last
}

// get asks the kernel for the generation (NFT_MSG_GETGEN), on a socket of
// its own kept open; under mu. A socket that failed is closed, the next
// call opens another.
func (g *Generations) get() (uint32, error) {
	if g.conn == nil {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: g.netns})
		if err != nil {
			return 0, fmt.Errorf("nftables generation: netlink socket: %w", err)
		}
		g.conn = c
	}
	gen, err := getGen(g.conn)
	if err != nil {
		g.conn.Close()
		g.conn = nil
	}
	return gen, err
}

var (
	getGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)
	newGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)
)

func getGen(c *netlink.Conn) (uint32, error) {
	// struct nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0.
	msgs, err := c.Execute(netlink.Message{Header: netlink.Header{Type: getGenType, Flags: netlink.Request}, Data: make([]byte, 4)})
	if err != nil {
		return 0, fmt.Errorf("nftables generation: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != newGenType || len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("nftables generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, fmt.Errorf("nftables generation: %w", err)
		}
	}
	return 0, errors.New("nftables generation: no NFTA_GEN_ID in the kernel's answer")
}

// Close closes the socket, if open.
func (g *Generations) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == nil {
		return nil
	}
	err := g.conn.Close()
	g.conn = nil
	return err
}
