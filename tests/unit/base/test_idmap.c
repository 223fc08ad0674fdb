/* SPDX-License-Identifier: Apache-2.0 */
/* The room id map (src/base/idmap.c) against a model, deletions included. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "base/idmap.h"

/* The ids the map's values stand for: the map keeps only hashes. */
static uint64_t keys[512];
static uint64_t key_of(const void *ctx, uint32_t val)
{
	(void)ctx;
	return keys[val];
}

Test(idmap, insert_find_remove_and_limits)
{
	struct kvf_idmap m;
	uint32_t slot;

	keys[1] = 5;
	keys[2] = 5;
	keys[3] = 6;
	cr_assert_eq(kvf_idmap_init(&m, 2, key_of, NULL), 0);
	cr_assert_eq(kvf_idmap_insert(&m, 5, 0, 1), 0);
	cr_assert_eq(kvf_idmap_insert(&m, 5, 0, 2), -EEXIST);
	cr_assert_eq(kvf_idmap_insert(&m, 5, 1, 2), 0, "other role, other key");
	cr_assert_eq(kvf_idmap_insert(&m, 6, 0, 3), -ENOSPC);
	cr_assert(kvf_idmap_find(&m, 5, 1, &slot));
	cr_assert_eq(slot, 2);
	cr_assert(kvf_idmap_remove(&m, 5, 0));
	cr_assert_not(kvf_idmap_remove(&m, 5, 0));
	cr_assert_not(kvf_idmap_find(&m, 5, 0, &slot));
	kvf_idmap_fini(&m);
}

Test(idmap, refuses_bad_setup)
{
	struct kvf_idmap m;

	cr_assert_eq(kvf_idmap_init(&m, 4, NULL, NULL), -EINVAL);
	cr_assert_eq(kvf_idmap_init(&m, KVF_IDMAP_MAX_VAL + 2, key_of, NULL), -EINVAL);
}

/* A stored entry whose value reads back another id: the hash bits match,
 * the id does not, so it is not the key (the check a hash collision needs). */
static uint64_t liar(const void *ctx, uint32_t val)
{
	(void)ctx;
	return val == 0 ? 999 : val;
}

Test(idmap, a_hash_match_is_checked_against_the_id)
{
	struct kvf_idmap m;
	uint32_t v;

	cr_assert_eq(kvf_idmap_init(&m, 4, liar, NULL), 0);
	cr_assert_eq(kvf_idmap_insert(&m, 100, 0, 0), 0);
	cr_assert_not(kvf_idmap_find(&m, 100, 0, &v), "hash matched, id did not");
	cr_assert_not(kvf_idmap_remove(&m, 100, 0));
	cr_assert_eq(kvf_idmap_insert(&m, 7, 1, 7), 0);
	cr_assert(kvf_idmap_find(&m, 7, 1, &v));
	cr_assert_eq(v, 7);
	kvf_idmap_fini(&m);
}

Test(idmap, random_against_model_with_collisions)
{
	enum { KEYS = 300, OPS = 300000 };
	static uint32_t model[KEYS]; /* slot + 1, 0 = absent */
	struct kvf_idmap m;
	uint32_t n = 0;

	srand(777);
	for (uint32_t k = 0; k < KEYS; k++)
		keys[k] = (uint64_t)k << 40 | (k & 3);
	cr_assert_eq(kvf_idmap_init(&m, KEYS, key_of, NULL), 0);
	for (int op = 0; op < OPS; op++) {
		uint32_t k = (uint32_t)rand() % KEYS, slot;
		/* keys that differ only in high bits, to stress probing */
		uint64_t id = (uint64_t)k << 40 | (k & 3);

		if (rand() % 2) {
			int rc = kvf_idmap_insert(&m, id, k & 1, k);

			cr_assert_eq(rc, model[k] ? -EEXIST : 0);
			if (!model[k]) {
				model[k] = k + 1;
				n++;
			}
		} else {
			cr_assert_eq(kvf_idmap_remove(&m, id, k & 1), model[k] != 0);
			if (model[k]) {
				model[k] = 0;
				n--;
			}
		}
		cr_assert_eq(m.n, n);
		for (uint32_t j = 0; op % 1000 == 0 && j < KEYS; j++) {
			bool found = kvf_idmap_find(&m, (uint64_t)j << 40 | (j & 3), j & 1, &slot);

			cr_assert_eq(found, model[j] != 0, "key %u", j);
			cr_assert(!found || slot == j);
		}
	}
	kvf_idmap_fini(&m);
}
