/* SPDX-License-Identifier: Apache-2.0 */
/* Watched rooms (src/engine/watch.c): kvf_changed reports each watched room whose
 * state changed, once, with its state then and its tag; nothing for rooms
 * not watched, released, or whose change left the room's state as it was
 * (a fan member's). */
#include <errno.h>

#include "room_fixture.h"

TestSuite(watch, .init = room_setup, .fini = room_teardown);

static int tags[8];

static kvf_room sender(uint64_t id)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
	return h;
}

static kvf_room watched(uint64_t id, int *tag)
{
	kvf_room h = sender(id);

	cr_assert_eq(kvf_watch(eng, h, tag), 0);
	return h;
}

/* The one change expected now: room h in state. */
static void one_change(kvf_room h, int state, void *tag)
{
	struct kvf_change c[4];

	cr_assert_eq(kvf_changed(eng, c, 4), 1);
	cr_assert_eq(c[0].room.v, h.v);
	cr_assert_eq(c[0].state, state, "state %d, want %d", c[0].state, state);
	cr_assert_eq(c[0].tag, tag);
}

static int nchanged(void)
{
	struct kvf_change c[16];

	return kvf_changed(eng, c, 16);
}

Test(watch, a_change_is_reported_once_with_its_tag_and_unwatched_rooms_never)
{
	kvf_room a = watched(1, &tags[0]), b = watched(2, &tags[1]), c = sender(3);

	cr_assert_eq(nchanged(), 0, "watching reports nothing: the state then counts as said");
	push_info(eng, 1, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	one_change(a, KVF_WAITING_FOR_INPUT, &tags[0]);
	cr_assert_eq(nchanged(), 0, "said once");
	cr_assert_eq(kvf_abort(eng, c), 0);
	cr_assert_eq(nchanged(), 0, "room 3 is not watched");
	cr_assert_eq(kvf_abort(eng, b), 0);
	one_change(b, KVF_FAILED, &tags[1]);
	cr_assert_eq(kvf_unwatch(eng, a), 0);
	cr_assert_eq(kvf_abort(eng, a), 0);
	cr_assert_eq(nchanged(), 0, "room 1 is unwatched");
	cr_assert_eq(kvf_unwatch(eng, a), -EINVAL, "not watched");
}

Test(watch, two_changes_between_calls_are_one_report_of_the_state_now)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	kvf_room h = watched(1, NULL);

	push_info(eng, 1, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_send(eng, h, src, 4), 0);
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	one_change(h, KVF_SUCCESS, NULL);
	cr_assert_eq(nchanged(), 0);
}

Test(watch, what_max_leaves_out_comes_at_the_next_call)
{
	struct kvf_change c[2];
	kvf_room h[5];

	for (int i = 0; i < 5; i++) {
		h[i] = watched(10 + (uint64_t)i, &tags[i]);
		cr_assert_eq(kvf_abort(eng, h[i]), 0);
	}
	for (int want = 0, call = 0; call < 3; call++) {
		int n = kvf_changed(eng, c, 2);

		cr_assert_eq(n, call < 2 ? 2 : 1, "call %d: %d", call, n);
		for (int k = 0; k < n; k++, want++) {
			cr_assert_eq(c[k].room.v, h[want].v, "in the order of the changes");
			cr_assert_eq(c[k].tag, &tags[want]);
		}
	}
	cr_assert_eq(kvf_changed(eng, c, 2), 0);
	cr_assert_eq(kvf_changed(eng, NULL, 2), -EINVAL);
}

Test(watch, a_released_room_says_nothing_and_its_slot_starts_unwatched)
{
	kvf_room old = watched(1, &tags[0]), fresh;

	cr_assert_eq(kvf_abort(eng, old), 0);
	cr_assert_eq(kvf_release(eng, old), 0);
	cr_assert_eq(kvf_watch(eng, old, NULL), -EINVAL, "stale handle");
	fresh = sender(2);
	cr_assert_eq((uint32_t)fresh.v, (uint32_t)old.v, "the same slot, reused");
	cr_assert_eq(nchanged(), 0, "the released room's queued change went with it");
	cr_assert_eq(kvf_abort(eng, fresh), 0);
	cr_assert_eq(nchanged(), 0, "the slot's new room is not watched");
	cr_assert_eq(kvf_release(eng, fresh), 0);
	fresh = watched(3, &tags[1]);
	cr_assert_eq(kvf_abort(eng, fresh), 0);
	one_change(fresh, KVF_FAILED, &tags[1]);
}

Test(watch, a_fan_reports_the_rooms_state_not_each_members)
{
	static const uint32_t src[4] = { 0, 1, 2, 3 };
	struct kvf_chunk_part p = { .region = 0, .dst_offset = 0, .n = 4, .src = src };
	kvf_room h;

	cr_assert_eq(kvf_sender_create_fanout(eng, 0xfa0, 3, &h), 0);
	cr_assert_eq(kvf_watch(eng, h, &tags[0]), 0);
	for (uint32_t conn = 11; conn <= 12; conn++) {
		push_info(eng, 0xfa0, conn, 0x100 + conn, 4);
		kvf_progress(eng);
	}
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
	cr_assert_eq(nchanged(), 0, "two of three members joined: the room still bootstraps");
	push_info(eng, 0xfa0, 13, 0x10d, 4);
	kvf_progress(eng);
	one_change(h, KVF_WAITING_FOR_INPUT, &tags[0]);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, KVF_SEND_LAST), 0);
	one_change(h, KVF_TRANSFERRING, &tags[0]);
	push_wc_id(eng, f.wr_on[11], 11, 0);
	kvf_progress(eng);
	cr_assert_eq(nchanged(), 0, "one member succeeded; the room transfers");
	push_wc_id(eng, f.wr_on[12], 12, 0);
	push_wc_id(eng, f.wr_on[13], 13, 0);
	kvf_progress(eng);
	one_change(h, KVF_SUCCESS, &tags[0]);
	cr_assert_eq(kvf_release(eng, h), 0);
	cr_assert_eq(nchanged(), 0);
}
