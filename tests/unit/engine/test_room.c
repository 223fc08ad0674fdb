/* SPDX-License-Identifier: Apache-2.0 */
/* The room state machine (src/engine/room.c, src/engine/api.c) through the public API and
 * the transport seam. The "seed_" tests are the scenarios of the production
 * bug in ../shared/seeds: each would leave a room pinned in a design
 * without one failure field, counted drops, tombstones and deadlines. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stddef.h>
#include <stdio.h>

#include "room_fixture.h"
#include "kvf_build.h"

TestSuite(room, .init = room_setup, .fini = room_teardown);

/* A sender room moved to TRANSFERRING with one signaled write. */
static kvf_room transferring_sender(uint64_t id)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
	push_info(eng, id, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_sender_send(eng, h, src, 4), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING);
	return h;
}

/* Seed 1: abort() must reach poll() whatever else is (not) there. */
Test(room, seed_abort_reaches_poll_in_every_state)
{
	kvf_room boot, wait, xfer;

	cr_assert_eq(kvf_sender_create(eng, 1, &boot), 0);
	cr_assert_eq(kvf_sender_create(eng, 2, &wait), 0);
	push_info(eng, 2, 7, 1, 4);
	kvf_progress(eng);
	xfer = transferring_sender(3);

	kvf_room all[] = { boot, wait, xfer };
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(kvf_abort(eng, all[i]), 0);
		cr_assert_eq(kvf_poll(eng, all[i]), KVF_FAILED, "room %d", i);
		cr_assert_eq(failure(all[i]).reason, KVF_FAIL_LOCAL_ABORT);
		cr_assert_str_not_empty(failure(all[i]).detail);
	}
	cr_assert_eq(stats().inflight, 0);
	cr_assert_eq(stats().failures[KVF_FAIL_LOCAL_ABORT], 3);
	/* abort again: idempotent, the first failure stands */
	cr_assert_eq(kvf_abort(eng, xfer), 0);
	cr_assert_eq(stats().failures[KVF_FAIL_LOCAL_ABORT], 3);
}

Test(room, seed_abort_after_release_is_loud)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 9, &h), 0);
	cr_assert_eq(kvf_abort(eng, h), 0);
	cr_assert_eq(kvf_release(eng, h), 0);
	/* The room's entry is gone: every call says so instead of a no-op. */
	cr_assert_eq(kvf_abort(eng, h), -EINVAL);
	cr_assert_eq(kvf_poll(eng, h), -EINVAL);
	cr_assert_eq(kvf_release(eng, h), -EINVAL);
}

/* Seed 2: the decode side's ABORT arrives before prefill created the room. */
Test(room, seed_peer_abort_before_sender_exists)
{
	kvf_room h;

	push_abort(eng, 42, KVF_SENDER, 7);
	kvf_progress(eng);
	cr_assert_eq(stats().tombstones_created, 1);
	cr_assert_eq(f.acks, 1, "nothing posted yet: ABORT_ACK at once");
	cr_assert_eq(f.ack_id, 42);

	cr_assert_eq(kvf_sender_create(eng, 42, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT);
	cr_assert_eq(stats().tombstones_applied, 1);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
}

/* Seed 3: a transfer whose completion never comes. */
Test(room, seed_inflight_deadline_fails_at_the_deadline)
{
	kvf_room h = transferring_sender(5);
	uint64_t sent = fake_clock;

	cr_assert_eq(stats().inflight, 1);
	fake_clock = sent + cfg.inflight_s * SEC - 1;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING, "one tick before the deadline");
	fake_clock = sent + cfg.inflight_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "at the deadline");
	cr_assert_eq(failure(h).reason, KVF_FAIL_DEADLINE);
	cr_assert_eq(failure(h).deadline, KVF_DL_INFLIGHT);
	cr_assert_eq(stats().inflight, 0);
	cr_assert_eq(stats().deadlines[KVF_DL_INFLIGHT], 1);

	/* Cleanup: the write may still land, so the memory is held until the
	 * connection is cut (quiesce deadline) and its flushes are in. */
	cr_assert_eq(kvf_quiescent(eng, h), 0);
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	fake_clock += cfg.quiesce_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(f.teardowns, 1);
	cr_assert_eq(f.teardown_conn, 7);
	push_lost(eng, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(failure(h).reason, KVF_FAIL_DEADLINE, "first failure kept");
	cr_assert_eq(kvf_release(eng, h), 0);
	cr_assert_eq(stats().unquiescent, 0);
	cr_assert_eq(stats().rooms[KVF_FAILED], 0);
}

/* Seed 4: ABORT for a room the decode side does not know. */
Test(room, seed_abort_for_unknown_receiver_room_is_counted)
{
	push_abort(eng, 77, KVF_RECEIVER, 7);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_UNKNOWN_ROOM], 1);
	cr_assert_eq(stats().tombstones_created, 1);
	cr_assert_eq(f.acks, 0, "receivers do not acknowledge");
	/* The tombstone expires after its TTL, counted too. */
	fake_clock += cfg.tombstone_ttl_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(stats().tombstones_expired, 1);
}

/* Seed 5: a late completion for a slot that now holds another room. */
Test(room, seed_stale_completion_ignored_new_room_unaffected)
{
	kvf_room old = transferring_sender(10), young;

	cr_assert_eq(kvf_abort(eng, old), 0);
	push_lost(eng, 7); /* connection cut: the old room drains */
	kvf_progress(eng);
	cr_assert_eq(kvf_release(eng, old), 0);

	young = transferring_sender(11);
	cr_assert_eq((uint32_t)young.v, (uint32_t)old.v, "same slot reused");
	cr_assert_neq(young.v, old.v, "new generation");
	push_wc(eng, old, 0);
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_STALE_GENERATION], 1);
	cr_assert_eq(kvf_poll(eng, young), KVF_TRANSFERRING);
	push_wc(eng, young, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, young), KVF_SUCCESS);
}

/* Seed 6: the same room id twice. */
Test(room, seed_duplicate_room_id)
{
	kvf_room a, b;

	cr_assert_eq(kvf_sender_create(eng, 3, &a), 0);
	cr_assert_eq(kvf_sender_create(eng, 3, &b), -EEXIST);
	cr_assert_eq(kvf_poll(eng, a), KVF_BOOTSTRAPPING);
	cr_assert_eq(stats().rooms[KVF_BOOTSTRAPPING], 1);
	/* the same id as a receiver is another room (one process may be both) */
	cr_assert_eq(kvf_receiver_create(eng, 3, "10.0.0.1:18515", &b), 0);
}

/* Seed 7: abort, then the completion that was already in flight. */
Test(room, seed_abort_then_late_completion)
{
	kvf_room h = transferring_sender(12);

	cr_assert_eq(kvf_abort(eng, h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(kvf_quiescent(eng, h), 0, "the write may still land");
	cr_assert_eq(f.aborts, 0, "ABORT waits until our writes drained");
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "a success completion does not undo it");
	cr_assert_eq(failure(h).reason, KVF_FAIL_LOCAL_ABORT);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(f.aborts, 1, "drained: now the receiver is told");
	cr_assert_eq(f.abort_role, KVF_RECEIVER);
	cr_assert_eq(kvf_release(eng, h), 0);
}

/* ------------------------------------------------------------ more paths */

Test(room, sender_success_path_and_imm)
{
	kvf_room h = transferring_sender(20);

	cr_assert_eq(f.write_n, 4);
	cr_assert_eq(f.write_imm, kvf_imm(5, 1), "imm names the receiver slot 5 gen 1");
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(stats().inflight, 0);
	cr_assert_eq(kvf_release(eng, h), 0);
	cr_assert_eq(stats().released, 1);
}

Test(room, error_completion_fails_with_status)
{
	kvf_room h = transferring_sender(21);

	push(eng, (struct kvf_event){ .kind = KVF_EV_WC, .status = 10 /* REM_ACCESS_ERR */,
				      .aux = (uint64_t)0x88 << 32 | 0x1234,
				      .key = kvf_wr_id(KVF_WR_DATA, (uint32_t)(h.v >> 32),
						       (uint32_t)h.v) });
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_WC_ERROR);
	cr_assert_eq(failure(h).wc_status, 10);
	cr_assert_eq(failure(h).vendor_err, 0x88);
	cr_assert(strstr(failure(h).detail, "qp 4660") != NULL, "%s", failure(h).detail);
#if HAVE_RDMA
	cr_assert(strstr(failure(h).detail, "remote access error"), "ibv_wc_status_str: %s",
		  failure(h).detail);
	cr_assert(strstr(failure(h).detail, "; "), "with a hint: %s", failure(h).detail);
#endif
	cr_assert_eq(kvf_quiescent(eng, h), 1);
}

Test(room, send_refusals)
{
	uint32_t blocks[5] = { 0, 1, 2, 3, 4 }, bad[4] = { 0, 1, 2, 99 };
	kvf_room h, g;

	cr_assert_eq(kvf_sender_create(eng, 30, &h), 0);
	cr_assert_eq(kvf_sender_send(eng, h, blocks, 4), -EAGAIN, "no ROOM_INFO yet");
	push_info(eng, 30, 7, 1, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_send(eng, h, blocks, 5), -EMSGSIZE);
	cr_assert_eq(failure(h).reason, KVF_FAIL_BAD_REQUEST);
	cr_assert(strstr(failure(h).detail, "5 source blocks") != NULL);
	cr_assert_eq(kvf_sender_send(eng, h, blocks, 4), -ECANCELED);

	cr_assert_eq(kvf_sender_create(eng, 31, &g), 0);
	push_info(eng, 31, 7, 1, 4);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_send(eng, g, bad, 4), -ERANGE);
	cr_assert_eq(failure(g).reason, KVF_FAIL_BAD_REQUEST);
	cr_assert_eq(kvf_sender_send(eng, g, NULL, 4), -EINVAL);
	cr_assert_eq(kvf_receiver_init(eng, g, blocks, 4), -EINVAL, "not a receiver");
}

Test(room, null_and_stale_handles)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;
	uint32_t b = 0;

	cr_assert_eq(kvf_poll(NULL, (kvf_room){ 0 }), -EINVAL);
	cr_assert_eq(kvf_poll(eng, (kvf_room){ 0 }), -EINVAL);
	cr_assert_eq(kvf_poll(eng, (kvf_room){ UINT64_MAX }), -EINVAL);
	cr_assert_eq(kvf_abort(eng, (kvf_room){ 5 }), -EINVAL);
	cr_assert_eq(kvf_failure(eng, (kvf_room){ 5 }, &fl), -EINVAL);
	cr_assert_eq(kvf_sender_send(eng, (kvf_room){ 5 }, &b, 1), -EINVAL);
	cr_assert_eq(kvf_receiver_init(NULL, (kvf_room){ 5 }, &b, 1), -EINVAL);
	cr_assert_eq(kvf_release(eng, (kvf_room){ 5 }), -EINVAL);
	cr_assert_eq(kvf_quiescent(eng, (kvf_room){ 5 }), -EINVAL);
	cr_assert_eq(kvf_sender_create(NULL, 1, NULL), -EINVAL);
	cr_assert_eq(kvf_progress(NULL), -EINVAL);
	cr_assert_eq(kvf_stats(NULL, NULL), -EINVAL);
}

Test(room, capacity_enospc)
{
	kvf_room h;

	for (uint32_t i = 0; i < cfg.max_rooms; i++)
		cr_assert_eq(kvf_sender_create(eng, 1000 + i, &h), 0);
	cr_assert_eq(kvf_sender_create(eng, 5, &h), -ENOSPC);
	cr_assert_eq(stats().rooms[KVF_BOOTSTRAPPING], cfg.max_rooms);
}

Test(room, every_state_has_a_deadline)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room boot, recv_wait, recv_boot;

	cr_assert_eq(kvf_sender_create(eng, 40, &boot), 0);
	cr_assert_eq(kvf_receiver_create(eng, 41, "10.0.0.1:1", &recv_wait), 0);
	cr_assert_eq(kvf_receiver_create(eng, 42, "10.0.0.1:1", &recv_boot), 0);
	cr_assert_eq(kvf_receiver_init(eng, recv_wait, blocks, 2), 0);
	cr_assert_eq(kvf_poll(eng, recv_wait), KVF_WAITING_FOR_INPUT);
	fake_clock += 300 * SEC;
	kvf_progress(eng);
	cr_assert_eq(failure(boot).deadline, KVF_DL_BOOTSTRAP);
	cr_assert_eq(failure(recv_boot).deadline, KVF_DL_BOOTSTRAP);
	cr_assert_eq(failure(recv_wait).deadline, KVF_DL_RECEIVER_WAITING);
	/* The receiver told the prefill side and waits for its ACK. */
	cr_assert_eq(f.aborts, 1);
	cr_assert_eq(f.abort_role, KVF_SENDER);
	cr_assert_eq(kvf_quiescent(eng, recv_wait), 0);
	cr_assert_eq(kvf_quiescent(eng, recv_boot), 1, "never told anyone");
	push(eng, (struct kvf_event){ .kind = KVF_EV_ABORT_ACK, .key = 41, .peer = 7 });
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, recv_wait), 1);
	cr_assert_eq(kvf_release(eng, recv_wait), 0);
}

Test(room, optional_waiting_for_input_deadline)
{
	kvf_room h;

	kvf_engine_close(eng);
	cfg.waiting_for_input_s = 5;
	eng = fake_engine(&cfg, &f);
	cr_assert_eq(kvf_sender_create(eng, 50, &h), 0);
	push_info(eng, 50, 7, 1, 2);
	kvf_progress(eng);
	fake_clock += 5 * SEC;
	kvf_progress(eng);
	cr_assert_eq(failure(h).deadline, KVF_DL_WAITING_FOR_INPUT);
	cr_assert_eq(f.aborts, 1, "the receiver is told (nothing was posted)");
}

Test(room, receiver_success_path)
{
	uint32_t blocks[3] = { 1, 2, 3 };
	kvf_room h;

	cr_assert_eq(kvf_receiver_create(eng, 60, "10.0.0.2:18515", &h), 0);
	cr_assert_eq(kvf_receiver_init(eng, h, blocks, 3), 0);
	cr_assert_eq(f.room_info_id, 60);
	cr_assert_eq(f.room_info_handle, h.v);
	cr_assert_eq(kvf_receiver_init(eng, h, blocks, 3), -EALREADY);
	push_data_done(eng, h);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
	cr_assert_eq(kvf_release(eng, h), 0);
}

Test(room, receiver_bad_peer_and_connect_failure)
{
	uint32_t blocks[1] = { 0 };
	kvf_room h;

	cr_assert_eq(kvf_receiver_create(eng, 61, "nohost", &h), -EINVAL);
	cr_assert_eq(kvf_receiver_create(eng, 61, "h:0", &h), -EINVAL);
	cr_assert_eq(kvf_receiver_create(eng, 61, "h:1", &h), 0);
	f.room_info_rc = -EHOSTUNREACH;
	cr_assert_eq(kvf_receiver_init(eng, h, blocks, 1), -EHOSTUNREACH);
	cr_assert_eq(failure(h).reason, KVF_FAIL_CONNECT);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
}

Test(room, early_room_info_is_parked_then_applied)
{
	kvf_room h;

	push_info(eng, 70, 7, 3, 2);
	kvf_progress(eng);
	cr_assert_eq(stats().early_infos_parked, 1);
	cr_assert_eq(kvf_sender_create(eng, 70, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(stats().early_infos_applied, 1);
}

Test(room, early_room_info_expires_with_abort_to_receiver)
{
	push_info(eng, 71, 7, 3, 2);
	kvf_progress(eng);
	fake_clock += cfg.tombstone_ttl_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(stats().early_infos_expired, 1);
	cr_assert_eq(f.aborts, 1);
	cr_assert_eq(f.abort_id, 71);
	cr_assert_eq(f.abort_role, KVF_RECEIVER);
}

Test(room, room_info_over_the_block_limit_is_a_bad_frame)
{
	kvf_room h;

	kvf_engine_close(eng);
	cfg.max_blocks_per_room = 3;
	eng = fake_engine(&cfg, &f);
	cr_assert_eq(kvf_sender_create(eng, 72, &h), 0);
	push_info(eng, 72, 7, 1, 4);
	kvf_progress(eng);
	cr_assert_eq(failure(h).reason, KVF_FAIL_BAD_FRAME);
	cr_assert(strstr(failure(h).detail, "max_blocks_per_room"), "%s", failure(h).detail);
	cr_assert_eq(f.aborts, 1, "the receiver is told");
}

Test(room, post_errors_map_to_reasons)
{
	uint32_t src[4] = { 0, 1, 2, 3 };
	int rcs[] = { -ENOTCONN, -EPROTO, -ERANGE, -EIO };
	enum kvf_fail_reason want[] = { KVF_FAIL_PEER_LOST, KVF_FAIL_BAD_FRAME,
					KVF_FAIL_BAD_REQUEST, KVF_FAIL_DEVICE };

	for (int i = 0; i < 4; i++) {
		kvf_room h;

		cr_assert_eq(kvf_sender_create(eng, 300 + i, &h), 0);
		push_info(eng, 300 + i, 7, 1, 4);
		kvf_progress(eng);
		f.signaled = rcs[i];
		cr_assert_eq(kvf_sender_send(eng, h, src, 4), rcs[i]);
		cr_assert_eq(failure(h).reason, want[i], "rc %d", rcs[i]);
	}
}

Test(room, peer_abort_while_transferring_acks_after_drain)
{
	kvf_room h = transferring_sender(80);

	push_abort(eng, 80, KVF_SENDER, 7);
	kvf_progress(eng);
	cr_assert_eq(failure(h).reason, KVF_FAIL_PEER_ABORT);
	cr_assert_eq(f.cancels, 1);
	cr_assert_eq(f.acks, 0, "a write is still posted");
	push_wc(eng, h, 5 /* WR_FLUSH_ERR */);
	kvf_progress(eng);
	cr_assert_eq(f.acks, 1);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
}

Test(room, peer_lost_fails_rooms_on_that_connection_only)
{
	kvf_room a = transferring_sender(90), b;

	cr_assert_eq(kvf_sender_create(eng, 91, &b), 0);
	push_info(eng, 91, 8, 1, 4);
	kvf_progress(eng);
	push_lost(eng, 7);
	kvf_progress(eng);
	cr_assert_eq(failure(a).reason, KVF_FAIL_PEER_LOST);
	cr_assert_eq(kvf_quiescent(eng, a), 1);
	cr_assert_eq(kvf_poll(eng, b), KVF_WAITING_FOR_INPUT);
}

Test(room, unknown_event_kinds_are_counted)
{
	push(eng, (struct kvf_event){ .kind = 200 });
	push(eng, (struct kvf_event){ .kind = KVF_EV_ABORT_ACK, .key = 1234 });
	push(eng, (struct kvf_event){ .kind = KVF_EV_BAD_FRAME, .peer = 7 });
	kvf_progress(eng);
	cr_assert_eq(stats().ignored[KVF_IGN_BAD_EVENT], 2);
	cr_assert_eq(stats().ignored[KVF_IGN_UNKNOWN_ROOM], 1);
	cr_assert_eq(stats().bad_frames, 1);
	cr_assert_eq(stats().events, 3);
}

Test(room, dump_names_state_deadline_and_failure)
{
	char buf[4096] = "";
	FILE *fp = fmemopen(buf, sizeof(buf), "w");
	kvf_room h = transferring_sender(0xabc);

	(void)h;
	cr_assert_eq(kvf_dump(eng, fp), 1);
	fclose(fp);
	cr_assert(strstr(buf, "TRANSFERRING") && strstr(buf, "inflight") && strstr(buf, "0xabc"),
		  "%s", buf);
	cr_assert(strstr(buf, "last send"), "%s", buf);
}

Test(room, early_table_full_evicts_the_oldest)
{
	kvf_room h;

	kvf_engine_close(eng);
	cfg.max_tombstones = 2;
	eng = fake_engine(&cfg, &f);
	push_abort(eng, 1, KVF_SENDER, 7);
	push_info(eng, 2, 7, 3, 2);
	push_abort(eng, 3, KVF_SENDER, 7);
	kvf_progress(eng);
	cr_assert_eq(stats().tombstones_evicted, 1);
	cr_assert_eq(stats().tombstones_live, 1);
	cr_assert_eq(stats().early_infos_live, 1);
	cr_assert_eq(stats().tombstones_created, 2);
	cr_assert_eq(kvf_sender_create(eng, 1, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_BOOTSTRAPPING, "the oldest tombstone was evicted");
	cr_assert_eq(kvf_sender_create(eng, 3, &h), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "the newest was kept");
}

/* Criterion runs the suite's init (setup) as well as this one. */
static void setup_redirected(void)
{
	cr_redirect_stderr();
}

Test(room, periodic_summary_line, .init = setup_redirected)
{
	char line[4096] = "";
	kvf_room h;

	kvf_engine_close(eng);
	cfg.summary_interval_s = 10;
	cfg.log_level = KVF_LOG_INFO;
	eng = fake_engine(&cfg, &f);
	h = transferring_sender(0x51);
	(void)h;
	fake_clock += 9 * SEC;
	kvf_progress(eng);
	fake_clock += 1 * SEC;
	kvf_progress(eng);
	fflush(stderr);
	FILE *err = cr_get_redirected_stderr();
	size_t n = fread(line, 1, sizeof(line) - 1, err);

	line[n] = '\0';
	cr_assert(strstr(line, "transferring 1") && strstr(line, "oldest inflight 10.000 s"),
		  "summary: %s", line);
	cr_assert_eq(strstr(strstr(line, "rooms:") + 1, "rooms:"), NULL, "one line per interval");
	/* The teardown's "closing with live rooms" warning must not write into
	 * the redirect pipe Criterion may have closed (SIGPIPE). */
	kvf_log_set_level(KVF_LOG_ERROR);
}

Test(room, bad_room_info_frame_aborts_the_receiver)
{
	kvf_room h;

	/* for a room that does not exist yet */
	push(eng, (struct kvf_event){ .kind = KVF_EV_BAD_FRAME, .key = 90, .peer = 7,
				      .role = KVF_SENDER });
	kvf_progress(eng);
	cr_assert_eq(f.aborts, 1);
	cr_assert_eq(f.abort_id, 90);
	cr_assert_eq(f.abort_role, KVF_RECEIVER);
	/* for a sender room still bootstrapping */
	cr_assert_eq(kvf_sender_create(eng, 91, &h), 0);
	push(eng, (struct kvf_event){ .kind = KVF_EV_BAD_FRAME, .key = 91, .peer = 7,
				      .role = KVF_SENDER });
	kvf_progress(eng);
	cr_assert_eq(failure(h).reason, KVF_FAIL_BAD_FRAME);
	cr_assert_eq(f.aborts, 2);
	cr_assert_eq(f.abort_id, 91);
	cr_assert_eq(stats().bad_frames, 2);
}

/* A caller built against an older, smaller kvf_stats / kvf_failure gets the
 * prefix it knows and not a byte more; a newer, larger one gets zeros where
 * this library knows nothing. */
Test(room, growable_structs_fill_only_what_the_caller_knows)
{
	enum { PAD = 64 };
	union {
		struct kvf_stats st;
		struct kvf_failure fl;
		unsigned char raw[sizeof(struct kvf_stats) + sizeof(struct kvf_failure) + PAD];
	} b;
	size_t old;
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 0x5e, &h), 0);
	cr_assert_eq(kvf_abort(eng, h), 0);

	old = offsetof(struct kvf_stats, tombstones_created);
	memset(&b, 0xAA, sizeof(b));
	b.st.size = (uint32_t)old;
	cr_assert_eq(kvf_stats(eng, &b.st), 0);
	cr_assert_eq(b.st.size, old);
	cr_assert_eq(b.st.created, 1);
	cr_assert_eq(b.st.failures[KVF_FAIL_LOCAL_ABORT], 1);
	for (size_t i = old; i < sizeof(b); i++)
		cr_assert_eq(b.raw[i], 0xAA, "byte %zu written past the caller's struct", i);

	memset(&b, 0xAA, sizeof(b));
	b.st.size = sizeof(struct kvf_stats) + PAD;
	cr_assert_eq(kvf_stats(eng, &b.st), 0);
	cr_assert_eq(b.st.size, sizeof(struct kvf_stats), "filled what this library knows");
	for (size_t i = sizeof(struct kvf_stats); i < sizeof(struct kvf_stats) + PAD; i++)
		cr_assert_eq(b.raw[i], 0, "unknown tail byte %zu not zeroed", i);
	cr_assert_eq(b.raw[sizeof(struct kvf_stats) + PAD], 0xAA, "and not one byte more");

	b.st.size = 0;
	cr_assert_eq(kvf_stats(eng, &b.st), -EINVAL, "size not set");
	b.st.size = 4;
	cr_assert_eq(kvf_stats(eng, &b.st), -EINVAL, "too small for any field");

	old = offsetof(struct kvf_failure, detail);
	memset(&b, 0xAA, sizeof(b));
	b.fl.size = (uint32_t)old;
	cr_assert_eq(kvf_failure(eng, h, &b.fl), 0);
	cr_assert_eq(b.fl.size, old);
	cr_assert_eq(b.fl.reason, KVF_FAIL_LOCAL_ABORT);
	cr_assert_eq(b.fl.err, ECANCELED);
	for (size_t i = old; i < sizeof(b); i++)
		cr_assert_eq(b.raw[i], 0xAA, "byte %zu written past the caller's struct", i);
	b.fl.size = 0;
	cr_assert_eq(kvf_failure(eng, h, &b.fl), -EINVAL);
}

/* The pool comes first: registering it after a room exists is refused with
 * its own errno, and init/send without a pool say so apart from a stale
 * handle. */
Test(room, pool_must_come_before_rooms)
{
	static uint64_t mem[2][16];
	void *bufs[2] = { mem[0], mem[1] };
	const uint64_t bs[2] = { 8, 8 };
	uint32_t blocks[2] = { 0, 1 };
	kvf_engine *bare = NULL;
	kvf_room r, s;

	cr_assert_eq(kvf_engine_create(&cfg, &fake_ops, &f, &bare), 0);
	cr_assert_eq(kvf_receiver_create(bare, 1, "10.0.0.1:1", &r), 0);
	cr_assert_eq(kvf_sender_create(bare, 2, &s), 0);
	cr_assert_eq(kvf_receiver_init(bare, r, blocks, 2), -ENOBUFS, "no pool");
	cr_assert_eq(kvf_receiver_init(bare, (kvf_room){ r.v + (1ull << 32) }, blocks, 2), -EINVAL,
		     "a stale handle is another error");
	push_info(bare, 2, 7, 1, 2);
	kvf_progress(bare);
	cr_assert_eq(kvf_sender_send(bare, s, blocks, 2), -ENOBUFS);
	cr_assert_eq(kvf_pool_register(bare, 2, bufs, bs, 16), -EBUSY, "rooms exist already");
	cr_assert_eq(f.room_infos, 0);
	kvf_engine_close(bare);
}

/* A slot reused after a deadline failure must not report the old room's
 * deadline in the new room's kvf_failure. */
Test(room, reused_slot_reports_no_old_deadline)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 0x70, &h), 0);
	fake_clock += cfg.bootstrap_s * SEC;
	kvf_progress(eng);
	cr_assert_eq(failure(h).deadline, KVF_DL_BOOTSTRAP);
	cr_assert_eq(kvf_release(eng, h), 0);
	cr_assert_eq(kvf_sender_create(eng, 0x71, &h), 0);
	cr_assert_eq(failure(h).reason, KVF_FAIL_NONE);
	cr_assert_eq(failure(h).deadline, KVF_DL_NONE);
}
