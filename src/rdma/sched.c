/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler's view of the connections (sched.h). */
#include "rdma/sched.h"

#include <inttypes.h>
#include <string.h>

#include "base/clock.h"
#include "rdma/conn.h"
#include "rdma/geom_map.h"
#include "base/hash.h"
#include "base/log.h"

/* ----------------------------------------------- the two stacks (poller) */

/* After a push: a scheduler asleep in kvf_engine_wait takes the stacks at
 * its next progress (op_wait_ns reads them after it arms its sleep; the
 * fence in kvf_ring_wake pairs with that arming). No ring: unit tests. */
static void wake_scheduler(struct kvf_rdma *t)
{
	if (t->ring)
		kvf_ring_wake(t->ring);
}

void kvf_sched_handoff(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_conn *top = atomic_load_explicit(&t->handoff, memory_order_relaxed);

	/* Release pairs with the acquire exchange in take(): c whole. */
	do
		c->handoff_next = top;
	while (!atomic_compare_exchange_weak_explicit(&t->handoff, &top, c, memory_order_release,
						      memory_order_relaxed));
	wake_scheduler(t);
}

void kvf_sched_dead(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_conn *top = atomic_load_explicit(&t->dead, memory_order_relaxed);

	/* Release pairs with the acquire exchange in take(): DEAD and the
	 * handoff push before it are seen. */
	do
		c->dead_next = top;
	while (!atomic_compare_exchange_weak_explicit(&t->dead, &top, c, memory_order_release,
						      memory_order_relaxed));
	wake_scheduler(t);
}

static struct kvf_conn *take(_Atomic(struct kvf_conn *) *stack)
{
	/* Acquire pairs with the release CAS of kvf_sched_handoff/_dead. */
	if (!atomic_load_explicit(stack, memory_order_relaxed))
		return NULL;
	return atomic_exchange_explicit(stack, NULL, memory_order_acquire);
}

/* ------------------------------------------------------- the structures */

static uint32_t peer_bucket(const char *peer)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then mixed */

	for (; *peer; peer++)
		h = (h ^ (uint8_t)*peer) * 0x100000001b3ull;
	return (uint32_t)kvf_mix64(h) & (KVF_SCHED_PEER_BUCKETS - 1);
}

static void adopt(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_sched_conns *s = &t->s;

	c->s_node.id = c->id;
	kvf_idtab_insert(&s->by_id, &c->s_node); /* grows: nobody else reads it */
	c->s_prev = NULL;
	c->s_next = s->all;
	if (s->all)
		s->all->s_prev = c;
	s->all = c;
	s->n++;
	kvf_sched_pending(t, c, true); /* HELLO is owed */
}

static void unlink_peer(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_conn **p = &t->s.by_peer[peer_bucket(c->peer)];

	for (; *p; p = &(*p)->s_peer_next) {
		if (*p == c) {
			*p = c->s_peer_next;
			return;
		}
	}
}

/* A peer that found our regions unfit for its own tears the connection
 * down at once, often before our scheduler compared them: compare them at
 * the end, so this side names the region, buffer and field too. */
static void check_regions_at_end(struct kvf_conn *c)
{
	/* Acquire pairs with the store-release of peer_pool in on_hello. */
	const struct kvf_peer_pool *pp = atomic_load_explicit(&c->peer_pool, memory_order_acquire);
	char why[200];

	if (c->shapes_checked || !pp)
		return;
	c->shapes_checked = true;
	if (!kvf_geom_map_check_conn(c, pp, why, sizeof(why)))
		kvf_err("rdma", "connection %u (%s) went down before its regions were compared; "
			"they differ: %s", c->id, c->peer, why);
}

/* A peer connection of ours that went down: its peer's connect backoff
 * (backoff.h) starts or goes on when it never got established, and ends
 * when it did. Its down_why and was_established were written before the
 * DEAD push, which take() acquired. */
static void count_connect(struct kvf_rdma *t, const struct kvf_conn *c)
{
	const struct kvf_backoff_peer *b;

	if (!c->active || c->group != c->id)
		return;
	if (c->was_established) {
		kvf_backoff_ok(&t->backoff, c->peer);
		return;
	}
	kvf_backoff_failed(&t->backoff, c->peer, kvf_monotonic_ns(), c->down_why);
	b = kvf_backoff_check(&t->backoff, c->peer, kvf_monotonic_ns());
	if (b)
		kvf_warn("rdma", "connecting to %s failed %u time%s in a row (%s): no new attempt "
			 "for %" PRIu64 " ms (rdma.reconnect_backoff_ms)", c->peer, b->fails,
			 b->fails == 1 ? "" : "s", b->why, (b->retry_ns - b->failed_ns) / 1000000);
}

static void retire(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_sched_conns *s = &t->s;

	check_regions_at_end(c);
	count_connect(t, c);

	kvf_idtab_remove(&s->by_id, &c->s_node);
	if (c->s_prev)
		c->s_prev->s_next = c->s_next;
	else
		s->all = c->s_next;
	if (c->s_next)
		c->s_next->s_prev = c->s_prev;
	s->n--;
	kvf_sched_pending(t, c, false);
	if (c->s_in_peer)
		unlink_peer(t, c);
	/* Release pairs with the poller's load-acquire of sched_done in
	 * drained() (poller.c): nothing of ours touches c after this. */
	atomic_store_explicit(&c->sched_done, true, memory_order_release);
	kvf_conn_put(c);
}

static void adopt_handed_off(struct kvf_rdma *t)
{
	for (struct kvf_conn *c = take(&t->handoff), *next; c; c = next) {
		next = c->handoff_next;
		adopt(t, c);
	}
}

void kvf_sched_collect(struct kvf_rdma *t)
{
	struct kvf_conn *dead = take(&t->dead), *next;

	/* After taking dead: every one of them is handed off by now. */
	adopt_handed_off(t);
	for (; dead; dead = next) {
		next = dead->dead_next;
		retire(t, dead);
	}
}

static struct kvf_conn *lookup(struct kvf_rdma *t, uint32_t id)
{
	struct kvf_idtab_node *n = kvf_idtab_find(&t->s.by_id, id);

	return n ? kvf_idtab_entry(n, struct kvf_conn, s_node) : NULL;
}

struct kvf_conn *kvf_sched_get(struct kvf_rdma *t, uint32_t id)
{
	struct kvf_conn *c;

	if (!id)
		return NULL;
	c = lookup(t, id);
	if (c || !atomic_load_explicit(&t->handoff, memory_order_relaxed))
		return c;
	/* A connection the poller made since: its events can name it before
	 * the next progress. */
	adopt_handed_off(t);
	return lookup(t, id);
}

/* Every QP of the group up: a member goes DEAD (and may be retired here)
 * a moment before the poller reaches the lead of the same teardown, and a
 * room picked onto that member would queue on a connection nobody holds. */
static bool group_alive(struct kvf_conn *lead)
{
	for (uint32_t i = 0; i < kvf_qp_group_size(lead); i++)
		if (atomic_load(&kvf_qp_group_at(lead, i)->state) >= KVF_CONN_DEAD)
			return false;
	return !atomic_load(&lead->teardown_req);
}

struct kvf_conn *kvf_sched_find_peer(struct kvf_rdma *t, const char *peer)
{
	for (struct kvf_conn *c = t->s.by_peer[peer_bucket(peer)]; c; c = c->s_peer_next)
		if (group_alive(c) && !strcmp(c->peer, peer))
			return c;
	return NULL;
}

void kvf_sched_add_peer(struct kvf_rdma *t, struct kvf_conn *lead)
{
	struct kvf_conn **b = &t->s.by_peer[peer_bucket(lead->peer)];

	lead->s_peer_next = *b;
	*b = lead;
	lead->s_in_peer = true;
}

void kvf_sched_pending(struct kvf_rdma *t, struct kvf_conn *c, bool waiting)
{
	struct kvf_sched_conns *s = &t->s;

	/* A retired connection (sched_done: ours, so relaxed) never goes back
	 * on the list: nothing would take it off before it is freed. A frame
	 * queued on it goes with it; its group's PEER_LOST fails the room. */
	if (waiting && atomic_load_explicit(&c->sched_done, memory_order_relaxed))
		return;
	if (waiting == c->s_pending)
		return;
	c->s_pending = waiting;
	if (waiting) {
		c->s_pprev = NULL;
		c->s_pnext = s->pending;
		if (s->pending)
			s->pending->s_pprev = c;
		s->pending = c;
		return;
	}
	if (c->s_pprev)
		c->s_pprev->s_pnext = c->s_pnext;
	else
		s->pending = c->s_pnext;
	if (c->s_pnext)
		c->s_pnext->s_pprev = c->s_pprev;
	c->s_pprev = c->s_pnext = NULL;
}

void kvf_sched_close(struct kvf_rdma *t)
{
	uint32_t max_b = t->s.by_id.max_buckets;
	struct kvf_conn *next;

	adopt_handed_off(t);
	take(&t->dead); /* no references of their own: every one is adopted */
	for (struct kvf_conn *c = t->s.all; c; c = next) {
		next = c->s_next;
		kvf_conn_put(c);
	}
	kvf_idtab_fini(&t->s.by_id);
	memset(&t->s, 0, sizeof(t->s));
	t->s.by_id.max_buckets = max_b;
}
