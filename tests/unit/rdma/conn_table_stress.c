/* SPDX-License-Identifier: Apache-2.0 */
/* The connection table (src/rdma/conn_table.c) under three threads, as the
 * transport uses it: a "scheduler" builds active connections and a
 * "poller" accepts passive ones, both inserting while the table grows
 * across its doublings and hits its cap (rdma.max_conns); the poller also
 * looks connections up by id, starts the ready active ones and unlinks
 * half of what it sees; a third thread takes the stats op's counts. Every
 * lookup must find the connection of that id, every refusal be counted,
 * and the table end consistent. Its own binary (not a Criterion test) so
 * that CI runs it under ThreadSanitizer, as sched_stress. Exit 0 when all
 * held, 1 otherwise. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rdma/conn.h"

#define PER_THREAD 20000u
#define CAP 16000u /* under the 20,000 never unlinked: the cap is reached */

static struct kvf_rdma *t;
static _Atomic uint32_t ids[2 * PER_THREAD]; /* published once inserted, 0 before */
static _Atomic uint32_t refused[2], bad, bad_kind[4];
static atomic_bool builders_done[2];

static struct kvf_conn *build(bool active)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	if (!c)
		exit(2);
	c->t = t;
	c->active = active;
	atomic_init(&c->ready, !active);
	atomic_init(&c->refs, 1); /* the table's */
	atomic_init(&c->state, KVF_CONN_CONNECTING);
	return c;
}

static void *builder(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (uint32_t i = 0; i < PER_THREAD; i++) {
		struct kvf_conn *c;

		if (kvf_conn_table_reserve(t, "p:1") == -ENOSPC) {
			atomic_fetch_add(&refused[k], 1);
			continue;
		}
		c = build(k == 0);
		kvf_conn_table_insert(t, c);
		if (k == 0) /* the group is whole */
			atomic_store_explicit(&c->ready, true, memory_order_release);
		atomic_store_explicit(&ids[k * PER_THREAD + i], c->id, memory_order_release);
	}
	atomic_store(&builders_done[k], true);
	return NULL;
}

/* Look up each id published so far; unlink every other one, once. */
static void poll_round(uint8_t *unlinked)
{
	struct kvf_conn *fresh[64];
	uint32_t n;

	do {
		n = kvf_conn_table_take_ready(t, fresh, 64);
		for (uint32_t i = 0; i < n; i++) {
			if (!fresh[i]->active)
				atomic_fetch_add(&bad_kind[0], 1);
			kvf_conn_put(fresh[i]);
		}
	} while (n == 64);
	for (uint32_t i = 0; i < 2 * PER_THREAD; i++) {
		uint32_t id = atomic_load_explicit(&ids[i], memory_order_acquire);
		struct kvf_conn *c;

		if (!id || unlinked[i])
			continue;
		c = kvf_conn_get(t, id);
		if (!c || c->id != id) {
			atomic_fetch_add(&bad_kind[1], 1);
			continue;
		}
		if (i % 2) {
			kvf_conn_unlink(c);
			unlinked[i] = 1;
		}
		kvf_conn_put(c);
	}
}

static void *poller(void *arg)
{
	uint8_t *unlinked = arg;

	while (!atomic_load(&builders_done[0]) || !atomic_load(&builders_done[1]))
		poll_round(unlinked);
	poll_round(unlinked);
	return NULL;
}

static atomic_bool stop_stats;

static void *stats(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_stats)) {
		uint64_t held, live;

		kvf_conn_table_count(t, &held, &live);
		if (held > CAP || live > held)
			atomic_fetch_add(&bad_kind[2], 1);
	}
	return NULL;
}

static const char *const kinds[4] = {
	"passive connections on the unstarted list", "lookups during the run",
	"counts of the stats op", "lookups at the end",
};

static uint32_t check(const uint8_t *unlinked)
{
	uint32_t want = 0, live = 0, nref = refused[0] + refused[1];

	for (uint32_t i = 0; i < 2 * PER_THREAD; i++) {
		uint32_t id = atomic_load(&ids[i]);
		struct kvf_conn *c = id ? kvf_conn_get(t, id) : NULL;

		want += id && !unlinked[i];
		if ((c != NULL) != (id && !unlinked[i]))
			bad_kind[3]++;
		kvf_conn_put(c);
	}
	for (struct kvf_conn *c = t->live; c; c = c->t_next)
		live++;
	if (t->nconns != want || live != want || t->nreserved || t->unstarted ||
	    atomic_load(&t->st_conns_over_max) != nref) {
		printf("conn_table_stress: %u held (want %u, listed %u), %u reserved, "
			"%u refused (counted %lu)\n", t->nconns, want, live, t->nreserved, nref,
			(unsigned long)atomic_load(&t->st_conns_over_max));
		bad++;
	}
	for (int k = 0; k < 4; k++)
		if (bad_kind[k]) {
			printf("conn_table_stress: %u wrong %s\n", bad_kind[k], kinds[k]);
			bad += bad_kind[k];
		}
	return bad;
}

int main(void)
{
	pthread_t b[2], p, s;
	uint8_t *unlinked = calloc(2 * PER_THREAD, 1);
	uint32_t nbad;

	t = calloc(1, sizeof(*t));
	if (!t || !unlinked)
		return 2;
	pthread_mutex_init(&t->lock, NULL);
	t->cfg.max_conns = CAP;
	kvf_idtab_init(&t->conns, CAP);
	/* The refusals' error lines, thousands of them: not wanted here. */
	if (!freopen("/dev/null", "w", stderr))
		return 2;
	if (pthread_create(&p, NULL, poller, unlinked) || pthread_create(&s, NULL, stats, NULL))
		return 2;
	for (intptr_t k = 0; k < 2; k++)
		if (pthread_create(&b[k], NULL, builder, (void *)k))
			return 2;
	for (int k = 0; k < 2; k++)
		pthread_join(b[k], NULL);
	pthread_join(p, NULL);
	atomic_store(&stop_stats, true);
	pthread_join(s, NULL);
	nbad = check(unlinked);
	printf("conn_table_stress: %u inserted, %u refused at the cap of %u, %u growths, "
	       "%u held: %s\n", 2 * PER_THREAD - refused[0] - refused[1], refused[0] + refused[1],
	       CAP, t->conns.grows, t->nconns, nbad ? "FAILED" : "ok");
	kvf_conn_table_close(t);
	pthread_mutex_destroy(&t->lock);
	free(t);
	free(unlinked);
	return nbad ? 1 : 0;
}
