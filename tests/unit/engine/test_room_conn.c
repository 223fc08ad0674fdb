/* SPDX-License-Identifier: Apache-2.0 */
/* A room takes frames only from the connection it is bound to: two decode
 * engines on one prefill engine (both with the right token) cannot fail,
 * finish or rebind each other's rooms. */
#include <criterion/criterion.h>

#include "room_fixture.h"

TestSuite(room_conn, .init = room_setup, .fini = room_teardown);

static enum kvf_fail_reason reason(kvf_room h)
{
	return failure(h).reason;
}

/* A sender room bound to conn 7 by its ROOM_INFO. */
static kvf_room bound_sender(uint64_t id)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
	push_info(eng, id, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	return h;
}

Test(room_conn, abort_from_another_connection_changes_nothing)
{
	kvf_room h = bound_sender(100);

	push_abort(eng, 100, KVF_SENDER, 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "conn 8 cannot fail conn 7's room");
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	cr_assert_eq(stats().tombstones_created, 0);
	cr_assert_eq(f.acks, 0);
	/* its own peer still can */
	push_abort(eng, 100, KVF_SENDER, 7);
	kvf_progress(eng);
	cr_assert_eq(reason(h), KVF_FAIL_PEER_ABORT);
	cr_assert_eq(f.acks, 1);
	cr_assert_eq(f.ack_conn, 7);
}

Test(room_conn, bad_frame_from_another_connection_changes_nothing)
{
	kvf_room h = bound_sender(101);

	push_bad_frame(eng, 101, KVF_SENDER, 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	cr_assert_eq(stats().bad_frames, 1, "still a bad frame, counted as one");
	cr_assert_eq(f.aborts, 0);
	push_bad_frame(eng, 101, KVF_SENDER, 7);
	kvf_progress(eng);
	cr_assert_eq(reason(h), KVF_FAIL_BAD_FRAME);
}

Test(room_conn, second_room_info_never_rebinds_a_sender)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	kvf_room h = bound_sender(102);

	push_info(eng, 102, 8, 0x200000009ull, 4);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	/* conn 8's receiver will never be served: it is told so at once */
	cr_assert_eq(f.aborts_on[8], 1);
	cr_assert_eq(f.abort_reason, KVF_FAIL_REFUSED);
	cr_assert_eq(f.abort_role, KVF_RECEIVER);
	cr_assert_eq(stats().room_infos_refused, 1);
	cr_assert_eq(kvf_sender_send(eng, h, src, 4), 0);
	cr_assert_eq(f.write_conn, 7, "the writes go to the room's own receiver");
	cr_assert_eq(f.write_imm, kvf_imm(5, 1), "with its handle, not conn 8's");
	/* and conn 8's ROOM_INFO after it failed neither rebinds it nor
	 * aborts conn 7's receiver before its writes drained */
	kvf_abort(eng, h);
	push_info(eng, 102, 8, 0x200000009ull, 4);
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[8], 2, "refused again");
	cr_assert_eq(f.aborts_on[7], 0, "a write of conn 7's is outstanding");
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(f.aborts_on[7], 1);
	cr_assert_eq(f.abort_conn, 7);
	cr_assert_eq(f.aborts, 3);
}

/* A receiver is bound when kvf_receiver_init sends its ROOM_INFO. */
Test(room_conn, receiver_bound_at_init_takes_only_its_connection)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room a, b;

	f.conn = 7;
	cr_assert_eq(kvf_receiver_create(eng, 200, "10.0.0.1:1", &a), 0);
	cr_assert_eq(kvf_receiver_init(eng, a, blocks, 2), 0);
	f.conn = 8;
	cr_assert_eq(kvf_receiver_create(eng, 201, "10.0.0.2:1", &b), 0);
	cr_assert_eq(kvf_receiver_init(eng, b, blocks, 2), 0);

	push_abort(eng, 200, KVF_RECEIVER, 8);
	push_data_done_on(eng, a, 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, a), KVF_WAITING_FOR_INPUT, "conn 8 neither fails nor finishes it");
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 2);

	/* Failed and waiting for its peer's ACK: another connection's ACK
	 * must not hand its blocks back while conn 7 may still write. */
	kvf_abort(eng, a);
	cr_assert_eq(f.abort_conn, 7);
	push_ack(eng, 200, 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, a), 0);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 3);
	push_ack(eng, 200, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, a), 1);

	push_data_done_on(eng, b, 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, b), KVF_SUCCESS);
}

/* What arrives before the room: the entry remembers its connection, and
 * another connection can neither replace nor cancel it. */
Test(room_conn, early_entries_belong_to_the_connection_that_left_them)
{
	kvf_room h;

	push_info(eng, 300, 7, 0x100000005ull, 4);
	push_abort(eng, 300, KVF_SENDER, 8);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	cr_assert_eq(stats().tombstones_created, 0);
	cr_assert_eq(kvf_sender_create(eng, 300, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "conn 7's ROOM_INFO applied");
	cr_assert_eq(stats().early_infos_applied, 1);

	push_abort(eng, 301, KVF_SENDER, 7);
	push_info(eng, 301, 8, 0x100000005ull, 4);
	push_abort(eng, 301, KVF_SENDER, 8);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 3);
	cr_assert_eq(stats().tombstones_created, 1);
	cr_assert_eq(kvf_sender_create(eng, 301, &h), 0);
	cr_assert_eq(reason(h), KVF_FAIL_PEER_ABORT);
	push_abort(eng, 301, KVF_SENDER, 8);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 4, "bound to conn 7 by the tombstone");
}

/* PEER_LOST walks the lost connection's own room list: every room bound to
 * it (senders bound by ROOM_INFO, receivers bound at init) fails, rooms of
 * other connections and unbound rooms do not, and a released room has left
 * the list (its slot reused by a room of another connection). */
Test(room_conn, peer_lost_fails_exactly_the_rooms_of_its_connection)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room s1 = bound_sender(300), s2 = bound_sender(301), gone = bound_sender(302);
	kvf_room other, unbound, r7, r8, reused;

	cr_assert_eq(kvf_sender_create(eng, 303, &other), 0);
	push_info(eng, 303, 8, 0x100000006ull, 4);
	cr_assert_eq(kvf_sender_create(eng, 304, &unbound), 0);
	f.conn = 7;
	cr_assert_eq(kvf_receiver_create(eng, 305, "10.0.0.1:1", &r7), 0);
	cr_assert_eq(kvf_receiver_init(eng, r7, blocks, 2), 0);
	f.conn = 8;
	cr_assert_eq(kvf_receiver_create(eng, 306, "10.0.0.2:1", &r8), 0);
	cr_assert_eq(kvf_receiver_init(eng, r8, blocks, 2), 0);
	kvf_progress(eng);
	/* released: its slot leaves conn 7's list and goes to conn 8's room */
	kvf_abort(eng, gone);
	push_ack(eng, 302, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_release(eng, gone), 0);
	cr_assert_eq(kvf_sender_create(eng, 307, &reused), 0);
	push_info(eng, 307, 8, 0x100000007ull, 4);

	push_lost(eng, 7);
	kvf_progress(eng);
	cr_assert_eq(reason(s1), KVF_FAIL_PEER_LOST);
	cr_assert_eq(reason(s2), KVF_FAIL_PEER_LOST);
	cr_assert_eq(reason(r7), KVF_FAIL_PEER_LOST);
	cr_assert_eq(kvf_quiescent(eng, r7), 1, "its QPs are in error: nothing can land");
	cr_assert_eq(kvf_poll(eng, other), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_poll(eng, reused), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_poll(eng, unbound), KVF_BOOTSTRAPPING);
	cr_assert_eq(kvf_poll(eng, r8), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(stats().failures[KVF_FAIL_PEER_LOST], 3);

	push_lost(eng, 8);
	kvf_progress(eng);
	cr_assert_eq(reason(other), KVF_FAIL_PEER_LOST);
	cr_assert_eq(reason(reused), KVF_FAIL_PEER_LOST);
	cr_assert_eq(reason(r8), KVF_FAIL_PEER_LOST);
	cr_assert_eq(kvf_poll(eng, unbound), KVF_BOOTSTRAPPING);
	cr_assert_eq(stats().failures[KVF_FAIL_PEER_LOST], 6);
}

/* The transport hears when a connection gets its first room and loses its
 * last (what rdma.idle_close_s closes by): once each way, not per room. */
Test(room_conn, the_transport_hears_a_connection_busy_and_idle)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room a, b;

	f.conn = 7;
	cr_assert_eq(kvf_receiver_create(eng, 300, "10.0.0.1:1", &a), 0);
	cr_assert_eq(kvf_receiver_init(eng, a, blocks, 2), 0);
	cr_assert_eq(f.busy, 1u << 7);
	cr_assert_eq(f.busy_calls, 1);
	cr_assert_eq(kvf_receiver_create(eng, 301, "10.0.0.1:1", &b), 0);
	cr_assert_eq(kvf_receiver_init(eng, b, blocks, 2), 0);
	cr_assert_eq(f.busy_calls, 1, "a second room changes nothing");
	push_data_done_on(eng, a, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, a), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, a), 0);
	cr_assert_eq(f.busy, 1u << 7, "one room is still on it");
	push_data_done_on(eng, b, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_release(eng, b), 0);
	cr_assert_eq(f.busy, 0, "its last room left");
	cr_assert_eq(f.busy_calls, 2);
}
