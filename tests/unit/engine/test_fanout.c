/* SPDX-License-Identifier: Apache-2.0 */
/* Rooms across ranks (src/engine/fan.c, the fan paths of api.c, api_room.c and
 * room_events.c) on the fake transport: a fan-out sender's receivers each
 * on a connection of its own (11, 12, 13), a fan-in receiver's senders
 * (21, 22). What is asserted is the bookkeeping: states, the one failure,
 * who is told, quiescence, counters; the bytes are the rxe suite's
 * (tests/rxe/scenarios/fan.sh). */
#include <errno.h>
#include <string.h>

#include "room_fixture.h"

TestSuite(fanout, .init = room_setup, .fini = room_teardown);

#define ID 0xfa0ull

static kvf_room fanout(uint32_t n)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create_fanout(eng, ID, n, &h), 0);
	return h;
}

/* Receivers on conns 11, 12, ... join with a list of n items each. */
static void join(uint32_t conn, uint32_t n)
{
	push_info(eng, ID, conn, 0x100 + conn, n);
	kvf_progress(eng);
}

static void join_dummy(uint32_t conn)
{
	push_info_lists(eng, ID, conn, 0x100 + conn, NULL, 0, NULL, 0);
	kvf_progress(eng);
}

static int send_items(kvf_room h, uint32_t off, uint32_t n, uint32_t flags)
{
	static const uint32_t src[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct kvf_chunk_part p = { .region = 0, .dst_offset = off, .n = n, .src = src };

	return kvf_sender_send_chunk(eng, h, &p, 1, flags);
}

static void complete(uint32_t conn, uint16_t status)
{
	push_wc_id(eng, f.wr_on[conn], conn, status);
	kvf_progress(eng);
}

static void assert_balanced(void)
{
	struct kvf_stats st = stats();

	cr_assert_eq(st.created, st.released, "created %lu released %lu",
		     (unsigned long)st.created, (unsigned long)st.released);
	for (int s = 0; s < KVF_POLL_NUM; s++)
		cr_assert_eq(st.rooms[s], 0, "rooms[%d] = %lu", s, (unsigned long)st.rooms[s]);
	cr_assert_eq(st.unquiescent, 0);
	cr_assert_eq(st.inflight, 0);
}

static uint64_t failures_total(void)
{
	struct kvf_stats st = stats();
	uint64_t n = 0;

	for (int i = 0; i < KVF_FAIL_NUM; i++)
		n += st.failures[i];
	return n;
}

Test(fanout, bootstraps_until_all_join_then_succeeds_when_every_write_completed)
{
	kvf_room h = fanout(3);
	uint32_t n = 0, count = 0;

	cr_assert_eq(stats().created, 3, "one slot per receiver");
	join(11, 4);
	join(12, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING, "2 of 3 joined");
	cr_assert_eq(kvf_sender_peer_count(eng, h, 0, &count), -EAGAIN);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), -EAGAIN);
	join(13, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_sender_receivers(eng, h, &n, NULL), 0);
	cr_assert_eq(n, 3);
	for (uint32_t k = 0; k < 3; k++) {
		cr_assert_eq(kvf_sender_peer_count_k(eng, h, k, 0, &count), 0);
		cr_assert_eq(count, 4);
	}
	cr_assert_eq(kvf_sender_peer_count_k(eng, h, 3, 0, &count), -EINVAL);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), 0);
	for (uint32_t c = 11; c <= 13; c++) {
		cr_assert_eq(f.writes_on[c], 1, "conn %u", c);
		cr_assert(f.imm_on[c], "conn %u gets its own immediate", c);
	}
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING);
	cr_assert_eq(stats().inflight, 3);
	complete(11, 0);
	complete(13, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING, "receiver 1's write is outstanding");
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	complete(12, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(f.aborts, 0);
	cr_assert_eq(kvf_release(eng, h), 0);
	cr_assert_eq(kvf_poll(eng, h), -EINVAL, "stale after release");
	assert_balanced();
}

Test(fanout, a_missing_rank_fails_at_the_bootstrap_deadline_saying_how_many_joined)
{
	kvf_room h = fanout(3);
	uint64_t t0 = fake_clock;
	struct kvf_failure fl;

	join(11, 4);
	join(12, 4);
	fake_clock = t0 + cfg.bootstrap_s * SEC - 1;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
	fake_clock = t0 + cfg.bootstrap_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_DEADLINE);
	cr_assert_eq(fl.deadline, KVF_DL_BOOTSTRAP);
	cr_assert(strstr(fl.detail, "(2 of 3 joined)"), "%s", fl.detail);
	/* The two that joined are told; nothing was posted, so at once. */
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(f.aborts_on[12], 1);
	cr_assert_eq(f.aborts, 2);
	cr_assert_eq(stats().failures[KVF_FAIL_DEADLINE], 1, "the room failed once");
	cr_assert_eq(stats().deadlines[KVF_DL_BOOTSTRAP], 1);
	cr_assert_eq(failures_total(), 1);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	/* The missing rank turns up late: it hears ABORT, it is not joined. */
	join(13, 4);
	cr_assert_eq(f.aborts_on[13], 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, one_lost_receiver_fails_the_room_once_and_aborts_the_others_once_drained)
{
	kvf_room h = fanout(3);
	struct kvf_failure fl;

	join(11, 4);
	join(12, 4);
	join(13, 4);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), 0);
	push_lost(eng, 12);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_PEER_LOST);
	cr_assert(strstr(fl.detail, "connection 12"), "%s", fl.detail);
	cr_assert_eq(failures_total(), 1);
	/* Receivers 0 and 2 still have a write posted: ABORT once drained. */
	cr_assert_eq(f.aborts, 0);
	cr_assert_eq(kvf_quiescent(eng, h), 0);
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	complete(11, 5 /* IBV_WC_WR_FLUSH_ERR */);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(kvf_quiescent(eng, h), 0, "receiver 2 has not drained");
	complete(13, 0);
	cr_assert_eq(f.aborts_on[13], 1);
	cr_assert_eq(f.aborts_on[12], 0, "the lost one is not told");
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_LOST, "the first failure stands");
	cr_assert_eq(failures_total(), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, a_receivers_abort_fails_the_room_and_the_others_hear_abort)
{
	kvf_room h = fanout(3);

	join(11, 4);
	join(12, 4);
	join(13, 4);
	push_abort(eng, ID, KVF_SENDER, 13);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT);
	cr_assert_eq(f.acks_on[13], 1, "the aborting receiver gets its ACK");
	cr_assert_eq(f.aborts_on[13], 0);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(f.aborts_on[12], 1);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), -ECANCELED);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, a_dummy_receiver_gets_only_the_final_write)
{
	kvf_room h = fanout(3);
	uint32_t n = 0, dummies = 0, count = 9;

	join(11, 4);
	join_dummy(12);
	join(13, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_sender_receivers(eng, h, &n, &dummies), 0);
	cr_assert_eq(dummies, 1);
	cr_assert_eq(kvf_sender_peer_count_k(eng, h, 1, 0, &count), 0);
	cr_assert_eq(count, 0);
	cr_assert_eq(send_items(h, 0, 2, 0), 0);
	cr_assert_eq(f.writes_on[11], 1);
	cr_assert_eq(f.writes_on[12], 0, "no data for a dummy");
	cr_assert_eq(f.writes_on[13], 1);
	complete(11, 0);
	complete(13, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING, "LAST is still due");
	cr_assert_eq(send_items(h, 2, 2, KVF_SEND_LAST), 0);
	cr_assert_eq(f.writes_on[12], 1);
	cr_assert_eq(f.nparts_on[12], 0, "the write of zero bytes");
	cr_assert(f.imm_on[12]);
	cr_assert_eq(send_items(h, 0, 1, 0), -EALREADY);
	complete(11, 0);
	complete(12, 0);
	complete(13, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, a_chunk_one_receiver_refuses_fails_the_room_naming_it)
{
	kvf_room h = fanout(2);
	struct kvf_failure fl;

	join(11, 4);
	join(12, 2);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), -EMSGSIZE);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_BAD_REQUEST);
	cr_assert(strstr(fl.detail, "receiver 1: "), "%s", fl.detail);
	cr_assert_eq(f.aborts_on[12], 1, "nothing posted to it: told at once");
	cr_assert_eq(f.aborts_on[11], 0, "its write is outstanding");
	complete(11, 0);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "a completed write does not undo it");
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, local_abort_tells_every_receiver)
{
	kvf_room h = fanout(3);

	join(11, 4);
	join(12, 4);
	cr_assert_eq(kvf_abort(eng, h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_LOCAL_ABORT);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(f.aborts_on[12], 1);
	cr_assert_eq(f.aborts, 2, "the one that never joined has no connection");
	cr_assert_eq(kvf_abort(eng, h), 0, "idempotent");
	cr_assert_eq(f.aborts, 2);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, a_second_room_info_on_one_connection_is_a_duplicate)
{
	kvf_room h = fanout(2);

	join(11, 4);
	join(11, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING, "one receiver, twice");
	cr_assert_eq(stats().ignored[KVF_IGN_DUPLICATE], 1);
	join(12, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(f.aborts, 0);
	join(13, 4);
	cr_assert_eq(f.aborts_on[13], 1, "one receiver too many is told");
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "and changes nothing");
	kvf_abort(eng, h);
	cr_assert_eq(kvf_release(eng, h), 0);
}

/* The decode ranks may ask before the prefill created the room: each
 * one's ROOM_INFO is parked (chained), and each joins at creation. */
Test(fanout, room_infos_parked_before_creation_each_join)
{
	kvf_room h;
	struct kvf_stats st;

	push_info(eng, ID, 11, 0x111, 4);
	push_info(eng, ID, 12, 0x112, 4);
	push_info(eng, ID, 12, 0x112, 4);
	kvf_progress(eng);
	st = stats();
	cr_assert_eq(st.early_infos_parked, 2);
	cr_assert_eq(st.early_infos_live, 2);
	cr_assert_eq(st.ignored[KVF_IGN_DUPLICATE], 1, "conn 12's second");
	h = fanout(3);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
	st = stats();
	cr_assert_eq(st.early_infos_applied, 2);
	cr_assert_eq(st.early_infos_live, 0);
	join(13, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), 0);
	cr_assert_eq(f.writes_on[11] + f.writes_on[12] + f.writes_on[13], 3);
	kvf_abort(eng, h);
}

Test(fanout, one_parked_room_info_too_many_hears_abort)
{
	kvf_room h;
	struct kvf_stats st;

	push_info(eng, ID, 11, 0x111, 4);
	push_info(eng, ID, 12, 0x112, 4);
	push_info(eng, ID, 13, 0x113, 4);
	kvf_progress(eng);
	h = fanout(2);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	st = stats();
	cr_assert_eq(st.early_infos_applied, 2);
	cr_assert_eq(st.early_infos_expired, 1);
	cr_assert_eq(st.early_infos_parked, st.early_infos_applied + st.early_infos_expired);
	cr_assert_eq(f.aborts_on[13], 1);
	cr_assert_eq(f.aborts, 1);
	kvf_abort(eng, h);
}

Test(fanout, parked_room_infos_expire_each_with_its_abort)
{
	push_info(eng, ID, 11, 0x111, 4);
	push_info(eng, ID, 12, 0x112, 4);
	kvf_progress(eng);
	fake_clock += (uint64_t)cfg.tombstone_ttl_s * SEC + 1;
	kvf_progress(eng);
	cr_assert_eq(stats().early_infos_expired, 2);
	cr_assert_eq(stats().early_infos_live, 0);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(f.aborts_on[12], 1);
}

Test(fanout, member_slots_have_no_handle_and_every_handle_goes_stale)
{
	kvf_room h = fanout(2), member, again;

	join(11, 4);
	join(12, 4);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), 0);
	/* The wr_id of receiver 1's writes names its slot and generation. */
	member.v = (uint64_t)kvf_wr_gen(f.wr_on[12]) << 32 | kvf_wr_slot(f.wr_on[12]);
	cr_assert_neq(member.v, h.v);
	cr_assert_eq(kvf_poll(eng, member), -EINVAL);
	cr_assert_eq(kvf_abort(eng, member), -EINVAL);
	cr_assert_eq(kvf_release(eng, member), -EINVAL);
	complete(11, 0);
	complete(12, 0);
	cr_assert_eq(kvf_release(eng, h), 0);
	/* A completion for the released room is stale, in a reused slot too. */
	again = fanout(2);
	complete(12, 0);
	cr_assert_eq(stats().ignored[KVF_IGN_STALE_GENERATION], 1);
	cr_assert_eq(kvf_poll(eng, again), KVF_BOOTSTRAPPING);
	kvf_abort(eng, again);
	cr_assert_eq(kvf_release(eng, again), 0);
	assert_balanced();
}

Test(fanout, bad_counts_a_taken_id_and_a_full_table)
{
	kvf_room h, one[64];

	cr_assert_eq(kvf_sender_create_fanout(eng, ID, 0, &h), -EINVAL);
	cr_assert_eq(kvf_sender_create_fanout(eng, ID, KVF_FAN_MAX + 1, &h), -EINVAL);
	cr_assert_eq(kvf_sender_create_fanout(eng, ID, 1, &h), 0, "n = 1: one slot");
	cr_assert_eq(stats().created, 1);
	cr_assert_eq(kvf_sender_create_fanout(eng, ID, 3, &one[0]), -EEXIST);
	cr_assert_eq(stats().created, 1, "nothing half made");
	for (uint32_t i = 0; i < 62; i++)
		cr_assert_eq(kvf_sender_create(eng, 100 + i, &one[i]), 0);
	cr_assert_eq(kvf_sender_create_fanout(eng, ID + 1, 2, &h), -ENOSPC);
	cr_assert_eq(stats().created, 63, "nothing half made");
}

Test(fanout, a_live_fan_is_freed_once_at_close)
{
	kvf_room h = fanout(4);

	join(11, 4);
	/* room_teardown closes the engine with the fan live: under ASan a
	 * second free or a read after it shows here. */
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
}

/* ------------------------------------------------------------------ fan-in */

static const char *const two[2] = { "10.0.0.1:7000", "10.0.0.2:7000" };

static kvf_room fanin(void)
{
	kvf_room h;

	f.conn_next = 21;
	cr_assert_eq(kvf_receiver_create_fanin(eng, ID, two, 2, &h), 0);
	return h;
}

static int init_all(kvf_room h, uint32_t n)
{
	static const uint32_t items[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct kvf_index_list l = { .region = 0, .n = n, .items = items };

	return kvf_receiver_init_regions(eng, h, &l, 1, NULL, 0);
}

static kvf_room handle_of(uint32_t i)
{
	return (kvf_room){ .v = f.info_handle[i] };
}

Test(fanout, fanin_succeeds_when_every_sender_wrote_its_last)
{
	kvf_room h = fanin();

	cr_assert_eq(init_all(h, 4), 0);
	cr_assert_eq(f.room_infos, 2);
	cr_assert_eq(f.info_conn[0], 21);
	cr_assert_eq(f.info_conn[1], 22);
	cr_assert_eq(f.info_handle[0], h.v, "sender 0's is the room's own handle");
	cr_assert_neq(f.info_handle[1], h.v, "each sender has a handle of its own");
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(init_all(h, 4), -EALREADY);
	push_data_done_on(eng, handle_of(1), 22);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "sender 0 has not written");
	/* Sender 0's immediate on sender 1's connection is not sender 0's. */
	push_data_done_on(eng, handle_of(0), 22);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(stats().ignored[KVF_IGN_OTHER_CONN], 1);
	push_data_done_on(eng, handle_of(0), 21);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, fanin_parts_each_sender_its_own_list)
{
	static const uint32_t lo[2] = { 0, 1 }, hi[2] = { 2, 3 };
	struct kvf_index_list a = { 0, 2, lo }, b = { 0, 2, hi };
	kvf_room h = fanin();

	cr_assert_eq(kvf_receiver_init_part(eng, h, 2, &a, 1, NULL, 0), -EINVAL);
	cr_assert_eq(kvf_receiver_init_part(eng, h, 0, &a, 1, "u", 1), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING, "sender 1 has no info yet");
	cr_assert_eq(kvf_receiver_init_part(eng, h, 0, &a, 1, NULL, 0), -EALREADY);
	cr_assert_eq(kvf_receiver_init_part(eng, h, 1, &b, 1, NULL, 0), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(f.info_conn[1], 22);
	kvf_abort(eng, h);
	cr_assert_eq(f.aborts_on[21], 1);
	cr_assert_eq(f.aborts_on[22], 1);
}

Test(fanout, fanin_one_sender_lost_aborts_the_other_and_waits_for_its_ack)
{
	kvf_room h = fanin();

	cr_assert_eq(init_all(h, 4), 0);
	push_lost(eng, 22);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_LOST);
	cr_assert(strstr(failure(h).detail, "connection 22"), "%s", failure(h).detail);
	cr_assert_eq(f.aborts_on[21], 1, "sender 0 is told");
	cr_assert_eq(f.aborts_on[22], 0);
	cr_assert_eq(failures_total(), 1);
	cr_assert_eq(kvf_quiescent(eng, h), 0, "sender 0 may still write");
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	push_ack(eng, ID, 21);
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, fanin_a_senders_abort_fails_the_room_and_the_other_is_told)
{
	kvf_room h = fanin();

	cr_assert_eq(init_all(h, 4), 0);
	push_data_done_on(eng, handle_of(0), 21);
	kvf_progress(eng);
	push_abort(eng, ID, KVF_RECEIVER, 22);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "one sender's data is not the room's");
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT);
	cr_assert_eq(f.aborts_on[22], 0, "its ABORT is its ACK");
	cr_assert_eq(f.aborts_on[21], 0, "sender 0 finished: nothing to stop");
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, fanin_bad_peers_and_a_dummy_receiver)
{
	const char *bad[2] = { "10.0.0.1:7000", "nope" };
	kvf_room h;

	cr_assert_eq(kvf_receiver_create_fanin(eng, ID, bad, 2, &h), -EINVAL);
	cr_assert_eq(kvf_receiver_create_fanin(eng, ID, two, 0, &h), -EINVAL);
	cr_assert_eq(stats().created, 0);
	cr_assert_eq(kvf_receiver_create(eng, ID, two[0], &h), 0);
	cr_assert_eq(kvf_receiver_init_dummy(eng, h), 0);
	cr_assert_eq(f.info_nl[0], 0, "a ROOM_INFO with no lists");
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	push_data_done(eng, h);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

/* Before the room: kvf_sender_pending counts the parked ROOM_INFOs and reads
 * the first one's user data (where kvferry.sglang's decode says the
 * fan-out), leaving them for the room's creation; a tombstone says so. */
Test(fanout, pending_counts_parked_infos_and_reads_the_first_user_data)
{
	const uint8_t user[12] = { 48, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0 };
	struct fake_list l = { "kv", 4 };
	uint8_t buf[16] = { 0 };
	uint32_t len = 99;
	kvf_room h;

	cr_assert_eq(kvf_sender_pending(eng, ID, buf, sizeof(buf), &len), 0, "nothing yet");
	cr_assert_eq(len, 0);
	push_info_lists(eng, ID, 11, 0x111, &l, 1, user, sizeof(user));
	push_info_lists(eng, ID, 12, 0x112, &l, 1, user, sizeof(user));
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_pending(eng, ID, buf, 4, &len), 2);
	cr_assert_eq(len, sizeof(user), "the whole length, though 4 bytes were copied");
	cr_assert_eq(buf[0], 48);
	cr_assert_eq(buf[4], 0, "no more than buflen");
	cr_assert_eq(kvf_sender_pending(eng, ID, buf, sizeof(buf), &len), 2, "nothing taken");
	cr_assert_eq(buf[8], 2);
	cr_assert_eq(kvf_sender_pending(eng, ID, NULL, 1, &len), -EINVAL);
	h = fanout(buf[8]);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT, "both joined at creation");
	cr_assert_eq(kvf_sender_pending(eng, ID, buf, sizeof(buf), &len), 0, "taken by the room");
	kvf_abort(eng, h);
	push_abort(eng, ID + 1, KVF_SENDER, 11);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_pending(eng, ID + 1, buf, sizeof(buf), &len), -ECANCELED);
}

/* A fan-in part with no lists is a dummy: its sender gets an empty ROOM_INFO. */
Test(fanout, fanin_part_without_lists_is_a_dummy)
{
	kvf_room h = fanin();
	uint32_t blocks[2] = { 0, 1 };
	struct kvf_index_list l = { .region = 0, .n = 2, .items = blocks };

	cr_assert_eq(kvf_receiver_init_part(eng, h, 1, NULL, 0, NULL, 0), 0);
	cr_assert_eq(kvf_receiver_init_part(eng, h, 1, NULL, 0, NULL, 0), -EALREADY);
	cr_assert_eq(kvf_receiver_init_part(eng, h, 0, &l, 0, NULL, 0), -EINVAL, "lists but none");
	cr_assert_eq(kvf_receiver_init_part(eng, h, 0, &l, 1, NULL, 0), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	kvf_abort(eng, h);
}

/* ------------------------------------------------ fan-out size learned */

static kvf_room learned(void)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create_learned(eng, ID, &h), 0);
	return h;
}

/* A receiver on conn whose user data begins with the fan-out tag for fan
 * receivers (kvferry/fan.h), then 8 bytes of its own. */
static void push_tagged(uint32_t conn, uint32_t fan)
{
	const uint8_t user[KVF_FAN_TAG_LEN + 8] = {
		'K', 'V', 'F', 'N', KVF_FAN_TAG_VERSION, 0, 0, 0,
		(uint8_t)fan, (uint8_t)(fan >> 8), (uint8_t)(fan >> 16), (uint8_t)(fan >> 24), 48,
	};
	struct fake_list l = { "kv", 4 };

	push_info_lists(eng, ID, conn, 0x100 + conn, &l, 1, user, sizeof(user));
}

static void join_tagged(uint32_t conn, uint32_t fan)
{
	push_tagged(conn, fan);
	kvf_progress(eng);
}

static uint32_t receivers(kvf_room h)
{
	uint32_t n = 0;

	cr_assert_eq(kvf_sender_receivers(eng, h, &n, NULL), 0);
	return n;
}

Test(fanout, learned_takes_its_size_from_the_first_room_info)
{
	kvf_room h = learned();
	uint8_t user[32];
	uint32_t len = 0;

	cr_assert_eq(receivers(h), 1, "nothing learned yet");
	cr_assert_eq(stats().created, 1);
	join_tagged(12, 3);
	cr_assert_eq(receivers(h), 3);
	cr_assert_eq(stats().created, 3, "one slot per receiver, from now");
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING, "1 of 3 joined");
	join_tagged(11, 3);
	join(13, 4); /* a later receiver's tag is not read */
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_sender_user_data(eng, h, user, sizeof(user), &len), 0);
	cr_assert_eq(len, KVF_FAN_TAG_LEN + 8, "the user data is the application's, tag included");
	cr_assert_eq(user[KVF_FAN_TAG_LEN], 48);
	cr_assert_eq(send_items(h, 0, 4, KVF_SEND_LAST), 0);
	for (uint32_t c = 11; c <= 13; c++)
		complete(c, 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(f.aborts, 0);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, learned_bootstrap_deadline_runs_from_creation)
{
	kvf_room h = learned();
	uint64_t t0 = fake_clock;
	struct kvf_failure fl;

	fake_clock = t0 + cfg.bootstrap_s * SEC - 2;
	join_tagged(11, 3);
	join(12, 4);
	fake_clock = t0 + cfg.bootstrap_s * SEC - 1;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
	fake_clock = t0 + cfg.bootstrap_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "the missing member's deadline is the room's");
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_DEADLINE);
	cr_assert_eq(fl.deadline, KVF_DL_BOOTSTRAP);
	cr_assert(strstr(fl.detail, "(2 of 3 joined)"), "%s", fl.detail);
	cr_assert_eq(f.aborts_on[11] + f.aborts_on[12], 2);
	cr_assert_eq(failures_total(), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, learned_with_no_receiver_fails_at_the_bootstrap_deadline)
{
	kvf_room h = learned();

	fake_clock += cfg.bootstrap_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).deadline, KVF_DL_BOOTSTRAP);
	cr_assert_eq(f.aborts, 0, "no one to tell");
	cr_assert_eq(kvf_release(eng, h), 0);
	assert_balanced();
}

Test(fanout, learned_without_a_tag_serves_one_receiver)
{
	kvf_room h = learned();

	join(11, 4);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(receivers(h), 1);
	join_tagged(12, 2); /* too late to make it a fan-out: refused */
	cr_assert_eq(f.aborts_on[12], 1);
	cr_assert_eq(stats().room_infos_refused, 1);
	kvf_abort(eng, h);
}

Test(fanout, learned_from_room_infos_parked_before_creation)
{
	kvf_room h;

	push_tagged(11, 3);
	push_tagged(12, 3);
	kvf_progress(eng);
	h = learned();
	cr_assert_eq(receivers(h), 3);
	cr_assert_eq(stats().early_infos_applied, 2);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING);
	join_tagged(13, 3);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	kvf_abort(eng, h);
}

Test(fanout, learned_bad_tags_fail_the_room_and_tell_the_receiver)
{
	kvf_room h = learned(), one[64];
	struct kvf_failure fl;

	join_tagged(11, KVF_FAN_MAX + 1);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_BAD_FRAME);
	cr_assert(strstr(fl.detail, "fan-out tag names 65 receivers"), "%s", fl.detail);
	cr_assert_eq(f.aborts_on[11], 1);
	cr_assert_eq(kvf_release(eng, h), 0);
	for (uint32_t i = 0; i < 62; i++)
		cr_assert_eq(kvf_sender_create(eng, 100 + i, &one[i]), 0);
	h = learned();
	join_tagged(12, 3); /* 2 more slots wanted, 1 free */
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	fl = failure(h);
	cr_assert_eq(fl.reason, KVF_FAIL_BAD_REQUEST);
	cr_assert(strstr(fl.detail, "2 more room slots wanted, 1 free"), "%s", fl.detail);
	cr_assert_eq(f.aborts_on[12], 1);
}
