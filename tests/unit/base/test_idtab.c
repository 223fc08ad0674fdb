/* SPDX-License-Identifier: Apache-2.0 */
/* src/base/idtab.c: the growing id table under the connection table and the
 * scheduler's view of it. Growth over many doublings with every id still
 * found, ids that shared a slot in the old fixed table (id % 1024), ids
 * spread over the 28-bit sequence and the rail bits, removal, the bound on
 * growth, and a zeroed table. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "base/idtab.h"

struct obj {
	uint32_t tag;
	struct kvf_idtab_node node;
};

static struct obj *find(const struct kvf_idtab *h, uint32_t id)
{
	struct kvf_idtab_node *n = kvf_idtab_find(h, id);

	return n ? kvf_idtab_entry(n, struct obj, node) : NULL;
}

static struct obj *objs(uint32_t n)
{
	struct obj *o = calloc(n, sizeof(*o));

	cr_assert_not_null(o);
	return o;
}

Test(idtab, a_zeroed_table_is_empty_and_takes_inserts)
{
	struct kvf_idtab h = {0};
	struct obj o = {.tag = 1, .node.id = 42};

	cr_assert_null(kvf_idtab_find(&h, 42));
	cr_assert_not(kvf_idtab_remove(&h, &o.node));
	kvf_idtab_insert(&h, &o.node);
	cr_assert_eq(find(&h, 42), &o);
	cr_assert_eq(h.n, 1);
	cr_assert(kvf_idtab_remove(&h, &o.node));
	cr_assert_null(kvf_idtab_find(&h, 42));
	kvf_idtab_fini(&h);
}

/* 100,000 ids, each k * 1024 + 7 (all one slot of the old table), then
 * ids spread over the sequence with a rail's bits on top: found after
 * every doubling; the buckets grow with the count. */
Test(idtab, grows_across_doublings_and_finds_every_id)
{
	enum { N = 100000 };
	struct obj *o = objs(N);
	struct kvf_idtab h;
	uint32_t grows_seen = 0;

	kvf_idtab_init(&h, 0);
	for (uint32_t i = 0; i < N; i++) {
		o[i].tag = i;
		o[i].node.id = i < N / 2 ? i * 1024u + 7 : 3u << 28 | (i * 2654435761u >> 4);
		kvf_idtab_insert(&h, &o[i].node);
		if (h.grows != grows_seen) {
			grows_seen = h.grows;
			for (uint32_t j = 0; j <= i; j++)
				cr_assert_eq(find(&h, o[j].node.id), &o[j], "id %u after growth %u",
					     o[j].node.id, h.grows);
		}
	}
	cr_assert_eq(h.n, N);
	cr_assert_geq(h.grows, 12, "64 buckets doubled at least 11 times: %u", h.grows);
	cr_assert_geq(h.mask + 1, N, "load factor at most 1: %u buckets", h.mask + 1);
	cr_assert_null(kvf_idtab_find(&h, 6));
	cr_assert_null(kvf_idtab_find(&h, 1024u * (N / 2) + 7));
	kvf_idtab_fini(&h);
	free(o);
}

Test(idtab, removal_keeps_the_others)
{
	enum { N = 5000 };
	struct obj *o = objs(N);
	struct kvf_idtab h;

	kvf_idtab_init(&h, N);
	for (uint32_t i = 0; i < N; i++) {
		o[i].node.id = i * 1024u + 1;
		kvf_idtab_insert(&h, &o[i].node);
	}
	for (uint32_t i = 0; i < N; i += 2)
		cr_assert(kvf_idtab_remove(&h, &o[i].node));
	cr_assert_not(kvf_idtab_remove(&h, &o[0].node), "gone already");
	cr_assert_eq(h.n, N / 2);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, o[i].node.id), i % 2 ? &o[i] : NULL, "id %u", o[i].node.id);
	/* Back in, growing no further than it did. */
	for (uint32_t i = 0; i < N; i += 2)
		kvf_idtab_insert(&h, &o[i].node);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, o[i].node.id), &o[i]);
	kvf_idtab_fini(&h);
	free(o);
}

/* Growth stops at the bound the caller gave: past it, chains get longer
 * and every lookup is still right. */
Test(idtab, growth_stops_at_its_bound)
{
	enum { N = 2000 };
	struct obj *o = objs(N);
	struct kvf_idtab h;

	kvf_idtab_init(&h, 100);
	cr_assert_eq(h.max_buckets, 128);
	for (uint32_t i = 0; i < N; i++) {
		o[i].node.id = i + 1;
		kvf_idtab_insert(&h, &o[i].node);
	}
	cr_assert_eq(h.mask + 1, 128);
	for (uint32_t i = 0; i < N; i++)
		cr_assert_eq(find(&h, i + 1), &o[i]);
	kvf_idtab_fini(&h);
	cr_assert_eq(h.n, 0);
	cr_assert_null(kvf_idtab_find(&h, 1));
	free(o);
}
