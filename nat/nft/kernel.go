package nft

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// IfNameSize is IFNAMSIZ: an interface name in a set key takes 16 bytes,
// NUL-padded.
const IfNameSize = 16

// Kernel reads and writes reef's tables in one network namespace. It is
// safe for concurrent use: every operation has a netlink socket of its
// own, so parallel CNI ADDs and DELs each send their own batch.
type Kernel struct {
	opts []nftables.ConnOption
	// podConns keeps the sockets of EditElems open between calls:
	// closing an nftables socket right after a batch that deleted set
	// elements blocks for milliseconds in the kernel, on every DEL.
	podConns chan *nftables.Conn
	// gens, when set, accounts for every batch this Kernel commits
	// (Generations): set before the Kernel's first use.
	gens *Generations
}

// podConnsKept bounds the sockets kept open: about the CNI operations in
// flight at once.
const podConnsKept = 8

// NewKernel returns a Kernel for the caller's network namespace (the
// daemon's, the node's), or for another given by
// nftables.WithNetNSFd (tests).
func NewKernel(opts ...nftables.ConnOption) *Kernel {
	return &Kernel{opts: opts, podConns: make(chan *nftables.Conn, podConnsKept)}
}

// Follow makes the Kernel account for its commits in gens, which the
// Kernels of the other writers of reef's tables in the namespace share,
// and returns it. Called before the Kernel's first use.
func (k *Kernel) Follow(gens *Generations) *Kernel {
	k.gens = gens
	return k
}

// Mark is gens' Mark (a Kernel that follows none: a Mark that never
// holds): taken before a Read that a check of drift then trusts.
func (k *Kernel) Mark() Mark { return k.gens.Mark() }

// Unchanged is gens' Unchanged: no writer but reef's Kernels that follow
// the same Generations committed since m.
func (k *Kernel) Unchanged(m Mark) bool { return k.gens.Unchanged(m) }

// flush commits c's batch, accounted for in the Generations followed.
func (k *Kernel) flush(c *nftables.Conn) error {
	if k.gens == nil {
		return c.Flush()
	}
	return k.gens.commit(c.Flush)
}

// podConn takes a kept socket, or opens one.
func (k *Kernel) podConn() (*nftables.Conn, error) {
	select {
	case c := <-k.podConns:
		return c, nil
	default:
		return k.conn(true)
	}
}

// putPodConn keeps a socket for the next call. A socket whose batch failed
// is closed instead: its state is unknown.
func (k *Kernel) putPodConn(c *nftables.Conn, ok bool) {
	if ok {
		select {
		case k.podConns <- c:
			return
		default:
		}
	}
	c.CloseLasting()
}

// batchBuffer is the socket buffer of a batch's netlink socket. The
// kernel refuses a message longer than the send buffer (EMSGSIZE), and a
// batch is one message: table inet reef with a hundred policies is more
// than the default 208 KiB. nft sets SO_SNDBUFFORCE to the batch's size
// for the same reason; reef, root like nft, forces a size no table of its
// reaches. The memory is the kernel's only while a batch is in flight.
const batchBuffer = 64 << 20

func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, batchBuffer),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, batchBuffer/4))
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("nftables socket buffers (SO_SNDBUFFORCE needs CAP_NET_ADMIN): %w", serr)
	}
	return nil
}

func (k *Kernel) conn(lasting bool) (*nftables.Conn, error) {
	opts := append(slices.Clone(k.opts), nftables.WithSockOptions(bigBuffers))
	if lasting {
		opts = append(opts, nftables.AsLasting())
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables netlink socket: %w", err)
	}
	return c, nil
}

// Tables lists the kernel's tables, in every family, that ours picks.
func (k *Kernel) Tables(ours func(TableID) bool) ([]TableID, error) {
	c, err := k.conn(false)
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	var out []TableID
	for _, t := range tables {
		if id := (TableID{Family: t.Family, Name: t.Name}); ours(id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// DeleteTables deletes the given tables in one batch.
func (k *Kernel) DeleteTables(ids []TableID) error {
	if len(ids) == 0 {
		return nil
	}
	c, err := k.conn(false)
	if err != nil {
		return err
	}
	for _, id := range ids {
		c.DelTable(nftTable(id))
	}
	if err := k.flush(c); err != nil {
		return fmt.Errorf("delete nftables tables %v: %w", ids, err)
	}
	return nil
}
