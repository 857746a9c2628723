/*
 * blocks.pml: spin model of reef's block-ownership protocol (blockproto;
 * the rules are in ../doc.go). check.sh checks it, and that each weakened
 * variant below fails; `make model` (part of `make test`) runs check.sh.
 *
 * What is modelled, and how it maps to doc.go
 * -------------------------------------------
 *
 * 3 voters V0..V2, CLAIMANTS claimants C0.. (2 by default, or 3), BLOCKS
 * blocks B0.. (2 by default, or 1). A real node may be both a voter and a
 * claimant; here they are separate processes: no rule makes a node's vote
 * depend on its own claims, or the other way round. One process runs each
 * claimant's rules for one block (Claimant(c,b)), one runs each voter's
 * rules for one block (Voter(v,b)); Restart(c) is claimant c's crash.
 *
 * The rules are per block, and the blocks share nothing but claimant
 * crashes (a crash loses the counts of every block at once), so the state
 * space of 2 blocks is about the square of that of 1 block: 2 claimants on
 * 2 blocks is 2.4M states, 3 claimants on 1 block 31k, but 3 claimants on
 * 2 blocks would be about 1e9, too many to search exhaustively here.
 * check.sh runs 2x2 and 3x1.
 *
 * Claimant, per block. doc.go: "A claimant claims a block at most once per
 * incarnation: pending, then confirmed once a majority of voters grant it,
 * or released when it gives up. A confirmed block stays its owner's."
 *
 *     none -> pending -> confirmed    (terminal)
 *             pending -> released     (terminal: never claimed again)
 *
 *   claim[]   the claim state: persisted, survives a crash.
 *   counted[] the voters whose grants the claimant has received for a
 *             pending claim, as a bit set: volatile, lost in a crash.
 *   It claims any block it never claimed, at any time (doc.go: a node
 *   claims when it needs addresses; when is not a safety matter). It may
 *   release a pending claim at any time: doc.go's give-up rules ("the
 *   block is confirmed by another node", "some voter granted it to a lower
 *   claimant address") are each one of these releases, so the model
 *   allows more than the real code. It confirms once grants from a strict
 *   majority of distinct voters (blockproto.Majority(3) = 2) are counted.
 *   The real claimant counts the grants in one table snapshot; here it
 *   accumulates grants received one by one (until it crashes), which
 *   allows every count a snapshot gives and more.
 *
 * Voter, per block. doc.go: "A voter grants a block to one claimant at
 * most, persists the grant before announcing it, and revokes it only when
 * that claimant announces the claim released."
 *
 *   grant[]   nobody, or the claimant it granted the block to: persisted.
 *   On claim(c,b) with no grant for b: grant b to c, persist, send
 *   grant(v,b,c), all in one step. Granted to c already: it may re-send
 *   grant(v,b,c) (the re-send step below). Granted to another: nothing.
 *   On release(c,b) with b granted to c: revoke (grant := nobody).
 *   Which claim it grants when it holds none (doc.go: the confirmed claim
 *   if one is announced, else the lowest claimant address) is abstracted
 *   to "whichever claim it receives first": a superset of the real order.
 *   doc.go's "never grants a pending claim of a block it knows confirmed
 *   by another" only forbids grants, so it is left out: the model is safe
 *   without it.
 *
 * Identities (docs/design.md, "IPv6-only nodes"). A voter is named in the
 * list, in its grants and in the claimant's count by its identity, a
 * 32-bit value that is its IPv4 address or, on an IPv6-only node,
 * bgp.routerID: not by anything the model ties to the node itself. Voter
 * node n has identity ID(n), a permutation of the node indices; the
 * claimant counts distinct identities. The safety argument needs only
 * that no two nodes share one (configured, and kept in the store).
 * -DDUP_IDENTITY adds voter node V3 with V0's identity: each of the two
 * grants once, to different claimants, and each claimant counts the
 * identity once, so two claimants each reach a majority (check.sh: must
 * fail).
 * -DADDR_BOUND is what reef does for a voter written in bgp.voters as an
 * IPv6 address (blockproto.Input.VoterAddr6): a grant is tied to the
 * address of the node that made it (through the record of the voter's
 * current incarnation, which announces the node's IPv6 address), and a
 * claimant counts identity i's grant only from the node at the address
 * configured for i. With DUP_IDENTITY it must hold (check.sh): V3's
 * grants are sent and never counted.
 *
 * Incarnations and supersession (doc.go; docs/ipam.md, "Restarts and
 * wiped state"). A claimant here is one incarnation: what it claims and
 * what it is granted are its own, and a wiped node is one more claimant.
 * What the model adds with -DSUPERSEDE is the rule that frees an
 * incarnation's blocks without a release: an incarnation names another
 * incarnation of its identity as its predecessor, and a voter that learns
 * of it revokes its grants to the named one (a grant of the named one's
 * pending claim may still be made afterwards: the real voter voids it for
 * good, so the model allows more). Claimant slot NEW is the node of C0
 * started again from an empty state dir (Wipe): C0's daemon stops, its
 * pods lose their network before the new incarnation announces anything
 * (the first reconcile pass), and from then on NEW claims as any claimant
 * and may name C0 at any time (it sees C0 in a record or a Seen path).
 * The property counts a block as C0's only while C0's pods hold it
 * (holds[]): an incarnation named while its pods still run would have its
 * blocks handed out under them.
 *   -DWIPE_KEEPS_PODS (weakened, must fail): the new incarnation announces
 *   before the old pods are gone.
 *   -DDUP_CLAIMANT: NEW is another node given C0's identity (two nodes
 *   given one bgp.routerID), C0 running; each of the two may name the other
 *   when it sees it (incarnations.go, learn: every other incarnation of its
 *   own identity it sees). Must fail. With -DADDR_BOUND it is what reef
 *   does for a router ID (blockproto's sameNode): an incarnation names
 *   another only if that one announced its own IPv6 address, which two
 *   nodes never share, so neither names the other; must hold.
 *
 * Not modelled: voter lists and their hashes (one agreed list is assumed),
 * forgets, confirmed-claim announcements (a voter
 * treats a confirmed claim like a pending one; the claim message stays
 * in the network anyway), and the "own confirmed block confirmed by
 * another" rule (it only reacts to a violation, which never occurs here).
 *
 * Steps are atomic. The real node's Decide persists its new state, then
 * announces it: "persist, then send" is one step here, and a crash between
 * the two is the same as the message being lost.
 *
 * The network. doc.go: "Nothing is inferred from the absence of an
 * announcement." BGP is state-based: a node sees a table of what is
 * announced, in any order, maybe with stale or duplicate copies, and may
 * not see some of it for a while (a partition, a restart). Two models:
 *
 *   default: sent[], the set of every message ever sent. A receiver may
 *     take any message in it, in any order, as often as it likes, or never.
 *     Nothing is ever removed. No rule here (nor in doc.go) acts on the
 *     absence of a message, so any run in which a message is lost,
 *     consumed or crowded out of a full buffer is matched, state for
 *     state, by a run here in which it is simply not received (again).
 *     So this covers loss, duplication, reordering, stale copies,
 *     partitions and re-announcement (re-sending a message already in the
 *     set changes nothing) with no bound on the messages in flight, and
 *     the network has one canonical state (no slot permutations), which
 *     keeps the exhaustive search small.
 *
 *   -DBAG=k: a bag of at most k messages, as a cross-check of that
 *     argument. A send goes into the bag if there is room, or is lost (a
 *     send may always be lost; one into a full bag always is). Copies of
 *     one message are merged (a second copy would only take room, and a
 *     send that finds no room is lost anyway). Delivering a message keeps
 *     it (duplication) or takes it out; any message may be dropped at any
 *     time (Network). Claimants and voters re-announce their state at any
 *     time. Much larger state space for the same behaviours: with 2 blocks
 *     even k = 2 is 11M states, so check.sh runs bags with 1 block.
 *
 * A delivery that would change nothing at the receiver (a claim of a block
 * granted to another, a second copy of a grant already counted) is not a
 * step: in the set it is a self-loop; in the bag it equals a drop.
 *
 * Crashes: a claimant may crash at any time, any number of times
 * (Restart(c)), and loses its grant counts only. A voter's crash loses
 * nothing, since its grants are persisted before they are sent; its
 * restart re-announces its grants, which is the re-send step of Voter.
 * In the set model a re-send changes nothing, so that step exists only
 * with -DBAG.
 *
 * Recovery (-DRECOVERY): `reef store recover` rebuilds a damaged store
 * from the kernel, so a node keeps its confirmed blocks and its
 * incarnation but loses the rest of its protocol state (doc.go,
 * "Recovered"). ClaimantRecover(c), once, at any time: every claim state
 * of c that is not confirmed is lost (FORGOT); a recovered claimant never
 * claims again, and announces nothing for a FORGOT block.
 * VoterRecover(v), at any time, any number of times: v loses every grant
 * it holds; a recovered voter grants a block only to a claimant that
 * announces it confirmed (confirmed(c,b), a message sent on confirmation,
 * in this mode only), never on a pending claim.
 *
 * Property: no block is ever confirmed by two claimants. Confirmed is
 * terminal, so it is asserted in the step that confirms.
 *
 * Weakened variants (each must fail; check.sh checks that they do):
 *   -DDUP_IDENTITY              two voter nodes of one identity
 *   -DVOTER_GRANTS_TWICE        a voter grants a claim of a block it has
 *                               granted to another claimant
 *   -DCONFIRM_WITHOUT_MAJORITY  a claimant confirms with 1 grant
 *   -DRECLAIM_AFTER_RELEASE     a claimant may claim a block again after it
 *                               released it. Nothing tells the messages of
 *                               its two claims apart, so a stale grant of
 *                               the first claim may be counted for the
 *                               second, and a stale release of the first
 *                               may revoke a grant of the second.
 * With -DRECOVERY:
 *   -DRECOVERED_CLAIMS          a recovered claimant claims again the
 *                               blocks whose claim state it lost
 *   -DRECOVERED_VOTER_GRANTS_PENDING  a recovered voter grants pending
 *                               claims, though it may have granted the
 *                               block to another before it lost its grants
 */

#ifndef CLAIMANTS
#define CLAIMANTS 2
#endif
#if CLAIMANTS < 2 || CLAIMANTS > 3
#error CLAIMANTS must be 2 or 3
#endif
#if defined(SUPERSEDE) || defined(DUP_CLAIMANT)
#define INCARNATIONS
#if CLAIMANTS != 2 || defined(RECOVERY) || defined(BAG) || (defined(SUPERSEDE) && defined(DUP_CLAIMANT))
#error SUPERSEDE and DUP_CLAIMANT: 2 claimants, the set network, no RECOVERY, one of the two
#endif
#endif

#define NV  3            /* voters: identities 0..2 in the list */
#ifdef DUP_IDENTITY
#define NVN (NV+1)       /* voter nodes V0..V3: V3 has V0's identity */
#else
#define NVN NV           /* voter nodes V0..V2 */
#endif
/* The identity of voter node n, what its grants carry and the claimant
 * counts (the list's entry: an IPv4 address or bgp.routerID): not the
 * node's index (its address); one identity per node, except that
 * DUP_IDENTITY's V3 has V0's (1). */
#define ID(n) (((n) + 1) % NV)
#ifdef INCARNATIONS
#define NC  (CLAIMANTS+1)  /* claimants C0..C(NC-1): C2 is NEW */
#define NEW (NC-1)
#else
#define NC  CLAIMANTS    /* claimants C0..C(NC-1) */
#endif
#ifndef BLOCKS
#define BLOCKS 2
#endif
#if BLOCKS < 1 || BLOCKS > 2
#error BLOCKS must be 1 or 2
#endif
#define NB  BLOCKS       /* blocks B0, B1 */

#ifdef CONFIRM_WITHOUT_MAJORITY
#define MAJORITY 1
#else
#define MAJORITY (NV/2 + 1)   /* blockproto.Majority(3) = 2 */
#endif

/* ---- claimant state ---- */
#define NONE      0
#define PENDING   1
#define CONFIRMED 2
#define RELEASED  3
#define FORGOT    4      /* recovered: the claim state went with the store */

byte claim[NC*NB];       /* persisted: NONE, PENDING, CONFIRMED, RELEASED */
byte counted[NC*NB];     /* volatile: bit v set = voter v's grant counted */
#define CLAIM(c,b)    claim[(c)*NB + (b)]
#define COUNTED(c,b)  counted[(c)*NB + (b)]
#define NCOUNTED(c,b) ((COUNTED(c,b) & 1) + ((COUNTED(c,b) >> 1) & 1) + ((COUNTED(c,b) >> 2) & 1))

/* ---- voter state, persisted: NOBODY, or c+1 = granted to claimant c ---- */
byte grant[NVN*NB];
#define GRANT(v,b) grant[(v)*NB + (b)]
#define NOBODY     0

/* ---- messages: a number each, 1..NMSG (0 = no message) ---- */
#define M_CLAIM(c,b)    (1 + (c)*NB + (b))                        /* claim(c,b): c announces b pending */
#define M_RELEASE(c,b)  (1 + NC*NB + (c)*NB + (b))                /* release(c,b): c announces b released */
/* A grant message is named by the identity that makes it; with
 * ADDR_BOUND by the voter node (its address) instead, and the claimant
 * counts identity i only from SLOTNODE(i), the node at i's configured
 * address (the one of V0..V2 whose identity is i). */
#ifdef ADDR_BOUND
#define NGS             NVN
#define SENDER(v)       (v)
#define SLOTNODE(i)     (((i) + NV - 1) % NV)
#else
#define NGS             NV
#define SENDER(v)       ID(v)
#define SLOTNODE(i)     (i)
#endif
#define M_GRANT(v,b,c)  (1 + 2*NC*NB + ((v)*NB + (b))*NC + (c))   /* grant(v,b,c): v grants b to c */
#if defined(INCARNATIONS)
#define M_SUPERSEDE(c)  (1 + 2*NC*NB + NGS*NB*NC + (c))           /* supersede(c): an incarnation names c its predecessor */
#define NMSG            (2*NC*NB + NGS*NB*NC + NC)
bool acts[NC];           /* the incarnation's daemon runs */
bool holds[NC];          /* its pods hold its confirmed blocks */
#define ACTS(c)  acts[c]
#define HOLDS(c) holds[c]
#elif !defined(RECOVERY)
#define NMSG            (2*NC*NB + NGS*NB*NC)
#else
#define M_CONFIRMED(c,b) (1 + 2*NC*NB + NGS*NB*NC + (c)*NB + (b))  /* confirmed(c,b): c announces b confirmed */
#define NMSG            (3*NC*NB + NGS*NB*NC)
bool crecovered[NC];     /* claimant c's store was recovered */
bool vrecovered[NVN];    /* voter node v's store was recovered */
#endif

#ifndef INCARNATIONS
#define ACTS(c)  true
#define HOLDS(c) true
#endif

#ifndef BAG
/* ---- network: the set of every message ever sent ---- */
bool sent[NMSG+1];

#define net_has(m)    sent[m]
inline net_send(m)    { sent[m] = true }
inline net_done(m)    { skip }                /* it stays: it may be delivered again */

#else
/* ---- network: a bag of at most BAG messages ---- */
#if BAG < 1
#error BAG must be at least 1
#endif
/* Copies of one message are merged: a second copy would only take room,
 * and a send that finds no room is lost, which a send may be anyway. */
bool inbag[NMSG+1];
byte used;               /* messages in the bag */

#define net_has(m) inbag[m]

/* into the bag if there is room, or lost */
inline net_send(m) {
	if
	:: inbag[m]                            /* a copy is there already */
	:: !inbag[m] && used < BAG -> inbag[m] = true; used++
	:: !inbag[m] -> printf("net: message %d lost\n", m)   /* always so when full */
	fi
}

/* delivered: keep it (duplication) or take it out */
inline net_done(m) {
	if
	:: skip
	:: inbag[m] = false; used--
	fi
}

/* loss: any message may be dropped at any time */
active proctype Network() {
	byte m;
end:	do
	:: atomic { used > 0 ->
		select(m : 1 .. NMSG);
		if
		:: inbag[m] -> printf("net: message %d dropped\n", m); inbag[m] = false; used--
		:: else
		fi;
		m = 0 }
	od
}
#endif

/* ---- claimant c, block b ---- */

/* A grant of b to c from voter identity v has arrived, is not counted yet, and b is
 * pending (a grant for a claim that is not pending is ignored). */
#define GRANT_ARRIVES(v) (ACTS(c) && CLAIM(c,b) == PENDING && (COUNTED(c,b) & (1 << (v))) == 0 && net_has(M_GRANT(SLOTNODE(v),b,c)))

inline claim_block() {
	printf("C%d claims B%d\n", c, b);
	CLAIM(c,b) = PENDING;
	net_send(M_CLAIM(c,b))
}

inline release_block() {
	printf("C%d releases B%d\n", c, b);
	CLAIM(c,b) = RELEASED;
	COUNTED(c,b) = 0;
	net_send(M_RELEASE(c,b))
}

/* counted is a set of voter identities: a second grant from one adds
 * nothing */
inline count_grant(v) {
	printf("C%d counts identity %d's grant of B%d\n", c, v, b);
	COUNTED(c,b) = COUNTED(c,b) | (1 << (v));
	net_done(M_GRANT(SLOTNODE(v),b,c))
}

inline confirm_block() {
	printf("C%d confirms B%d\n", c, b);
	CLAIM(c,b) = CONFIRMED;
	COUNTED(c,b) = 0;
#ifdef RECOVERY
	net_send(M_CONFIRMED(c,b));
#endif
	/* the property: no other claimant has b confirmed (and, with
	 * incarnations, its pods holding it) */
	o = 0;
	do
	:: o < NC -> assert(o == c || CLAIM(o,b) != CONFIRMED || !HOLDS(o)); o++
	:: else -> break
	od;
	o = 0
}

proctype Claimant(byte c; byte b) {
	byte o;              /* scratch: another claimant; 0 between steps */
end:	do
	/* claim b, at any time, at most once: "a claimant claims a block at
	 * most once per incarnation" */
#ifndef RECLAIM_AFTER_RELEASE
	:: atomic { ACTS(c) && CLAIM(c,b) == NONE -> claim_block() }
#else
	/* weakened: claims again a block it released */
	:: atomic { (CLAIM(c,b) == NONE || CLAIM(c,b) == RELEASED) -> claim_block() }
#endif

	/* give a pending claim up, at any time: every give-up rule of doc.go
	 * is one of these; released is terminal */
	:: atomic { ACTS(c) && CLAIM(c,b) == PENDING -> release_block() }
#ifdef RECOVERY
#ifdef RECOVERED_CLAIMS
	/* weakened: it claims the block again, as if it never had */
	:: atomic { CLAIM(c,b) == FORGOT -> claim_block() }
#endif
#endif

	/* receive a grant */
	:: atomic { GRANT_ARRIVES(0) -> count_grant(0) }
	:: atomic { GRANT_ARRIVES(1) -> count_grant(1) }
	:: atomic { GRANT_ARRIVES(2) -> count_grant(2) }

	/* confirm once a strict majority of the voters granted b */
	:: atomic { ACTS(c) && CLAIM(c,b) == PENDING && NCOUNTED(c,b) >= MAJORITY -> confirm_block() }

#ifdef BAG
	/* re-announce its claim state (BGP is state-based) */
	:: atomic { CLAIM(c,b) == PENDING  -> printf("C%d re-announces B%d pending\n", c, b); net_send(M_CLAIM(c,b)) }
	:: atomic { CLAIM(c,b) == RELEASED -> printf("C%d re-announces B%d released\n", c, b); net_send(M_RELEASE(c,b)) }
#endif
	od
}

#if NB == 1
#define ANY_COUNTED(c) (COUNTED(c,0) != 0)
#else
#define ANY_COUNTED(c) ((COUNTED(c,0) | COUNTED(c,1)) != 0)
#endif

/* Claimant c crashes and restarts, at any time, any number of times: its
 * grant counts (volatile) are lost, its claim states (persisted) are not.
 * A crash with nothing counted changes nothing, so it is not a step. */
proctype Restart(byte c) {
	byte b;
end:	do
	:: atomic { ACTS(c) && ANY_COUNTED(c) ->
		printf("C%d crashes and restarts: its grant counts are lost\n", c);
		b = 0;
		do
		:: b < NB -> COUNTED(c,b) = 0; b++
		:: else -> break
		od;
		b = 0 }
	od
}

#ifdef RECOVERY
/* Claimant c's store is damaged and rebuilt: it keeps its confirmed
 * blocks, loses every other claim state and its grant counts, and claims
 * nothing from then on. */
proctype ClaimantRecover(byte c) {
	byte b;
	atomic { !crecovered[c] ->
		printf("C%d's store is recovered: it keeps its confirmed blocks only\n", c);
		crecovered[c] = true;
		b = 0;
		do
		:: b < NB ->
			if
			:: CLAIM(c,b) != CONFIRMED -> CLAIM(c,b) = FORGOT
			:: else
			fi;
			COUNTED(c,b) = 0;
			b++
		:: else -> break
		od;
		b = 0 }
}

#if NB == 1
#define ANY_GRANT(v) (GRANT(v,0) != NOBODY)
#else
#define ANY_GRANT(v) (GRANT(v,0) != NOBODY || GRANT(v,1) != NOBODY)
#endif

/* Voter v's store is damaged and rebuilt, at any time, any number of
 * times: it loses every grant it holds. */
proctype VoterRecover(byte v) {
	byte b;
end:	do
	:: atomic { (!vrecovered[v] || ANY_GRANT(v)) ->
		printf("V%d's store is recovered: its grants are lost\n", v);
		vrecovered[v] = true;
		b = 0;
		do
		:: b < NB -> GRANT(v,b) = NOBODY; b++
		:: else -> break
		od;
		b = 0 }
	od
}
#endif

#ifdef INCARNATIONS
#ifdef SUPERSEDE
/* C0's node is started again from an empty state dir, once, at any time:
 * C0's daemon is gone; the new one removes the pods its new store does not
 * know (C0's) before it announces anything, and runs as NEW. */
proctype Wipe() {
	atomic {
		printf("C0's state dir is wiped: it comes back as C%d\n", NEW);
		acts[0] = false;
#ifndef WIPE_KEEPS_PODS
		holds[0] = false;
#endif
		acts[NEW] = true; holds[NEW] = true }
}
#define NAMES(a, o) true                /* one node: its own earlier incarnation */
#elif defined(ADDR_BOUND)
#define NAMES(a, o) false               /* another node's IPv6 address: never named */
#else
#define NAMES(a, o) true                /* the identity alone: named */
#endif

/* An incarnation that runs names another of its identity it sees as its
 * predecessor (incarnations.go, learn), once, at any time after it has
 * seen it: NEW may see C0 (its record, or a Seen path of it, stays in the
 * table after C0 stops); C0 sees NEW only while both run. */
proctype Name() {
end:	do
	:: atomic { ACTS(NEW) && NAMES(NEW, 0) && !net_has(M_SUPERSEDE(0)) ->
		printf("C%d names C0 its predecessor\n", NEW); net_send(M_SUPERSEDE(0)) }
	:: atomic { ACTS(0) && ACTS(NEW) && NAMES(0, NEW) && !net_has(M_SUPERSEDE(NEW)) ->
		printf("C0 names C%d its predecessor\n", NEW); net_send(M_SUPERSEDE(NEW)) }
	od
}

/* supersede(c) arrives and v's grant for b is c's */
#define SUPERSEDE_ARRIVES(c) (GRANT(v,b) == (c) + 1 && net_has(M_SUPERSEDE(c)))

inline revoke_superseded(c) {
	printf("V%d revokes its grant of B%d to C%d (C%d superseded)\n", v, b, c, c);
	GRANT(v,b) = NOBODY
}
#endif

/* ---- voter v, block b ---- */

/* claim(c,b) arrives and v has no grant for b */
#if defined(RECOVERY) && !defined(RECOVERED_VOTER_GRANTS_PENDING)
#define CLAIM_ARRIVES(c)   (GRANT(v,b) == NOBODY && !vrecovered[v] && net_has(M_CLAIM(c,b)))
#else
#define CLAIM_ARRIVES(c)   (GRANT(v,b) == NOBODY && net_has(M_CLAIM(c,b)))
#endif
#ifdef RECOVERY
/* recovered: confirmed(c,b) arrives and v has no grant for b */
#define CONFIRMED_ARRIVES(c) (GRANT(v,b) == NOBODY && vrecovered[v] && net_has(M_CONFIRMED(c,b)))
#endif
/* release(c,b) arrives and v's grant for b is c's */
#define RELEASE_ARRIVES(c) (GRANT(v,b) == (c) + 1 && net_has(M_RELEASE(c,b)))
#ifdef VOTER_GRANTS_TWICE
/* weakened: claim(c,b) arrives and v has granted b to another claimant */
#define STEAL_ARRIVES(c)   (GRANT(v,b) != NOBODY && GRANT(v,b) != (c) + 1 && net_has(M_CLAIM(c,b)))
#endif

/* persist the grant, then announce it (one step) */
inline grant_to(c) {
	if
	:: GRANT(v,b) == NOBODY -> printf("V%d (identity %d) grants B%d to C%d\n", v, ID(v), b, c)
	:: else -> printf("V%d (identity %d) grants B%d to C%d, though it granted it to C%d\n", v, ID(v), b, c, GRANT(v,b) - 1)
	fi;
	GRANT(v,b) = (c) + 1;
	net_send(M_GRANT(SENDER(v),b,c));
	net_done(M_CLAIM(c,b))
}

#ifdef RECOVERY
/* a recovered voter grants a confirmed owner */
inline grant_confirmed(c) {
	printf("V%d (recovered) grants B%d to its confirmed owner C%d\n", v, b, c);
	GRANT(v,b) = (c) + 1;
	net_send(M_GRANT(SENDER(v),b,c));
	net_done(M_CONFIRMED(c,b))
}
#endif

inline revoke(c) {
	printf("V%d revokes its grant of B%d to C%d (release received)\n", v, b, c);
	GRANT(v,b) = NOBODY;
	net_done(M_RELEASE(c,b))
}

proctype Voter(byte v; byte b) {
end:	do
	:: atomic { CLAIM_ARRIVES(0)   -> grant_to(0) }
	:: atomic { RELEASE_ARRIVES(0) -> revoke(0) }
	:: atomic { CLAIM_ARRIVES(1)   -> grant_to(1) }
	:: atomic { RELEASE_ARRIVES(1) -> revoke(1) }
#if NC > 2
	:: atomic { CLAIM_ARRIVES(2)   -> grant_to(2) }
	:: atomic { RELEASE_ARRIVES(2) -> revoke(2) }
#endif
#ifdef INCARNATIONS
	:: atomic { SUPERSEDE_ARRIVES(0) -> revoke_superseded(0) }
	:: atomic { SUPERSEDE_ARRIVES(1) -> revoke_superseded(1) }
	:: atomic { SUPERSEDE_ARRIVES(2) -> revoke_superseded(2) }
#endif
#ifdef RECOVERY
	:: atomic { CONFIRMED_ARRIVES(0) -> grant_confirmed(0) }
	:: atomic { CONFIRMED_ARRIVES(1) -> grant_confirmed(1) }
#if NC > 2
	:: atomic { CONFIRMED_ARRIVES(2) -> grant_confirmed(2) }
#endif
#endif
#ifdef VOTER_GRANTS_TWICE
	:: atomic { STEAL_ARRIVES(0) -> grant_to(0) }
	:: atomic { STEAL_ARRIVES(1) -> grant_to(1) }
#if NC > 2
	:: atomic { STEAL_ARRIVES(2) -> grant_to(2) }
#endif
#endif
#ifdef BAG
	/* re-send the grant it holds: on a duplicate claim(c,b), after a
	 * restart (a voter's crash loses nothing), or as any BGP
	 * re-announcement */
	:: atomic { GRANT(v,b) != NOBODY ->
		printf("V%d re-announces its grant of B%d to C%d\n", v, b, GRANT(v,b) - 1);
		net_send(M_GRANT(SENDER(v),b,GRANT(v,b) - 1)) }
#endif
	od
}

init {
	byte i, j;
	atomic {
		for (i : 0 .. NVN-1) {
			for (j : 0 .. NB-1) { run Voter(i, j) }
		}
		for (i : 0 .. NC-1) {
			for (j : 0 .. NB-1) { run Claimant(i, j) }
			run Restart(i)
		}
#ifdef RECOVERY
		for (i : 0 .. NC-1) { run ClaimantRecover(i) }
		for (i : 0 .. NVN-1) { run VoterRecover(i) }
#endif
#ifdef INCARNATIONS
		for (i : 0 .. NEW-1) { acts[i] = true; holds[i] = true }
#ifdef SUPERSEDE
		run Wipe();
#else
		acts[NEW] = true; holds[NEW] = true;   /* the second node runs from the start */
#endif
		run Name();
#endif
		i = 0; j = 0
	}
}
