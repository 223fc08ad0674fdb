/* SPDX-License-Identifier: Apache-2.0 */
#include "engine/chunk.h"

#include <inttypes.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bits follow the lists: both sizes keep them 8-byte aligned. */
_Static_assert(sizeof(struct kvf_chunks) % 8 == 0 && sizeof(struct kvf_chunk_list) % 8 == 0,
	       "kvf_chunks' bits must be aligned");

static size_t words(uint32_t n)
{
	return ((size_t)n + 63) / 64;
}

static bool bit(const uint64_t *b, uint32_t i)
{
	return (b[i / 64] >> (i % 64)) & 1u;
}

struct kvf_chunks *kvf_chunks_new(const struct kvf_peer_info *pi, const struct kvf_regions *rs,
				  uint32_t *mask)
{
	size_t nw = 0, head = sizeof(struct kvf_chunks) + pi->nlists * sizeof(struct kvf_chunk_list);
	struct kvf_chunks *cs;
	uint64_t *bits;

	for (uint32_t k = 0; k < pi->nlists; k++)
		nw += words(pi->lists[k].n);
	cs = malloc(head + nw * sizeof(uint64_t));
	if (!cs)
		return NULL;
	bits = (uint64_t *)((char *)cs + head); /* head is a multiple of 8 */
	memset(bits, 0, nw * sizeof(uint64_t));
	*mask = 0;
	cs->nlists = pi->nlists;
	for (uint32_t k = 0; k < pi->nlists; k++) {
		struct kvf_chunk_list *l = &cs->l[k];

		l->local = kvf_regions_find(rs, pi->lists[k].name);
		if (l->local != KVF_NO_REGION)
			*mask |= 1u << l->local;
		l->done = 0;
		l->sent = bits;
		bits += words(pi->lists[k].n);
	}
	return cs;
}

int kvf_chunks_list(const struct kvf_chunks *cs, uint32_t region)
{
	for (uint32_t k = 0; k < cs->nlists; k++)
		if (cs->l[k].local == region)
			return (int)k;
	return -1;
}

/* Bits [lo, hi) of one word, 0 <= lo < hi <= 64. */
static uint64_t span(uint32_t lo, uint32_t hi)
{
	return (hi == 64 ? ~0ull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
}

/* The first entry of [off, off + n) already sent, or UINT32_MAX; a word at
 * a time (a room's lists run to thousands of pages). */
static uint32_t first_sent(const uint64_t *b, uint32_t off, uint32_t n)
{
	for (uint32_t i = off, end = off + n; i < end;) {
		uint32_t w = i / 64, hi = end - w * 64 < 64 ? end - w * 64 : 64;
		uint64_t hit = b[w] & span(i % 64, hi);

		if (hit)
			return w * 64 + (uint32_t)__builtin_ctzll(hit);
		i = (w + 1) * 64;
	}
	return UINT32_MAX;
}

static void mark_sent(uint64_t *b, uint32_t off, uint32_t n)
{
	for (uint32_t i = off, end = off + n; i < end;) {
		uint32_t w = i / 64, hi = end - w * 64 < 64 ? end - w * 64 : 64;

		b[w] |= span(i % 64, hi);
		i = (w + 1) * 64;
	}
}

int kvf_chunks_take(struct kvf_chunks *cs, const struct kvf_peer_info *pi,
		    const struct kvf_chunk_part *parts, uint32_t nparts,
		    struct kvf_xfer_part *out, char *why, size_t wlen)
{
	for (uint32_t i = 0; i < nparts; i++) {
		const struct kvf_chunk_part *p = &parts[i];
		int k = kvf_chunks_list(cs, p->region);
		const struct kvf_peer_list *pl;
		struct kvf_chunk_list *l;
		uint32_t dup;

		if (k < 0) {
			snprintf(why, wlen, "chunk part %" PRIu32 ": region id %" PRIu32 " is none "
				 "the receiver asked for (%" PRIu32 " lists)", i, p->region, pi->nlists);
			return -EMSGSIZE;
		}
		pl = &pi->lists[k];
		l = &cs->l[k];
		if (p->dst_offset > pl->n || p->n > pl->n - p->dst_offset) {
			snprintf(why, wlen, "region '%s': chunk entries %" PRIu32 "..%" PRIu64
				 " run past the receiver's list of %" PRIu32, pl->name, p->dst_offset,
				 (uint64_t)p->dst_offset + p->n - 1, pl->n);
			return -EMSGSIZE;
		}
		dup = first_sent(l->sent, p->dst_offset, p->n);
		if (dup != UINT32_MAX) {
			snprintf(why, wlen, "region '%s': chunk entries %" PRIu32 "..%" PRIu32
				 " overlap what was sent (entry %" PRIu32 ")", pl->name,
				 p->dst_offset, p->dst_offset + p->n - 1, dup);
			return -EMSGSIZE;
		}
		mark_sent(l->sent, p->dst_offset, p->n);
		l->done += p->n;
		out[i] = (struct kvf_xfer_part){ .region = p->region, .peer_region = pl->peer_region,
						 .n = p->n, .src = p->src,
						 .dst = pi->ids + pl->first + p->dst_offset };
	}
	return 0;
}

int kvf_chunks_whole(const struct kvf_chunks *cs, const struct kvf_peer_info *pi, char *why,
		     size_t wlen)
{
	for (uint32_t k = 0; k < cs->nlists; k++) {
		const struct kvf_chunk_list *l = &cs->l[k];
		uint32_t n = pi->lists[k].n, a = 0, b;

		if (l->done == n)
			continue;
		while (bit(l->sent, a))
			a++;
		for (b = a; b + 1 < n && !bit(l->sent, b + 1); b++)
			;
		snprintf(why, wlen, "region '%s': the LAST chunk leaves entries %" PRIu32 "..%" PRIu32
			 " of the receiver's %" PRIu32 " unsent (%" PRIu32 " sent)%s", pi->lists[k].name,
			 a, b, n, l->done, l->local == KVF_NO_REGION ? "; no region of that name here" : "");
		return -EMSGSIZE;
	}
	return 0;
}
