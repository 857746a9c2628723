// Package blocksim runs the block protocol (package blockproto) for many
// nodes in one process, over a simulated network that loses, delays and
// partitions, as etcd's raft keeps rafttest apart from raft. It drives
// blockproto only through its exported API, so what it shows holds for the
// decision every daemon runs. Nothing of it runs in the daemon: the tests
// of blockproto and the simulation report (reef-lab bench-sim, Run) use it.
package blocksim
