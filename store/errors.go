package store

import "errors"

// The sentinel errors of the package. Each is returned wrapped, inside a
// message that names the object, so test them with errors.Is. Their text is
// the phrase that message is built around ("endpoint k8s.abc not found"),
// which is why it reads oddly on its own.
var (
	// ErrNotFound is returned by SetEndpoint and ClaimPorts when no endpoint
	// record has the handle. Lookups that may legitimately miss (Endpoint, Release) report
	// a boolean instead, so that DEL stays idempotent without error checks.
	ErrNotFound = errors.New("not found")

	// ErrPoolExhausted is returned by Claim when every block of the pool is
	// owned, by this node or another: "pool 10.244.0.0/24 exhausted: all 4
	// blocks of /26 are owned".
	ErrPoolExhausted = errors.New("exhausted")

	// ErrNoFreeAddress is returned by Allocate when every confirmed block
	// this node owns in the pool is full: time to claim one.
	ErrNoFreeAddress = errors.New("no free address")

	// ErrBlockInUse is returned by DropOwnBlock for a block that still has
	// allocated addresses.
	ErrBlockInUse = errors.New("still has allocated addresses")

	// ErrOwnBlock is returned by PutRemoteBlock for a block this node owns:
	// it must be given up with DropOwnBlock first.
	ErrOwnBlock = errors.New("is this node's")

	// ErrLocked is returned by Open when another process holds the file
	// lock for longer than Options.Timeout: "store /var/lib/reef/reef.db is
	// locked by another process (is another reef daemon running?)".
	ErrLocked = errors.New("locked by another process")

	// ErrSchemaTooNew is returned by Open when the file was written by a
	// newer reef whose schema version this code does not know. The file is
	// left untouched, so a rollback of the binary never damages it.
	ErrSchemaTooNew = errors.New("newer than this reef understands")

	// ErrPortTaken is returned by ClaimPorts for a hostPort that another
	// endpoint holds: "hostPort tcp 8080 is held by pod default/web
	// (container abc123, handle k8s-pod-network.abc123)". The error is a
	// *PortTakenError, which names the mapping and its holder; get it with
	// errors.As.
	ErrPortTaken = errors.New("is held by")
)
