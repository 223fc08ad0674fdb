/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/stage_pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kvf_stage_pool_init(struct kvf_stage_pool *p, size_t slot_size, uint32_t nslots)
{
	memset(p, 0, sizeof(*p));
	if (!slot_size || !nslots)
		return -EINVAL;
	p->free_list = calloc(nslots, sizeof(*p->free_list));
	if (!p->free_list)
		return -ENOMEM;
	p->slot_size = slot_size;
	p->nslots = nslots;
	/* Lowest slot on top: a quiet pool reuses the same few slots. */
	for (uint32_t i = 0; i < nslots; i++)
		p->free_list[i] = nslots - 1 - i;
	p->nfree = nslots;
	return 0;
}

void kvf_stage_pool_fini(struct kvf_stage_pool *p)
{
	while (p->head) {
		struct kvf_stage_claim *c = p->head;

		p->head = c->next;
		free(c->priv);
		free(c);
	}
	while (p->rooms) {
		struct kvf_stage_room *r = p->rooms;

		p->rooms = r->next;
		free(r);
	}
	free(p->free_list);
	memset(p, 0, sizeof(*p));
}

struct kvf_stage_room *kvf_stage_room_get(struct kvf_stage_pool *p, uint32_t conn,
					  uint64_t wr_id, bool create)
{
	struct kvf_stage_room *r;

	for (r = p->rooms; r; r = r->next)
		if (r->wr_id == wr_id && r->conn == conn)
			return r;
	if (!create)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->wr_id = wr_id;
	r->conn = conn;
	r->next = p->rooms;
	p->rooms = r;
	return r;
}

void kvf_stage_queued(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id, uint32_t nsig)
{
	struct kvf_stage_room *r = kvf_stage_room_get(p, conn, wr_id, nsig > 0);

	if (r)
		r->queued += nsig;
}

void kvf_stage_completed(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id)
{
	struct kvf_stage_room *r = kvf_stage_room_get(p, conn, wr_id, false);

	if (r && r->done < r->queued)
		r->done++;
}

void kvf_stage_cancel(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id,
		      uint32_t ndropped)
{
	struct kvf_stage_room *r = kvf_stage_room_get(p, conn, wr_id, false);

	if (!r)
		return;
	r->queued -= ndropped < r->queued - r->done ? ndropped : r->queued - r->done;
	for (struct kvf_stage_claim *c = p->head; c; c = c->next) {
		if (c->room != r)
			continue;
		c->cancelled = true;
		if (c->sig_end > r->queued)
			c->sig_end = r->queued;
	}
}

void kvf_stage_conn_gone(struct kvf_stage_pool *p, uint32_t conn)
{
	for (struct kvf_stage_room *r = p->rooms; r; r = r->next)
		if (r->conn == conn)
			r->done = r->queued;
	for (struct kvf_stage_claim *c = p->head; c; c = c->next)
		if (c->room->conn == conn)
			c->cancelled = true;
}

int kvf_stage_claim_new(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id,
			uint32_t nslots, uint64_t bytes, struct kvf_stage_claim **out)
{
	struct kvf_stage_room *r;
	struct kvf_stage_claim *c;

	if (nslots > p->nslots)
		return -E2BIG;
	r = kvf_stage_room_get(p, conn, wr_id, true);
	c = r ? calloc(1, sizeof(*c) + nslots * sizeof(c->slots[0])) : NULL;
	if (!c)
		return -ENOMEM;
	c->room = r;
	c->sig_end = r->queued;
	c->nslots = nslots;
	c->bytes = bytes;
	r->nclaims++;
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->nclaims++;
	*out = c;
	return 0;
}

uint32_t kvf_stage_grant(struct kvf_stage_pool *p,
			 void (*granted)(void *ctx, struct kvf_stage_claim *c), void *ctx)
{
	uint32_t n = 0;

	for (struct kvf_stage_claim *c = p->head; c; c = c->next) {
		if (c->state != KVF_CLAIM_WAITING || c->cancelled)
			continue;
		if (c->nslots > p->nfree) {
			/* In order: a big chunk is not passed by small ones forever. */
			if (!c->waited)
				p->waits++;
			c->waited = true;
			break;
		}
		for (uint32_t i = 0; i < c->nslots; i++)
			c->slots[i] = p->free_list[--p->nfree];
		c->state = KVF_CLAIM_COPYING;
		p->granted++;
		p->bytes += c->bytes;
		n++;
		granted(ctx, c);
	}
	return n;
}

/* Nothing writes its slots (no copy in flight) and nothing reads them (every
 * signaled write of its chunk completed, or will never be posted). */
static bool quiescent(const struct kvf_stage_claim *c)
{
	if (c->state == KVF_CLAIM_COPYING)
		return false;
	if (c->state == KVF_CLAIM_WAITING)
		return c->cancelled;
	return c->room->done >= c->sig_end;
}

static void drop_rooms(struct kvf_stage_pool *p)
{
	struct kvf_stage_room **pr = &p->rooms;

	while (*pr) {
		struct kvf_stage_room *r = *pr;

		if (!r->nclaims && r->done >= r->queued) {
			*pr = r->next;
			free(r);
		} else {
			pr = &r->next;
		}
	}
}

uint32_t kvf_stage_reap(struct kvf_stage_pool *p)
{
	struct kvf_stage_claim **pc = &p->head, *prev = NULL;
	uint32_t n = 0;

	while (*pc) {
		struct kvf_stage_claim *c = *pc;

		if (!quiescent(c)) {
			prev = c;
			pc = &c->next;
			continue;
		}
		if (c->state != KVF_CLAIM_WAITING)
			for (uint32_t i = 0; i < c->nslots; i++)
				p->free_list[p->nfree++] = c->slots[i];
		c->room->nclaims--;
		*pc = c->next;
		if (p->tail == c)
			p->tail = prev;
		p->nclaims--;
		free(c->priv);
		free(c);
		n++;
	}
	drop_rooms(p);
	return n;
}
