/* SPDX-License-Identifier: Apache-2.0 */
/* Head slicing: what part of each token of a page a sender writes when the
 * two sides hold different head ranges of one layer (different tensor
 * parallelism). A page is tokens x heads x head_bytes, token major. With
 * [h0, h0 + n) the heads both sides hold, token t of a page goes
 *     source      t x src_token_bytes + (h0 - src_head0) x head_bytes
 *     destination t x dst_token_bytes + (h0 - dst_head0) x head_bytes
 *     length      n x head_bytes
 * Pure arithmetic, no device: tests/unit/transfer/test_slice.c checks it against a
 * global [tokens, heads, head_dim] tensor. */
#ifndef KVF_SLICE_H
#define KVF_SLICE_H

#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

struct kvf_slice {
	uint32_t tokens;          /* tokens per page; 0 = copy whole items, no slicing */
	uint64_t src_token_bytes; /* one token's bytes in a source page */
	uint64_t dst_token_bytes; /* ... in a destination page */
	uint64_t src_off;         /* the first shared head in a source token */
	uint64_t dst_off;         /* ... in a destination token */
	uint64_t len;             /* the shared heads' bytes of one token */
};

/* The slice from src's pages into dst's (same page_tokens and head_bytes,
 * checked by the caller). false when their head ranges do not overlap.
 * The same head range gives tokens 0: whole items, today's path. */
bool kvf_slice_make(const struct kvf_buf_geometry *src, const struct kvf_buf_geometry *dst,
		    struct kvf_slice *out);

static inline uint64_t kvf_slice_src(const struct kvf_slice *s, uint32_t t)
{
	return t * s->src_token_bytes + s->src_off;
}

static inline uint64_t kvf_slice_dst(const struct kvf_slice *s, uint32_t t)
{
	return t * s->dst_token_bytes + s->dst_off;
}

/* Whether the destination bytes of a page are one run: the sender holds
 * every head the receiver has (the slice is the receiver's whole token). */
static inline bool kvf_slice_dst_contiguous(const struct kvf_slice *s)
{
	return s->len == s->dst_token_bytes;
}

/* RDMA WRITEs one page takes with at most max_sge SGEs each: one per token
 * when the destination is strided; with a contiguous destination one WR
 * gathers max_sge tokens (one SGE each: the source is strided, or the
 * slice would be the whole item). 1 for whole items. */
uint32_t kvf_slice_wrs_per_page(const struct kvf_slice *s, uint32_t max_sge);

#endif
