/* SPDX-License-Identifier: Apache-2.0 */
/* src/proto.c: every frame round-trips, every malformation is rejected with
 * a reason that names it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

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
	cr_assert_eq(buf[4], 1);
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
