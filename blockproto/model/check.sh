#!/usr/bin/env bash
# check.sh: model-check blocks.pml and voters.pml, and lbipam.pml
# (package lbipam), with spin (`make model`, part of `make test`).
#
# The protocol must hold: every configuration of the base models is searched
# exhaustively (no bitstate, no hash compaction, no depth truncation) and
# must report errors: 0. Each weakened variant must fail: pan must report
# an assertion violation (two claimants with one block confirmed).
#
# One line per run: name, what it must do, states stored, errors, pan's
# seconds. Exits non-zero if any run does not do what it must.
#
#   DEPTH=n    initial pan -m (raised by itself, x4, if the search hits it)
#   JOBS=n     runs at once (default: the number of CPUs); the lines are
#              printed in the order below either way
#   TRAILS=dir keep, for each failing variant, pan's output, the trail and
#              its replay (spin -t) in dir
#
# By hand, e.g.:
#   spin -a -DRECLAIM_AFTER_RELEASE -DBLOCKS=1 blocks.pml
#   gcc -O2 -DSAFETY -DBFS -o pan pan.c && ./pan      # BFS: a shortest trail
#   spin -t -DRECLAIM_AFTER_RELEASE -DBLOCKS=1 blocks.pml   # the story (printf)
#   spin -t -p -DRECLAIM_AFTER_RELEASE -DBLOCKS=1 blocks.pml # every statement
#   spin -a -DADOPT voters.pml ... spin -T -t -DADOPT voters.pml
#     (-T: voters.pml prints a line in several parts, which spin would
#     otherwise indent part by part)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model=$here/blocks.pml
depth0=${DEPTH:-200000}
trails=${TRAILS:-}
if [ -n "$trails" ]; then
	mkdir -p "$trails"
	trails=$(cd "$trails" && pwd)
fi

for tool in spin gcc; do
	command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (make deps-model)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# -DSAFETY: safety properties only (the assertion, invalid end states).
# -DREVERSE: pan tries processes from the lowest pid first; it changes
# only the order of the search, which is exhaustive either way, and finds
# the weakened variants' violations sooner. -w: pan.c is generated code;
# gcc 12 warns about its bounds-checked array stores.
CFLAGS=(-O2 -DSAFETY -DREVERSE -w)

fail=0
jobs_max=${JOBS:-$(nproc)}
runs=0

# run NAME pass|fail SPIN-DEFINES...   (the model is $model): starts
# run_one in the background, at most jobs_max at once; report prints
# each run's line, in order, and sets fail.
run() {
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n || true
	done
	runs=$((runs + 1))
	(
		fail=0
		run_one "$@"
		echo "$fail" >"$tmp/run$runs.rc"
	) >"$tmp/run$runs.out" 2>"$tmp/run$runs.err" &
}

report() {
	wait || true
	local i
	for ((i = 1; i <= runs; i++)); do
		cat "$tmp/run$i.out"
		cat "$tmp/run$i.err" >&2
		[ "$(cat "$tmp/run$i.rc" 2>/dev/null)" = 0 ] || fail=1
	done
}

run_one() {
	local name=$1 expect=$2
	shift 2
	local dir=$tmp/$name file
	file=$(basename "$model")
	mkdir "$dir"
	cp "$model" "$dir/$file"
	(
		cd "$dir"
		spin -a "$@" "$file" >spin.out 2>&1 || { cat spin.out >&2; exit 1; }
		gcc "${CFLAGS[@]}" -o pan pan.c >gcc.out 2>&1 || { cat gcc.out >&2; exit 1; }
	) || { echo "check.sh: $name: spin -a or gcc failed" >&2; fail=1; return; }

	local depth=$depth0 tries=0 out=$dir/pan.out
	while :; do
		(cd "$dir" && ./pan -m"$depth" >"$out" 2>&1) || true
		grep -q 'max search depth too small' "$out" || break
		tries=$((tries + 1))
		if [ "$tries" -ge 4 ]; then
			break
		fi
		depth=$((depth * 4))
	done

	local errors states secs verdict=ok
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | tail -n 1)
	states=$(awk '/states, stored/ { print $1; exit }' "$out")
	secs=$(sed -n 's/^pan: elapsed time \([^ ]*\) seconds.*/\1/p' "$out")
	if [ -z "$errors" ] || [ -z "$states" ]; then
		verdict="FAILED: pan did not finish"
	elif grep -q 'max search depth too small' "$out"; then
		verdict="FAILED: depth $depth too small, the search was truncated"
	elif grep -qi 'out of memory' "$out"; then
		verdict="FAILED: pan ran out of memory"
	elif [ "$expect" = pass ]; then
		if [ "$errors" != 0 ]; then
			verdict="FAILED: the protocol is violated"
		elif grep -q 'Search not completed' "$out"; then
			verdict="FAILED: search not completed"
		fi
	else
		if [ "$errors" = 0 ]; then
			verdict="FAILED: the weakened variant was not caught"
		elif ! grep -q 'assertion violated' "$out"; then
			verdict="FAILED: an error, but not an assertion violation"
		fi
	fi
	printf '%-38s must %-4s  states %9s  errors %s  %6s s  %s\n' \
		"$name" "$expect" "${states:-?}" "${errors:-?}" "${secs:-?}" "$verdict"
	if [ "$verdict" != ok ]; then
		fail=1
		sed 's/^/    /' "$out" >&2
	fi
	if [ -n "$trails" ] && [ "$expect" = fail ] && [ -f "$dir/$file.trail" ]; then
		local story=()
		[ "$file" = voters.pml ] && story=(-T)
		cp "$out" "$trails/$name.pan.out"
		cp "$dir/$file.trail" "$trails/$name.trail"
		(cd "$dir" && spin "${story[@]}" -t "$@" "$file") >"$trails/$name.story" 2>&1 || true
	fi
}

# The protocol: 3 voters, 2 claimants, 2 blocks, the network as the set of
# all messages sent (see blocks.pml); then 3 claimants on 1 block (with 2
# blocks the search does not fit: the blocks are independent, so the state
# space is the square of the 1-block one); then bags of a few slots, with
# loss, as a cross-check of the set network.
run base                        pass
run base-claimants3-blocks1     pass -DCLAIMANTS=3 -DBLOCKS=1
run base-bag6-blocks1           pass -DBAG=6 -DBLOCKS=1
run base-bag3-claimants3-blocks1 pass -DBAG=3 -DCLAIMANTS=3 -DBLOCKS=1

# One rule weakened at a time: each must break the protocol.
for v in VOTER_GRANTS_TWICE CONFIRM_WITHOUT_MAJORITY RECLAIM_AFTER_RELEASE; do
	run "$v"             fail -D"$v"
	run "$v-bag6-blocks1" fail -D"$v" -DBAG=6 -DBLOCKS=1
done

# Two voter nodes of one identity (bgp.routerID configured twice): must
# break the protocol (docs/design.md, "IPv6-only nodes").
run DUP_IDENTITY-blocks1        fail -DDUP_IDENTITY -DBLOCKS=1
# The same, with the voters written as IPv6 addresses, as reef binds them
# (blockproto.Input.VoterAddr6): must hold.
run ADDR_BOUND-dup-identity-blocks1 pass -DDUP_IDENTITY -DADDR_BOUND -DBLOCKS=1

# Supersession (blocks.pml, "Incarnations and supersession"): a node
# started again from an empty state dir names its old incarnation, whose
# grants the voters revoke: must hold, with identities as IPv4 addresses and
# as router IDs bound to IPv6 addresses; must fail if the new incarnation
# announces before the old pods are gone.
run supersede-blocks1           pass -DSUPERSEDE -DBLOCKS=1
run supersede-addr-bound-blocks1 pass -DSUPERSEDE -DADDR_BOUND -DBLOCKS=1
run WIPE_KEEPS_PODS-blocks1     fail -DSUPERSEDE -DWIPE_KEEPS_PODS -DBLOCKS=1
# Two claimant nodes given one identity (one bgp.routerID), both running,
# either may name the other: must fail by the identity alone, and hold with
# reef's rule (ADDR_BOUND: only an incarnation that announced this node's
# IPv6 address is named).
run DUP_CLAIMANT-blocks1        fail -DDUP_CLAIMANT -DBLOCKS=1
run ADDR_BOUND-dup-claimant-blocks1 pass -DDUP_CLAIMANT -DADDR_BOUND -DBLOCKS=1

# Recovered stores (`reef store recover`): with 1 block, since the rules
# are per block and a recovery's effect on one block is the recovery of
# that block alone (2 blocks: 35M states, 6 minutes, 6 GB here).
run recovery-blocks1            pass -DRECOVERY -DBLOCKS=1
run recovery-claimants3-blocks1 pass -DRECOVERY -DCLAIMANTS=3 -DBLOCKS=1
run recovery-bag6-blocks1       pass -DRECOVERY -DBAG=6 -DBLOCKS=1
for v in RECOVERED_CLAIMS RECOVERED_VOTER_GRANTS_PENDING; do
	run "$v-blocks1"      fail -DRECOVERY -D"$v" -DBLOCKS=1
	run "$v-bag6-blocks1" fail -DRECOVERY -D"$v" -DBAG=6 -DBLOCKS=1
done

# Voter lists (voters.pml): the design, in each scenario (GROW: V3, V4
# join, 3 -> 4 -> 5 voters; REPLACE: V3 replaces V0; REJOIN: V0 taken out,
# wiped, added back; WALK: every sequence of up to 3 one-voter changes over
# 4 voters, up to 4 over 4, up to 3 over 5, with wipes of voters out of the
# list), with recovered voters, with 3 claimants. 1 block: the 1-block
# search covers any number of blocks, 3 claimants on 2 blocks included
# (voters.pml, "Blocks"); 2 blocks with 2 claimants cross-check that.
model=$here/voters.pml
run voters-grow-claimants3              pass -DCLAIMANTS=3
run voters-grow-recover                 pass -DRECOVER
run voters-replace-claimants3           pass -DREPLACE -DCLAIMANTS=3
run voters-replace-recover-claimants3   pass -DREPLACE -DRECOVER -DCLAIMANTS=3
run voters-replace-blocks2              pass -DREPLACE -DBLOCKS=2
run voters-rejoin-claimants3            pass -DREJOIN -DCLAIMANTS=3
run voters-rejoin-recover-claimants3    pass -DREJOIN -DRECOVER -DCLAIMANTS=3
run voters-rejoin-blocks2               pass -DREJOIN -DBLOCKS=2
run voters-walk-claimants3              pass -DWALK -DCLAIMANTS=3
run voters-walk-steps4                  pass -DWALK -DSTEPS=4
run voters-walk-recover                 pass -DWALK -DRECOVER
run voters-walk-voters5-claimants3      pass -DWALK -DVOTERS=5 -DCLAIMANTS=3
# Without wipes, a claimant may keep its pending claims over a switch.
run voters-walk-keeps-pending-no-wipe   pass -DWALK -DSWITCH_KEEPS_PENDING -DNO_WIPE

# One rule weakened at a time: each must break the protocol.
run ADOPT                               fail -DADOPT
run TWO_AT_ONCE-replace                 fail -DREPLACE -DTWO_AT_ONCE
run TWO_AT_ONCE-grow                    fail -DTWO_AT_ONCE
run NO_CATCHUP-replace                  fail -DREPLACE -DNO_CATCHUP
run NO_CATCHUP-grow                     fail -DNO_CATCHUP
run CATCHUP_ANY_GRANT-replace-claimants3 fail -DREPLACE -DCATCHUP_ANY_GRANT -DCLAIMANTS=3
run NO_WAIT_FOR_SWITCH-replace          fail -DREPLACE -DNO_WAIT_FOR_SWITCH
run WIPED_VOTER                         fail -DREJOIN -DWIPED_VOTER
run SWITCH_KEEPS_PENDING-rejoin         fail -DREJOIN -DSWITCH_KEEPS_PENDING
run WIPE_WAITS-keeps-pending-recover    fail -DREJOIN -DSWITCH_KEEPS_PENDING -DWIPE_WAITS -DRECOVER

# LoadBalancer address assignment (lbipam/model/lbipam.pml): two
# controllers at once (the Lease is not modelled), lagging informer
# caches, Services changed and deleted; then each rule weakened.
model=$here/../../lbipam/model/lbipam.pml
run lbipam                              pass
for v in NO_SWAP_BEFORE_STATUS UNCONDITIONED_STATUS BLIND_RECORD_WRITE RELEASE_FROM_CACHE; do
	run "lbipam-$v" fail -D"$v"
done

report
exit "$fail"
