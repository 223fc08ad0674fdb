/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/sendcq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "rdma/rdma_internal.h"

/* Entries a shared send CQ has at most: 64 connections a CQ, 256 KiB of
 * CQEs on a ConnectX (64 B each). Bigger would make one peer pay for
 * many; smaller would make the poller poll more CQs. */
#define SENDCQ_ENTRIES 4096

int kvf_sendcq_open(struct kvf_rdma *t)
{
	struct kvf_send_cqs *s = &t->scqs;
	struct ibv_device_attr da;
	int rc = ibv_query_device(t->ctx, &da);
	int e = SENDCQ_ENTRIES;

	if (rc) {
		kvf_err("rdma", "ibv_query_device: %s", strerror(rc));
		return -rc;
	}
	if (da.max_cqe < e)
		e = da.max_cqe;
	if (e < (int)KVF_SENDCQ_PER_CONN) {
		kvf_err("rdma", "%s: CQs of %d entries at most; a connection needs %u",
			ibv_get_device_name(t->ctx->device), da.max_cqe, KVF_SENDCQ_PER_CONN);
		return -EOPNOTSUPP;
	}
	s->per_cq = (uint32_t)e / KVF_SENDCQ_PER_CONN;
	s->cap = t->cfg.max_conns / s->per_cq + 1;
	s->cqs = calloc(s->cap, sizeof(*s->cqs));
	if (!s->cqs)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

void kvf_sendcq_close(struct kvf_rdma *t)
{
	struct kvf_send_cqs *s = &t->scqs;
	uint32_t n = atomic_load(&s->n);

	if (!s->cqs)
		return;
	for (uint32_t i = 0; i < n; i++) {
		if (s->cqs[i]->cq_unacked)
			ibv_ack_cq_events(s->cqs[i]->cq, s->cqs[i]->cq_unacked);
		ibv_destroy_cq(s->cqs[i]->cq);
		free(s->cqs[i]);
	}
	free(s->cqs);
	s->cqs = NULL;
	pthread_mutex_destroy(&s->lock);
}

/* A new CQ at cqs[n]; the lock is held. */
static struct kvf_send_cq *add_cq(struct kvf_rdma *t)
{
	struct kvf_send_cqs *s = &t->scqs;
	uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
	struct kvf_send_cq *scq;
	int e = (int)(s->per_cq * KVF_SENDCQ_PER_CONN);

	if (n == s->cap) { /* only with slots kept by QPs destroyed undrained */
		kvf_err("rdma", "no send CQ for another connection: %u CQs of %u connections made "
			"(rdma.max_conns %u), their slots held", n, s->per_cq, t->cfg.max_conns);
		errno = ENOSPC;
		return NULL;
	}
	scq = calloc(1, sizeof(*scq));
	if (!scq)
		return NULL;
	/* Its context: the unacked count on_cq_events keeps (poller.c). */
	scq->cq = ibv_create_cq(t->ctx, e, &scq->cq_unacked, t->cch, 0);
	if (!scq->cq) {
		int err = errno ? errno : ENOMEM;

		kvf_err("rdma", "ibv_create_cq(%d entries) for the send queues of %u connections: %s",
			e, s->per_cq, strerror(err));
		free(scq);
		errno = err;
		return NULL;
	}
	s->cqs[n] = scq;
	/* Release pairs with the poller's load-acquire of n. */
	atomic_store_explicit(&s->n, n + 1, memory_order_release);
	return scq;
}

struct kvf_send_cq *kvf_sendcq_take(struct kvf_rdma *t)
{
	struct kvf_send_cqs *s = &t->scqs;
	struct kvf_send_cq *scq = NULL;
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	n = atomic_load_explicit(&s->n, memory_order_relaxed);
	for (uint32_t i = 0; i < n && !scq; i++)
		if (s->cqs[i]->users < s->per_cq)
			scq = s->cqs[i];
	if (!scq)
		scq = add_cq(t);
	if (scq)
		scq->users++;
	pthread_mutex_unlock(&s->lock);
	return scq;
}

void kvf_sendcq_give(struct kvf_rdma *t, struct kvf_send_cq *scq)
{
	pthread_mutex_lock(&t->scqs.lock);
	scq->users--;
	pthread_mutex_unlock(&t->scqs.lock);
}
