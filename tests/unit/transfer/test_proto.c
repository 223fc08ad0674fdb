/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/proto.c: every frame round-trips, every malformation is rejected with
 * a reason that names it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/event.h"
#include "info_fixture.h"

static const struct kvf_proto_limits lim = {.max_blocks = 64, .max_bufs = 8,
					    .regions = peer_regions, .nregions = 2};
static uint8_t buf[4096];
static uint8_t info[4096];
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

	for (unsigned i = 0; i < sizeof(in.nonce); i++)
		in.nonce[i] = (uint8_t)(0xa0 + i);
	memcpy(in.engine_id, "decode-engine-with-a-long-na", 29);
	kvf_proto_encode_cm(pd, &in);
	cr_assert_eq(kvf_proto_decode_cm(pd, sizeof(pd), &out, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(out.version, KVF_PROTO_VERSION);
	cr_assert_eq(out.frame_max, 65536);
	cr_assert_eq(memcmp(out.nonce, in.nonce, 16), 0, "the nonce comes back");
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

/* ------------------------------------------------------------ HELLO */

static const struct kvf_hello_region hr2[2] = {
	{ .name = "kv", .id = 0, .nitems = 100, .nbufs = 2 },
	{ .name = "aux", .id = 3, .nitems = 4, .nbufs = 1 },
};
static const struct kvf_hello_buf hb3[3] = {
	{ .addr = 0x1000, .item_size = 64, .rkey = 1 },
	{ .addr = 0x9000, .item_size = 128, .rkey = 2 },
	{ .addr = 0x20000, .item_size = 24, .rkey = 3 },
};

Test(proto, hello_round_trip_with_regions)
{
	struct kvf_hello_region r;
	struct kvf_hello_buf b;
	struct kvf_frame f;
	int len = kvf_proto_encode_hello(buf, sizeof(buf), "engine-a", hr2, 2, hb3);

	cr_assert_eq(len, (int)kvf_proto_hello_len(2, 3));
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_str_eq(f.hello.engine_id, "engine-a");
	cr_assert_eq(f.hello.nregions, 2);
	cr_assert_eq(f.hello.nbufs, 3);
	kvf_proto_hello_region(&f, 1, &r);
	cr_assert_str_eq(r.name, "aux");
	cr_assert_eq(r.id, 3);
	cr_assert_eq(r.nitems, 4);
	kvf_proto_hello_buf(&f, 1, 0, &b);
	cr_assert_eq(b.addr, 0x20000);
	cr_assert_eq(b.item_size, 24);
	cr_assert_eq(b.rkey, 3);
	kvf_proto_hello_buf(&f, 0, 1, &b);
	cr_assert_eq(b.item_size, 128);
	cr_assert_eq(kvf_proto_encode_hello(buf, (size_t)len - 1, "e", hr2, 2, hb3), -EMSGSIZE);
}

Test(proto, hello_malformations)
{
	struct kvf_hello_region dup[2] = { hr2[0], hr2[1] };
	size_t len = (size_t)kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 2, hb3);
	size_t r1 = KVF_PROTO_HELLO_FIXED + KVF_PROTO_HELLO_REGION_LEN + 2 * KVF_PROTO_HELLO_BUF_LEN;

	expect_reject(len - 4, -EBADMSG, "length mismatch");
	buf[r1 + 44] = 1;
	expect_reject(len, -EBADMSG, "region 1: reserved word not 0");
	buf[r1 + 44] = 0;
	buf[r1 + KVF_PROTO_HELLO_REGION_LEN + 20] = 5;
	expect_reject(len, -EBADMSG, "region 'aux' buffer 0: reserved word 0x00000005");
	buf[r1 + KVF_PROTO_HELLO_REGION_LEN + 20] = 0;
	buf[KVF_PROTO_HDR_LEN + KVF_PROTO_ENGINE_ID_LEN + 4] = 4; /* nbufs 4, regions have 3 */
	expect_reject(len, -EBADMSG, "HELLO says 4 buffers, its regions have 3");
	dup[1].id = 0;
	len = (size_t)kvf_proto_encode_hello(buf, sizeof(buf), "e", dup, 2, hb3);
	expect_reject(len, -EBADMSG, "id given twice");
	dup[1].id = 3;
	memcpy(dup[1].name, "kv", 3);
	len = (size_t)kvf_proto_encode_hello(buf, sizeof(buf), "e", dup, 2, hb3);
	expect_reject(len, -EBADMSG, "HELLO names region 'kv' twice");
	len = (size_t)kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 0, hb3);
	expect_reject(len, -EBADMSG, "HELLO with 0 regions");
	len = (size_t)kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 2, hb3);
	buf[r1] = 0; /* aux's name empty */
	expect_reject(len, -EBADMSG, "region 1: name empty");
}

/* ------------------------------------------------------------ the info */

/* A kv list, an aux list and 70 bytes of user data, through one frame. */
Test(proto, room_info_round_trip_with_regions_and_user_data)
{
	uint32_t kv[5] = { 9, 8, 99, 0, 1 }, aux = 2, n;
	struct kvf_proto_list l[2] = { { 0, 5, kv }, { 3, 1, &aux } };
	uint8_t user[70];
	struct kvf_peer_info *pi = NULL;
	struct kvf_room_reasm ra = { 0 };
	struct kvf_reasm_drop drop;
	struct kvf_frame f;
	int total, len;

	for (int i = 0; i < 70; i++)
		user[i] = (uint8_t)(i * 7);
	total = kvf_proto_encode_info(info, sizeof(info), l, 2, user, 70);
	cr_assert_eq(total, (int)kvf_proto_info_len(l, 2, 70));
	cr_assert_eq(total, 8 + 72 + 8 + 20 + 8 + 4);
	len = info_frame(buf, sizeof(buf), 0x77, 0xabc, info, (uint32_t)total, 0, &n);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)), 1,
		     "%s", why);
	cr_assert_eq(pi->room_id, 0x77);
	cr_assert_eq(pi->recv_handle, 0xabc);
	cr_assert_eq(pi->nlists, 2);
	cr_assert_eq(pi->nids, 6);
	cr_assert_str_eq(pi->lists[1].name, "aux");
	cr_assert_eq(pi->lists[1].peer_region, 3);
	cr_assert_eq(pi->lists[1].first, 5);
	cr_assert_eq(pi->ids[2], 99);
	cr_assert_eq(pi->ids[5], 2);
	cr_assert_eq(pi->user_len, 70);
	cr_assert_eq(memcmp(pi->user, user, 70), 0);
	free(pi);
}

static int decode_info(uint32_t len)
{
	struct kvf_peer_info *pi = NULL;
	int rc = kvf_proto_decode_info(info, len, &lim, 1, 2, &pi, why, sizeof(why));

	free(pi);
	return rc;
}

static int decode_info_with(uint32_t len, const struct kvf_proto_limits *l)
{
	struct kvf_peer_info *pi = NULL;
	int rc = kvf_proto_decode_info(info, len, l, 1, 2, &pi, why, sizeof(why));

	free(pi);
	return rc;
}

#define expect_info_reject(len, text)                                                   \
	do {                                                                            \
		cr_assert_eq(decode_info(len), -EBADMSG, "%s", why);                    \
		cr_assert(strstr(why, (text)), "reason '%s' lacks '%s'", why, (text)); \
	} while (0)

Test(proto, info_malformations_are_named)
{
	uint32_t kv[2] = { 1, 2 }, aux = 1, big = 100, many[65] = { 0 };
	struct kvf_proto_list l[2] = { { 0, 2, kv }, { 3, 1, &aux } };
	uint32_t len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, "ab", 2);

	cr_assert_eq(decode_info(len), 0, "%s", why);
	expect_info_reject(len - 4, "list for region 'aux' of 1 items: runs past the info");
	expect_info_reject(len + 4, "has 4 bytes after its last list");
	info[10] = 1; /* user data padding */
	expect_info_reject(len, "padding byte 2 is not 0");
	info[10] = 0;
	l[1].region = 5;
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, NULL, 0);
	expect_info_reject(len, "names region id 5, not in the peer's HELLO");
	l[1].region = 0;
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, NULL, 0);
	expect_info_reject(len, "names region id 0, named by an earlier list");
	l[1] = (struct kvf_proto_list){ 3, 1, &big };
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, NULL, 0);
	expect_info_reject(len, "list for region 'aux': item 0 is 100, outside its 4");
	l[0] = (struct kvf_proto_list){ 0, 65, many };
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 1, NULL, 0);
	expect_info_reject(len, "more items than engine.max_blocks_per_room");
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 0, NULL, 0);
	cr_assert_eq(decode_info(len), 0, "no lists is a dummy receiver's info: %s", why);
	info[0] = 17; /* 17 lists */
	expect_info_reject(len, "with 17 lists (0..16)");
	info[0] = 0;
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 1, NULL, 0);
	info[4] = 1; /* user_len 257 */
	info[5] = 1;
	expect_info_reject(len, "257 bytes of user data");
}

Test(proto, room_info_frame_malformations)
{
	uint32_t kv[2] = { 1, 2 }, n;
	uint32_t total = kv_info(info, sizeof(info), kv, 2);
	int len = info_frame(buf, sizeof(buf), 9, 1, info, total, 0, &n);
	struct kvf_proto_limits nohello = lim;
	struct kvf_frame f;

	expect_reject((size_t)len + 4, -EBADMSG, "length mismatch");
	buf[KVF_PROTO_HDR_LEN + 12] = 1; /* total 1 < this frame's 24 bytes */
	expect_reject((size_t)len, -EBADMSG, "carries 24 bytes of an info of 1");
	buf[KVF_PROTO_HDR_LEN + 12] = 0;
	nohello.nregions = 0;
	cr_assert_eq(kvf_proto_decode(buf, (size_t)len, &nohello, &f, NULL, why, sizeof(why)),
		     -EBADMSG);
	cr_assert(strstr(why, "before the peer's HELLO"), "%s", why);
	len = info_frame(buf, sizeof(buf), 9, 1, info, total, 4, &n);
	buf[KVF_PROTO_HDR_LEN] = 0; /* offset 0 */
	expect_reject((size_t)len, -EBADMSG, "ROOM_INFO_CONT at offset 0");
}

/* An info over many small frames, reassembled whole; the memory held
 * follows the bytes received. */
Test(proto, room_info_sequence_round_trip)
{
	uint32_t kv[60], aux = 3, off = 0, n;
	struct kvf_proto_list l[2] = { { 0, 60, kv }, { 3, 1, &aux } };
	uint32_t total;
	struct kvf_room_reasm ra = { 0 };
	struct kvf_peer_info *pi = NULL;
	struct kvf_reasm_drop drop;
	int frames = 0, rc = 0;

	for (uint32_t i = 0; i < 60; i++)
		kv[i] = 99 - i;
	total = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, "prefix", 6);
	while (off < total) {
		struct kvf_frame f;
		int len = info_frame(buf, 64, 0x55, 7, info, total, off, &n);

		cr_assert_gt(len, 0);
		cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
		rc = kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why));
		cr_assert_geq(rc, 0, "%s", why);
		cr_assert_not(drop.set);
		cr_assert_leq(ra.cap, ra.total);
		off += n;
		frames++;
	}
	cr_assert_eq(rc, 1);
	cr_assert_eq(frames, (int)kvf_proto_room_info_frames(total, 64));
	cr_assert_eq(pi->nids, 61);
	cr_assert_eq(pi->ids[59], 40);
	cr_assert_eq(pi->ids[60], 3);
	cr_assert_eq(memcmp(pi->user, "prefix", 6), 0);
	cr_assert_null(ra.buf);
	free(pi);
}

Test(proto, room_info_sequence_breaks_are_named)
{
	uint32_t kv[20] = { 0 }, n;
	uint32_t total = kv_info(info, sizeof(info), kv, 20);
	struct kvf_room_reasm ra = { 0 };
	struct kvf_peer_info *pi = NULL;
	struct kvf_reasm_drop drop;
	struct kvf_frame f;
	int len = info_frame(buf, 64, 1, 7, info, total, 0, &n);

	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)), 0);
	len = info_frame(buf, 64, 1, 7, info, total, n + 4, &n);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)),
		     -EBADMSG);
	cr_assert(strstr(why, "ROOM_INFO_CONT at offset 28, expected 24"), "%s", why);
	cr_assert_null(ra.buf, "the room's bytes are freed");

	len = info_frame(buf, 64, 1, 7, info, total, 0, &n);
	decode((size_t)len, &f, NULL);
	kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why));
	len = info_frame(buf, 64, 2, 7, info, total, 0, &n);
	decode((size_t)len, &f, NULL);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 5, &pi, &drop, why, sizeof(why)), 0);
	cr_assert(drop.set, "room 1's sequence is cut short by room 2's");
	cr_assert_eq(drop.room_id, 1);
	cr_assert(strstr(drop.why, "24 of 96 info bytes received"), "%s", drop.why);
	cr_assert(kvf_proto_reasm_expire(&ra, 6 + KVF_PROTO_REASM_MAX_NS, &drop));
	cr_assert_eq(drop.room_id, 2);
	cr_assert_null(ra.buf);
}

/* HELLO matching: one shape by name (docs/wire.md 5.3), the reason naming
 * the region and the field. */
Test(proto, region_shapes_match_or_say_which_field)
{
	const uint64_t ours[3] = { 4096, 4096, 64 }, other[3] = { 4096, 8192, 64 };
	char w[160] = "";

	cr_assert(kvf_proto_same_shape("kv", ours, 3, ours, 3, w, sizeof(w)));
	cr_assert_not(kvf_proto_same_shape("kv", ours, 3, other, 3, w, sizeof(w)));
	cr_assert_str_eq(w, "region 'kv': buffer 1 item size 4096 here, 8192 at the peer");
	cr_assert_not(kvf_proto_same_shape("aux", ours, 3, ours, 2, w, sizeof(w)));
	cr_assert_str_eq(w, "region 'aux': nbufs 3 here, 2 at the peer");
}

/* A CONT past the info's total fails the room and frees its bytes; the
 * memory held grows with the bytes received, never to a declared total. */
Test(proto, room_info_cont_past_total_and_memory_bound)
{
	uint32_t kv[40] = { 0 }, n;
	uint32_t total = kv_info(info, sizeof(info), kv, 40);
	struct kvf_room_reasm ra = { 0 };
	struct kvf_peer_info *pi = NULL;
	struct kvf_reasm_drop drop;
	struct kvf_frame f;
	int len = info_frame(buf, 64, 1, 7, info, total, 0, &n);

	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)), 0);
	cr_assert_eq(ra.cap, n, "only the first frame's bytes are held, not the total %u", total);
	/* the next frame carries 4 bytes more than the info has left */
	len = info_frame(buf, sizeof(buf), 1, 7, info, total + 4, n, &n);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)),
		     -EBADMSG);
	cr_assert(strstr(why, "ROOM_INFO_CONT of 156 bytes at offset 24 runs past the info's 176"),
		  "%s", why);
	cr_assert_null(ra.buf);
	cr_assert_null(pi);
}

/* A buffer's geometry: round trip, and one that does not describe its
 * items refused (docs/wire.md 5.3). */
Test(proto, hello_geometry_round_trip_and_refusals)
{
	struct kvf_hello_buf g[3] = { hb3[0], hb3[1], hb3[2] }, b;
	struct kvf_frame f;
	int len;

	g[1].geom = (struct kvf_buf_geometry){.page_tokens = 2, .heads = 4, .head0 = 12,
					      .head_bytes = 16, .layer = 61, .kind = 1};
	len = kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 2, g);
	cr_assert_eq(decode((size_t)len, &f, NULL), 0, "%s", why);
	kvf_proto_hello_buf(&f, 0, 1, &b);
	cr_expect_eq(b.geom.page_tokens, 2);
	cr_expect_eq(b.geom.heads, 4);
	cr_expect_eq(b.geom.head0, 12);
	cr_expect_eq(b.geom.head_bytes, 16);
	cr_expect_eq(b.geom.layer, 61);
	cr_expect_eq(b.geom.kind, 1);
	kvf_proto_hello_buf(&f, 0, 0, &b);
	cr_expect_eq(b.geom.page_tokens, 0, "no geometry stays none");
	g[1].geom.head_bytes = 8; /* 2 x 4 x 8 is not the item size 128 */
	len = kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 2, g);
	expect_reject((size_t)len, -EBADMSG, "region 'kv' buffer 1: geometry page_tokens 2 x heads "
		      "4 x head_bytes 8 is not its item size 128");
	g[1].geom = (struct kvf_buf_geometry){.layer = 3};
	len = kvf_proto_encode_hello(buf, sizeof(buf), "e", hr2, 2, g);
	expect_reject((size_t)len, -EBADMSG, "geometry page_tokens 0 x heads 0");
}

/* ---------------------------------------------------- lists as runs */

static struct kvf_peer_info *decode_ok(uint32_t len, const struct kvf_proto_limits *l)
{
	struct kvf_peer_info *pi = NULL;

	cr_assert_eq(kvf_proto_decode_info(info, len, l, 1, 2, &pi, why, sizeof(why)), 0, "%s",
		     why);
	return pi;
}

/* A list goes as runs where that is smaller, and names the same items in
 * the same order (docs/wire.md 5.4). */
Test(proto, a_list_goes_as_runs_where_smaller)
{
	uint32_t kv[40], scattered[6] = { 9, 8, 99, 0, 1, 50 }, aux = 2;
	struct kvf_proto_list l[2] = { { 0, 40, kv }, { 3, 1, &aux } };
	struct kvf_peer_info *pi;
	uint32_t len;

	for (uint32_t i = 0; i < 40; i++) /* runs 10..29 and 60..79 */
		kv[i] = i < 20 ? 10 + i : 40 + i;
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 2, NULL, 0);
	cr_assert_eq(len, 8 + (8 + 2 * 8) + (8 + 4), "two runs, and aux as one item");
	cr_assert_eq(len, kvf_proto_info_len(l, 2, 0));
	cr_assert_eq(info[8 + 3], 0x80, "the runs flag in the region word");
	pi = decode_ok(len, &lim);
	cr_assert_eq(pi->nids, 41);
	cr_assert_eq(pi->lists[0].n, 40);
	cr_assert_eq(pi->lists[1].first, 40);
	for (uint32_t i = 0; i < 40; i++)
		cr_assert_eq(pi->ids[i], kv[i], "item %u", i);
	cr_assert_eq(pi->ids[40], 2);
	free(pi);
	l[0] = (struct kvf_proto_list){ 0, 6, scattered };
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, 1, NULL, 0);
	cr_assert_eq(len, 8 + 8 + 6 * 4, "scattered items stay items");
	cr_assert_eq(info[8 + 3], 0);
}

/* A contiguous million-item list (a 1M-token request at page size 1) is
 * one run: 24 bytes of info, not 4 MiB. */
Test(proto, a_million_contiguous_items_are_one_run)
{
	const uint32_t n = 1u << 20;
	struct kvf_hello_region big = { .name = "kv", .id = 0, .nitems = 2 * n, .nbufs = 2 };
	struct kvf_proto_limits bl = { .max_blocks = n, .max_bufs = 8, .regions = &big,
				       .nregions = 1 };
	uint32_t *ids = malloc(n * sizeof(*ids));
	struct kvf_proto_list l = { 0, n, ids };
	struct kvf_peer_info *pi;
	uint32_t len;

	cr_assert_not_null(ids);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = 7 + i;
	len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), &l, 1, NULL, 0);
	cr_assert_eq(len, 24);
	pi = decode_ok(len, &bl);
	cr_assert_eq(pi->nids, n);
	cr_assert_eq(pi->ids[0], 7);
	cr_assert_eq(pi->ids[n - 1], 7 + n - 1);
	free(pi);
	bl.max_blocks = n - 1;
	cr_assert_eq(decode_info_with(len, &bl), -EBADMSG);
	cr_assert(strstr(why, "more items than engine.max_blocks_per_room"), "%s", why);
	free(ids);
}

static void put_run(uint32_t off, uint32_t start, uint32_t count)
{
	memcpy(info + off, &start, 4);
	memcpy(info + off + 4, &count, 4);
}

Test(proto, bad_runs_are_named)
{
	uint32_t kv[8] = { 0, 1, 2, 3, 10, 11, 12, 13 };
	struct kvf_proto_list l = { 0, 8, kv };
	uint32_t len = (uint32_t)kvf_proto_encode_info(info, sizeof(info), &l, 1, NULL, 0);

	cr_assert_eq(len, 8 + 8 + 2 * 8);
	cr_assert_eq(decode_info(len), 0, "%s", why);
	put_run(24, 10, 0);
	expect_info_reject(len, "run 1 (items 10+0) is empty in its 100");
	put_run(24, 98, 3);
	expect_info_reject(len, "run 1 (items 98+3) is outside its 100");
	put_run(24, 0xffffffffu, 2);
	expect_info_reject(len, "run 1 (items 4294967295+2) is outside its 100");
	put_run(24, 10, 61); /* 4 + 61 items, over lim's 64 */
	expect_info_reject(len, "more items than engine.max_blocks_per_room");
	put_run(24, 10, 4);
	expect_info_reject(len - 4, "of 2 runs: runs past the info");
}
