/* SPDX-License-Identifier: Apache-2.0 */
/* Seeded randomized test of the room engine: thousands of rooms, random
 * interleavings of every event (drops, duplicates and stale ones included),
 * the clock advancing. Checks, all along: no live room is past the deadline
 * of its state, the gauges equal a recount; at the end every room is
 * terminal and quiescent, and every slot comes back. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fake_transport.h"

enum { ROOMS = 6000, CONNS = 8 };

struct troom {
	kvf_room h;
	uint64_t id;
	int role;
	int live;
	uint32_t conn;
	int sigs;     /* signaled completions the fake "posted" */
};

static struct troom rooms[ROOMS];
static int nrooms;
static int live_idx[ROOMS]; /* indices of live rooms, for picking */
static int nlive;
static int successes;
static struct fake f;
static kvf_engine *eng;
static struct kvf_config cfg;
static unsigned seed;

static int rnd(int n)
{
	return (int)(rand_r(&seed) % (unsigned)n);
}

/* The deadline length of the room's current state, 0 = none. */
static uint64_t state_len(const struct kvf_slot *r)
{
	switch (r->state) {
	case KVF_BOOTSTRAPPING: return cfg.bootstrap_s * SEC;
	case KVF_WAITING_FOR_INPUT:
		return (r->role == KVF_SENDER ? cfg.waiting_for_input_s : cfg.receiver_waiting_s) * SEC;
	case KVF_TRANSFERRING: return cfg.inflight_s * SEC;
	default: return 0;
	}
}

static void check_invariants(void)
{
	uint64_t count[KVF_POLL_NUM] = { 0 }, inflight = 0, unq = 0, live = 0;
	struct kvf_stats st = KVF_STATS_INIT;

	kvf_stats(eng, &st);
	for (int i = 0; i < nrooms; i++) {
		struct troom *t = &rooms[i];
		int s;

		if (!t->live)
			continue;
		live++;
		s = kvf_poll(eng, t->h);
		cr_assert_geq(s, 0, "room %d handle went stale while live", i);
		count[s]++;
		inflight += s == KVF_TRANSFERRING;
		unq += (s == KVF_FAILED || s == KVF_SUCCESS) && kvf_quiescent(eng, t->h) == 0;

		const struct kvf_slot *r = &eng->slots[(uint32_t)t->h.v];
		uint64_t len = state_len(r);

		cr_assert(s == KVF_FAILED || s == KVF_SUCCESS || (len && fake_clock < r->state_ns + len),
			  "room %d (%s) in %s past its deadline", i,
			  t->role == KVF_SENDER ? "sender" : "receiver", kvf_poll_str(s));
	}
	for (int s = 0; s < KVF_POLL_NUM; s++)
		cr_assert_eq(st.rooms[s], count[s], "gauge %s %lu, recount %lu", kvf_poll_str(s),
			     (unsigned long)st.rooms[s], (unsigned long)count[s]);
	cr_assert_eq(st.inflight, inflight);
	cr_assert_eq(st.unquiescent, unq);
	cr_assert_eq(st.created - st.released, live);
	cr_assert_eq(st.tombstones_created, st.tombstones_applied + st.tombstones_expired +
						    st.tombstones_evicted + st.tombstones_live);
	cr_assert_eq(st.early_infos_parked, st.early_infos_applied + st.early_infos_expired +
						    st.early_infos_evicted + st.early_infos_replaced +
						    st.early_infos_live);
}

static void create_room(void)
{
	struct troom *t = &rooms[nrooms];
	int rc;

	t->id = (uint64_t)nrooms * 2654435761u + 1;
	t->role = rnd(2);
	t->conn = 1 + (uint32_t)rnd(CONNS);
	rc = t->role == KVF_SENDER ? kvf_sender_create(eng, t->id, &t->h)
				   : kvf_receiver_create(eng, t->id, "10.1.1.1:18515", &t->h);
	if (rc == -ENOSPC)
		return;
	cr_assert_eq(rc, 0);
	t->live = 1;
	live_idx[nlive++] = nrooms;
	nrooms++;
}

static void sender_step(struct troom *t)
{
	uint32_t src[5] = { 0, 1, 2, 3, 4 };

	switch (rnd(8)) {
	case 0: /* ROOM_INFO, maybe a duplicate */
		push_info(eng, t->id, t->conn, 0x100000003ull, 4);
		break;
	case 1: /* the engine sends, sometimes with the wrong size */
		f.signaled = 1 + rnd(3);
		if (kvf_sender_send(eng, t->h, src, rnd(10) ? 4 : 5) == 0)
			t->sigs = f.signaled;
		break;
	case 2: case 3: case 4: /* completions, an error now and then */
		if (t->sigs > 0 || rnd(4) == 0) {
			push_wc(eng, t->h, rnd(20) ? 0 : 12);
			t->sigs -= t->sigs > 0;
		}
		break;
	case 5:
		if (rnd(4) == 0)
			push_abort(eng, t->id, KVF_SENDER, t->conn);
		break;
	case 6:
		if (rnd(4) == 0)
			kvf_abort(eng, t->h);
		break;
	default:
		break; /* the event that never comes */
	}
}

static void receiver_step(struct troom *t)
{
	uint32_t dst[4] = { 4, 5, 6, 7 };

	switch (rnd(7)) {
	case 0:
		f.conn = t->conn;
		kvf_receiver_init(eng, t->h, dst, 4);
		break;
	case 1: case 2: /* now and then from a connection that is not the room's */
		push_data_done_on(eng, t->h, rnd(10) ? t->conn : 1 + (uint32_t)rnd(CONNS));
		break;
	case 3:
		push(eng, (struct kvf_event){ .kind = KVF_EV_ABORT_ACK, .key = t->id, .peer = t->conn });
		break;
	case 4:
		if (rnd(4) == 0)
			push_abort(eng, t->id, KVF_RECEIVER, t->conn);
		break;
	case 5:
		if (rnd(4) == 0)
			kvf_abort(eng, t->h);
		break;
	default:
		break;
	}
}

/* The transport's side of teardown: PEER_LOST once the connection is cut. */
static void deliver_teardowns(void)
{
	for (uint32_t c = 1; c <= CONNS; c++)
		if (f.torn & (1u << c))
			push_lost(eng, c);
	f.torn = 0;
}

static void maybe_release(int k)
{
	struct troom *t = &rooms[live_idx[k]];
	kvf_room old = t->h;

	int s = kvf_poll(eng, t->h);

	if (kvf_release(eng, t->h) == 0) {
		successes += s == KVF_SUCCESS;
		t->live = 0;
		live_idx[k] = live_idx[--nlive];
		if (rnd(3) == 0) /* a late completion naming the old generation */
			push_wc(eng, old, 0);
	}
}

static void step(void)
{
	int a = rnd(100);

	if (a < 8 && nrooms < ROOMS) {
		create_room();
	} else if (a < 90 && nlive) {
		int k = rnd(nlive);
		struct troom *t = &rooms[live_idx[k]];

		if (rnd(6) == 0)
			maybe_release(k);
		else if (t->role == KVF_SENDER)
			sender_step(t);
		else
			receiver_step(t);
	} else if (a < 91) {
		if (rnd(5) == 0)
			push_lost(eng, 1 + (uint32_t)rnd(CONNS));
	} else if (a < 93) {
		/* ABORT or ROOM_INFO for a room that does not exist yet */
		uint64_t id = (uint64_t)(nrooms + rnd(20)) * 2654435761u + 1;

		if (rnd(2))
			push_abort(eng, id, rnd(2), 1 + (uint32_t)rnd(CONNS));
		else
			push_info(eng, id, 1 + (uint32_t)rnd(CONNS), 0x100000003ull, 4);
	} else {
		fake_clock += (uint64_t)rnd(100) * SEC / 1000;
	}
	deliver_teardowns();
	kvf_progress(eng);
}

Test(room_random, thousands_of_rooms_every_interleaving, .timeout = 300)
{
	fake_cfg(&cfg);
	cfg.max_rooms = 1024;
	cfg.bootstrap_s = 20;
	cfg.waiting_for_input_s = 15;
	cfg.inflight_s = 10;
	cfg.receiver_waiting_s = 30;
	cfg.quiesce_s = 5;
	cfg.tombstone_ttl_s = 10;
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	seed = 20261129;
	for (int i = 0; i < 400000 && nrooms < ROOMS; i++) {
		step();
		if (i % 97 == 0)
			check_invariants();
	}
	cr_assert_eq(nrooms, ROOMS, "the run should create every room (got %d)", nrooms);

	/* Let every deadline pass: each room must end terminal and quiescent. */
	for (int i = 0; i < 200; i++) {
		fake_clock += SEC;
		deliver_teardowns();
		kvf_progress(eng);
		check_invariants();
	}
	for (int i = 0; i < nrooms; i++) {
		if (!rooms[i].live)
			continue;
		int s = kvf_poll(eng, rooms[i].h);

		cr_assert(s == KVF_FAILED || s == KVF_SUCCESS, "room %d still %s", i, kvf_poll_str(s));
		cr_assert_eq(kvf_quiescent(eng, rooms[i].h), 1, "room %d not quiescent", i);
		successes += s == KVF_SUCCESS;
		cr_assert_eq(kvf_release(eng, rooms[i].h), 0);
		rooms[i].live = 0;
	}
	struct kvf_stats st = KVF_STATS_INIT;

	kvf_stats(eng, &st);
	cr_log_info("created %lu, released %lu, successes %d, failures: deadline %lu abort %lu peer-abort %lu wc %lu lost %lu bad-req %lu; ignored stale %lu unknown %lu finished %lu dup %lu; tombstones %lu/%lu",
		    (unsigned long)st.created, (unsigned long)st.released, successes, (unsigned long)st.failures[KVF_FAIL_DEADLINE],
		    (unsigned long)st.failures[KVF_FAIL_LOCAL_ABORT], (unsigned long)st.failures[KVF_FAIL_PEER_ABORT],
		    (unsigned long)st.failures[KVF_FAIL_WC_ERROR], (unsigned long)st.failures[KVF_FAIL_PEER_LOST],
		    (unsigned long)st.failures[KVF_FAIL_BAD_REQUEST], (unsigned long)st.ignored[0], (unsigned long)st.ignored[1],
		    (unsigned long)st.ignored[2], (unsigned long)st.ignored[3], (unsigned long)st.tombstones_created, (unsigned long)st.tombstones_applied);
	cr_assert_eq(st.created, st.released);
	cr_assert_eq(eng->nfree, eng->nslots, "no slot leaked");
	for (int s = 0; s < KVF_POLL_NUM; s++)
		cr_assert_eq(st.rooms[s], 0);
	cr_assert_eq(st.inflight, 0);
	cr_assert_eq(st.unquiescent, 0);
	cr_assert_gt(st.ignored[KVF_IGN_STALE_GENERATION], 0, "stale events were exercised");
	cr_assert_gt(st.failures[KVF_FAIL_DEADLINE], 0);
	cr_assert_gt(successes, ROOMS / 10, "enough rooms reach SUCCESS to mean something");
	cr_assert_gt(st.tombstones_applied, 0);
	cr_assert_gt(st.early_infos_applied, 0);
	/* Every state change went through the table (debug builds also assert
	 * each one), and the storm took every transition in it. */
	for (unsigned role = 0; role < 2; role++)
		for (unsigned from = 0; from < KVF_ROOM_NSTATES; from++)
			for (unsigned to = 0; to < KVF_ROOM_NSTATES; to++)
				cr_assert_eq(eng->transitions[role][from][to] > 0,
					     kvf_room_transition_allowed(role, from, to),
					     "role %u %u -> %u", role, from, to);
	kvf_engine_close(eng);
}
