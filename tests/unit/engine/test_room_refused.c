/* SPDX-License-Identifier: Apache-2.0 */
/* A ROOM_INFO the prefill will never serve is answered at once (issue 43):
 * ABORT(to the receiver, REASON_REFUSED) for a room id bound to another
 * connection, failed or finished, or aborted by another connection before
 * the room existed, so the decode room fails now and not at
 * deadlines.receiver_waiting_s. Never while a live room of that connection
 * may still write to the receiver. docs/wire.md 7.2. */
#include <criterion/criterion.h>
#include <string.h>

#include "room_fixture.h"

TestSuite(room_refused, .init = room_setup, .fini = room_teardown);

/* conn 7 is the good decode, conn 8 another authenticated peer. */
#define GOOD 7
#define OTHER 8

static void told_refused(uint32_t conn, int times, uint64_t refused)
{
	cr_assert_eq(f.aborts_on[conn], times, "conn %u told %d times", conn, f.aborts_on[conn]);
	cr_assert_eq(f.abort_conn, conn);
	cr_assert_eq(f.abort_role, KVF_RECEIVER, "to the decode's room");
	cr_assert_eq(f.abort_reason, KVF_FAIL_REFUSED, "reason %u", f.abort_reason);
	cr_assert_eq(stats().room_infos_refused, refused);
}

/* The first order: the foreign ABORT, the room created (FAILED,
 * bound to conn 8 by the tombstone, by design), then the good ROOM_INFO. */
Test(room_refused, good_info_after_a_foreign_tombstone_took_the_room)
{
	kvf_room h;

	push_abort(eng, 500, KVF_SENDER, OTHER);
	kvf_progress(eng);
	cr_assert_eq(f.acks_on[OTHER], 1, "the tombstone is acknowledged at once");
	cr_assert_eq(kvf_sender_create(eng, 500, &h), 0);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT);
	push_info(eng, 500, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	told_refused(GOOD, 1, 1);
	cr_assert_eq(f.aborts, 1, "conn 8 is told nothing more");
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT, "the room is unchanged");
}

/* The other order: the foreign ABORT, the good ROOM_INFO (not parked: the
 * tombstone is conn 8's), then the room. */
Test(room_refused, good_info_behind_a_foreign_tombstone_is_answered_not_dropped)
{
	kvf_room h;

	push_abort(eng, 501, KVF_SENDER, OTHER);
	push_info(eng, 501, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	told_refused(GOOD, 1, 1);
	cr_assert_eq(stats().early_infos_parked, 0);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	cr_assert_eq(kvf_sender_create(eng, 501, &h), 0);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT, "the tombstone fails it, by design");
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[GOOD], 1, "told once");
	cr_assert_eq(stats().tombstones_applied, 1);
}

/* A second decode naming a live room of the first: told, the first's
 * transfer goes on to its own connection. */
Test(room_refused, info_for_a_live_room_of_another_connection)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 502, &h), 0);
	push_info(eng, 502, GOOD, 0x100000005ull, 4);
	push_info(eng, 502, OTHER, 0x200000009ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	told_refused(OTHER, 1, 1);
	cr_assert_eq(f.aborts_on[GOOD], 0);
	cr_assert_eq(kvf_sender_send(eng, h, src, 4), 0);
	cr_assert_eq(f.write_conn, GOOD);
}

/* A finished room: another connection is told at once; its own connection
 * only once nothing of the room is in flight (a new receiver room reusing
 * the id), never while its writes may still land. */
Test(room_refused, info_for_a_finished_room)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 503, &h), 0);
	push_info(eng, 503, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_send(eng, h, src, 4), 0);
	kvf_abort(eng, h); /* FAILED, its write outstanding: not quiescent */
	push_info(eng, 503, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(f.aborts, 0, "its own receiver hears the room's ABORT once drained");
	cr_assert_eq(stats().ignored[KVF_IGN_FINISHED_ROOM], 1);
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[GOOD], 1);
	cr_assert_eq(f.abort_reason, KVF_FAIL_LOCAL_ABORT, "the room's own ABORT");
	push_info(eng, 503, GOOD, 0x100000005ull, 4);
	push_info(eng, 503, OTHER, 0x200000009ull, 4);
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[GOOD], 2, "quiescent now: a new room with the id is refused");
	told_refused(OTHER, 1, 2);
}

/* A live room's own connection asking twice is a duplicate and is never
 * answered with ABORT: the room writes into that receiver. */
Test(room_refused, live_room_own_connection_is_never_aborted)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 504, &h), 0);
	push_info(eng, 504, GOOD, 0x100000005ull, 4);
	push_info(eng, 504, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_DUPLICATE], 1);
	cr_assert_eq(f.aborts, 0);
	cr_assert_eq(stats().room_infos_refused, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
}

/* Before the room: the same connection's second ROOM_INFO is a duplicate
 * (the parked one serves the room); after its own ABORT it is refused. */
Test(room_refused, early_entries_of_the_same_connection)
{
	push_info(eng, 505, GOOD, 0x100000005ull, 4);
	push_info(eng, 505, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(stats().early_infos_parked, 1);
	cr_assert_eq(stats().ignored[KVF_IGN_DUPLICATE], 1);
	cr_assert_eq(f.aborts, 0);

	push_abort(eng, 506, KVF_SENDER, GOOD);
	push_info(eng, 506, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	told_refused(GOOD, 1, 1);
}

/* A room failed before any ROOM_INFO came: the receiver hears the room's
 * own reason (counted as refused too). */
Test(room_refused, info_for_a_room_failed_unbound_names_its_reason)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 507, &h), 0);
	kvf_abort(eng, h);
	push_info(eng, 507, GOOD, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[GOOD], 1);
	cr_assert_eq(f.abort_reason, KVF_FAIL_LOCAL_ABORT);
	cr_assert_eq(stats().room_infos_refused, 1);
}

/* One receiver more than a fan-out has, parked before the room: refused. */
Test(room_refused, parked_info_with_no_receiver_left_is_refused)
{
	kvf_room h;

	push_info(eng, 508, GOOD, 0x100000005ull, 4);
	push_info(eng, 508, OTHER, 0x200000009ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_create(eng, 508, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "the first joined");
	told_refused(OTHER, 1, 1);
	cr_assert_eq(stats().early_infos_expired, 1, "the books: one outcome each");
}

/* The decode side: the refusal fails its room now, naming the reason, and
 * the room is quiescent at once (nothing of it was posted). */
Test(room_refused, decode_room_fails_at_once_naming_the_refusal)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room r;

	f.conn = GOOD;
	cr_assert_eq(kvf_receiver_create(eng, 509, "10.0.0.1:1", &r), 0);
	cr_assert_eq(kvf_receiver_init(eng, r, blocks, 2), 0);
	push(eng, (struct kvf_event){ .kind = KVF_EV_PEER_ABORT, .key = 509,
				      .role = KVF_RECEIVER, .peer = GOOD,
				      .status = KVF_FAIL_REFUSED });
	kvf_progress(eng);
	cr_assert_eq(failure(r).reason, KVF_FAIL_PEER_ABORT);
	cr_assert(strstr(failure(r).detail, "room refused"), "%s", failure(r).detail);
	cr_assert_eq(kvf_quiescent(eng, r), 1);
	cr_assert_str_eq(kvf_fail_reason_str(KVF_FAIL_REFUSED), "room refused");
}
