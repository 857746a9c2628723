/*
 * voters.pml: spin model of reef's block protocol with voter lists: two
 * lists at once, joins, list changes, wiped and recovered voters.
 * blocks.pml models the protocol under one agreed list; this model is
 * about what happens when nodes run different lists (issue 26). check.sh
 * checks it, and that each weakened variant below fails; `make model`
 * (part of `make test`) runs check.sh.
 *
 * What is modelled
 * ----------------
 *
 * Nodes V0.. (voters, when a list names them) and N.. (nodes that are in
 * no list). A node may be a voter and a claimant at once (a joining node
 * usually is): its voter side (Voter(v,b)) and its claimant side
 * (Claimant(c,b); claimant c is node CNODE(c)) run the same list,
 * list[n]. Node(n) is node n starting, or restarting with the list it is
 * configured with now (a rolling restart: each node at its own moment).
 * Operator() is the person who edits bgp.voters on every node.
 *
 * Scenarios, one per run (the list as the set of its voters):
 *   GROW (default)  V3 and V4 join and become voters, one at a time:
 *                   {V0,V1,V2} -> {V0,V1,V2,V3} -> {V0..V4}. Claimants:
 *                   V3, V0 (and V4). 3, 4 and 5 voters.
 *   -DREPLACE       V3 replaces V0: {V0,V1,V2} -> {V0,V1,V2,V3} ->
 *                   {V1,V2,V3}. Claimants: V3, V0 (and V1).
 *   -DREJOIN        the documented way to wipe a voter: take V0 out
 *                   ({V1,V2}), wait for the precondition, wipe V0's state
 *                   dir, add it back ({V0,V1,V2}). Claimants: V1, N3
 *                   (and V2).
 *   -DWALK          every sequence of at most STEPS (3) one-voter changes,
 *                   from {V0,V1,V2}, over voters V0..V(VOTERS-1) (VOTERS
 *                   4 or 5), down to one voter; and at any moment the
 *                   precondition holds, a wipe of any voter that is out of
 *                   the list. Claimants: V3, V0 (and V1).
 *   -DADOPT         the old default (a weakened variant, below).
 * In every scenario V0..V2 (and N3) run from the start; the others (the
 * joiners) start at any moment, with the list they are configured with
 * then. -DRECOVER adds recovered voters to any of them.
 *
 * The rules, and how each maps to the code
 * ----------------------------------------
 *
 * Every node has an explicit list (bgp.voters). A list is a tag t here,
 * LBITS(t) its voters; the code's tag is the list's hash (VoterHash).
 *
 *   Claim. A claimant claims a block at most once per incarnation, at any
 *     time, and announces the claim pending, tagged with its current list.
 *     It may give a pending claim up (release) at any time: every give-up
 *     rule of the code is one of these. Confirmed is terminal.
 *   Grant. A voter (a node in its own current list) that holds no grant
 *     for b grants b, in one step that persists the grant and announces
 *     it tagged with the voter's current list:
 *       - to a claimant that announces b confirmed (catch-up: a voter
 *         added later, or one whose grants were lost), or
 *       - to a claimant whose pending claim of b was announced under the
 *         voter's current list.
 *     One grant per block at a time. It revokes a grant only when its
 *     claimant announces the claim released.
 *   Count and confirm. A claimant with b pending counts the grants of b
 *     to it that are tagged with its own current list, from voters of its
 *     own list, any copy, and confirms b at a strict majority of its list.
 *   Switch. A node that (re)starts with another list keeps its persisted
 *     state, and announces it again under the new list: a voter re-
 *     announces every grant it holds tagged with its new list (a grant is
 *     not bound to a list; the tag says which list its voter is in now).
 *     And (the rule this model adds, see "A pending claim does not outlive
 *     its list") a claimant releases every claim it has pending.
 *   Changing the list (Operator). One voter added or removed at a time.
 *     Every node is configured with the new list at once; each node
 *     switches at its own moment. The next change may start only when
 *     every node that runs runs the current list, and every voter of the
 *     current list holds a grant of every confirmed block to its owner
 *     (the precondition the procedure and `reef status` check).
 *   Wiping a voter (REJOIN, WALK). Only a voter out of the current list,
 *     once the precondition holds: it loses every grant, and once it is
 *     in a list again it grants like any voter.
 *   Recovered voter (-DRECOVER). `reef store recover` with blocks in use:
 *     at any time, any number of times, a voter loses every grant, and in
 *     that incarnation never grants a pending claim again, only confirmed
 *     owners (blocks.pml's RECOVERY; docs/ipam.md, "Voters keep their
 *     disk"). A later wipe is a new incarnation: it may grant pending
 *     claims again.
 * Left out: "a node that sees another list stops claiming" (it is for
 * liveness and `reef status`; the model is safe without it), the voter's
 * order (confirmed owner first, then the lowest claimant: the model
 * lets it grant either, in any order), "never grants a pending claim of
 * a block it knows confirmed by another", and every other rule that only
 * forbids a grant or a claim.
 *
 * A pending claim does not outlive its list
 * -----------------------------------------
 *
 * With the rules as first designed, a claimant kept its pending claims
 * over a switch and announced them again under its new list. REJOIN then
 * fails (-DSWITCH_KEEPS_PENDING): N3 claims b under {V0,V1,V2}, V0 grants
 * it; V0 is taken out, wiped and added back while N3's claim stays
 * pending (nothing in the precondition is about pending claims); V1
 * claims b, V0 (empty) and V2 grant V1, V1 confirms; N3, back on
 * {V0,V1,V2}, counts V0's old grant (a copy of it is still in the table,
 * tagged {V0,V1,V2}) and V1's, and confirms too. The list came back to a
 * list a wiped voter had granted under, and a stale grant of the voter's
 * old state counted under it again. A claimant that releases its pending
 * claims when it switches lists cannot count a grant made under an
 * earlier list: every claim is made, granted, counted and confirmed under
 * one list. Two other fixes were tried and are not enough or not
 * checkable: waiting, before a wipe, until the voter holds no grant for a
 * pending claim (-DWIPE_WAITS) fails with a recovered voter, whose lost
 * grants the wait cannot see (-DSWITCH_KEEPS_PENDING -DWIPE_WAITS
 * -DRECOVER); "no pending claim anywhere" is not something any node can
 * see. Without wipes, keeping pending claims over a switch is safe (the
 * WALK run with -DSWITCH_KEEPS_PENDING -DNO_WIPE passes).
 *
 * What is abstracted, and why it is sound
 * ---------------------------------------
 *
 * The network is blocks.pml's set of every message ever sent (see there
 * why that covers loss, duplication, reordering, stale copies, partitions
 * and re-announcement). A message is a bit in a set of tags: ctags(c,b)
 * is the lists claim(c,b) pending was announced under, gtags(v,b,c) the
 * lists grant(v,b,c) was announced under; release and confirmed are the
 * claim states themselves (a claimant announces them as it persists
 * them, and states only move forward).
 *
 * No grant counts. The code counts the grants in one table snapshot; a
 * table may hold any copy of anything ever announced. So a claimant can
 * confirm exactly when the set holds grants, tagged with its list, from a
 * majority of its list's voters: Claimant's guard NGOT(c,b,list) >= MAJ.
 * There is no counted[] and no crash: a crash loses the counts only, and
 * the set still holds every message the counts were made from.
 *
 * Forgotten tags. When c's claim of b is released or confirmed, its tags
 * are cleared: nobody acts on a pending claim that is over (a voter that
 * granted it from a stale copy would hold a grant it can revoke at once,
 * or give a confirmed owner the grant catch-up gives it anyway), and a
 * claimant counts only while pending. This keeps dead history out of the
 * state: without it, the GROW search had not finished after 126M states
 * and 15 GB; with it, it takes seconds.
 *
 * Wiped voters. A wiped node comes back as a new incarnation. The code
 * ignores the old incarnation's grants once it has heard of the new one;
 * here they always count (a copy of them is in the set, and a claimant
 * need not have heard of the new incarnation yet: safety must not rest
 * on which records arrive first). A wipe here loses the voter's grants
 * only. In REJOIN the wiped voter is no claimant; in WALK it may be one,
 * and its claimant side keeps its claim states: a pending claim of the
 * old incarnation may still be released (what its supersession amounts
 * to: its voters revoke their grants) or even, beyond what the code
 * allows, confirmed. The new incarnation's claimant side would be one
 * more claimant (blocks.pml), as a third claimant is.
 *
 * Starting. A node that has not started yet does nothing; starting is a
 * switch from no list. A node that runs from the start and does nothing
 * until it switches is the same as one that starts later.
 *
 * Blocks. The rules are per block, and the blocks share only the lists,
 * the operator, recovery and wipes. Every run of the model with several
 * blocks, seen on one block b, is a run of the model with that block
 * alone: a step on another block changes nothing of b's; a switch, a
 * recovery or a wipe does to b what it does with b alone (or nothing);
 * and the operator's precondition with several blocks implies it for b
 * alone. The property is about one block. So the 1-block search covers
 * any number of blocks, 3 claimants on 2 blocks included (that search
 * itself is the square of the 1-block one, more than 14M states after 5
 * minutes here). check.sh runs 1 block, 2 or 3 claimants, and 2 blocks
 * with 2 claimants as a cross-check of this argument.
 *
 * Steps are atomic (d_step), as in blocks.pml: "persist, then announce"
 * is one step, and a crash between the two is a lost message.
 *
 * Property: no block is ever confirmed by two claimants, asserted in the
 * step that confirms.
 *
 * Weakened variants (each must fail; check.sh checks that they do):
 *   -DADOPT              the old default: nodes without bgp.voters take
 *                        the five lowest addresses of themselves and their
 *                        peers, and Adopt keeps each side's own list when
 *                        each is backed by a majority of its own voters.
 *                        As in issue 26: old nodes V0..V2 (.21-.23) run
 *                        {V0,V1,V2}; three joiners V3..V5 with lower
 *                        addresses (.11-.13) take {V3,V4,V5,V0,V1} (the
 *                        five lowest), which their three votes carry
 *                        alone. Three joiners is the fewest that can:
 *                        with two, their default's majority needs an old
 *                        node, which votes under {V0,V1,V2} only.
 *   -DTWO_AT_ONCE        a change of two voters in one step (REPLACE:
 *                        {V0,V1,V2} -> {V1,V2,V3}; GROW: {V0,V1,V2} ->
 *                        {V0..V4})
 *   -DNO_CATCHUP         the next change starts before the voters of the
 *                        list hold a grant for every confirmed block
 *   -DCATCHUP_ANY_GRANT  ... once they hold a grant for it, to anyone (a
 *                        grant to a pending rival is not a catch-up; with
 *                        3 claimants)
 *   -DNO_WAIT_FOR_SWITCH the next change starts before every node runs
 *                        the current list
 *   -DWIPED_VOTER        V0 loses its grants while in the list (state dir
 *                        wiped, or `reef store recover` with nothing in
 *                        use, which draws a new incarnation) and goes on
 *                        granting pending claims (REJOIN's lists, no change)
 *   -DSWITCH_KEEPS_PENDING  a claimant keeps its pending claims over a
 *                        switch (the rules as first designed, above)
 *   -DSWITCH_KEEPS_PENDING -DWIPE_WAITS -DRECOVER  the same, with a wipe
 *                        that waits until the voter holds no grant for a
 *                        pending claim
 */

#define OFF 0            /* a node's list before it first starts: no list */

#define NONE      0
#define PENDING   1
#define CONFIRMED 2
#define RELEASED  3
#define NOBODY    0

/* ================= scenarios ================= */

#if defined(ADOPT)
/* Old nodes V0..V2 run {V0,V1,V2}; joiners V3..V5 run their default,
 * {V0,V1,V3,V4,V5}, for good. No list change. */
#define NV 6
#define NPURE 0
#define LIST0 7                        /* {V0,V1,V2} */
#define LIST1 59                       /* {V0,V1,V3,V4,V5} */
#define NSTEP 1
#define STEPLIST(p) 1
#define CFG(n) ((n) < 3 -> 1 : 2)      /* tag numbers: 1 = LIST0, 2 = LIST1 */
#define CNODE0 2                       /* an old node */
#define CNODE1 3                       /* a joiner */
#define CNODE2 4                       /* a joiner */

#elif defined(REJOIN)
/* V0 is taken out, wiped, and added back. */
#define NV 3
#define NPURE 1                        /* N3: a node that is no voter */
#define LIST0 7                        /* {V0,V1,V2} */
#define LIST1 6                        /* {V1,V2} */
#ifdef WIPED_VOTER
#define NSTEP 1                        /* no list change: V0 is wiped in place */
#define STEPLIST(p) 1
#else
#define NSTEP 4                        /* {V0,V1,V2}, {V1,V2}, wipe V0, {V0,V1,V2} */
#define STEPLIST(p) ((p) == 0 || (p) == 3 -> 1 : 2)
#define WIPE_STEP 2
#endif
#define CFG(n) STEPLIST(step)
#define FOUNDER(n) true
#define CNODE0 1
#define CNODE1 3
#define CNODE2 2

#elif defined(REPLACE)
/* V0 is replaced by V3: {V0,V1,V2}, {V0,V1,V2,V3}, {V1,V2,V3}. */
#define NV 4
#define NPURE 0
#define LIST0 7                        /* {V0,V1,V2} */
#ifdef TWO_AT_ONCE
#define LIST1 14                       /* {V1,V2,V3}: in one step */
#define NSTEP 2
#else
#define LIST1 15                       /* {V0,V1,V2,V3} */
#define LIST2 14                       /* {V1,V2,V3} */
#define NSTEP 3
#endif
#define STEPLIST(p) ((p) + 1)
#define CFG(n) STEPLIST(step)
#define CNODE0 3                       /* the joiner */
#define CNODE1 0                       /* the voter that leaves */
#define CNODE2 1

#elif defined(WALK)
/* Any sequence of at most STEPS one-voter changes, from {V0,V1,V2}, over
 * voters V0..V(NV-1), with wipes of voters out of the list. */
#ifndef VOTERS
#define VOTERS 4
#endif
#if VOTERS < 4 || VOTERS > 5
#error VOTERS must be 4 or 5
#endif
#define NV VOTERS
#define NPURE 0
#ifndef STEPS
#define STEPS 3
#endif
#define CFG(n) cur
#define CNODE0 3
#define CNODE1 0
#define CNODE2 1

#else
/* GROW: V3 and V4 join: {V0,V1,V2}, {V0,V1,V2,V3}, {V0..V4}. */
#define NV 5
#define NPURE 0
#define LIST0 7                        /* {V0,V1,V2} */
#ifdef TWO_AT_ONCE
#define LIST1 31                       /* {V0..V4}: in one step */
#define NSTEP 2
#else
#define LIST1 15                       /* {V0,V1,V2,V3} */
#define LIST2 31                       /* {V0..V4} */
#define NSTEP 3
#endif
#define STEPLIST(p) ((p) + 1)
#define CFG(n) STEPLIST(step)
#define CNODE0 3                       /* a joiner */
#define CNODE1 0                       /* an old voter */
#define CNODE2 4                       /* a joiner */
#endif

#ifndef CLAIMANTS
#define CLAIMANTS 2
#endif
#if CLAIMANTS < 2 || CLAIMANTS > 3
#error CLAIMANTS must be 2 or 3
#endif
#define NC CLAIMANTS
#ifndef BLOCKS
#define BLOCKS 1
#endif
#if BLOCKS < 1 || BLOCKS > 2
#error BLOCKS must be 1 or 2
#endif
#define NB BLOCKS
#define NN (NV + NPURE)

/* the nodes that run when the model starts (the others join later) */
#ifndef FOUNDER
#define FOUNDER(n) ((n) < 3)
#endif

#define CNODE(c) ((c) == 0 -> CNODE0 : ((c) == 1 -> CNODE1 : CNODE2))

/* A list is named by a tag t: the set of its voters as a bit mask (the
 * list hash of the code) when WALK, else its number in the scenario's
 * table, 1.. . LBITS(t) is the mask. */
#ifdef WALK
#define LBITS(t) (t)
#define TAGS int                       /* a set of tags: bit t; t <= 31 */
int cur = 7;                           /* the list the operator configures */
byte steps;                            /* changes made */
#define CUR cur
#else
#ifndef LIST2
#define LIST2 0
#endif
#define LBITS(t) ((t) == 1 -> LIST0 : ((t) == 2 -> LIST1 : LIST2))
#define TAGS byte
byte step;                             /* the operator's step */
#define CUR STEPLIST(step)
#endif
#define INLIST(v,t) ((LBITS(t) >> (v)) & 1)
#define LSIZE(t) (INLIST(0,t) + INLIST(1,t) + INLIST(2,t) + INLIST(3,t) + INLIST(4,t) + INLIST(5,t))
#define MAJ(t) (LSIZE(t) / 2 + 1)
#define HASTAG(set,t) (((set) >> (t)) & 1)

/* ---- state ---- */
byte list[NN];           /* the list node n runs now (persisted config), OFF before it starts */
byte claim[NC*NB];       /* persisted: NONE, PENDING, CONFIRMED, RELEASED */
TAGS ctags[NC*NB];       /* claim(c,b) pending was announced under these lists */
byte grant[NV*NB];       /* persisted: NOBODY, or c+1 */
TAGS gtags[NV*NB*NC];    /* grant(v,b,c) was announced under these lists */
#ifdef RECOVER
bool vrec[NV];           /* voter v's store was recovered (this incarnation) */
#endif

#define CLAIM(c,b)    claim[(c)*NB + (b)]
#define CTAGS(c,b)    ctags[(c)*NB + (b)]
#define GRANT(v,b)    grant[(v)*NB + (b)]
#define GTAGS(v,b,c)  gtags[((v)*NB + (b))*NC + (c)]

/* voter v of list t announced a grant of b to c under t */
#define HAS(v,c,b,t) (INLIST(v,t) && HASTAG(GTAGS(v,b,c), t))
#if NV == 3
#define NGOT(c,b,t) (HAS(0,c,b,t) + HAS(1,c,b,t) + HAS(2,c,b,t))
#elif NV == 4
#define NGOT(c,b,t) (HAS(0,c,b,t) + HAS(1,c,b,t) + HAS(2,c,b,t) + HAS(3,c,b,t))
#elif NV == 5
#define NGOT(c,b,t) (HAS(0,c,b,t) + HAS(1,c,b,t) + HAS(2,c,b,t) + HAS(3,c,b,t) + HAS(4,c,b,t))
#elif NV == 6
#define NGOT(c,b,t) (HAS(0,c,b,t) + HAS(1,c,b,t) + HAS(2,c,b,t) + HAS(3,c,b,t) + HAS(4,c,b,t) + HAS(5,c,b,t))
#endif

#if NB == 1
#define ANY_GRANT(v) (GRANT(v,0) != NOBODY)
#else
#define ANY_GRANT(v) (GRANT(v,0) != NOBODY || GRANT(v,1) != NOBODY)
#endif

/* ---- story ---- */
inline print_list(t) {
	printf("{");
	pv = 0;
	do
	:: pv < NV ->
		if
		:: INLIST(pv, t) -> printf(" V%d", pv)
		:: else
		fi;
		pv++
	:: else -> break
	od;
	printf(" }");
	pv = 0
}

inline print_node(n) {
	if
	:: (n) < NV -> printf("V%d", n)
	:: else -> printf("N%d", n)
	fi
}

/* ---- claimant c (node CNODE(c)), block b ---- */

/* c gave up b or confirmed it: nothing announced for c's pending claim
 * of b can matter any more (see the header) */
inline forget_tags() {
	CTAGS(c,b) = 0;
	o = 0;
	do
	:: o < NV -> GTAGS(o,b,c) = 0; o++
	:: else -> break
	od;
	o = 0
}

proctype Claimant(byte c; byte b) {
	byte n = CNODE(c);
	byte o, pv;
end:	do
	/* claim b, at any time, once */
	:: d_step { list[n] != OFF && CLAIM(c,b) == NONE ->
		print_node(n); printf(" claims B%d under ", b); print_list(list[n]); printf("\n");
		CLAIM(c,b) = PENDING;
		CTAGS(c,b) = CTAGS(c,b) | (1 << list[n]) }

	/* give it up, at any time */
	:: d_step { list[n] != OFF && CLAIM(c,b) == PENDING ->
		print_node(n); printf(" releases B%d\n", b);
		CLAIM(c,b) = RELEASED;
		forget_tags() }

	/* confirm: grants announced under its list, from voters of its list,
	 * a strict majority of the list */
	:: d_step { list[n] != OFF && CLAIM(c,b) == PENDING && NGOT(c,b,list[n]) >= MAJ(list[n]) ->
		print_node(n); printf(" confirms B%d: %d grants under ", b, NGOT(c,b,list[n])); print_list(list[n]); printf("\n");
		CLAIM(c,b) = CONFIRMED;
		forget_tags();
		/* the property: no other claimant has b confirmed */
		o = 0;
		do
		:: o < NC -> assert(o == c || CLAIM(o,b) != CONFIRMED); o++
		:: else -> break
		od;
		o = 0 }
	od
}

/* ---- voter v, block b ---- */

#define VOTING (list[v] != OFF && INLIST(v, list[v]))
#ifdef RECOVER
#define MAY_GRANT_PENDING (!vrec[v])
#else
#define MAY_GRANT_PENDING true
#endif
/* claim(c,b) pending, announced under v's list, and v has no grant for b */
#define PENDING_ARRIVES(c)   (VOTING && MAY_GRANT_PENDING && GRANT(v,b) == NOBODY && HASTAG(CTAGS(c,b), list[v]))
/* c announces b confirmed, and v has no grant for b (catch-up) */
#define CONFIRMED_ARRIVES(c) (VOTING && GRANT(v,b) == NOBODY && CLAIM(c,b) == CONFIRMED)
/* c announces b released, and v's grant of b is c's */
#define RELEASE_ARRIVES(c)   (GRANT(v,b) == (c) + 1 && CLAIM(c,b) == RELEASED)

/* persist the grant, then announce it under v's list (one step) */
inline grant_to(c) {
	GRANT(v,b) = (c) + 1;
	if
	:: CLAIM(c,b) == PENDING -> GTAGS(v,b,c) = GTAGS(v,b,c) | (1 << list[v])
	:: else
	fi
}

inline grant_pending(c) {
	printf("V%d grants B%d to ", v, b); print_node(CNODE(c)); printf(" (pending) under "); print_list(list[v]); printf("\n");
	grant_to(c)
}

inline grant_confirmed(c) {
	printf("V%d grants B%d to its confirmed owner ", v, b); print_node(CNODE(c)); printf("\n");
	grant_to(c)
}

inline revoke(c) {
	printf("V%d revokes its grant of B%d to ", v, b); print_node(CNODE(c)); printf(" (released)\n");
	GRANT(v,b) = NOBODY
}

proctype Voter(byte v; byte b) {
	byte pv;
end:	do
	:: d_step { PENDING_ARRIVES(0)   -> grant_pending(0) }
	:: d_step { CONFIRMED_ARRIVES(0) -> grant_confirmed(0) }
	:: d_step { RELEASE_ARRIVES(0)   -> revoke(0) }
	:: d_step { PENDING_ARRIVES(1)   -> grant_pending(1) }
	:: d_step { CONFIRMED_ARRIVES(1) -> grant_confirmed(1) }
	:: d_step { RELEASE_ARRIVES(1)   -> revoke(1) }
#if NC > 2
	:: d_step { PENDING_ARRIVES(2)   -> grant_pending(2) }
	:: d_step { CONFIRMED_ARRIVES(2) -> grant_confirmed(2) }
	:: d_step { RELEASE_ARRIVES(2)   -> revoke(2) }
#endif
	od
}

/* ---- node n: (re)starts with the list it is configured with ---- */
proctype Node(byte n) {
	byte b, c, v, pv;
end:	do
	:: d_step { list[n] != CFG(n) ->
		list[n] = CFG(n);
		print_node(n); printf(" runs "); print_list(list[n]); printf("\n");
		/* its pending claims */
		c = 0;
		do
		:: c < NC ->
			if
			:: CNODE(c) == n ->
				b = 0;
				do
				:: b < NB ->
					if
#ifndef SWITCH_KEEPS_PENDING
					:: CLAIM(c,b) == PENDING ->
						print_node(n); printf(" releases B%d (a claim under another list)\n", b);
						CLAIM(c,b) = RELEASED;
						CTAGS(c,b) = 0;
						v = 0;
						do
						:: v < NV -> GTAGS(v,b,c) = 0; v++
						:: else -> break
						od;
						v = 0
#else
					:: CLAIM(c,b) == PENDING -> CTAGS(c,b) = CTAGS(c,b) | (1 << list[n])
#endif
					:: else
					fi;
					b++
				:: else -> break
				od
			:: else
			fi;
			c++
		:: else -> break
		od;
		/* its grants, announced again under its new list */
		if
		:: n < NV ->
			b = 0;
			do
			:: b < NB ->
				if
				:: GRANT(n,b) != NOBODY && CLAIM(GRANT(n,b) - 1, b) == PENDING ->
					GTAGS(n,b,GRANT(n,b) - 1) = GTAGS(n,b,GRANT(n,b) - 1) | (1 << list[n])
				:: else
				fi;
				b++
			:: else -> break
			od
		:: else
		fi;
		b = 0; c = 0 }
	od
}

/* voter v loses every grant (state dir wiped, or store recovered) */
inline lose_grants(v) {
	b = 0;
	do
	:: b < NB -> GRANT(v,b) = NOBODY; b++
	:: else -> break
	od;
	b = 0
}

/* ---- the operator ---- */

/* ready: the precondition of the next step. Every node that runs runs
 * the current list, and every voter of it holds a grant of each
 * confirmed block to its owner. */
inline check_ready() {
	ready = true;
#ifndef NO_WAIT_FOR_SWITCH
	n = 0;
	do
	:: n < NN -> ready = ready && (list[n] == OFF || list[n] == CUR); n++
	:: else -> break
	od;
#endif
#ifndef NO_CATCHUP
	b = 0;
	do
	:: b < NB ->
		c = 0;
		do
		:: c < NC ->
			if
			:: CLAIM(c,b) == CONFIRMED ->
				v = 0;
				do
				:: v < NV ->
#ifndef CATCHUP_ANY_GRANT
					ready = ready && (!INLIST(v, CUR) || GRANT(v,b) == c + 1);
#else
					ready = ready && (!INLIST(v, CUR) || GRANT(v,b) != NOBODY);
#endif
					v++
				:: else -> break
				od
			:: else
			fi;
			c++
		:: else -> break
		od;
		b++
	:: else -> break
	od;
#endif
	n = 0; b = 0; c = 0; v = 0
}

#ifdef WIPE_WAITS
/* and the voter to be wiped holds no grant for a pending claim */
inline check_wipe(w) {
	b = 0;
	do
	:: b < NB -> ready = ready && (GRANT(w,b) == NOBODY || CLAIM(GRANT(w,b) - 1, b) != PENDING); b++
	:: else -> break
	od;
	b = 0
}
#else
inline check_wipe(w) { skip }
#endif

inline wipe(w) {
	printf("operator: V%d's state dir is wiped\n", w);
	lose_grants(w);
#ifdef RECOVER
	vrec[w] = false;         /* a new incarnation with a fresh store */
#endif
}

/* a wipe that would change nothing is not a step */
#ifdef RECOVER
#define WIPE_CHANGES(w) (ANY_GRANT(w) || vrec[w])
#else
#define WIPE_CHANGES(w) ANY_GRANT(w)
#endif

#ifndef WALK
proctype Operator() {
	byte n, b, c, v, pv;
	bool ready;
end:	do
	:: d_step { step < NSTEP - 1 ->
		check_ready();
#ifdef WIPE_STEP
		if
		:: step + 1 == WIPE_STEP -> check_wipe(0)
		:: else
		fi;
#endif
		if
		:: ready ->
			step++;
#ifdef WIPE_STEP
			if
			:: step == WIPE_STEP -> wipe(0)
			:: else -> printf("operator: every node is configured with "); print_list(CUR); printf("\n")
			fi;
#else
			printf("operator: every node is configured with "); print_list(CUR); printf("\n");
#endif
			ready = false
		:: else
		fi }
	od
}
#else
inline try_wipe() {
	check_ready();
	check_wipe(w);
	if
	:: ready -> wipe(w)
	:: else
	fi;
	w = 0; ready = false
}

/* add voter w to the list, or take it out */
inline try_change() {
	check_ready();
	if
	:: ready ->
		cur = cur ^ (1 << w);
		steps++;
		printf("operator: every node is configured with "); print_list(cur); printf("\n")
	:: else
	fi;
	w = 0; ready = false
}

/* any one-voter change, up to STEPS of them; a voter out of the list may
 * be wiped at any time the precondition holds */
proctype Operator() {
	byte n, b, c, v, pv, w;
	bool ready;
end:	do
	:: d_step { steps < STEPS && (cur ^ 1) != 0 -> w = 0; try_change() }
	:: d_step { steps < STEPS && (cur ^ 2) != 0 -> w = 1; try_change() }
	:: d_step { steps < STEPS && (cur ^ 4) != 0 -> w = 2; try_change() }
	:: d_step { steps < STEPS && (cur ^ 8) != 0 -> w = 3; try_change() }
#if NV > 4
	:: d_step { steps < STEPS && (cur ^ 16) != 0 -> w = 4; try_change() }
#endif
#ifndef NO_WIPE
	:: d_step { !INLIST(0, cur) && WIPE_CHANGES(0) -> w = 0; try_wipe() }
	:: d_step { !INLIST(1, cur) && WIPE_CHANGES(1) -> w = 1; try_wipe() }
	:: d_step { !INLIST(2, cur) && WIPE_CHANGES(2) -> w = 2; try_wipe() }
	:: d_step { !INLIST(3, cur) && WIPE_CHANGES(3) -> w = 3; try_wipe() }
#if NV > 4
	:: d_step { !INLIST(4, cur) && WIPE_CHANGES(4) -> w = 4; try_wipe() }
#endif
#endif
	od
}
#endif

#ifdef WIPED_VOTER
/* weakened: V0 is wiped while in the list, at any time, and goes on
 * voting for pending claims */
proctype Wiper() {
	byte b;
end:	do
	:: d_step { ANY_GRANT(0) -> printf("V0's state dir is wiped; it keeps its list\n"); lose_grants(0) }
	od
}
#endif

#ifdef RECOVER
/* voter v's store is recovered (`reef store recover`), at any time, any
 * number of times: it loses its grants and grants no pending claim again
 * in this incarnation */
proctype Recover(byte v) {
	byte b;
end:	do
	:: d_step { (!vrec[v] || ANY_GRANT(v)) ->
		printf("V%d's store is recovered: its grants are lost\n", v);
		vrec[v] = true;
		lose_grants(v) }
	od
}
#endif

init {
	byte i, j;
	atomic {
		for (i : 0 .. NN-1) {
			if
			:: FOUNDER(i) -> list[i] = CFG(i)
			:: else
			fi
		}
		for (i : 0 .. NV-1) {
			for (j : 0 .. NB-1) { run Voter(i, j) }
		}
		for (i : 0 .. NC-1) {
			for (j : 0 .. NB-1) { run Claimant(i, j) }
		}
		for (i : 0 .. NN-1) { run Node(i) }
		run Operator();
#ifdef WIPED_VOTER
		run Wiper();
#endif
#ifdef RECOVER
		for (i : 0 .. NV-1) { run Recover(i) }
#endif
		i = 0; j = 0
	}
}
