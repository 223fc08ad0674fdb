/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/conn_table.c without a device: the connection table past the
 * old fixed 1,024 slots, ids that shared a slot there, the live and
 * unstarted lists, and the cap (rdma.max_conns): -ENOSPC, its log line
 * naming the key, the counter, and room again once one goes. The scheduler's
 * own table by id grows the same way (test_sched.c). The table's two-thread
 * stress is conn_table_stress.c (TSan in CI). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdma/conn.h"
#include "rdma/sched.h"

static struct kvf_rdma *t;

static void setup(void)
{
	t = calloc(1, sizeof(*t));
	cr_assert_not_null(t);
	pthread_mutex_init(&t->lock, NULL);
	t->cfg.max_conns = 65536;
	t->rail = 1;
	kvf_idtab_init(&t->conns, t->cfg.max_conns);
}

static void teardown(void)
{
	kvf_conn_table_close(t);
	kvf_sched_close(t);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

TestSuite(conn_table, .init = setup, .fini = teardown);

/* A connection as kvf_conn_new makes it, without buffers or a device:
 * in the table, with the table's reference and the test's. */
static struct kvf_conn *conn(bool active)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	cr_assert_not_null(c);
	c->t = t;
	c->active = active;
	atomic_init(&c->ready, !active);
	atomic_init(&c->refs, 2);
	atomic_init(&c->state, KVF_CONN_CONNECTING);
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.9:1"), 0);
	kvf_conn_table_insert(t, c);
	return c;
}

static struct kvf_conn *get(uint32_t id)
{
	struct kvf_conn *c = kvf_conn_get(t, id);

	if (c)
		kvf_conn_put(c); /* the table still holds one */
	return c;
}

/* 5,000 connections (the old table held 1,024), each found by id after
 * every growth, ids on this rail; every other one unlinked, the rest
 * still found; the counts the stats op gives. */
Test(conn_table, grows_past_the_old_fixed_size)
{
	enum { N = 5000 };
	struct kvf_conn **c = calloc(N, sizeof(*c));
	uint64_t held, live;

	cr_assert_not_null(c);
	for (uint32_t i = 0; i < N; i++) {
		c[i] = conn(false);
		cr_assert_eq(kvf_conn_rail(c[i]->id), 1);
		cr_assert_eq(c[i]->id & ((1u << KVF_CONN_RAIL_SHIFT) - 1), i + 1);
	}
	cr_assert_geq(t->conns.grows, 7, "64 buckets to 8192: %u growths", t->conns.grows);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(get(c[i]->id), c[i]);
	/* ids that shared slot (id % 1024) in the old table: 1 + 1024k */
	for (uint32_t i = 0; i < N; i += 1024)
		cr_assert_eq(get(c[i]->id), c[i], "id %#x", c[i]->id);
	cr_assert_null(get(0));
	cr_assert_null(get(1u << 28 | (N + 1)));
	atomic_store(&c[3]->state, KVF_CONN_DEAD);
	kvf_conn_table_count(t, &held, &live);
	cr_assert_eq(held, N);
	cr_assert_eq(live, N - 1);
	for (uint32_t i = 0; i < N; i += 2)
		kvf_conn_unlink(c[i]);
	kvf_conn_unlink(c[0]); /* twice: nothing */
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(get(c[i]->id), i % 2 ? c[i] : NULL);
	kvf_conn_table_count(t, &held, &live);
	cr_assert_eq(held, N / 2);
	cr_assert_eq(t->nconns, N / 2);
	for (uint32_t i = 0; i < N; i++)
		kvf_conn_put(c[i]); /* the test's */
	free(c);
}

/* The sequence wraps (28 bits) past a connection still held: its id is
 * skipped, and 0 is never given. */
Test(conn_table, ids_skip_zero_and_ids_held)
{
	struct kvf_conn *a, *b, *d;

	t->next_id = (1u << KVF_CONN_RAIL_SHIFT) - 2;
	a = conn(false); /* seq 2^28 - 1 */
	t->next_id = (1u << KVF_CONN_RAIL_SHIFT) - 3;
	b = conn(false); /* 2^28 - 2 */
	d = conn(false); /* 2^28 - 1 held: skipped, 0 skipped: seq 1 */
	cr_assert_eq(a->id, 1u << 28 | ((1u << 28) - 1));
	cr_assert_eq(b->id, 1u << 28 | ((1u << 28) - 2));
	cr_assert_eq(d->id, 1u << 28 | 1);
	cr_assert_eq(get(d->id), d);
	kvf_conn_put(a);
	kvf_conn_put(b);
	kvf_conn_put(d);
}

/* The poller starts active connections once their group is ready, oldest
 * first, from the unstarted list only; unlinking takes one off it too. */
Test(conn_table, the_poller_takes_ready_active_connections_only)
{
	struct kvf_conn *p = conn(false), *a = conn(true), *b = conn(true), *d = conn(true);
	struct kvf_conn *out[4];

	cr_assert_eq(kvf_conn_table_take_ready(t, out, 4), 0, "none ready");
	atomic_store(&d->ready, true);
	atomic_store(&a->ready, true);
	cr_assert_eq(kvf_conn_table_take_ready(t, out, 4), 2);
	cr_assert_eq(out[0], a, "oldest first");
	cr_assert_eq(out[1], d);
	kvf_conn_put(out[0]);
	kvf_conn_put(out[1]);
	cr_assert_eq(kvf_conn_table_take_ready(t, out, 4), 0, "taken once");
	kvf_conn_unlink(b);
	atomic_store(&b->ready, true);
	cr_assert_eq(kvf_conn_table_take_ready(t, out, 4), 0, "unlinked: not started");
	cr_assert_null(t->unstarted);
	cr_assert_null(t->unstarted_tail);
	kvf_conn_put(p);
	kvf_conn_put(a);
	kvf_conn_put(b);
	kvf_conn_put(d);
}

static char *read_all(FILE *f)
{
	static char buf[8192];
	size_t n;

	fflush(f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	return buf;
}

/* At rdma.max_conns (held and being built): -ENOSPC, one error line naming
 * the key, counted (conns_over_max, what /metrics exports); a place given
 * back or a connection gone makes room again. */
Test(conn_table, the_cap_refuses_with_enospc_named_and_counted)
{
	struct kvf_transport_stats ts = {0};
	struct kvf_conn *c[3];
	FILE *log = tmpfile();
	char *text;

	cr_assert_not_null(log);
	t->cfg.max_conns = 4;
	c[0] = conn(false);
	c[1] = conn(true);
	c[2] = conn(false);
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.9:1"), 0, "the 4th: being built");
	fflush(stderr);
	cr_assert_eq(dup2(fileno(log), STDERR_FILENO), STDERR_FILENO); /* the log's lines */
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.7:18515"), -ENOSPC);
	text = read_all(log);
	cr_assert(strstr(text, "rdma.max_conns = 4") && strstr(text, "10.0.0.7:18515") &&
		  strstr(text, "ENOSPC") && strstr(text, "4 connections held"), "log: %s", text);
	cr_assert_eq(atomic_load(&t->st_conns_over_max), 1);
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.7:18515"), -ENOSPC);
	cr_assert_eq(t->nconns, 3);
	kvf_rdma_ops.stats(t, &ts);
	cr_assert_eq(ts.conns_over_max, 2, "the stats op exports it");
	cr_assert_eq(ts.conns_held, 3);
	cr_assert_eq(ts.conns_live, 3);
	kvf_conn_table_unreserve(t); /* the one being built failed */
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.7:18515"), 0);
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.7:18515"), -ENOSPC);
	kvf_conn_table_unreserve(t);
	kvf_conn_unlink(c[1]);
	cr_assert_eq(kvf_conn_table_reserve(t, "10.0.0.7:18515"), 0, "one went: room");
	kvf_conn_table_unreserve(t);
	for (int i = 0; i < 3; i++)
		kvf_conn_put(c[i]);
	fclose(log);
}

/* The scheduler's own table by id grows too: 3,000 connections handed
 * over, found by id, ids that shared a bucket in the old table among them. */
Test(conn_table, the_schedulers_table_grows)
{
	enum { N = 3000 };
	struct kvf_conn **c = calloc(N, sizeof(*c));

	cr_assert_not_null(c);
	for (uint32_t i = 0; i < N; i++) {
		c[i] = calloc(1, sizeof(**c));
		cr_assert_not_null(c[i]);
		c[i]->id = c[i]->group = 1 + i * 1024u; /* one old slot, all of them */
		c[i]->t = t;
		atomic_init(&c[i]->refs, 1); /* the scheduler's */
		atomic_init(&c[i]->state, KVF_CONN_CONNECTING);
		kvf_sched_handoff(t, c[i]);
	}
	kvf_sched_collect(t);
	cr_assert_eq(t->s.n, N);
	cr_assert_geq(t->s.by_id.grows, 6);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(kvf_sched_get(t, c[i]->id), c[i]);
	for (uint32_t i = 0; i < N; i += 3) {
		atomic_store(&c[i]->state, KVF_CONN_DEAD);
		kvf_sched_dead(t, c[i]);
	}
	kvf_sched_collect(t);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(kvf_sched_get(t, 1 + i * 1024u), i % 3 ? c[i] : NULL);
	free(c);
}
