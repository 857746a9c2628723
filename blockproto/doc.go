// Package blockproto is reef's block protocol: how nodes agree, with no
// shared datastore, on which node owns which address block. It is a pure
// state machine in the style of etcd's raft: no goroutines, clocks or I/O.
// Decide takes the node's persisted state and one snapshot of what the
// cluster announces (the BGP table) and returns what to persist and what to
// announce; the caller persists before it announces. docs/ipam.md gives the
// safety argument, and model/ holds the spin model of the same rules.
//
// The rules, in short:
//
//   - Voters are a fixed, configured list of node addresses that every node
//     must agree on (bgp.voters); a claim is confirmed by a strict majority
//     of them. Every record, claim and grant carries the hash of the
//     sender's voter list; a voter grants only claims made under its own
//     list, a claimant counts only grants made under its own list, and a
//     node that sees a peer with another list claims nothing.
//   - A node identity is its address and an incarnation, a random number
//     drawn when its store is created. A wiped node comes back as a new
//     incarnation. It names the earlier incarnations of its address that
//     it sees in its own record (a node that cannot order two announces
//     both as seen paths, so that the running one learns of the other);
//     a named incarnation is superseded, its claims and grants void from
//     then on. No clock orders incarnations (incarnations.go).
//   - A claimant claims a block at most once per incarnation: pending, then
//     confirmed once a majority of voters grant it, or released when it
//     gives up. A confirmed block stays its owner's until the owner is
//     forgotten or superseded.
//   - A voter grants a block to one claimant at most, persists the grant
//     before announcing it, and revokes it only when that claimant
//     announces the claim released, or is forgotten or superseded. A voter
//     never grants a pending claim of a block it knows confirmed by another.
//     With no grant, it grants the confirmed claim of the block if one is
//     announced (so a voter added later catches up), else the pending claim
//     of the lowest claimant address.
//   - A claimant gives up a pending claim when the block is confirmed by
//     another node, or when some voter granted it to a lower claimant
//     address (the one split votes converge on), or to a claimant whose
//     claim it does not see pending (the owner is down, and the voters
//     remember the block for it).
//   - A node that sees its own confirmed block confirmed by another (state
//     restored from a backup, or this node forgotten while it was away)
//     stops allocating from it and says so; it never guesses a winner.
//   - Recovered: a store rebuilt from the kernel after damage (`reef store
//     recover`) keeps the incarnation and its confirmed blocks but not the
//     blocks it gave up nor its grants. In that incarnation it claims no
//     block again (a stale grant of a claim it gave up could count), grants
//     only claims announced confirmed (it may have granted the block to
//     another before). Claims it lost with the file stay held by the
//     voters until a new incarnation supersedes this one.
//   - Restricted: a voter whose store is new (a wiped state dir, or a
//     recovery that drew a new incarnation) lost the grants of its earlier
//     incarnation, so it grants only claims announced confirmed (or
//     remembered), never a pending one, its own included. It claims as any
//     node does. The daemon lifts it when the node comes back into the
//     voter list after it was taken out (a one-voter change each way).
//   - Nothing is inferred from the absence of an announcement: a session
//     that drops, a route reflector that restarts, a path that is late
//     never revoke a grant or free a block. Timers decide only when to look
//     again, never what is true.
package blockproto
