/* SPDX-License-Identifier: Apache-2.0 */
/* The early-event table (src/engine/early.c) and how the engine keeps its books on
 * it: every tombstone and parked ROOM_INFO ends in exactly one counted
 * outcome. */
#include <criterion/criterion.h>

#include "engine/early.h"
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

/* Every tombstone and every parked ROOM_INFO ends in exactly one counted
 * outcome, and the live gauges are the table's own count. */
static void check_books(kvf_engine *eng)
{
	struct kvf_stats st = KVF_STATS_INIT;

	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_eq(st.tombstones_created, st.tombstones_applied + st.tombstones_expired +
						    st.tombstones_evicted + st.tombstones_live,
		     "tombstones: created %lu applied %lu expired %lu evicted %lu live %lu",
		     (unsigned long)st.tombstones_created, (unsigned long)st.tombstones_applied,
		     (unsigned long)st.tombstones_expired, (unsigned long)st.tombstones_evicted,
		     (unsigned long)st.tombstones_live);
	cr_assert_eq(st.early_infos_parked, st.early_infos_applied + st.early_infos_expired +
						    st.early_infos_evicted + st.early_infos_replaced +
						    st.early_infos_live,
		     "infos: parked %lu applied %lu expired %lu evicted %lu replaced %lu live %lu",
		     (unsigned long)st.early_infos_parked, (unsigned long)st.early_infos_applied,
		     (unsigned long)st.early_infos_expired, (unsigned long)st.early_infos_evicted,
		     (unsigned long)st.early_infos_replaced, (unsigned long)st.early_infos_live);
	cr_assert_eq(st.tombstones_live + st.early_infos_live, eng->early.ntomb + eng->early.ninfo);
}

Test(room_early, every_early_entry_has_one_counted_outcome, .timeout = 120)
{
	struct kvf_config cfg;
	struct kvf_stats st = KVF_STATS_INIT;
	struct fake f;
	kvf_engine *eng;
	unsigned seed = 7;
	kvf_room h;

	fake_cfg(&cfg);
	cfg.max_rooms = 256;
	cfg.max_tombstones = 32; /* small: evictions happen */
	cfg.tombstone_ttl_s = 2;
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	for (int i = 0; i < 20000; i++) {
		uint64_t id = 1 + (uint64_t)(rand_r(&seed) % 64);
		uint32_t conn = 7 + (uint32_t)(rand_r(&seed) % 2);

		switch (rand_r(&seed) % 6) {
		case 0: case 1: /* the decode side asks early */
			push_info(eng, id, conn, 0x100000001ull, 2);
			break;
		case 2: case 3: /* ... and aborts, often before the room exists */
			push_abort(eng, id, rand_r(&seed) % 2 ? KVF_SENDER : KVF_RECEIVER, conn);
			break;
		case 4: /* the prefill side creates the room and is done with it */
			if (kvf_sender_create(eng, id, &h) == 0) {
				kvf_abort(eng, h);
				kvf_release(eng, h);
			}
			break;
		default:
			fake_clock += SEC / 4;
			break;
		}
		kvf_progress(eng);
		if (i % 101 == 0)
			check_books(eng);
	}
	check_books(eng);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_gt(st.early_infos_replaced, 0, "the storm replaced parked infos");
	cr_assert_gt(st.early_infos_evicted + st.tombstones_evicted, 0, "and evicted entries");
	cr_assert_gt(st.early_infos_applied + st.tombstones_applied, 0);
	cr_assert_gt(st.early_infos_expired + st.tombstones_expired, 0);
	/* Everything left expires: the books close with nothing live. */
	fake_clock += (cfg.tombstone_ttl_s + 1) * SEC;
	kvf_progress(eng);
	check_books(eng);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_eq(st.tombstones_live + st.early_infos_live, 0);
	kvf_engine_close(eng);
}

/* Issue 13, defect 13 for tombstones: an ABORT that came on one connection
 * before its receiver room existed fails that room only when the room is
 * bound to the same connection (here: its ROOM_INFO went out on conn 7). */
Test(room_early, receiver_tombstone_applies_only_to_its_connection)
{
	struct kvf_config cfg;
	struct kvf_stats st = KVF_STATS_INIT;
	struct fake f;
	uint32_t blk = 0;
	kvf_engine *eng;
	kvf_room a, b;

	fake_cfg(&cfg);
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	push_abort(eng, 0x51, KVF_RECEIVER, 8); /* another connection's */
	push_abort(eng, 0x52, KVF_RECEIVER, 7); /* the room's own connection's */
	kvf_progress(eng);
	cr_assert_eq(kvf_receiver_create(eng, 0x51, "10.0.0.1:1", &a), 0);
	cr_assert_eq(kvf_receiver_init(eng, a, &blk, 1), 0);
	cr_assert_eq(kvf_poll(eng, a), KVF_WAITING_FOR_INPUT, "conn 8's tombstone is not for it");
	blk = 1;
	cr_assert_eq(kvf_receiver_create(eng, 0x52, "10.0.0.1:1", &b), 0);
	if (kvf_poll(eng, b) != KVF_FAILED) /* conn 7 known at creation: failed at once */
		cr_assert_eq(kvf_receiver_init(eng, b, &blk, 1), -ECANCELED);
	cr_assert_eq(kvf_poll(eng, b), KVF_FAILED);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_eq(st.tombstones_applied, 1);
	cr_assert_eq(st.tombstones_live, 1, "conn 8's stays until its TTL");
	fake_clock += (cfg.tombstone_ttl_s + 1) * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_eq(st.tombstones_expired, 1);
	cr_assert_eq(kvf_poll(eng, a), KVF_WAITING_FOR_INPUT);
	kvf_engine_close(eng);
}

/* Parked ROOM_INFOs are bounded in bytes: past engine.max_parked_info_bytes
 * one more is refused, counted, and answered with an ABORT. */
Test(room_early, parked_infos_are_bounded_in_bytes)
{
	struct kvf_config cfg;
	struct kvf_stats st = KVF_STATS_INIT;
	struct fake f;
	kvf_engine *eng;
	uint32_t n = 4000; /* items per info: ~16 KiB each */
	uint64_t one;

	fake_cfg(&cfg);
	cfg.max_parked_info_bytes = 64 * 1024;
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	for (uint64_t id = 1; id <= 8; id++)
		push_info(eng, id, 7, 0x100000001ull, n);
	kvf_progress(eng);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	one = sizeof(struct kvf_peer_info) + n * sizeof(uint32_t);
	cr_assert_eq(st.early_infos_parked, cfg.max_parked_info_bytes / one);
	cr_assert_eq(st.early_infos_refused, 8 - st.early_infos_parked);
	cr_assert_leq(eng->early.info_bytes, cfg.max_parked_info_bytes);
	cr_assert_eq(eng->early.info_bytes, st.early_infos_parked * one);
	cr_assert_eq(f.aborts, (int)st.early_infos_refused, "each refused one is aborted");
	cr_assert_eq(f.abort_role, KVF_RECEIVER);
	/* The bytes come back as parked infos leave: one more fits again. */
	fake_clock += (cfg.tombstone_ttl_s + 1) * SEC;
	kvf_progress(eng);
	cr_assert_eq(eng->early.info_bytes, 0);
	push_info(eng, 9, 7, 0x100000001ull, n);
	kvf_progress(eng);
	cr_assert_eq(kvf_stats(eng, &st), 0);
	cr_assert_eq(st.early_infos_live, 1);
	check_books(eng);
	kvf_engine_close(eng);
}
