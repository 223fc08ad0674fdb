/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/frame_events.c: each received frame becomes the events the
 * poller pushes, or the verdict the poller acts on. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "base/log.h"
#include "transfer/frame_events.h"
#include "info_fixture.h"

#define MAX_EV 8

static struct kvf_event evs[MAX_EV];
static int nev;
static uint8_t buf[4096];
static struct kvf_room_reasm ra;
static const struct kvf_proto_limits lim = {.max_blocks = 64, .max_bufs = 8,
					    .regions = peer_regions, .nregions = 2};
static uint8_t info[1024];

static void record(void *arg, const struct kvf_event *ev)
{
	(void)arg;
	cr_assert_lt(nev, MAX_EV);
	evs[nev++] = *ev;
}

static const struct kvf_frame_src src = {
	.reasm = &ra, .lim = &lim, .conn_id = 3, .peer = 9, .role = KVF_SENDER,
	.peer_name = "10.0.0.2:4791", .push = record,
};

static void setup(void)
{
	nev = 0;
	memset(&ra, 0, sizeof(ra));
	kvf_log_set_level(KVF_LOG_ERROR);
}

static void teardown(void)
{
	for (int i = 0; i < nev; i++)
		free(evs[i].data);
	kvf_proto_reasm_clear(&ra);
}

TestSuite(frame_events, .init = setup, .fini = teardown);

static enum kvf_frame_verdict feed(int len, uint64_t now)
{
	struct kvf_frame f;

	cr_assert_gt(len, 0);
	return kvf_frame_events(&src, buf, (size_t)len, now, &f);
}

Test(frame_events, abort_and_ack_become_their_events)
{
	cr_assert_eq(feed(kvf_proto_encode_abort(buf, sizeof(buf), 77, KVF_RECEIVER, 5), 0),
		     KVF_FRAME_HANDLED);
	cr_assert_eq(feed(kvf_proto_encode_abort_ack(buf, sizeof(buf), 78), 0), KVF_FRAME_HANDLED);
	cr_assert_eq(nev, 2);
	cr_assert_eq(evs[0].kind, KVF_EV_PEER_ABORT);
	cr_assert_eq(evs[0].key, 77);
	cr_assert_eq(evs[0].role, KVF_RECEIVER);
	cr_assert_eq(evs[0].status, 5);
	cr_assert_eq(evs[0].peer, 9);
	cr_assert_eq(evs[1].kind, KVF_EV_ABORT_ACK);
	cr_assert_eq(evs[1].key, 78);
	cr_assert_eq(evs[1].role, KVF_RECEIVER);
}

Test(frame_events, heartbeat_is_quiet_hello_goes_to_the_caller)
{
	struct kvf_hello_buf hb = {.addr = 0x1000, .item_size = 64, .rkey = 1};
	struct kvf_hello_region hr = {.name = "kv", .id = 0, .nitems = 10, .nbufs = 1};

	cr_assert_eq(feed(kvf_proto_encode_heartbeat(buf, sizeof(buf)), 0), KVF_FRAME_HANDLED);
	cr_assert_eq(feed(kvf_proto_encode_hello(buf, sizeof(buf), "p", &hr, 1, &hb), 0),
		     KVF_FRAME_HELLO);
	cr_assert_eq(nev, 0);
}

/* After the handshake an AUTH frame makes no event: the poller's handshake
 * takes it (a refusal of ours tears the connection down). */
Test(frame_events, auth_goes_to_the_caller)
{
	struct kvf_auth_id id = {.decode_qpn = 1, .prefill_qpn = 2};
	struct kvf_frame f;
	int len = kvf_proto_encode_auth(buf, sizeof(buf), KVF_RECEIVER, KVF_AUTH_BAD_TOKEN, &id);

	cr_assert_eq(kvf_frame_events(&src, buf, (size_t)len, 0, &f), KVF_FRAME_AUTH);
	cr_expect_eq(f.auth.status, KVF_AUTH_BAD_TOKEN);
	cr_expect_eq(nev, 0);
}

Test(frame_events, whole_room_info_becomes_peer_info)
{
	uint32_t ids[3] = {7, 8, 9}, n, total = kv_info(info, sizeof(info), ids, 3);
	struct kvf_peer_info *pi;

	cr_assert_eq(feed(info_frame(buf, sizeof(buf), 5, 0x33, info, total, 0, &n), 0),
		     KVF_FRAME_HANDLED);
	cr_assert_eq(nev, 1);
	cr_assert_eq(evs[0].kind, KVF_EV_PEER_INFO);
	cr_assert_eq(evs[0].key, 5);
	cr_assert_eq(evs[0].role, KVF_SENDER);
	pi = evs[0].data;
	cr_assert_eq(pi->peer, 9);
	cr_assert_eq(pi->recv_handle, 0x33);
	cr_assert_eq(pi->nlists, 1);
	cr_assert_str_eq(pi->lists[0].name, "kv");
	cr_assert_eq(pi->lists[0].n, 3);
	cr_assert_eq(pi->ids[2], 9);
}

Test(frame_events, bad_header_is_fatal_and_told)
{
	int len = kvf_proto_encode_heartbeat(buf, sizeof(buf));

	buf[0] = 'X';
	cr_assert_eq(feed(len, 0), KVF_FRAME_FATAL);
	cr_assert_eq(nev, 1);
	cr_assert_eq(evs[0].kind, KVF_EV_BAD_FRAME);
	cr_assert_eq(evs[0].key, 0);
	cr_assert_eq(evs[0].role, KVF_SENDER);
	cr_assert(strstr(evs[0].data, "from 10.0.0.2:4791: bad magic"), "%s",
		  (char *)evs[0].data);
}

/* A malformed part of another room's list fails both rooms; the connection
 * stays. */
Test(frame_events, malformed_cont_fails_both_rooms)
{
	uint32_t ids[6] = {1, 2, 3, 4, 5, 6}, n, total = kv_info(info, sizeof(info), ids, 6);
	int len = info_frame(buf, kvf_proto_room_info_len(8), 5, 1, info, total, 0, &n);

	cr_assert_eq(feed(len, 0), KVF_FRAME_HANDLED);
	cr_assert_not_null(ra.buf);
	len = info_frame(buf, sizeof(buf), 6, 1, info, total, 8, &n);
	buf[KVF_PROTO_HDR_LEN + 4] = 0; /* 0 bytes: malformed */
	cr_assert_eq(feed(len, 0), KVF_FRAME_HANDLED);
	cr_assert_null(ra.buf);
	cr_assert_eq(nev, 2);
	cr_assert_eq(evs[0].key, 5);
	cr_assert(strstr(evs[0].data, "cut short by a malformed ROOM_INFO_CONT for room 0x6"),
		  "%s", (char *)evs[0].data);
	cr_assert_eq(evs[1].key, 6);
}

/* Any frame finds a sequence left hanging past the bound: a heartbeat
 * frees it and fails its room. */
Test(frame_events, heartbeat_expires_a_hanging_sequence)
{
	uint32_t ids[6] = {1, 2, 3, 4, 5, 6}, n, total = kv_info(info, sizeof(info), ids, 6);
	int len = info_frame(buf, kvf_proto_room_info_len(8), 5, 1, info, total, 0, &n);

	cr_assert_eq(feed(len, 1000), KVF_FRAME_HANDLED);
	len = kvf_proto_encode_heartbeat(buf, sizeof(buf));
	cr_assert_eq(feed(len, 1000 + KVF_PROTO_REASM_MAX_NS), KVF_FRAME_HANDLED);
	cr_assert_eq(nev, 0);
	cr_assert_eq(feed(len, 1001 + KVF_PROTO_REASM_MAX_NS), KVF_FRAME_HANDLED);
	cr_assert_eq(nev, 1);
	cr_assert_eq(evs[0].kind, KVF_EV_BAD_FRAME);
	cr_assert_eq(evs[0].key, 5);
	cr_assert(strstr(evs[0].data, "not whole after 30000 ms"), "%s", (char *)evs[0].data);
	cr_assert_null(ra.buf);
	cr_assert_eq(ra.expired, 1);
}

/* The poller's keepalives go on the QP whenever they are due, so one may
 * land between the frames of a ROOM_INFO sequence (docs/wire.md 5.4): it
 * is not "of a room" and the sequence goes on whole. */
Test(frame_events, heartbeat_between_a_sequences_frames_leaves_it_whole)
{
	uint32_t ids[6] = {1, 2, 3, 4, 5, 6}, n, total = kv_info(info, sizeof(info), ids, 6);
	struct kvf_peer_info *pi;
	int len = info_frame(buf, kvf_proto_room_info_len(8), 5, 1, info, total, 0, &n);

	cr_assert_eq(feed(len, 0), KVF_FRAME_HANDLED);
	cr_assert_eq(feed(kvf_proto_encode_heartbeat(buf, sizeof(buf)), 1), KVF_FRAME_HANDLED);
	cr_assert_not_null(ra.buf, "the sequence is still in progress");
	cr_assert_eq(nev, 0);
	len = info_frame(buf, sizeof(buf), 5, 1, info, total, n, &n);
	cr_assert_eq(feed(len, 2), KVF_FRAME_HANDLED);
	cr_assert_eq(nev, 1);
	cr_assert_eq(evs[0].kind, KVF_EV_PEER_INFO);
	pi = evs[0].data;
	cr_assert_eq(pi->lists[0].n, 6);
	cr_assert_eq(pi->ids[5], 6);
}
