/* SPDX-License-Identifier: Apache-2.0 */
/* Connect backoff per peer (scheduler thread only).
 *
 * A peer connection that goes down before it was ever established (rejected,
 * unreachable, timed out) counts a failure for its peer; one that was
 * established resets the count. While a peer is in backoff, a room that
 * would connect to it fails at once with the last failure's text instead of
 * starting another attempt: without it, a decode whose prefill is gone
 * starts a connection per batch of rooms, each with its frame buffers
 * (megabytes), as fast as the rooms fail. The wait after the nth failure in
 * a row is base * 2^(n-1), at most max. */
#ifndef KVF_RDMA_BACKOFF_H
#define KVF_RDMA_BACKOFF_H

#include <stdint.h>

#include "config/config.h"

#define KVF_BACKOFF_PEERS 64u /* peers remembered; the stalest goes first */
#define KVF_BACKOFF_WHY 160u

struct kvf_backoff_peer {
	char peer[KVF_CFG_STR + 64]; /* "host:port", as the rooms name it */
	uint32_t fails;          /* connects failed in a row, 0 = free entry */
	uint64_t failed_ns;      /* when the last one failed */
	uint64_t retry_ns;       /* no new attempt before this */
	char why[KVF_BACKOFF_WHY];
};

struct kvf_backoff {
	uint64_t base_ns, max_ns; /* base 0: no backoff */
	struct kvf_backoff_peer peers[KVF_BACKOFF_PEERS];
};

void kvf_backoff_init(struct kvf_backoff *b, uint32_t base_ms, uint32_t max_ms);
/* A connection to peer failed before it was established, at now. */
void kvf_backoff_failed(struct kvf_backoff *b, const char *peer, uint64_t now, const char *why);
/* A connection to peer was established: the next failure waits base again. */
void kvf_backoff_ok(struct kvf_backoff *b, const char *peer);
/* Connects to peer failed in a row (0: none, or it connected since). */
uint32_t kvf_backoff_fails(const struct kvf_backoff *b, const char *peer);
/* The peer's entry when a connect to it must wait (now < its retry_ns),
 * else NULL: connect now. */
const struct kvf_backoff_peer *kvf_backoff_check(const struct kvf_backoff *b, const char *peer,
						 uint64_t now);

#endif
