/* SPDX-License-Identifier: Apache-2.0 */
/* Head slicing (src/transfer/slice.c) against a global [tokens, heads, head_dim]
 * tensor for TP pairs, pairing by global layer (src/transfer/geom.c), and the
 * geometry refusals of kvf_region_register (src/engine/region.c), each naming
 * the buffer and the field. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "transfer/geom.h"
#include "engine/region.h"
#include "transfer/slice.h"

#define T 5      /* tokens per page */
#define HB 6     /* bytes per head per token (odd-sized on purpose) */
#define UNTOUCHED 0xee

/* The global tensor's byte: token t, global head h, byte b (never UNTOUCHED). */
static uint8_t g(uint32_t t, uint32_t h, uint32_t b)
{
	return (uint8_t)(1 + (t * 31 + h * 7 + b) % 200);
}

/* Rank r of tp over heads total: its geometry (heads split evenly; the
 * callers pick totals that tp divides). */
static struct kvf_buf_geometry rank_geom(uint32_t heads, uint32_t tp, uint32_t r)
{
	return (struct kvf_buf_geometry){.page_tokens = T, .heads = heads / tp,
					 .head0 = r * (heads / tp), .head_bytes = HB, .layer = 3};
}

/* One page of rank geometry ge, filled from the global tensor. */
static uint8_t *page_of(const struct kvf_buf_geometry *ge)
{
	uint8_t *p = malloc((size_t)T * ge->heads * HB);

	cr_assert(p);
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t j = 0; j < ge->heads; j++)
			for (uint32_t b = 0; b < HB; b++)
				p[(t * ge->heads + j) * HB + b] = g(t, ge->head0 + j, b);
	return p;
}

/* Copy what the slice says from src's page into dst's page. */
static void apply(const struct kvf_buf_geometry *sg, const uint8_t *src,
		  const struct kvf_buf_geometry *dg, uint8_t *dst)
{
	struct kvf_slice s;

	if (!kvf_slice_make(sg, dg, &s))
		return; /* no heads in common: nothing to write */
	if (!s.tokens) {
		memcpy(dst, src, (size_t)T * sg->heads * HB);
		return;
	}
	for (uint32_t t = 0; t < s.tokens; t++) {
		cr_assert_leq(kvf_slice_src(&s, t) + s.len, (uint64_t)T * sg->heads * HB);
		cr_assert_leq(kvf_slice_dst(&s, t) + s.len, (uint64_t)T * dg->heads * HB);
		memcpy(dst + kvf_slice_dst(&s, t), src + kvf_slice_src(&s, t), s.len);
	}
}

/* Prefill TP sp into decode TP dp over heads: every decode rank fed by
 * every prefill rank ends up holding exactly its heads of the global
 * tensor; fed by one prefill rank, exactly the heads both hold, the rest
 * untouched. */
static void check_tp(uint32_t heads, uint32_t sp, uint32_t dp)
{
	for (uint32_t d = 0; d < dp; d++) {
		struct kvf_buf_geometry dg = rank_geom(heads, dp, d);
		size_t bytes = (size_t)T * dg.heads * HB;
		uint8_t *want = page_of(&dg), *all = malloc(bytes);

		memset(all, UNTOUCHED, bytes);
		for (uint32_t s = 0; s < sp; s++) {
			struct kvf_buf_geometry sg = rank_geom(heads, sp, s);
			uint8_t *src = page_of(&sg), *one = malloc(bytes);

			memset(one, UNTOUCHED, bytes);
			apply(&sg, src, &dg, one);
			apply(&sg, src, &dg, all);
			for (uint32_t t = 0; t < T; t++)
				for (uint32_t j = 0; j < dg.heads; j++) {
					uint32_t h = dg.head0 + j;
					bool mine = h >= sg.head0 && h < sg.head0 + sg.heads;
					size_t at = (t * dg.heads + j) * HB;

					for (uint32_t b = 0; b < HB; b++)
						cr_assert_eq(one[at + b], mine ? g(t, h, b) : UNTOUCHED,
							     "TP%u->TP%u src %u dst %u token %u head %u "
							     "byte %u", sp, dp, s, d, t, h, b);
				}
			free(src);
			free(one);
		}
		cr_assert_eq(memcmp(all, want, bytes), 0, "TP%u->TP%u dst rank %u", sp, dp, d);
		free(want);
		free(all);
	}
}

Test(slice, tp_pairs_against_the_global_tensor)
{
	check_tp(8, 1, 2);
	check_tp(8, 2, 1);
	check_tp(8, 2, 4);
	check_tp(8, 4, 2);
	check_tp(8, 8, 4);
	check_tp(8, 1, 8);
	check_tp(6, 2, 3); /* 3 heads per prefill rank, 2 per decode rank: no rank divides */
	check_tp(6, 3, 2);
}

Test(slice, offsets_as_the_issue_writes_them)
{
	/* Prefill 8 heads [0, 8) into decode rank 1 of TP2, heads [4, 8). */
	struct kvf_buf_geometry s = {T, 8, 0, HB, 0, 0}, d = {T, 4, 4, HB, 0, 0};
	struct kvf_slice sl;

	cr_assert(kvf_slice_make(&s, &d, &sl));
	cr_expect_eq(sl.tokens, T);
	cr_expect_eq(kvf_slice_src(&sl, 2), 2 * 8 * HB + 4 * HB);
	cr_expect_eq(kvf_slice_dst(&sl, 2), 2 * 4 * HB);
	cr_expect_eq(sl.len, 4 * HB);
	cr_expect(kvf_slice_dst_contiguous(&sl));
	cr_expect_eq(kvf_slice_wrs_per_page(&sl, 4), 2, "5 tokens, 4 SGEs a WR");
	/* The other way round: the destination is strided, one WR a token. */
	cr_assert(kvf_slice_make(&d, &s, &sl));
	cr_expect_eq(kvf_slice_src(&sl, 2), 2 * 4 * HB);
	cr_expect_eq(kvf_slice_dst(&sl, 2), 2 * 8 * HB + 4 * HB);
	cr_expect_not(kvf_slice_dst_contiguous(&sl));
	cr_expect_eq(kvf_slice_wrs_per_page(&sl, 4), T);
	/* The same heads: whole items, one WR. */
	cr_assert(kvf_slice_make(&s, &s, &sl));
	cr_expect_eq(sl.tokens, 0);
	cr_expect_eq(kvf_slice_wrs_per_page(&sl, 4), 1);
	/* Disjoint ranges. */
	d.head0 = 8;
	cr_expect_not(kvf_slice_make(&s, &d, &sl));
}

/* ------------------------------------------------------------- pairing */

#define G(l, k, h0, n) {.page_tokens = 16, .heads = (n), .head0 = (h0), .head_bytes = 128, \
			 .layer = (l), .kind = (k)}

Test(slice, two_pipeline_stages_pair_by_global_layer)
{
	/* The receiver holds layers 0..3 (K, V each) in its own order; stage
	 * one sends layers 0..1, stage two layers 2..3. */
	struct kvf_buf_geometry recv[8] = {G(3, 1, 0, 8), G(3, 0, 0, 8), G(2, 1, 0, 8),
					   G(2, 0, 0, 8), G(1, 1, 0, 8), G(1, 0, 0, 8),
					   G(0, 1, 0, 8), G(0, 0, 0, 8)};
	struct kvf_buf_geometry st1[4] = {G(0, 0, 0, 8), G(0, 1, 0, 8), G(1, 0, 0, 8),
					  G(1, 1, 0, 8)};
	struct kvf_buf_geometry st2[4] = {G(2, 0, 0, 8), G(2, 1, 0, 8), G(3, 0, 0, 8),
					  G(3, 1, 0, 8)};
	struct kvf_geom_pair p[4];
	char why[200] = "";

	cr_assert_eq(kvf_geom_pair("kv", st1, 4, recv, 8, p, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(p[0].dst, 7);
	cr_expect_eq(p[1].dst, 6);
	cr_expect_eq(p[2].dst, 5);
	cr_expect_eq(p[3].dst, 4);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(p[i].slice.tokens, 0, "equal geometry: whole items");
	cr_assert_eq(kvf_geom_pair("kv", st2, 4, recv, 8, p, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(p[0].dst, 3);
	cr_expect_eq(p[3].dst, 0);
	/* A receiver of one stage's layers cannot take the other stage. */
	cr_expect_eq(kvf_geom_pair("kv", st2, 4, st1, 4, p, why, sizeof(why)), -EPROTO);
	cr_expect_str_eq(why, "region 'kv': sender buffer 0 (layer 2 kind 0): layer 2 kind 0 is "
			 "not at the receiver (field layer)");
}

Test(slice, pairing_failures_name_buffer_and_field)
{
	struct kvf_buf_geometry s[2] = {G(5, 0, 0, 4), G(5, 1, 0, 4)};
	struct kvf_buf_geometry r[2] = {G(5, 0, 4, 4), G(5, 1, 0, 4)};
	struct kvf_geom_pair p[2];
	char why[200];

	cr_expect_eq(kvf_geom_pair("kv", s, 2, r, 2, p, why, sizeof(why)), -EPROTO);
	cr_expect_str_eq(why, "region 'kv': sender buffer 0 (layer 5 kind 0): heads (head0, heads) "
			 "[0, 4) at the sender and [4, 8) at the receiver (its buffer 0) do not "
			 "overlap");
	r[0].head0 = 2;
	cr_assert_eq(kvf_geom_pair("kv", s, 2, r, 2, p, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(p[0].slice.tokens, 16, "heads [2, 4) in common: sliced");
	cr_expect_eq(p[0].slice.len, 2 * 128);
	r[1].head_bytes = 256;
	cr_expect_eq(kvf_geom_pair("kv", s, 2, r, 2, p, why, sizeof(why)), -EPROTO);
	cr_expect_str_eq(why, "region 'kv': sender buffer 1 (layer 5 kind 1): head_bytes 128 at "
			 "the sender, 256 at the receiver (its buffer 1)");
	r[1].head_bytes = 128;
	r[1].page_tokens = 32;
	cr_expect_eq(kvf_geom_pair("kv", s, 2, r, 2, p, why, sizeof(why)), -EPROTO);
	cr_expect_str_eq(why, "region 'kv': sender buffer 1 (layer 5 kind 1): page_tokens 16 at "
			 "the sender, 32 at the receiver (its buffer 1)");
}

/* ------------------------------------------------------- registration */

static char logged[512];

static void keep_log(void *arg, int level, const char *module, const char *msg)
{
	(void)arg;
	(void)level;
	(void)module;
	snprintf(logged, sizeof(logged), "%s", msg);
}

static int check(struct kvf_buf_geometry *geo, const uint64_t *sizes)
{
	static uint64_t mem[2][512];
	void *bufs[2] = {mem[0], mem[1]};
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	struct kvf_regions rs;
	uint32_t id;

	memset(&rs, 0, sizeof(rs));
	d.name = "kv";
	d.nbufs = 2;
	d.nitems = 4;
	d.bufs = bufs;
	d.item_size = sizes;
	d.geom = geo;
	logged[0] = '\0';
	return kvf_regions_check(&rs, &d, &id);
}

Test(slice, registration_refusals_name_buffer_and_field)
{
	uint64_t sizes[2] = {4 * 2 * 8, 4 * 2 * 8};
	struct kvf_buf_geometry geo[2] = {{4, 2, 0, 8, 0, 0}, {4, 2, 0, 8, 0, 1}};

	cr_assert_eq(kvf_set_log_callback(keep_log, NULL), 0);
	cr_expect_eq(check(geo, sizes), 0, "%s", logged);
	cr_expect_eq(check(NULL, sizes), 0, "no geometry: today's regions");
	geo[1].head_bytes = 16;
	cr_expect_eq(check(geo, sizes), -EINVAL);
	cr_expect(strstr(logged, "region 'kv': buffer 1 (layer 0 kind 1, item size 64): geometry "
			 "page_tokens x heads x head_bytes is not the item size"), "%s", logged);
	geo[1] = (struct kvf_buf_geometry){4, 2, 0, 8, 0, 0};
	cr_expect_eq(check(geo, sizes), -EINVAL);
	cr_expect(strstr(logged, "buffer 1 (layer 0 kind 0, item size 64): geometry (layer, kind) "
			 "given to an earlier buffer too"), "%s", logged);
	geo[1] = (struct kvf_buf_geometry){0};
	cr_expect_eq(check(geo, sizes), -EINVAL);
	cr_expect(strstr(logged, "buffer 1 (layer 0 kind 0, item size 64): geometry given for some "
			 "buffers and not others"), "%s", logged);
	geo[1] = (struct kvf_buf_geometry){.page_tokens = 4, .head_bytes = 16, .kind = 1};
	cr_expect_eq(check(geo, sizes), -EINVAL);
	cr_expect(strstr(logged, "buffer 1 (layer 0 kind 1, item size 64): geometry heads 0"), "%s",
		  logged);
	cr_assert_eq(kvf_set_log_callback(NULL, NULL), 0);
}

Test(slice, an_old_caller_without_the_field_is_read_without_geometry)
{
	/* A descriptor of the size before .geom: the field is not read. */
	static uint64_t mem[64];
	void *bufs[1] = {mem};
	uint64_t sizes[1] = {8};
	struct kvf_region_desc d = {.size = offsetof(struct kvf_region_desc, geom), .nbufs = 1,
				    .name = "kv", .nitems = 4, .bufs = bufs, .item_size = sizes,
				    .geom = (const struct kvf_buf_geometry *)1};
	struct kvf_regions rs;
	uint32_t id;

	memset(&rs, 0, sizeof(rs));
	cr_expect_eq(kvf_regions_check(&rs, &d, &id), 0);
	cr_expect_null(kvf_region_desc_geom(&d));
}
