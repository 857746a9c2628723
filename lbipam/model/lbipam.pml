/*
 * lbipam.pml: spin model of reef's LoadBalancer address assignment
 * (package lbipam, docs/lbipam.md). blockproto/model/check.sh checks it,
 * and that each weakened variant below fails; `make model` (part of `make
 * test`) runs check.sh.
 *
 * The property: no two Services' statuses show the address at once.
 *
 * What is modelled
 * ----------------
 *
 * One address X and NSVC Services (2). The API server holds, for each
 * Service, whether it exists, whether it is ours (type LoadBalancer, no
 * other class), whether its status shows X, and its resourceVersion; and
 * the record (a ConfigMap): X's owner (or NONE) and the record's
 * resourceVersion. Every API request is one atomic step, as the API
 * server serialises writes to one object; nothing is atomic across
 * objects or across requests.
 *
 * Env() is everyone else: it creates Service 1 (Service 0 exists from the
 * start), turns a Service's type to and from LoadBalancer, and deletes
 * Services, each change moving its resourceVersion on, up to CHANGES
 * changes in all (2). Its status stays as it was (the API server may keep it).
 *
 * Two controllers run up to ROUNDS (2) rounds each, at any moment, both
 * at once: the Lease is
 * not modelled, as safety must not rest on it (a leader paused past its
 * lease, a clock that jumps). Each has an informer cache of each Service:
 * a copy of the Service as it was at some version, caught up to the
 * current one at any moment (Catch-up), never going back.
 *
 * A round, as Controller.round does it:
 *   1. Read the record (owner, rv) from the API.
 *   2. Release: if the cache says the owner is gone or no longer ours,
 *      read the owner afresh: gone -> release; ours after all -> keep;
 *      not ours, status showing X -> clear the status, conditioned on the
 *      version just read, and keep X this round; not ours, not showing ->
 *      release. A released X goes to no one this round.
 *   3. Assign: with no owner, to any Service the cache says exists and is
 *      ours, if no other Service's cached status shows X (Assign's
 *      "taken"), or to no one.
 *   4. Swap: if the owner changed, or a status is to show X that its
 *      cached status does not, write the record conditioned on rv (the
 *      code writes a counter, so the swap always moves rv on). A lost swap
 *      ends the round.
 *   5. Statuses: each Service the cache says exists and is ours is to
 *      show X exactly when it owns X; where its cached status differs, the
 *      status is written conditioned on the cached version.
 *
 * Sizes: the default (CHANGES=2, ROUNDS=2) is 4.2M states, 9 s, in make
 * test; -DCHANGES=3 is 20.6M states, 38 s, and -DROUNDS=3 24.9M states,
 * 59 s and 2.2 GB (both pass; by hand, on the 2-core lab machine).
 *
 * Weakened variants (each must fail):
 *   -DNO_SWAP_BEFORE_STATUS  step 4 only when the owner changed: a status
 *                            shows X from a record that has since moved on.
 *   -DUNCONDITIONED_STATUS   step 5 without the version condition.
 *   -DBLIND_RECORD_WRITE     step 4 without the rv condition.
 *   -DRELEASE_FROM_CACHE     step 2 releases on the cache's word alone.
 */

#ifndef NSVC
#define NSVC 2
#endif
#ifndef CHANGES
#define CHANGES 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#define NONE 255
#define NCTL 2

bool exists[NSVC];
bool ours[NSVC];
bool shows[NSVC];
byte ver[NSVC];
bool created[NSVC];

byte owner = NONE;
byte rv = 0;

byte changes = 0;

#define SAFE (!(exists[0] && shows[0] && exists[1] && shows[1]))

inline statusWrite(s, v, want) {
	atomic {
#ifdef UNCONDITIONED_STATUS
		if
		:: exists[s] -> shows[s] = want; ver[s]++
		:: else -> skip
		fi;
#else
		if
		:: exists[s] && ver[s] == v -> shows[s] = want; ver[s]++
		:: else -> skip
		fi;
#endif
		assert(SAFE)
	}
}

proctype Env() {
	byte s;
	do
	:: changes < CHANGES ->
		atomic {
			if
			:: !created[1] -> created[1] = true; exists[1] = true; ours[1] = true; ver[1]++
			:: s = 0
			:: s = 1
			fi;
			if
			:: s == 0 || s == 1 ->
				if
				:: exists[s] -> ours[s] = !ours[s]; ver[s]++
				:: exists[s] -> exists[s] = false; shows[s] = false; ver[s]++
				:: else -> skip
				fi
			:: else -> skip
			fi;
			s = NONE;
			changes++
		}
	:: else -> break
	od
}

proctype Controller(byte c) {
	/* the informer cache: each Service as of some version */
	bool cex[NSVC], cou[NSVC], csh[NSVC];
	byte cver[NSVC];
	byte rOwner, rRv, s, newOwner, fv, rounds;
	bool fex, fou, fsh, released, check, swapped, want;
	atomic { cex[0] = true; cou[0] = true; cver[0] = 1 };
end:
	do
	:: /* Catch-up: the informer delivers a Service's current version */
		atomic {
			if
			:: s = 0
			:: s = 1
			fi;
			cex[s] = exists[s]; cou[s] = ours[s]; csh[s] = shows[s]; cver[s] = ver[s];
			s = 0
		}
	:: rounds < ROUNDS -> /* a round */
		/* 1. the record, and whether the cache says to release */
		atomic {
			rounds++; rOwner = owner; rRv = rv;
			check = (rOwner != NONE && (!cex[rOwner] || !cou[rOwner]))
		};
		/* 2. release */
		if
		:: check ->
#ifdef RELEASE_FROM_CACHE
			released = true
#else
			atomic {
				fex = exists[rOwner]; fou = ours[rOwner]; fsh = shows[rOwner]; fv = ver[rOwner];
				released = (!fex || !fou && !fsh)
			};
			if
			:: fex && !fou && fsh -> statusWrite(rOwner, fv, false)
			:: else -> skip
			fi
#endif
		:: else -> skip
		fi;
		/* 3. assign, and 4. the swap */
		atomic {
			newOwner = rOwner;
			if
			:: released -> newOwner = NONE
			:: !released && rOwner == NONE ->
				if
				:: cex[0] && cou[0] && !(cex[1] && csh[1]) -> newOwner = 0
				:: cex[1] && cou[1] && !(cex[0] && csh[0]) -> newOwner = 1
				:: true -> skip
				fi
			:: else -> skip
			fi;
			/* a status to show X that its cache does not */
			check = (newOwner != NONE && cex[newOwner] && cou[newOwner] && !csh[newOwner]);
#ifdef NO_SWAP_BEFORE_STATUS
			check = false;
#endif
			swapped = true;
			if
			:: newOwner != rOwner || check ->
#ifdef BLIND_RECORD_WRITE
				owner = newOwner; rv++
#else
				if
				:: rv == rRv -> owner = newOwner; rv++
				:: else -> swapped = false
				fi
#endif
			:: else -> skip
			fi
		};
		/* 5. statuses (a lost swap ends the round) */
		s = 0;
		do
		:: swapped && s < NSVC ->
			want = (newOwner == s);
			if
			:: cex[s] && cou[s] && csh[s] != want -> statusWrite(s, cver[s], want)
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		atomic { s = 0; fv = 0; fex = false; fou = false; fsh = false; released = false; check = false; swapped = false; want = false; rOwner = 0; rRv = 0; newOwner = 0 }
	od
}

init {
	atomic {
		exists[0] = true; ours[0] = true; created[0] = true; ver[0] = 1;
		run Env();
		run Controller(0);
		run Controller(1)
	}
}
