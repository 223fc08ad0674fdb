/* SPDX-License-Identifier: Apache-2.0 */
/* The early-event table (src/early.c) and how the engine keeps its books on
 * it: every tombstone and parked ROOM_INFO ends in exactly one counted
 * outcome. */
#include <criterion/criterion.h>

#include "early.h"
#include "fake_transport.h"

/* Engine creation that fails part way (the early table's id map refuses its
 * size) must unwind without freeing anything twice. The id map refuses more
 * than KVF_IDMAP_MAX_VAL + 1 entries before allocating; the entry array was
 * already allocated (virtual memory only, never touched). */
Test(room_early, failed_init_leaves_nothing_to_free_twice)
{
	struct kvf_early e = { 0 };

	cr_assert_eq(kvf_early_init(&e, KVF_IDMAP_MAX_VAL + 2), -EINVAL);
	cr_assert_null(e.ent, "the entry array is freed and forgotten");
	kvf_early_fini(&e); /* what the engine's cleanup does: must be harmless */
}

Test(room_early, engine_create_unwinds_a_failed_early_table)
{
	struct kvf_config cfg;
	kvf_engine *eng = NULL;

	fake_cfg(&cfg);
	cfg.max_tombstones = KVF_IDMAP_MAX_VAL + 2;
	cr_assert_eq(kvf_engine_create(&cfg, NULL, NULL, &eng), -EINVAL);
	cr_assert_null(eng);
}
