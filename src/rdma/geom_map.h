/* SPDX-License-Identifier: Apache-2.0 */
/* Geometry applied to a connection: which of the peer's buffers each of
 * our region's buffers writes to, and with which head slice (src/transfer/geom.c
 * pairs them, src/transfer/slice.c slices). Without geometry on either side the
 * regions must have one shape (kvf_proto_same_shape) and pair by position.
 * Scheduler thread only. */
#ifndef KVF_GEOM_MAP_H
#define KVF_GEOM_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/sendq.h"
#include "transfer/slice.h"

struct kvf_conn;
struct kvf_pool;
struct kvf_peer_pool;

/* Our region's writes into the peer's region of the same name. */
struct kvf_geom_map {
	uint64_t seq;             /* the kvf_pool.seq it was made for */
	uint32_t peer_idx;        /* the peer's region, in its HELLO order */
	struct kvf_sq_buf *remote;  /* per our buffer: the partner's address, size, rkey */
	struct kvf_slice *slices;   /* per our buffer, or NULL: every pair whole */
};

/* Whether our region p and the peer's region idx (same name) can be
 * combined, the sender being us when we_send. false with why naming the
 * region, the buffer and the field: the same text on both sides. */
bool kvf_geom_map_check(const struct kvf_pool *p, const struct kvf_peer_pool *pp, uint32_t idx,
			bool we_send, char *why, size_t wlen);

/* Every region both sides of c have by one name (ours against the peer's
 * HELLO pp): false with why for the first that cannot be combined. */
bool kvf_geom_map_check_conn(const struct kvf_conn *c, const struct kvf_peer_pool *pp,
			     char *why, size_t wlen);

/* Sender: the map of region p to the peer's idx on connection c, made on
 * first use and kept until p is registered anew or c goes. Returns 0 and
 * *out, -EPROTO (why says) or -ENOMEM. */
int kvf_geom_map_get(struct kvf_conn *c, const struct kvf_pool *p,
		     const struct kvf_peer_pool *pp, uint32_t idx,
		     const struct kvf_geom_map **out, char *why, size_t wlen);

/* Free c's maps (connection teardown). */
void kvf_geom_map_free_all(struct kvf_conn *c);

#endif
