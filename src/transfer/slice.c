/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/slice.h"

bool kvf_slice_make(const struct kvf_buf_geometry *src, const struct kvf_buf_geometry *dst,
		    struct kvf_slice *out)
{
	uint64_t s_end = (uint64_t)src->head0 + src->heads, d_end = (uint64_t)dst->head0 + dst->heads;
	uint64_t h0 = src->head0 > dst->head0 ? src->head0 : dst->head0;
	uint64_t h1 = s_end < d_end ? s_end : d_end;
	uint64_t hb = src->head_bytes;

	*out = (struct kvf_slice){0};
	if (h1 <= h0)
		return false;
	if (src->head0 == dst->head0 && src->heads == dst->heads)
		return true; /* the same heads: whole items */
	out->tokens = src->page_tokens;
	out->src_token_bytes = (uint64_t)src->heads * hb;
	out->dst_token_bytes = (uint64_t)dst->heads * hb;
	out->src_off = (h0 - src->head0) * hb;
	out->dst_off = (h0 - dst->head0) * hb;
	out->len = (h1 - h0) * hb;
	return true;
}

uint32_t kvf_slice_wrs_per_page(const struct kvf_slice *s, uint32_t max_sge)
{
	if (!s->tokens)
		return 1;
	if (!kvf_slice_dst_contiguous(s))
		return s->tokens;
	return (s->tokens + max_sge - 1) / max_sge;
}
