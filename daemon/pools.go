package daemon

// The pools as the store keeps them, against the config's: pools taken
// out of the config (retired), and pools changed under their blocks.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/reefcni/reef/store"
)

// retiredPools are the pools of the store's blocks that the config no
// longer has (and that overlap none it has): a pool taken out of the
// config. The block protocol has no way yet to give up a confirmed block,
// so their blocks stay in it, owned, claimed and voted for as before, and
// the speaker keeps taking their announcements; nothing is allocated from
// them, claimed in them or routed to them. A pool put back finds its blocks
// where they were.
func retiredPools(pools []store.Pool, st *store.Store, log *slog.Logger) ([]store.Pool, error) {
	blocks, err := st.Blocks()
	if err != nil {
		return nil, err
	}
	var out []store.Pool
	held := map[netip.Prefix]int{}
	for _, b := range blocks {
		if !b.Pool.IsValid() {
			continue
		}
		if i := slices.IndexFunc(pools, func(p store.Pool) bool { return p.CIDR.Overlaps(b.Pool) }); i >= 0 {
			if err := samePool(pools[i], b); err != nil {
				err.index = i
				return nil, err
			}
			continue
		}
		if !slices.ContainsFunc(out, func(p store.Pool) bool { return p.CIDR == b.Pool }) {
			out = append(out, store.Pool{CIDR: b.Pool, BlockSize: b.CIDR.Bits()})
		}
		held[b.Pool] += b.Used
	}
	for _, p := range out {
		if held[p.CIDR] > 0 {
			log.Warn("a pool gone from the config still has pods with its addresses: they keep them, but reef routes none of them any more; delete those pods (reef ipam show --show-allocations)",
				"pool", p.CIDR, "addresses", held[p.CIDR])
			continue
		}
		log.Info("a pool gone from the config keeps its blocks in the block protocol (owned and voted for as before); nothing is allocated from or routed to them", "pool", p.CIDR)
	}
	return out, nil
}

// configRetiredPools is retiredPools of cfg's pools, whose refusal of a
// changed pool names the config file, line and key.
func configRetiredPools(cfg Config, pools []store.Pool, st *store.Store, log *slog.Logger) ([]store.Pool, error) {
	retired, err := retiredPools(pools, st, log)
	if pc := (*poolChangeError)(nil); errors.As(err, &pc) {
		return nil, pc.at(cfg)
	}
	return retired, err
}

// samePool refuses a configured pool p that overlaps the pool of the
// store's block b without being that pool: a pool whose cidr or blockSize
// changed while the store has blocks of it. The cluster agreed on those
// blocks as blocks of the old pool: routes, allocations and the votes all
// go by it, so a widened, narrowed or re-cut pool would leave pods
// unrouted. Calico's pools are immutable for the same reason.
func samePool(p store.Pool, b store.Block) *poolChangeError {
	if p.CIDR == b.Pool && p.BlockSize == b.CIDR.Bits() {
		return nil
	}
	if p.CIDR == b.Pool {
		return &poolChangeError{pool: p.CIDR, key: "blockSize", size: p.BlockSize, msg: fmt.Sprintf("but the store has blocks of it of size /%d (%s): a pool's blockSize cannot change while it has blocks; put blockSize %d back, or add a new pool beside it and retire this one (docs/ipam.md)",
			b.CIDR.Bits(), b.CIDR, b.CIDR.Bits())}
	}
	return &poolChangeError{pool: p.CIDR, key: "cidr", msg: fmt.Sprintf("overlaps pool %s, of which the store has blocks (%s): a pool's cidr cannot change while it has blocks; put %s back, or add a pool that overlaps no other beside it and retire the old one (docs/ipam.md)",
		b.Pool, b.CIDR, b.Pool)}
}

// poolChangeError is samePool's refusal of the configured pools[index]:
// key is the key that changed (its value size, for blockSize).
type poolChangeError struct {
	index    int
	pool     netip.Prefix
	size     int
	key, msg string
}

func (e *poolChangeError) Error() string {
	if e.key == "blockSize" {
		return fmt.Sprintf("pool %s: blockSize %d, %s", e.pool, e.size, e.msg)
	}
	return fmt.Sprintf("pool %s %s", e.pool, e.msg)
}

// at is the error naming the key in the config file the pools were read
// from, with its line.
func (e *poolChangeError) at(cfg Config) error {
	if e.key == "blockSize" {
		return cfg.KeyError(fmt.Sprintf("pools[%d].blockSize", e.index), fmt.Sprintf("value %d, %s", e.size, e.msg))
	}
	return cfg.KeyError(fmt.Sprintf("pools[%d].cidr", e.index), fmt.Sprintf("value %q %s", e.pool, e.msg))
}

func storePools(cfg []PoolConfig) []store.Pool {
	var pools []store.Pool
	for _, p := range cfg {
		pools = append(pools, store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	return pools
}
