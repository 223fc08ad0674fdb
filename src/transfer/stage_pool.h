/* SPDX-License-Identifier: Apache-2.0 */
/* Staging through host memory (docs/design.md, "GPU memory and staging"):
 * the slot pool and its ledger, without any device, so every rule here is
 * checked by tests/unit/transfer/test_stage.c.
 *
 * Slots. The staging memory is nslots fixed-size slots (one registered
 * area, src/rdma/stage.c); a free list holds the free ones. A staged chunk
 * takes a claim for the slots it needs, all at once (no partial hold that
 * could deadlock two chunks), granted in arrival order: when the first
 * waiting claim does not fit, it and every later one wait (counted once
 * per claim in waits). A room waiting for slots is bounded by its room
 * deadline like any other wait: the engine aborts it and its claim goes.
 *
 * Quiescence. A claim's slots go back only when nothing can touch them:
 * its copy into them is done (the DMA engine writes them) and every
 * signaled write of its chunk has completed (the NIC reads them). Writes
 * of one room complete in the order they were queued, so each room with a
 * claim has a ledger entry: signaled writes queued, and completed; a claim
 * is done reading when completed reaches sig_end, the room's queued count
 * just after its chunk. A cancel takes the dropped (never posted) writes
 * off queued and clamps every claim to it; a lost connection completes
 * its rooms at once (nothing more will come, nothing more will be read).
 *
 * Scheduler thread only. */
#ifndef KVF_STAGE_POOL_H
#define KVF_STAGE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One room's signaled writes (key: connection id and wr_id). */
struct kvf_stage_room {
	struct kvf_stage_room *next;
	uint64_t wr_id;
	uint32_t conn;
	uint32_t nclaims;  /* claims that count on it */
	uint64_t queued;   /* signaled writes queued, less those cancelled */
	uint64_t done;     /* their completions (success or error) */
};

enum kvf_claim_state {
	KVF_CLAIM_WAITING, /* no slots yet */
	KVF_CLAIM_COPYING, /* slots granted, the copy into them in flight */
	KVF_CLAIM_COPIED,  /* copy done: its writes may go */
};

struct kvf_stage_claim {
	struct kvf_stage_claim *next;
	struct kvf_stage_room *room;
	enum kvf_claim_state state;
	bool cancelled;     /* its writes were dropped, or its room failed */
	bool waited;        /* counted in waits already */
	uint16_t tag;       /* its writes' tag in the send queue */
	uint64_t sig_end;   /* room->queued just after its chunk */
	uint64_t bytes;     /* bytes it copies */
	void *priv;         /* the owner's (copy list, event): free()d with it */
	uint32_t nslots;
	uint32_t slots[];   /* granted slots, in the chunk's order */
};

struct kvf_stage_pool {
	size_t slot_size;
	uint32_t nslots;
	uint32_t nfree;
	uint32_t *free_list;
	struct kvf_stage_claim *head, *tail; /* every claim not returned, in order */
	struct kvf_stage_room *rooms;
	uint32_t nclaims;
	/* Counters (stats): */
	uint64_t waits;     /* claims that had to wait for slots */
	uint64_t granted;   /* claims granted slots (chunks staged) */
	uint64_t bytes;     /* bytes of the granted claims */
};

/* nslots slots of slot_size bytes. Returns 0, -EINVAL (0 of either) or -ENOMEM. */
int kvf_stage_pool_init(struct kvf_stage_pool *p, size_t slot_size, uint32_t nslots);
/* Frees every claim and ledger entry (the transport is closing: nothing
 * reads or writes the slots any more). */
void kvf_stage_pool_fini(struct kvf_stage_pool *p);

/* The ledger entry of (conn, wr_id), made when absent; NULL when out of
 * memory. */
struct kvf_stage_room *kvf_stage_room_get(struct kvf_stage_pool *p, uint32_t conn,
					  uint64_t wr_id, bool create);
/* nsig more signaled writes queued for the room (every chunk of it). */
void kvf_stage_queued(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id, uint32_t nsig);
/* One completion of the room's writes (a room without an entry: nothing). */
void kvf_stage_completed(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id);
/* ndropped of the room's queued signaled writes were cancelled: every
 * claim of the room is cancelled and clamped. */
void kvf_stage_cancel(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id,
		      uint32_t ndropped);
/* The connection is gone: its rooms have every completion they will get. */
void kvf_stage_conn_gone(struct kvf_stage_pool *p, uint32_t conn);

/* A claim for nslots slots, for the chunk whose writes were just queued
 * (kvf_stage_queued first), appended WAITING. Returns 0, -E2BIG (more
 * slots than the pool has: it could never be granted) or -ENOMEM. */
int kvf_stage_claim_new(struct kvf_stage_pool *p, uint32_t conn, uint64_t wr_id,
			uint32_t nslots, uint64_t bytes, struct kvf_stage_claim **out);

/* Grant slots to waiting claims in order while they fit; granted(ctx, c)
 * for each (it starts the copy). Returns how many were granted. */
uint32_t kvf_stage_grant(struct kvf_stage_pool *p,
			 void (*granted)(void *ctx, struct kvf_stage_claim *c), void *ctx);

/* Return the slots of every quiescent claim and free it (and ledger
 * entries nothing counts on any more). Returns how many claims went. */
uint32_t kvf_stage_reap(struct kvf_stage_pool *p);

static inline uint32_t kvf_stage_busy_slots(const struct kvf_stage_pool *p)
{
	return p->nslots - p->nfree;
}

#endif
