/* SPDX-License-Identifier: Apache-2.0 */
/* Pairing a sender's region buffers with the receiver's region of the same
 * name by geometry (struct kvf_buf_geometry): by (layer, kind), not by
 * position, each pair with its head slice. Pure logic, no device: the
 * transport applies it to a connection (src/rdma/geom_map.c) and
 * tests/unit/transfer/test_slice.c checks it. */
#ifndef KVF_GEOM_H
#define KVF_GEOM_H

#include <stddef.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "transfer/slice.h"

/* A sender buffer's partner: the receiver's buffer and what to copy. */
struct kvf_geom_pair {
	uint32_t dst;           /* the receiver's buffer index in the region */
	struct kvf_slice slice; /* .tokens 0: whole items */
};

/*
 * Pair each of the ns sender buffers (geometry sg) with one of the nr
 * receiver buffers (rg) of region name. Every sender buffer needs a
 * receiver buffer of the same (layer, kind) with the same page_tokens and
 * head_bytes and an overlapping head range; receiver buffers no sender
 * buffer names are fine (the sender is one pipeline stage). Returns 0 and
 * pairs[0..ns), or -EPROTO with why naming the region, the sender's buffer
 * and the field ("region 'kv': sender buffer 3 (layer 1 kind 1): head_bytes
 * 128 at the sender, 256 at the receiver (its buffer 3)"): the same text on
 * both sides, each computing it from both HELLOs.
 */
int kvf_geom_pair(const char *name, const struct kvf_buf_geometry *sg, uint32_t ns,
		  const struct kvf_buf_geometry *rg, uint32_t nr, struct kvf_geom_pair *pairs,
		  char *why, size_t wlen);

/* Whether g is "no geometry" (all zero). */
static inline int kvf_geom_none(const struct kvf_buf_geometry *g)
{
	return !g->page_tokens && !g->heads && !g->head0 && !g->head_bytes && !g->layer &&
	       !g->kind;
}

#endif
