/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/geom_map.c without a device: hand-made regions (ours) and
 * peer HELLOs in, the partner of each buffer, its slice, and the mismatch
 * text each side computes out. Both sides must say the same words. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/conn.h"
#include "rdma/geom_map.h"
#include "rdma/pool.h"
#include "rdma/rdma_internal.h"

/* Our region "kv": n buffers of geometry g (NULL: none), items of size[b]. */
static struct kvf_pool *pool(uint32_t n, const struct kvf_buf_geometry *g, const uint64_t *size)
{
	struct kvf_pool *p = calloc(1, sizeof(*p) + n * sizeof(p->bufs[0]));

	cr_assert(p);
	strcpy(p->name, "kv");
	p->nbufs = n;
	p->nblocks = 8;
	p->seq = 1;
	for (uint32_t b = 0; b < n; b++) {
		p->bufs[b].addr = 0x10000 * (b + 1);
		p->bufs[b].block_size = size[b];
	}
	if (g) {
		p->geom = calloc(n, sizeof(*g));
		memcpy(p->geom, g, n * sizeof(*g));
	}
	return p;
}

/* A peer HELLO of one region "kv" (its buffers at 0x100000 x (b + 1)). */
static struct kvf_peer_pool *peer(uint32_t n, const struct kvf_buf_geometry *g,
				  const uint64_t *size)
{
	struct kvf_peer_pool *pp = calloc(1, sizeof(*pp) + n * (sizeof(pp->bufs[0]) +
								 sizeof(pp->geom[0])));

	cr_assert(pp);
	pp->geom = (struct kvf_buf_geometry *)(pp->bufs + n);
	pp->nregions = 1;
	pp->nbufs = n;
	strcpy(pp->regions[0].name, "kv");
	pp->regions[0].nitems = 8;
	pp->regions[0].nbufs = n;
	for (uint32_t b = 0; b < n; b++) {
		pp->bufs[b] = (struct kvf_sq_buf){.addr = 0x100000ull * (b + 1),
						  .block_size = size[b], .key = 100 + b};
		if (g)
			pp->geom[b] = g[b];
	}
	return pp;
}

static struct kvf_rdma rt = {.cfg = {.max_blocks_per_room = 16}};

/* A connection as the scheduler holds it: its transport, its send queue's
 * SGE limit and bound on waiting writes. */
static struct kvf_conn *conn(void)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));

	cr_assert(c);
	c->t = &rt;
	c->sq.max_sge = 4;
	c->sq.pend_max = 100;
	return c;
}

static void pool_free(struct kvf_pool *p)
{
	free(p->geom);
	free(p);
}

#define G(l, k, h0, n, hb) {.page_tokens = 16, .heads = (n), .head0 = (h0), .head_bytes = (hb), \
			     .layer = (l), .kind = (k)}

Test(geom_map, equal_geometry_pairs_by_layer_and_keeps_whole_items)
{
	/* A stage of layers 2..3 into a receiver of layers 0..3 in its own order. */
	struct kvf_buf_geometry ours[4] = {G(2, 0, 0, 8, 128), G(2, 1, 0, 8, 128),
					   G(3, 0, 0, 8, 128), G(3, 1, 0, 8, 128)};
	struct kvf_buf_geometry theirs[8] = {G(0, 0, 0, 8, 128), G(0, 1, 0, 8, 128),
					     G(1, 0, 0, 8, 128), G(1, 1, 0, 8, 128),
					     G(3, 1, 0, 8, 128), G(3, 0, 0, 8, 128),
					     G(2, 1, 0, 8, 128), G(2, 0, 0, 8, 128)};
	uint64_t sz[8] = {16384, 16384, 16384, 16384, 16384, 16384, 16384, 16384};
	struct kvf_pool *p = pool(4, ours, sz);
	struct kvf_peer_pool *pp = peer(8, theirs, sz);
	struct kvf_conn *c = conn();
	const struct kvf_geom_map *m, *again;
	char why[200] = "";

	cr_assert_eq(kvf_geom_map_get(c, p, pp, 0, &m, why, sizeof(why)), 0, "%s", why);
	cr_expect_null(m->slices, "equal geometry: the whole-block path");
	cr_expect_eq(c->sq.pend_max, 100, "whole items: conn.c's bound stands");
	cr_expect_eq(m->remote[0].key, 107, "layer 2 K is their buffer 7");
	cr_expect_eq(m->remote[1].key, 106);
	cr_expect_eq(m->remote[2].key, 105);
	cr_expect_eq(m->remote[3].key, 104);
	cr_assert_eq(kvf_geom_map_get(c, p, pp, 0, &again, why, sizeof(why)), 0);
	cr_expect_eq(again, m, "made once per registration");
	p->seq = 2;
	cr_assert_eq(kvf_geom_map_get(c, p, pp, 0, &again, why, sizeof(why)), 0);
	cr_expect_eq(again->seq, 2, "a region registered anew gets a new map");
	kvf_geom_map_free_all(c);
	free(c);
	free(pp);
	pool_free(p);
}

Test(geom_map, no_geometry_is_by_position)
{
	uint64_t sz[2] = {4096, 64};
	struct kvf_pool *p = pool(2, NULL, sz);
	struct kvf_peer_pool *pp = peer(2, NULL, sz);
	struct kvf_conn *c = conn();
	const struct kvf_geom_map *m;
	char why[200] = "";

	cr_assert_eq(kvf_geom_map_get(c, p, pp, 0, &m, why, sizeof(why)), 0, "%s", why);
	cr_expect_null(m->slices);
	cr_expect_eq(m->remote[0].key, 100);
	cr_expect_eq(m->remote[1].key, 101);
	kvf_geom_map_free_all(c);
	free(c);
	free(pp);
	pool_free(p);
}

Test(geom_map, tp1_into_tp2_rank1_is_sliced)
{
	struct kvf_buf_geometry ours[1] = {G(0, 0, 0, 8, 128)}, theirs[1] = {G(0, 0, 4, 4, 128)};
	uint64_t s8[1] = {16 * 8 * 128}, s4[1] = {16 * 4 * 128};
	struct kvf_pool *p = pool(1, ours, s8);
	struct kvf_peer_pool *pp = peer(1, theirs, s4);
	struct kvf_conn *c = conn();
	const struct kvf_geom_map *m;
	char why[200] = "";

	cr_assert_eq(kvf_geom_map_get(c, p, pp, 0, &m, why, sizeof(why)), 0, "%s", why);
	cr_assert_not_null(m->slices);
	cr_expect_eq(m->slices[0].tokens, 16);
	cr_expect_eq(m->slices[0].src_off, 4 * 128);
	cr_expect_eq(m->slices[0].dst_off, 0);
	cr_expect_eq(m->slices[0].len, 4 * 128);
	cr_expect_eq(m->remote[0].block_size, s4[0], "the partner's own item size");
	cr_expect_eq(c->sq.pend_max, (size_t)1024 * 16 * 4 + 1,
		     "the biggest room still fits: 4 WRs a sliced page");
	kvf_geom_map_free_all(c);
	free(c);
	free(pp);
	pool_free(p);
}

/* The prefill (sender) and the decode (receiver) each check the other's
 * HELLO against their own region: both must name the same buffer and
 * field in the same words. */
static void same_words(const struct kvf_buf_geometry *sg, const uint64_t *ss, uint32_t ns,
		       const struct kvf_buf_geometry *rg, const uint64_t *rs, uint32_t nr,
		       const char *want)
{
	struct kvf_pool *ps = pool(ns, sg, ss), *pr = pool(nr, rg, rs);
	struct kvf_peer_pool *hs = peer(ns, sg, ss), *hr = peer(nr, rg, rs);
	char a[200] = "", b[200] = "";

	cr_expect_not(kvf_geom_map_check(ps, hr, 0, true, a, sizeof(a)));
	cr_expect_not(kvf_geom_map_check(pr, hs, 0, false, b, sizeof(b)));
	cr_expect_str_eq(a, want, "prefill's view");
	cr_expect_str_eq(b, want, "decode's view");
	free(hs);
	free(hr);
	pool_free(ps);
	pool_free(pr);
}

Test(geom_map, both_sides_name_the_same_buffer_and_field)
{
	struct kvf_buf_geometry s[2] = {G(7, 0, 0, 4, 64), G(7, 1, 0, 4, 64)};
	struct kvf_buf_geometry r[2] = {G(7, 0, 0, 4, 128), G(7, 1, 0, 4, 128)};
	uint64_t ss[2] = {16 * 4 * 64, 16 * 4 * 64}, rs[2] = {16 * 4 * 128, 16 * 4 * 128};

	same_words(s, ss, 2, r, rs, 2, "region 'kv': sender buffer 0 (layer 7 kind 0): head_bytes 64 "
		   "at the sender, 128 at the receiver (its buffer 0)");
	r[0] = (struct kvf_buf_geometry)G(6, 0, 0, 4, 64);
	r[1] = (struct kvf_buf_geometry)G(6, 1, 0, 4, 64);
	same_words(s, ss, 2, r, ss, 2, "region 'kv': sender buffer 0 (layer 7 kind 0): layer 7 kind 0 "
		   "is not at the receiver (field layer)");
	same_words(s, ss, 2, NULL, ss, 2, "region 'kv': buffer geometry at the sender, none at the "
		   "receiver (field geometry)");
	same_words(NULL, ss, 2, s, ss, 2, "region 'kv': buffer geometry at the receiver, none at the "
		   "sender (field geometry)");
}
