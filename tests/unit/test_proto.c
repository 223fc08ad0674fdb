/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/proto.c: every frame round-trips, every malformation is rejected with
 * a reason that names it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdma/proto.h"

static const struct kvf_proto_limits lim = {.max_blocks = 64, .max_bufs = 8, .nblocks = 100};
static uint8_t buf[4096];
static char why[256];

static int decode(size_t len, struct kvf_frame *f, bool *names)
{
	why[0] = '\0';
	return kvf_proto_decode(buf, len, &lim, f, names, why, sizeof(why));
}

#define expect_reject(len, err, text)                                          \
	do {                                                                   \
		struct kvf_frame f_;                                           \
		cr_assert_eq(decode((len), &f_, NULL), (err), "%s", why);      \
		cr_assert(strstr(why, (text)), "reason '%s' lacks '%s'", why, (text)); \
	} while (0)

Test(proto, hello_round_trip)
{
	struct kvf_hello_buf in[3] = {
		{.addr = 0x7f0000001000, .block_size = 16384, .rkey = 0x1234},
		{.addr = 0x7f0000100000, .block_size = 16384, .rkey = 0x5678},
		{.addr = 0x10, .block_size = 4096, .rkey = 0xffffffff},
	}, out;
	struct kvf_frame f;
	int len = kvf_proto_encode_hello(buf, sizeof(buf), "prefill-0", 100, in, 3);

	cr_assert_eq(len, (int)kvf_proto_hello_len(3));
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.type, KVF_FR_HELLO);
	cr_assert_str_eq(f.hello.engine_id, "prefill-0");
	cr_assert_eq(f.hello.nbufs, 3);
	cr_assert_eq(f.hello.nblocks, 100);
	for (uint32_t i = 0; i < 3; i++) {
		kvf_proto_hello_buf(&f, i, &out);
		cr_assert_eq(out.addr, in[i].addr);
		cr_assert_eq(out.block_size, in[i].block_size);
		cr_assert_eq(out.rkey, in[i].rkey);
	}
}

Test(proto, room_info_round_trip)
{
	uint32_t blocks[5] = {0, 7, 8, 9, 99};
	struct kvf_frame f;
	bool names;
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 0xdeadbeefcafe1234ull,
					     0x0000000500000007ull, blocks, 5);

	cr_assert_eq(len, (int)kvf_proto_room_info_len(5));
	cr_assert_eq(decode((size_t)len, &f, &names), 0, "%s", why);
	cr_assert(names);
	cr_assert_eq(f.type, KVF_FR_ROOM_INFO);
	cr_assert_eq(f.room_id, 0xdeadbeefcafe1234ull);
	cr_assert_eq(f.room_info.recv_handle, 0x0000000500000007ull);
	cr_assert_eq(f.room_info.nblocks, 5);
	cr_assert_eq(kvf_proto_frame_room(buf), 0xdeadbeefcafe1234ull);
	for (uint32_t i = 0; i < 5; i++)
		cr_assert_eq(kvf_proto_block(&f, i), blocks[i]);
}

Test(proto, abort_ack_heartbeat_round_trip)
{
	struct kvf_frame f;
	int len;

	len = kvf_proto_encode_abort(buf, sizeof(buf), 42, 1, 5);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.type, KVF_FR_ABORT);
	cr_assert_eq(f.room_id, 42);
	cr_assert_eq(f.abort.to_role, 1);
	cr_assert_eq(f.abort.reason, 5);

	len = kvf_proto_encode_abort_ack(buf, sizeof(buf), 43);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.type, KVF_FR_ABORT_ACK);
	cr_assert_eq(f.room_id, 43);

	len = kvf_proto_encode_heartbeat(buf, sizeof(buf));
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.type, KVF_FR_HEARTBEAT);
}

Test(proto, little_endian_on_the_wire)
{
	kvf_proto_encode_abort_ack(buf, sizeof(buf), 0x0102030405060708ull);
	cr_assert_eq(memcmp(buf, "KVFR", 4), 0);
	cr_assert_eq(buf[4], KVF_PROTO_VERSION);
	cr_assert_eq(buf[5], 0);
	cr_assert_eq(buf[8], 24);
	cr_assert_eq(buf[16], 0x08);
	cr_assert_eq(buf[23], 0x01);
}

Test(proto, encoder_rejects_small_buffer)
{
	uint32_t blocks[4] = {1, 2, 3, 4};

	cr_assert_eq(kvf_proto_encode_room_info(buf, kvf_proto_room_info_len(4) - 1, 1, 2,
						blocks, 4), -EMSGSIZE);
	cr_assert_eq(kvf_proto_encode_heartbeat(buf, 10), -EMSGSIZE);
}

Test(proto, short_frame)
{
	kvf_proto_encode_heartbeat(buf, sizeof(buf));
	expect_reject(10, -EBADMSG, "short frame");
	expect_reject(0, -EBADMSG, "short frame");
}

Test(proto, bad_magic)
{
	bool names = true;
	struct kvf_frame f;

	kvf_proto_encode_abort_ack(buf, sizeof(buf), 7);
	buf[0] ^= 0xff;
	expect_reject(KVF_PROTO_HDR_LEN, -EBADMSG, "bad magic");
	/* A frame with a bad header names no room: the connection goes. */
	decode(KVF_PROTO_HDR_LEN, &f, &names);
	cr_assert_not(names);
}

Test(proto, bad_version)
{
	kvf_proto_encode_heartbeat(buf, sizeof(buf));
	buf[4] = 9;
	expect_reject(KVF_PROTO_HDR_LEN, -EPROTO, "protocol version 9");
}

Test(proto, unknown_type)
{
	kvf_proto_encode_heartbeat(buf, sizeof(buf));
	buf[6] = 77;
	expect_reject(KVF_PROTO_HDR_LEN, -EPROTO, "unknown frame type 77");
}

Test(proto, length_mismatch)
{
	uint32_t blocks[2] = {1, 2};
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 9, 1, blocks, 2);

	/* Received more than the header says, and less. */
	expect_reject((size_t)len + 4, -EBADMSG, "length mismatch");
	expect_reject((size_t)len - 4, -EBADMSG, "length mismatch");
}

Test(proto, block_count_over_limit)
{
	uint32_t blocks[65] = {0};
	struct kvf_frame f;
	bool names = false;
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 77, 1, blocks, 65);

	expect_reject((size_t)len, -EBADMSG, "65 blocks (1..64 allowed)");
	/* The header was sound: the bad frame fails only room 77. */
	decode((size_t)len, &f, &names);
	cr_assert(names);
	cr_assert_eq(f.room_id, 77);
}

Test(proto, zero_blocks)
{
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 77, 1, NULL, 0);

	expect_reject((size_t)len, -EBADMSG, "0 blocks");
}

Test(proto, truncated_block_list)
{
	uint32_t blocks[4] = {1, 2, 3, 4};
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 5, 1, blocks, 4);

	/* Claim 4 blocks, carry 3, header length consistent with what came. */
	len -= 4;
	buf[8] = (uint8_t)len;
	expect_reject((size_t)len, -EBADMSG, "truncated block list");
}

Test(proto, block_id_outside_pool)
{
	uint32_t blocks[3] = {1, 100, 2};
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 5, 1, blocks, 3);

	expect_reject((size_t)len, -EBADMSG, "id 100, outside the pool of 100 blocks");
}

Test(proto, room_info_before_hello)
{
	struct kvf_proto_limits nolim = {.max_blocks = 64, .max_bufs = 8, .nblocks = 0};
	uint32_t blocks[1] = {0};
	struct kvf_frame f;
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 5, 1, blocks, 1);

	cr_assert_eq(kvf_proto_decode(buf, (size_t)len, &nolim, &f, NULL, why, sizeof(why)),
		     -EBADMSG);
	cr_assert(strstr(why, "before the peer's HELLO"), "%s", why);
}

Test(proto, short_room_info_body)
{
	kvf_proto_encode_abort_ack(buf, sizeof(buf), 5);
	buf[6] = KVF_FR_ROOM_INFO;
	expect_reject(KVF_PROTO_HDR_LEN, -EBADMSG, "shorter than its fixed part");
}

Test(proto, hello_malformations)
{
	struct kvf_hello_buf in[2] = {{.addr = 0x1000, .block_size = 64, .rkey = 1},
				      {.addr = 0x9000, .block_size = 64, .rkey = 2}};
	struct kvf_hello_buf many[9] = {{0}};
	int len;

	for (int i = 0; i < 9; i++)
		many[i].block_size = 1;
	len = kvf_proto_encode_hello(buf, sizeof(buf), "x", 10, many, 9);
	expect_reject((size_t)len, -EBADMSG, "9 buffers (1..8 allowed)");

	len = kvf_proto_encode_hello(buf, sizeof(buf), "x", 10, in, 2);
	len -= KVF_PROTO_HELLO_BUF_LEN;
	buf[8] = (uint8_t)len;
	expect_reject((size_t)len, -EBADMSG, "truncated buffer list");

	in[1].block_size = 0;
	len = kvf_proto_encode_hello(buf, sizeof(buf), "x", 10, in, 2);
	expect_reject((size_t)len, -EBADMSG, "empty or wraps");

	in[1].block_size = 64;
	in[1].addr = UINT64_MAX - 100;
	len = kvf_proto_encode_hello(buf, sizeof(buf), "x", 10, in, 2);
	expect_reject((size_t)len, -EBADMSG, "empty or wraps");
}

Test(proto, abort_malformations)
{
	int len = kvf_proto_encode_abort(buf, sizeof(buf), 3, 2, 1);

	expect_reject((size_t)len, -EBADMSG, "ABORT for role 2");
	kvf_proto_encode_abort_ack(buf, sizeof(buf), 3);
	buf[6] = KVF_FR_ABORT;
	expect_reject(KVF_PROTO_HDR_LEN, -EBADMSG, "ABORT of 24 bytes");
}

/* Every reserved field is 0 on receipt: a header's decides before any room
 * is named (the connection goes), a body's fails its frame like any other
 * malformation. */
Test(proto, reserved_fields_must_be_zero)
{
	struct kvf_hello_buf in[2] = {{.addr = 0x1000, .block_size = 64, .rkey = 1},
				      {.addr = 0x9000, .block_size = 64, .rkey = 2}};
	struct kvf_frame f;
	bool names = true;
	int len;

	len = kvf_proto_encode_abort_ack(buf, sizeof(buf), 3);
	buf[7] = 1;
	cr_assert_eq(decode((size_t)len, &f, &names), -EBADMSG);
	cr_assert(strstr(why, "header flags 0x01"), "%s", why);
	cr_assert_not(names, "a bad header names no room");
	buf[7] = 0;
	buf[15] = 0x80;
	expect_reject((size_t)len, -EBADMSG, "reserved 0x80000000");

	len = kvf_proto_encode_heartbeat(buf, sizeof(buf));
	buf[16] = 2;
	cr_assert_eq(decode((size_t)len, &f, &names), -EBADMSG);
	cr_assert(strstr(why, "HEARTBEAT with room id 0x2"), "%s", why);
	cr_assert_not(names);

	len = kvf_proto_encode_hello(buf, sizeof(buf), "x", 10, in, 2);
	buf[23] = 1;
	cr_assert_eq(decode((size_t)len, &f, &names), -EBADMSG);
	cr_assert(strstr(why, "HELLO with room id 0x100000000000000"), "%s", why);
	cr_assert_not(names);
	buf[23] = 0;
	buf[KVF_PROTO_HELLO_FIXED + KVF_PROTO_HELLO_BUF_LEN + 20] = 7;
	expect_reject((size_t)len, -EBADMSG, "HELLO buffer 1: reserved word 0x00000007");

	len = kvf_proto_encode_abort(buf, sizeof(buf), 3, 1, 1);
	buf[KVF_PROTO_HDR_LEN + 1] = 9;
	cr_assert_eq(decode((size_t)len, &f, &names), -EBADMSG);
	cr_assert(strstr(why, "reserved bytes 0x09, 0x00000000"), "%s", why);
	cr_assert(names, "a bad ABORT body fails its room");
	cr_assert_eq(f.room_id, 3);
	buf[KVF_PROTO_HDR_LEN + 1] = 0;
	buf[KVF_PROTO_HDR_LEN + 7] = 1;
	expect_reject((size_t)len, -EBADMSG, "0x00, 0x01000000");
}

Test(proto, cm_private_data)
{
	struct kvf_cm_hello in = {.version = KVF_PROTO_VERSION, .frame_max = 65536}, out;
	uint8_t pd[64] = {0};
	uint8_t h2[16];

	kvf_proto_token_hash("secret", in.token_hash);
	kvf_proto_token_hash("secreT", h2);
	cr_assert_neq(memcmp(in.token_hash, h2, 16), 0);
	memcpy(in.engine_id, "decode-engine-with-a-long-na", 29);
	kvf_proto_encode_cm(pd, &in);
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(out.version, KVF_PROTO_VERSION);
	cr_assert_eq(out.frame_max, 65536);
	cr_assert_eq(memcmp(out.token_hash, in.token_hash, 16), 0);
	cr_assert_str_eq(out.engine_id, "decode-engine-with-a-long-na");
	cr_assert_eq(out.mtu, 0, "no MTU asked for decodes as 0");

	/* The path MTU a side asks for (or the one the passive side set)
	 * rides in the byte that was reserved; the rest does not move. */
	in.mtu = 3; /* IBV_MTU_1024 */
	kvf_proto_encode_cm(pd, &in);
	cr_assert_eq(pd[6], 3);
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(out.mtu, 3);
	cr_assert_eq(out.version, KVF_PROTO_VERSION);
	cr_assert_eq(out.frame_max, 65536);

	/* The byte after the MTU is reserved: 0 in our version, anything in
	 * another (the caller refuses that version by name). */
	pd[7] = 1;
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "reserved byte 0x01"), "%s", why);
	pd[4]++;
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(out.version, KVF_PROTO_VERSION + 1);
	pd[4]--;
	pd[7] = 0;

	cr_assert_eq(kvf_proto_decode_cm(pd, 20, &out, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "20 bytes"), "%s", why);
	pd[0] = 0;
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "magic"), "%s", why);
}

Test(proto, reject_reason)
{
	uint8_t rej[KVF_PROTO_REJ_LEN];
	char text[128];

	kvf_proto_encode_rej(rej, KVF_REJ_TOKEN, "from decode-0");
	kvf_proto_decode_rej(rej, sizeof(rej), text, sizeof(text));
	cr_assert_str_eq(text, "bad token: from decode-0");
	kvf_proto_decode_rej(NULL, 0, text, sizeof(text));
	cr_assert_str_eq(text, "no reason given");
}

/* The reason is not cut at 40 characters: the whole 140 bytes of text the
 * IB CM's 148-byte REJ private data leaves after the header travel. */
Test(proto, reject_reason_long)
{
	uint8_t rej[KVF_PROTO_REJ_LEN + 16];
	char text[KVF_PROTO_REJ_TEXT + 32], want[KVF_PROTO_REJ_TEXT + 32], in[200];
	const char *reason = "peer decode-engine-with-a-long-na has a different auth token";

	cr_assert_leq(KVF_PROTO_REJ_LEN, 148);
	kvf_proto_encode_rej(rej, KVF_REJ_TOKEN, reason);
	kvf_proto_decode_rej(rej, KVF_PROTO_REJ_LEN, text, sizeof(text));
	snprintf(want, sizeof(want), "bad token: %s", reason);
	cr_assert_str_eq(text, want);

	/* Longer than fits: the first 140 bytes, and nothing read past. */
	memset(in, 'x', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	memset(rej, 'y', sizeof(rej));
	kvf_proto_encode_rej(rej, KVF_REJ_VERSION, in);
	kvf_proto_decode_rej(rej, KVF_PROTO_REJ_LEN, text, sizeof(text));
	cr_assert_eq(strlen(text), strlen("bad version: ") + KVF_PROTO_REJ_TEXT, "%s", text);
	cr_assert_eq(text[strlen(text) - 1], 'x');

	/* The CM pads to its size: trailing zeros are no text. */
	kvf_proto_encode_rej(rej, KVF_REJ_RESOURCES, "");
	kvf_proto_decode_rej(rej, KVF_PROTO_REJ_LEN, text, sizeof(text));
	cr_assert_str_eq(text, "no resources");

	/* An older peer's 48-byte reject (text up to 39 bytes). */
	memset(rej, 0, sizeof(rej));
	memcpy(rej, "KVFR", 4);
	rej[4] = KVF_REJ_MALFORMED;
	memcpy(rej + 8, "short data", 10);
	kvf_proto_decode_rej(rej, 48, text, sizeof(text));
	cr_assert_str_eq(text, "malformed connect data: short data");

	/* A code from a newer peer still shows its number. */
	rej[4] = 200;
	kvf_proto_decode_rej(rej, 48, text, sizeof(text));
	cr_assert_str_eq(text, "reason 200: short data");

	/* Too short for the header, or not ours. */
	kvf_proto_decode_rej(rej, 7, text, sizeof(text));
	cr_assert_str_eq(text, "no reason given");
	rej[0] = 'X';
	kvf_proto_decode_rej(rej, 48, text, sizeof(text));
	cr_assert_str_eq(text, "no reason given");
}

/* ------------------------------------------ ROOM_INFO over several frames */

#include <stdlib.h>

#include "event.h"

/* A big pool and list limit for the sequence tests. */
static const struct kvf_proto_limits biglim = {.max_blocks = 300000, .max_bufs = 8,
					      .nblocks = 1u << 20};
static uint8_t fbuf[65536];

static int decode_big(const void *p, size_t len, struct kvf_frame *f, bool *names)
{
	why[0] = '\0';
	return kvf_proto_decode(p, len, &biglim, f, names, why, sizeof(why));
}

/* Encode the list to frames of at most fmax bytes and feed every frame
 * through decode and reassembly, as the poller does. */
static struct kvf_peer_info *round_trip_seq(const uint32_t *blocks, uint32_t total, size_t fmax,
					    uint32_t *nframes)
{
	struct kvf_room_reasm ra = {0};
	struct kvf_peer_info *done = NULL;
	uint32_t off = 0;

	*nframes = 0;
	while (off < total) {
		struct kvf_reasm_drop drop;
		struct kvf_frame f;
		uint32_t n = 0;
		bool names = false;
		int len = kvf_proto_encode_room_info_part(fbuf, fmax, 0x1234, 0x500000007ull, blocks,
							  total, off, &n);
		int rc;

		cr_assert_gt(len, 0);
		cr_assert_leq((size_t)len, fmax);
		cr_assert_eq(decode_big(fbuf, (size_t)len, &f, &names), 0, "%s", why);
		cr_assert(names);
		cr_assert_eq(f.type, off ? KVF_FR_ROOM_INFO_CONT : KVF_FR_ROOM_INFO);
		cr_assert_eq(f.room_info.offset, off);
		cr_assert_eq(f.room_info.nblocks, n);
		if (!off)
			cr_assert_eq(f.room_info.total, total);
		rc = kvf_proto_reasm_feed(&ra, &f, 0, &done, &drop, why, sizeof(why));
		cr_assert_not(drop.set);
		off += n;
		(*nframes)++;
		cr_assert_eq(rc, off == total ? 1 : 0, "%s", why);
	}
	cr_assert_null(ra.pi, "nothing left buffered once whole");
	return done;
}

Test(proto, room_info_sequence_round_trip)
{
	uint32_t total = 100003, nframes;
	uint32_t *blocks = malloc(total * sizeof(*blocks));
	struct kvf_peer_info *pi;

	for (uint32_t i = 0; i < total; i++)
		blocks[i] = (i * 7919u) % (1u << 20);
	pi = round_trip_seq(blocks, total, 65536, &nframes);
	cr_assert_not_null(pi);
	cr_assert_eq(nframes, kvf_proto_room_info_frames(total, 65536));
	cr_assert_eq(nframes, 7); /* 16374 ids in the first, 16376 in each next */
	cr_assert_eq(pi->room_id, 0x1234);
	cr_assert_eq(pi->recv_handle, 0x500000007ull);
	cr_assert_eq(pi->nblocks, total);
	cr_assert_eq(memcmp(pi->blocks, blocks, total * sizeof(*blocks)), 0);
	free(pi);

	/* Exactly one frame's worth, one more, and tiny frames. */
	pi = round_trip_seq(blocks, 16374, 65536, &nframes);
	cr_assert_eq(nframes, 1);
	free(pi);
	pi = round_trip_seq(blocks, 16375, 65536, &nframes);
	cr_assert_eq(nframes, 2);
	cr_assert_eq(kvf_proto_room_info_frames(16375, 65536), 2);
	free(pi);
	/* 1 id in the ROOM_INFO, 3 in each CONT (8 bytes less fixed part). */
	pi = round_trip_seq(blocks, 10, KVF_PROTO_ROOM_INFO_FIXED + 4, &nframes);
	cr_assert_eq(nframes, 4);
	cr_assert_eq(kvf_proto_room_info_frames(10, KVF_PROTO_ROOM_INFO_FIXED + 4), 4);
	cr_assert_eq(memcmp(pi->blocks, blocks, 10 * sizeof(*blocks)), 0);
	free(pi);
	free(blocks);
}

Test(proto, room_info_part_encoder_limits)
{
	uint32_t blocks[4] = {1, 2, 3, 4}, n = 99;

	cr_assert_eq(kvf_proto_encode_room_info_part(fbuf, KVF_PROTO_ROOM_INFO_FIXED + 3, 1, 2,
						     blocks, 4, 0, &n), -EMSGSIZE);
	cr_assert_eq(kvf_proto_encode_room_info_part(fbuf, sizeof(fbuf), 1, 2, blocks, 4, 4, &n),
		     -EINVAL);
	cr_assert_eq(kvf_proto_room_info_frames(4, KVF_PROTO_ROOM_INFO_FIXED + 3), 0);
	/* A whole list in the first frame: the classic ROOM_INFO. */
	cr_assert_eq(kvf_proto_encode_room_info_part(fbuf, sizeof(fbuf), 1, 2, blocks, 4, 0, &n),
		     (int)kvf_proto_room_info_len(4));
	cr_assert_eq(n, 4);
	/* A CONT carries 8 bytes of fixed part less than a ROOM_INFO. */
	cr_assert_eq(kvf_proto_encode_room_info_part(fbuf, kvf_proto_room_info_cont_len(2), 1, 2,
						     blocks, 4, 1, &n),
		     (int)kvf_proto_room_info_cont_len(2));
	cr_assert_eq(n, 2);
}

/* A ROOM_INFO with its total field 0 (a peer that never splits) is the
 * whole list. */
Test(proto, room_info_total_zero_is_whole)
{
	uint32_t blocks[3] = {4, 5, 6};
	struct kvf_frame f;
	int len = kvf_proto_encode_room_info(buf, sizeof(buf), 9, 1, blocks, 3);

	cr_assert_eq(buf[KVF_PROTO_HDR_LEN + 12], 0);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.room_info.total, 3);
	cr_assert_eq(f.room_info.nblocks, 3);
}

/* Encode frame `off` of a 10-id list for room `room` into fbuf (frames of
 * 3 ids), decode it. */
static void seq_frame(uint64_t room, uint32_t off, struct kvf_frame *f)
{
	static const uint32_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	uint32_t n;
	size_t cap = off ? kvf_proto_room_info_cont_len(3) : kvf_proto_room_info_len(3);
	int len = kvf_proto_encode_room_info_part(fbuf, cap, room, 77, ids, 10, off, &n);

	cr_assert_gt(len, 0);
	cr_assert_eq(decode_big(fbuf, (size_t)len, f, NULL), 0, "%s", why);
}

static int feed(struct kvf_room_reasm *ra, uint64_t room, uint32_t off, struct kvf_reasm_drop *drop,
		struct kvf_peer_info **done)
{
	struct kvf_frame f;

	seq_frame(room, off, &f);
	why[0] = '\0';
	return kvf_proto_reasm_feed(ra, &f, 0, done, drop, why, sizeof(why));
}

Test(proto, room_info_sequence_malformations)
{
	struct kvf_room_reasm ra = {0};
	struct kvf_reasm_drop drop;
	struct kvf_peer_info *done;

	/* CONT with nothing in progress: that room fails. */
	cr_assert_eq(feed(&ra, 5, 3, &drop, &done), -EBADMSG);
	cr_assert(strstr(why, "no ROOM_INFO before it"), "%s", why);
	cr_assert_not(drop.set);

	/* Wrong offset (a gap): the room fails, its ids are freed. */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 5, 6, &drop, &done), -EBADMSG);
	cr_assert(strstr(why, "offset 6, expected 3 (of 10"), "%s", why);
	cr_assert_null(ra.pi);

	/* Repeated (overlapping) CONT. */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 5, 3, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 5, 3, &drop, &done), -EBADMSG);
	cr_assert(strstr(why, "offset 3, expected 6"), "%s", why);
	cr_assert_null(ra.pi);

	/* Another room's CONT in the middle: both rooms fail. */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 6, 3, &drop, &done), -EBADMSG);
	cr_assert(strstr(why, "room 0x5's ROOM_INFO was in progress"), "%s", why);
	cr_assert(drop.set);
	cr_assert_eq(drop.room_id, 5);
	cr_assert(strstr(drop.why, "3 of 10 block ids"), "%s", drop.why);
	cr_assert_null(ra.pi);

	/* Another room's ROOM_INFO before the list is whole: the first room
	 * fails, the new one starts and completes. */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 7, 0, &drop, &done), 0);
	cr_assert(drop.set);
	cr_assert_eq(drop.room_id, 5);
	cr_assert_eq(feed(&ra, 7, 3, &drop, &done), 0);
	cr_assert_not(drop.set);
	cr_assert_eq(feed(&ra, 7, 6, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 7, 9, &drop, &done), 1);
	cr_assert_eq(done->room_id, 7);
	cr_assert_eq(done->nblocks, 10);
	for (uint32_t i = 0; i < 10; i++)
		cr_assert_eq(done->blocks[i], i);
	free(done);

	/* The same room's ROOM_INFO again mid-sequence: it fails. */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), -EBADMSG);
	cr_assert(strstr(why, "second ROOM_INFO"), "%s", why);
	cr_assert_not(drop.set);
	cr_assert_null(ra.pi);

	/* A connection lost mid-sequence: cleared, nothing leaks (ASan). */
	cr_assert_eq(feed(&ra, 5, 0, &drop, &done), 0);
	kvf_proto_reasm_clear(&ra);
	cr_assert_null(ra.pi);
	cr_assert_eq(ra.have, 0);
}

/* A CONT that runs past the list's total (its offset is right). */
Test(proto, room_info_cont_past_total)
{
	static const uint32_t ids[8] = {0};
	struct kvf_room_reasm ra = {0};
	struct kvf_reasm_drop drop;
	struct kvf_peer_info *done;
	struct kvf_frame f;
	uint32_t n;
	int len;

	/* ROOM_INFO: 2 ids of a list of 4. */
	len = kvf_proto_encode_room_info_part(fbuf, kvf_proto_room_info_len(2), 3, 1, ids, 4, 0, &n);
	cr_assert_eq(decode_big(fbuf, (size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, 0, &done, &drop, why, sizeof(why)), 0);
	/* CONT at 2 of a list the sender thinks has 8: 6 ids. */
	len = kvf_proto_encode_room_info_part(fbuf, sizeof(fbuf), 3, 1, ids, 8, 2, &n);
	cr_assert_eq(n, 6);
	cr_assert_eq(decode_big(fbuf, (size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, 0, &done, &drop, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "runs past the list's 4"), "%s", why);
	cr_assert_null(ra.pi);
}

Test(proto, room_info_sequence_decode_malformations)
{
	uint32_t ids[4] = {1, 2, 3, 4}, n;
	struct kvf_frame f;
	bool names = false;
	int len;

	/* ROOM_INFO whose total is below its own count. */
	len = kvf_proto_encode_room_info(buf, sizeof(buf), 9, 1, ids, 4);
	buf[KVF_PROTO_HDR_LEN + 12] = 3;
	expect_reject((size_t)len, -EBADMSG, "4 block ids of a list of 3");

	/* ROOM_INFO announcing a list over the limit. */
	len = kvf_proto_encode_room_info_part(buf, kvf_proto_room_info_len(2), 9, 1, ids, 4, 0, &n);
	buf[KVF_PROTO_HDR_LEN + 12] = 65;
	expect_reject((size_t)len, -EBADMSG, "list of 65 blocks (1..64 allowed)");

	/* CONT: offset 0, count 0, past the limit, truncated, id out of pool. */
	len = kvf_proto_encode_room_info_part(buf, sizeof(buf), 9, 1, ids, 4, 1, &n);
	cr_assert_eq(len, (int)kvf_proto_room_info_cont_len(3));
	cr_assert_eq(decode((size_t)len, &f, &names), 0, "%s", why);
	cr_assert(names);
	cr_assert_eq(f.room_id, 9);
	cr_assert_str_eq(kvf_frame_type_str(f.type), "ROOM_INFO_CONT");

	buf[KVF_PROTO_HDR_LEN] = 0;
	expect_reject((size_t)len, -EBADMSG, "at offset 0");
	buf[KVF_PROTO_HDR_LEN] = 62; /* 62 + 3 > 64 */
	expect_reject((size_t)len, -EBADMSG, "3 blocks at offset 62 (lists of 1..64");
	buf[KVF_PROTO_HDR_LEN] = 0xff; /* offset near UINT32_MAX: no wrap */
	buf[KVF_PROTO_HDR_LEN + 1] = 0xff;
	buf[KVF_PROTO_HDR_LEN + 2] = 0xff;
	buf[KVF_PROTO_HDR_LEN + 3] = 0xff;
	expect_reject((size_t)len, -EBADMSG, "at offset 4294967295");
	len = kvf_proto_encode_room_info_part(buf, sizeof(buf), 9, 1, ids, 4, 1, &n);
	buf[KVF_PROTO_HDR_LEN + 4] = 0;
	expect_reject((size_t)len, -EBADMSG, "0 blocks at offset 1");
	buf[KVF_PROTO_HDR_LEN + 4] = 4; /* says 4, carries 3 */
	expect_reject((size_t)len, -EBADMSG, "truncated block list");
	ids[3] = 100;
	len = kvf_proto_encode_room_info_part(buf, sizeof(buf), 9, 1, ids, 4, 1, &n);
	expect_reject((size_t)len, -EBADMSG, "ROOM_INFO_CONT block 3 is id 100, outside the pool");
	expect_reject(KVF_PROTO_ROOM_INFO_CONT_FIXED - 1, -EBADMSG, "length mismatch");
	buf[8] = KVF_PROTO_ROOM_INFO_CONT_FIXED - 1;
	expect_reject(KVF_PROTO_ROOM_INFO_CONT_FIXED - 1, -EBADMSG, "shorter than its fixed part");
}

/* A ROOM_INFO announcing the largest list allowed holds only the ids it
 * carries; the list grows (at most doubling) as the ids come. */
Test(proto, reasm_memory_follows_the_ids_received)
{
	static uint32_t ids[300000];
	struct kvf_room_reasm ra = {0};
	struct kvf_reasm_drop drop;
	struct kvf_peer_info *done = NULL;
	struct kvf_frame f;
	uint32_t n, off = 0, last_cap = 0;
	int len, rc = 0;

	len = kvf_proto_encode_room_info_part(fbuf, kvf_proto_room_info_len(1), 4, 1, ids,
					      300000, 0, &n);
	cr_assert_eq(decode_big(fbuf, (size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(f.room_info.total, 300000);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, 0, &done, &drop, why, sizeof(why)), 0);
	cr_assert_eq(ra.cap, 1, "one id received, room for one");
	cr_assert_eq(ra.pi->nblocks, 300000);
	for (off = 1; off < 300000; off += n) {
		len = kvf_proto_encode_room_info_part(fbuf, sizeof(fbuf), 4, 1, ids, 300000, off, &n);
		cr_assert_eq(decode_big(fbuf, (size_t)len, &f, NULL), 0, "%s", why);
		rc = kvf_proto_reasm_feed(&ra, &f, 0, &done, &drop, why, sizeof(why));
		cr_assert_geq(rc, 0, "%s", why);
		if (rc)
			break;
		cr_assert_geq(ra.cap, ra.have);
		cr_assert_leq(ra.cap, 2 * ra.have, "cap %u for %u ids", ra.cap, ra.have);
		cr_assert_geq(ra.cap, last_cap);
		last_cap = ra.cap;
	}
	cr_assert_eq(rc, 1);
	cr_assert_eq(done->nblocks, 300000);
	free(done);
}

/* A sequence left hanging is dropped once older than the bound: counted,
 * its room named, its memory freed; what comes after sees none. */
Test(proto, reasm_drops_a_sequence_older_than_the_bound)
{
	struct kvf_room_reasm ra = {0};
	struct kvf_reasm_drop drop;
	struct kvf_peer_info *done;
	struct kvf_frame f;
	uint64_t t0 = 5000000000ull;

	seq_frame(5, 0, &f);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, t0, &done, &drop, why, sizeof(why)), 0);
	cr_assert_not(kvf_proto_reasm_expire(&ra, t0 + KVF_PROTO_REASM_MAX_NS, &drop));
	cr_assert_not(drop.set);
	cr_assert_not_null(ra.pi, "at the bound: still in progress");
	cr_assert(kvf_proto_reasm_expire(&ra, t0 + KVF_PROTO_REASM_MAX_NS + 1, &drop));
	cr_assert(drop.set);
	cr_assert_eq(drop.room_id, 5);
	cr_assert(strstr(drop.why, "not whole after 30000 ms: 3 of 10 block ids"), "%s", drop.why);
	cr_assert_null(ra.pi);
	cr_assert_eq(ra.expired, 1);
	cr_assert_not(kvf_proto_reasm_expire(&ra, UINT64_MAX, &drop), "nothing left to drop");

	/* Its late CONT: the expired sequence is reported once, the CONT
	 * continues nothing. */
	seq_frame(5, 0, &f);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, t0, &done, &drop, why, sizeof(why)), 0);
	seq_frame(5, 3, &f);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, t0 + KVF_PROTO_REASM_MAX_NS + 1, &done, &drop,
					  why, sizeof(why)), -EBADMSG);
	cr_assert(drop.set);
	cr_assert(strstr(why, "the one in progress was too old"), "%s", why);
	cr_assert_eq(ra.expired, 2);

	/* Another room's ROOM_INFO after the bound: the old one is reported
	 * expired (not cut short), the new one starts. */
	seq_frame(5, 0, &f);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, t0, &done, &drop, why, sizeof(why)), 0);
	seq_frame(6, 0, &f);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, t0 + KVF_PROTO_REASM_MAX_NS + 1, &done, &drop,
					  why, sizeof(why)), 0);
	cr_assert(drop.set);
	cr_assert_eq(drop.room_id, 5);
	cr_assert(strstr(drop.why, "not whole after"), "%s", drop.why);
	cr_assert_eq(ra.pi->room_id, 6);
	cr_assert_eq(ra.started_ns, t0 + KVF_PROTO_REASM_MAX_NS + 1);
	kvf_proto_reasm_clear(&ra);
}
