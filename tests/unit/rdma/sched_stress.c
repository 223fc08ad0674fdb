/* SPDX-License-Identifier: Apache-2.0 */
/* The two lock-free stacks of src/rdma/sched.c under two threads: a
 * "poller" thread hands 20,000 connections over and reports every third
 * one dead while this thread, the scheduler, collects. Nothing may be lost
 * or retired twice. Its own binary (not a Criterion test) so that CI runs
 * it under ThreadSanitizer, as ring_stress. Exit 0 when every connection
 * ended where it should, 1 otherwise. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rdma/conn.h"
#include "rdma/sched.h"

#define NSTRESS 20000u

static struct kvf_rdma *t;
static struct kvf_conn *conns[NSTRESS];

/* A connection as kvf_conn_new leaves it, without buffers or a device:
 * refs for the scheduler and for this test. */
static struct kvf_conn *conn(uint32_t id)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	if (!c)
		exit(2);
	c->id = c->group = id;
	c->t = t;
	c->active = true;
	snprintf(c->peer, sizeof(c->peer), "p:1");
	atomic_init(&c->refs, 2);
	atomic_init(&c->state, KVF_CONN_CONNECTING);
	return c;
}

static void *poller(void *arg)
{
	(void)arg;
	for (uint32_t i = 0; i < NSTRESS; i++) {
		kvf_sched_handoff(t, conns[i]);
		if (i % 3 == 0) {
			atomic_store(&conns[i]->state, KVF_CONN_DEAD);
			kvf_sched_dead(t, conns[i]);
		}
	}
	return NULL;
}

/* Until every connection is held or retired, as the scheduler sees it. */
static void collect_all(void)
{
	uint32_t seen = 0;

	while (seen < NSTRESS) {
		kvf_sched_collect(t);
		seen = 0;
		for (uint32_t i = 0; i < NSTRESS; i++)
			seen += atomic_load(&conns[i]->sched_done) ||
				kvf_sched_get(t, conns[i]->id) == conns[i];
	}
}

static uint32_t check(void)
{
	uint32_t bad = 0;

	for (uint32_t i = 0; i < NSTRESS; i++) {
		bool dead = i % 3 == 0;

		if (atomic_load(&conns[i]->sched_done) != dead ||
		    (kvf_sched_get(t, i + 1) == conns[i]) == dead ||
		    atomic_load(&conns[i]->refs) != (dead ? 1 : 2)) {
			if (bad++ < 5)
				fprintf(stderr, "sched_stress: conn %u: done %d, held %d, refs %d\n",
					i + 1, atomic_load(&conns[i]->sched_done),
					kvf_sched_get(t, i + 1) == conns[i],
					atomic_load(&conns[i]->refs));
		}
	}
	if (t->s.n != NSTRESS - (NSTRESS + 2) / 3) {
		fprintf(stderr, "sched_stress: %u held, want %u\n", t->s.n,
			NSTRESS - (NSTRESS + 2) / 3);
		bad++;
	}
	return bad;
}

int main(void)
{
	pthread_t th;
	uint32_t bad;

	t = calloc(1, sizeof(*t));
	if (!t)
		return 2;
	for (uint32_t i = 0; i < NSTRESS; i++)
		conns[i] = conn(i + 1);
	if (pthread_create(&th, NULL, poller, NULL))
		return 2;
	collect_all();
	pthread_join(th, NULL);
	kvf_sched_collect(t);
	bad = check();
	kvf_sched_close(t);
	for (uint32_t i = 0; i < NSTRESS; i++)
		kvf_conn_put(conns[i]);
	free(t);
	printf("sched_stress: %u connections handed over, %u retired: %s\n", NSTRESS,
	       (NSTRESS + 2) / 3, bad ? "FAILED" : "ok");
	return bad ? 1 : 0;
}
