/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/sched.c without a device: the scheduler's own view of the
 * connections. Handed-off connections are found by id, dead ones retired
 * (out of every structure, sched_done set, the scheduler's reference put),
 * the peer map finds only live leads. The two-thread stress of the
 * lock-free stacks is sched_stress.c (run under TSan by CI). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "rdma/conn.h"
#include "rdma/sched.h"

static struct kvf_rdma *t;

static void setup(void)
{
	t = calloc(1, sizeof(*t));
	cr_assert_not_null(t);
}

static void teardown(void)
{
	kvf_sched_close(t);
	free(t);
}

TestSuite(sched, .init = setup, .fini = teardown);

/* A connection as kvf_conn_new leaves it, without buffers or a device:
 * refs for the scheduler and for the test. */
static struct kvf_conn *conn(uint32_t id, const char *peer)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	cr_assert_not_null(c);
	c->id = c->group = id;
	c->t = t;
	c->active = true;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	atomic_init(&c->refs, 2);
	atomic_init(&c->state, KVF_CONN_CONNECTING);
	return c;
}

static void go_dead(struct kvf_conn *c)
{
	atomic_store(&c->state, KVF_CONN_DEAD);
	kvf_sched_dead(t, c);
}

Test(sched, handed_off_connections_are_found_and_dead_ones_retired)
{
	/* 7 and 7 + 1024 shared a bucket in the old fixed table (id % 1024) */
	struct kvf_conn *a = conn(7, "10.0.0.1:1"), *b = conn(7 + 1024, "10.0.0.2:1");

	kvf_sched_handoff(t, a);
	kvf_sched_handoff(t, b);
	cr_assert_eq(kvf_sched_get(t, 7), a, "a miss adopts what was handed off");
	cr_assert_eq(kvf_sched_get(t, 7 + 1024), b);
	cr_assert_null(kvf_sched_get(t, 8));
	cr_assert_null(kvf_sched_get(t, 0));
	cr_assert(a->s_pending && b->s_pending, "HELLO is owed: on the pending list");
	kvf_sched_add_peer(t, a);
	cr_assert_eq(kvf_sched_find_peer(t, "10.0.0.1:1"), a);
	cr_assert_null(kvf_sched_find_peer(t, "10.0.0.2:1"), "not a group lead of ours");

	atomic_store(&a->teardown_req, 1);
	cr_assert_null(kvf_sched_find_peer(t, "10.0.0.1:1"), "teardown asked: not reused");
	go_dead(a);
	cr_assert_eq(kvf_sched_get(t, 7), a, "retired only at collect");
	cr_assert_not(atomic_load(&a->sched_done));
	kvf_sched_collect(t);
	cr_assert(atomic_load(&a->sched_done), "the poller may destroy its QP now");
	cr_assert_null(kvf_sched_get(t, 7));
	cr_assert_eq(kvf_sched_get(t, 7 + 1024), b, "its bucket neighbour stays");
	cr_assert_eq(t->s.n, 1);
	cr_assert_eq(t->s.pending, b, "a left the pending list");
	cr_assert_eq(atomic_load(&a->refs), 1, "the scheduler's reference is put");
	kvf_conn_put(a);
	kvf_conn_put(b); /* the scheduler's goes at close */
}

Test(sched, a_connection_made_and_lost_between_two_collects_is_adopted_then_retired)
{
	struct kvf_conn *c = conn(9, "x:1");

	kvf_sched_handoff(t, c);
	go_dead(c);
	kvf_sched_collect(t);
	cr_assert(atomic_load(&c->sched_done));
	cr_assert_null(kvf_sched_get(t, 9));
	cr_assert_eq(t->s.n, 0);
	cr_assert_eq(atomic_load(&c->refs), 1);
	kvf_conn_put(c);
}

/* A member of a group goes DEAD, and is retired, a moment before the lead
 * of the same teardown: the group is no longer offered for new rooms, and
 * the retired member never goes back on the pending list (it would be
 * freed while still on it). */
Test(sched, a_group_with_a_dead_member_is_not_offered_and_retired_ones_stay_off_pending)
{
	struct kvf_conn *lead = conn(20, "10.0.0.3:1"), *m = conn(21, "10.0.0.3:1");

	lead->members = calloc(1, sizeof(*lead->members) + 2 * sizeof(lead->members->qp[0]));
	cr_assert_not_null(lead->members);
	lead->members->n = lead->members->want = 2;
	lead->members->qp[0] = lead;
	lead->members->qp[1] = m;
	kvf_conn_ref(m); /* the group's */
	kvf_sched_handoff(t, lead);
	kvf_sched_handoff(t, m);
	kvf_sched_collect(t);
	kvf_sched_add_peer(t, lead);
	cr_assert_eq(kvf_sched_find_peer(t, "10.0.0.3:1"), lead);
	go_dead(m);
	cr_assert_null(kvf_sched_find_peer(t, "10.0.0.3:1"), "a member is down: not offered");
	kvf_sched_collect(t);
	cr_assert(atomic_load(&m->sched_done));
	cr_assert_not(m->s_pending);
	kvf_sched_pending(t, m, true);
	cr_assert_not(m->s_pending, "retired: not back on the pending list");
	cr_assert_neq(t->s.pending, m);
	go_dead(lead);
	kvf_sched_collect(t);
	kvf_conn_put(m);    /* the test's */
	kvf_conn_put(lead); /* the test's: frees the group, its reference on m */
}
