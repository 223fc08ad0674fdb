/* SPDX-License-Identifier: Apache-2.0 */
/* The connection state machine's one door (src/rdma/conn.c) without a
 * device: the table of allowed transitions pair by pair, a connection walked
 * through the door from NEW to DESTROYED, and a refused move (DEAD back to
 * CONNECTING, the move of 48bfd10) that asserts, or where asserts are off
 * leaves the state as it was. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "rdma/conn.h"

enum { NEW = KVF_CONN_NEW, RES = KVF_CONN_RESOLVING, CONN = KVF_CONN_CONNECTING,
       AUTH = KVF_CONN_AUTH, EST = KVF_CONN_ESTABLISHED, DEAD = KVF_CONN_DEAD,
       GONE = KVF_CONN_DESTROYED, N = KVF_CONN_NUM_STATES };

/* conn.h's lifecycle, written out: (from, to). */
static const int expected[][2] = {
	{ NEW, RES },   { NEW, CONN },  { NEW, DEAD }, { RES, CONN },  { RES, DEAD },
	{ CONN, AUTH }, { CONN, DEAD }, { AUTH, EST }, { AUTH, DEAD }, { EST, DEAD },
	{ DEAD, GONE },
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

static bool is_expected(int from, int to)
{
	for (size_t i = 0; i < NEXPECTED; i++)
		if (expected[i][0] == from && expected[i][1] == to)
			return true;
	return false;
}

Test(conn_machine, table_is_the_lifecycle)
{
	for (int from = 0; from < N; from++)
		for (int to = 0; to < N; to++)
			cr_expect_eq(kvf_conn_transition_allowed(from, to), is_expected(from, to),
				     "%s -> %s", kvf_conn_state_str(from), kvf_conn_state_str(to));
}

Test(conn_machine, refused_pairs)
{
	/* A setup event after the teardown (48bfd10), a step back, the same
	 * state twice, out of DESTROYED, a skipped handshake. */
	cr_expect_not(kvf_conn_transition_allowed(DEAD, CONN));
	cr_expect_not(kvf_conn_transition_allowed(DEAD, AUTH));
	cr_expect_not(kvf_conn_transition_allowed(DEAD, EST));
	cr_expect_not(kvf_conn_transition_allowed(DEAD, DEAD));
	cr_expect_not(kvf_conn_transition_allowed(EST, AUTH));
	cr_expect_not(kvf_conn_transition_allowed(AUTH, AUTH));
	cr_expect_not(kvf_conn_transition_allowed(GONE, DEAD));
	cr_expect_not(kvf_conn_transition_allowed(GONE, NEW));
	cr_expect_not(kvf_conn_transition_allowed(CONN, EST));
	cr_expect_not(kvf_conn_transition_allowed(NEW, GONE));
	cr_expect_not(kvf_conn_transition_allowed(-1, NEW));
	cr_expect_not(kvf_conn_transition_allowed(NEW, N));
}

Test(conn_machine, no_way_out_of_dead_but_destroyed)
{
	for (int to = 0; to < N; to++)
		cr_expect_eq(kvf_conn_transition_allowed(DEAD, to), to == GONE);
	for (int to = 0; to < N; to++)
		cr_expect_not(kvf_conn_transition_allowed(GONE, to));
	for (int from = 0; from < DEAD; from++)
		cr_expect(kvf_conn_transition_allowed(from, DEAD), "%s -> DEAD",
			  kvf_conn_state_str(from));
}

/* A connection whose poller is this thread: the door's owner check holds. */
static struct kvf_rdma *t;
static struct kvf_conn *c;

static void setup(void)
{
	t = calloc(1, sizeof(*t));
	c = calloc(1, sizeof(*c));
	cr_assert(t && c);
	t->poller = pthread_self();
	c->t = t;
	c->id = 7;
	snprintf(c->peer, sizeof(c->peer), "10.0.0.9:1");
	atomic_init(&c->state, KVF_CONN_NEW);
}

static void teardown(void)
{
	free(c);
	free(t);
}

Test(conn_machine, door_walks_the_active_side, .init = setup, .fini = teardown)
{
	static const enum kvf_conn_state walk[] = {
		KVF_CONN_RESOLVING, KVF_CONN_CONNECTING, KVF_CONN_AUTH,
		KVF_CONN_ESTABLISHED, KVF_CONN_DEAD, KVF_CONN_DESTROYED,
	};

	for (size_t i = 0; i < sizeof(walk) / sizeof(walk[0]); i++) {
		cr_assert(kvf_conn_set_state(c, walk[i], "test"));
		cr_assert_eq(atomic_load(&c->state), (int)walk[i]);
	}
}

#ifdef NDEBUG
Test(conn_machine, door_refuses_and_keeps_the_state, .init = setup, .fini = teardown)
{
	atomic_store(&c->state, KVF_CONN_DEAD);
	cr_assert_not(kvf_conn_set_state(c, KVF_CONN_CONNECTING, "a late route"));
	cr_assert_eq(atomic_load(&c->state), KVF_CONN_DEAD);
}
#else
Test(conn_machine, door_refuses_and_asserts, .init = setup, .fini = teardown,
     .signal = SIGABRT)
{
	atomic_store(&c->state, KVF_CONN_DEAD);
	kvf_conn_set_state(c, KVF_CONN_CONNECTING, "a late route");
}

/* Another thread than the poller: the owner check. */
static void *off_thread(void *arg)
{
	(void)arg;
	kvf_conn_set_state(c, KVF_CONN_RESOLVING, "off the poller");
	return NULL;
}

Test(conn_machine, door_asserts_its_thread, .init = setup, .fini = teardown, .signal = SIGABRT)
{
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, off_thread, NULL), 0);
	pthread_join(th, NULL);
}
#endif
