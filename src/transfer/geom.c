/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/geom.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

/* The receiver buffer of (layer, kind), or nr. Registration made the pair
 * unique per region on each side. */
static uint32_t find_partner(const struct kvf_buf_geometry *s,
			     const struct kvf_buf_geometry *rg, uint32_t nr)
{
	uint32_t r;

	for (r = 0; r < nr; r++)
		if (rg[r].layer == s->layer && rg[r].kind == s->kind)
			break;
	return r;
}

/* Why sender buffer b (s) cannot go to receiver buffer r (d), or 0. */
static int pair_one(const char *name, uint32_t b, const struct kvf_buf_geometry *s,
		    uint32_t r, const struct kvf_buf_geometry *d, struct kvf_slice *out,
		    char *why, size_t wlen)
{
	const char *field = s->page_tokens != d->page_tokens ? "page_tokens" :
			    s->head_bytes != d->head_bytes ? "head_bytes" : NULL;
	int n;

	n = snprintf(why, wlen, "region '%s': sender buffer %" PRIu32 " (layer %" PRIu32
		     " kind %" PRIu32 "): ", name, b, s->layer, s->kind);
	if (n < 0 || (size_t)n >= wlen)
		n = 0;
	if (field) {
		snprintf(why + n, wlen - (size_t)n, "%s %" PRIu32 " at the sender, %" PRIu32
			 " at the receiver (its buffer %" PRIu32 ")", field,
			 field[0] == 'p' ? s->page_tokens : s->head_bytes,
			 field[0] == 'p' ? d->page_tokens : d->head_bytes, r);
		return -EPROTO;
	}
	if (!kvf_slice_make(s, d, out)) {
		snprintf(why + n, wlen - (size_t)n, "heads (head0, heads) [%" PRIu32 ", %" PRIu64
			 ") at the sender and [%" PRIu32 ", %" PRIu64 ") at the receiver (its "
			 "buffer %" PRIu32 ") do not overlap", s->head0,
			 (uint64_t)s->head0 + s->heads, d->head0, (uint64_t)d->head0 + d->heads, r);
		return -EPROTO;
	}
	return 0;
}

int kvf_geom_pair(const char *name, const struct kvf_buf_geometry *sg, uint32_t ns,
		  const struct kvf_buf_geometry *rg, uint32_t nr, struct kvf_geom_pair *pairs,
		  char *why, size_t wlen)
{
	for (uint32_t b = 0; b < ns; b++) {
		uint32_t r = find_partner(&sg[b], rg, nr);
		int rc;

		if (r == nr) {
			snprintf(why, wlen, "region '%s': sender buffer %" PRIu32 " (layer %" PRIu32
				 " kind %" PRIu32 "): layer %" PRIu32 " kind %" PRIu32 " is not at "
				 "the receiver (field layer)", name, b, sg[b].layer, sg[b].kind,
				 sg[b].layer, sg[b].kind);
			return -EPROTO;
		}
		rc = pair_one(name, b, &sg[b], r, &rg[r], &pairs[b].slice, why, wlen);
		if (rc)
			return rc;
		pairs[b].dst = r;
	}
	return 0;
}
