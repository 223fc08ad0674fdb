/* SPDX-License-Identifier: Apache-2.0 */
/* The rail's send frames: one pool for every connection, the scheduler's
 * alone. Device-free bookkeeping (unit-tested); frames.c registers the
 * memory behind it.
 *
 * A control SEND takes a frame until its completion gives it back. Each
 * frame remembers the connection that took it, so that the frames of a
 * connection destroyed before its flush drained (the poller's give-up,
 * poller.c) come back all at once (kvf_txpool_reclaim) instead of leaking
 * from a pool every connection needs. A connection holds at most
 * per_conn frames (KVF_TXPOOL_PER_CONN): one peer that stopped draining
 * its receives cannot take the frames the others need. */
#ifndef KVF_TXPOOL_H
#define KVF_TXPOOL_H

#include <stdbool.h>
#include <stdint.h>

#define KVF_TXPOOL_PER_CONN 64u
#define KVF_TXPOOL_NONE UINT32_MAX /* owner of a free frame */

struct kvf_txpool {
	uint32_t n;          /* frames */
	uint32_t nfree;
	uint32_t *free;      /* a stack of free frame indexes */
	uint32_t *owner;     /* per frame: the connection id holding it, or NONE */
	uint64_t waits;      /* times a frame was wanted and none was free */
	uint64_t reclaimed;  /* frames given back by kvf_txpool_reclaim */
};

/* n frames, all free. 0 or -ENOMEM. */
int kvf_txpool_init(struct kvf_txpool *p, uint32_t n);
void kvf_txpool_fini(struct kvf_txpool *p);
/* A free frame for connection conn, or KVF_TXPOOL_NONE (counted in waits). */
uint32_t kvf_txpool_take(struct kvf_txpool *p, uint32_t conn);
/* Frame i back (a completion, or a post that failed). false when i is not
 * a frame of the pool or is free already: a completion seen twice, or one
 * for a frame that kvf_txpool_reclaim took back, changes nothing. */
bool kvf_txpool_give(struct kvf_txpool *p, uint32_t i);
/* Every frame conn still holds, back: its QP is gone, no completion for
 * them can come. Returns how many. */
uint32_t kvf_txpool_reclaim(struct kvf_txpool *p, uint32_t conn);

#endif
