/* SPDX-License-Identifier: Apache-2.0 */
/* The connection table (conn.h, "the table"): every connection of this
 * transport not yet freed, by id, in a growing chained hash (idtab.h),
 * bounded by rdma.max_conns; with the list of all of them (the stats
 * op's count, close) and the list of the active ones the poller has not
 * started yet (start_new_conns), so that nothing walks max_conns slots.
 *
 * Why a plain rehash and no epochs: every access is under t->lock (the
 * poller's lookups, inserts from either thread, the poller's unlinks, the
 * scheduler's stats), and the lock is only taken at setup and teardown,
 * never per frame or write (the scheduler finds connections through its
 * own lock-free structures, sched.h). No reader can be in the bucket
 * array while a growth replaces it, so the old array is freed at once.
 * A growth is O(connections held), once per doubling: 65,536
 * connections are 11 doublings in all, each a few hundred microseconds
 * at most under the lock. */
#include <errno.h>
#include <string.h>

#include "rdma/conn.h"
#include "base/log.h"

static struct kvf_conn *of(struct kvf_idtab_node *n)
{
	return n ? kvf_idtab_entry(n, struct kvf_conn, t_node) : NULL;
}

int kvf_conn_table_reserve(struct kvf_rdma *t, const char *peer)
{
	uint32_t max = t->cfg.max_conns; /* 0: a zeroed config (unit tests), no cap */
	uint32_t held;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	held = t->nconns + t->nreserved;
	if (max && held >= max)
		rc = -ENOSPC;
	else
		t->nreserved++;
	pthread_mutex_unlock(&t->lock);
	if (!rc)
		return 0;
	atomic_fetch_add_explicit(&t->st_conns_over_max, 1, memory_order_relaxed);
	kvf_err("conn", "%s%sconnection table full: %u connections held, rdma.max_conns = %u: "
		"no connection to %s (-ENOSPC); raise rdma.max_conns, or lower rdma.qps_per_peer "
		"on the decodes", t->rail_name, t->rail_name[0] ? ": " : "", held, max, peer);
	return rc;
}

void kvf_conn_table_unreserve(struct kvf_rdma *t)
{
	pthread_mutex_lock(&t->lock);
	t->nreserved--;
	pthread_mutex_unlock(&t->lock);
}

/* A free id: the next sequence number that is not 0 ("no connection" in
 * events) and not held. The sequence is 28 bits and at most rdma.max_conns
 * (< 2^28) are held, so the loop ends; it loops at all only after 2^28
 * connections, past a long-lived one. */
static uint32_t next_free_id(struct kvf_rdma *t)
{
	for (;;) {
		uint32_t seq = ++t->next_id & ((1u << KVF_CONN_RAIL_SHIFT) - 1);
		uint32_t id = t->rail << KVF_CONN_RAIL_SHIFT | seq;

		if (seq && !kvf_idtab_find(&t->conns, id))
			return id;
	}
}

void kvf_conn_table_insert(struct kvf_rdma *t, struct kvf_conn *c)
{
	pthread_mutex_lock(&t->lock);
	c->id = next_free_id(t);
	c->t_node.id = c->id;
	kvf_idtab_insert(&t->conns, &c->t_node);
	t->nreserved--;
	t->nconns++;
	c->t_prev = NULL;
	c->t_next = t->live;
	if (t->live)
		t->live->t_prev = c;
	t->live = c;
	if (c->active) {
		c->u_next = NULL;
		c->u_prev = t->unstarted_tail;
		if (t->unstarted_tail)
			t->unstarted_tail->u_next = c;
		else
			t->unstarted = c;
		t->unstarted_tail = c;
		c->t_unstarted = true;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Under the lock. */
static void off_unstarted(struct kvf_rdma *t, struct kvf_conn *c)
{
	if (!c->t_unstarted)
		return;
	if (c->u_prev)
		c->u_prev->u_next = c->u_next;
	else
		t->unstarted = c->u_next;
	if (c->u_next)
		c->u_next->u_prev = c->u_prev;
	else
		t->unstarted_tail = c->u_prev;
	c->u_prev = c->u_next = NULL;
	c->t_unstarted = false;
}

struct kvf_conn *kvf_conn_get(struct kvf_rdma *t, uint32_t id)
{
	struct kvf_conn *c;

	if (!id)
		return NULL;
	pthread_mutex_lock(&t->lock);
	c = of(kvf_idtab_find(&t->conns, id));
	if (c)
		kvf_conn_ref(c);
	pthread_mutex_unlock(&t->lock);
	return c;
}

uint32_t kvf_conn_table_take_ready(struct kvf_rdma *t, struct kvf_conn **out, uint32_t max)
{
	struct kvf_conn *c, *next;
	uint32_t n = 0;

	pthread_mutex_lock(&t->lock);
	for (c = t->unstarted; c && n < max; c = next) {
		next = c->u_next;
		/* Acquire pairs with the store-release of ready in
		 * kvf_qp_group_connect (conn.c), once the group
		 * (qps_per_peer QPs) is whole. */
		if (!atomic_load_explicit(&c->ready, memory_order_acquire))
			continue;
		off_unstarted(t, c);
		kvf_conn_ref(c);
		out[n++] = c;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void kvf_conn_table_count(struct kvf_rdma *t, uint64_t *held, uint64_t *live)
{
	uint64_t n = 0;

	pthread_mutex_lock(&t->lock);
	*held = t->nconns;
	for (struct kvf_conn *c = t->live; c; c = c->t_next)
		n += atomic_load(&c->state) < KVF_CONN_DEAD;
	pthread_mutex_unlock(&t->lock);
	*live = n;
}

void kvf_conn_unlink(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	bool was;

	pthread_mutex_lock(&t->lock);
	was = kvf_idtab_remove(&t->conns, &c->t_node);
	if (was) {
		t->nconns--;
		off_unstarted(t, c);
		if (c->t_prev)
			c->t_prev->t_next = c->t_next;
		else
			t->live = c->t_next;
		if (c->t_next)
			c->t_next->t_prev = c->t_prev;
		c->t_prev = c->t_next = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	if (was)
		kvf_conn_put(c);
}

void kvf_conn_table_close(struct kvf_rdma *t)
{
	while (t->live)
		kvf_conn_unlink(t->live);
	kvf_idtab_fini(&t->conns);
}
