/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seed corpora for fuzz_proto, fuzz_reasm and fuzz_engine, made by proto.c's
 * own encoders so every seed is a valid frame (or sequence) the fuzzer
 * mutates from:  seed_gen DIR  writes DIR/proto/, DIR/reasm/, DIR/engine/.
 * tests/fuzz/gen_seeds.sh runs it into tests/fuzz/corpus/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kvferry/kvferry.h>

#include "transfer/auth.h"
#include "transfer/proto.h"

static const char *root;

static void die(const char *what)
{
	fprintf(stderr, "seed_gen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put(const char *dir, const char *name, const void *p, size_t len)
{
	char path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", root, dir);
	if (mkdir(path, 0755) && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
	fp = fopen(path, "wb");
	if (!fp || fwrite(p, 1, len, fp) != len || fclose(fp))
		die(path);
}

/* A record file (fuzz_records.h) being built. */
struct seq {
	uint8_t b[1 << 16];
	size_t n;
};

static void rec(struct seq *s, uint8_t op, const void *p, int len)
{
	if (len < 0 || s->n + 3 + (size_t)len > sizeof(s->b)) {
		fprintf(stderr, "seed_gen: record of %d bytes does not fit\n", len);
		exit(1);
	}
	s->b[s->n++] = op;
	s->b[s->n++] = (uint8_t)len;
	s->b[s->n++] = (uint8_t)(len >> 8);
	if (len)
		memcpy(s->b + s->n, p, (size_t)len);
	s->n += (size_t)len;
}

static const uint32_t ids[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
static uint8_t fr[4096];

/* Two regions: "kv" (id 0, 16 items, 2 buffers) and "aux" (id 3, 4 items). */
static int hello(void)
{
	struct kvf_hello_region r[2] = {{.name = "kv", .id = 0, .nitems = 16, .nbufs = 2},
					{.name = "aux", .id = 3, .nitems = 4, .nbufs = 1}};
	struct kvf_hello_buf b[3] = {{.addr = 0x10000, .item_size = 8, .rkey = 0x11},
				     {.addr = 0x20000, .item_size = 8, .rkey = 0x22},
				     {.addr = 0x30000, .item_size = 16, .rkey = 0x33}};

	return kvf_proto_encode_hello(fr, sizeof(fr), "decode-0", r, 2, b);
}

/* An info of n kv ids (and one aux item when aux), with 8 bytes of user data. */
static uint8_t info[512];
static uint32_t make_info(uint32_t n, bool aux)
{
	struct kvf_proto_list l[2] = {{0, n, ids}, {3, 1, ids + 2}};

	return (uint32_t)kvf_proto_encode_info(info, sizeof(info), l, aux ? 2 : 1, "prefix=2", 8);
}

/* Frame of room's info (n ids) at byte off, at most 12 info bytes a frame. */
static int part(uint64_t room, uint32_t n, uint32_t off)
{
	uint32_t k, total = make_info(n, true);
	size_t cap = off ? kvf_proto_room_info_cont_len(12) : kvf_proto_room_info_len(12);

	return kvf_proto_encode_room_info_part(fr, cap, room, 0x100000000ull | room, info, total,
					       off, &k);
}

/* The whole info of n ids in one frame. */
static int whole(uint64_t room, uint64_t handle, uint32_t n)
{
	uint32_t k, total = make_info(n, false);

	return kvf_proto_encode_room_info_part(fr, sizeof(fr), room, handle, info, total, 0, &k);
}

static void proto_seeds(void)
{
	struct kvf_cm_hello h = {.version = KVF_PROTO_VERSION, .mtu = 3, .frame_max = 65536,
				 .engine_id = "prefill-0"};
	uint8_t cm[KVF_PROTO_CM_LEN], rej[KVF_PROTO_REJ_LEN];
	struct kvf_auth_id id = {.decode_qpn = 0x11, .prefill_qpn = 0x12,
				 .decode_gid = {[10] = 0xff, [11] = 0xff, 10, 77, 0, 2},
				 .prefill_gid = {[10] = 0xff, [11] = 0xff, 10, 77, 0, 1}};

	put("proto", "hello", fr, (size_t)hello());
	put("proto", "room_info", fr, (size_t)whole(7, 9, 4));
	put("proto", "room_info_first_of_10", fr, (size_t)part(7, 10, 0));
	put("proto", "room_info_cont", fr, (size_t)part(7, 10, 12));
	put("proto", "abort", fr, (size_t)kvf_proto_encode_abort(fr, sizeof(fr), 7, 1, 5));
	put("proto", "abort_ack", fr, (size_t)kvf_proto_encode_abort_ack(fr, sizeof(fr), 7));
	put("proto", "heartbeat", fr, (size_t)kvf_proto_encode_heartbeat(fr, sizeof(fr)));
	for (unsigned i = 0; i < sizeof(h.nonce); i++)
		h.nonce[i] = (uint8_t)(0x5a ^ i);
	kvf_proto_encode_cm(cm, &h);
	put("proto", "cm_private_data", cm, sizeof(cm));
	kvf_proto_encode_rej(rej, KVF_REJ_VERSION, "peer decode-0 speaks protocol 4, we speak 5");
	put("proto", "reject", rej, sizeof(rej));
	memcpy(id.decode_nonce, h.nonce, sizeof(id.decode_nonce));
	put("proto", "auth_proof", fr, (size_t)kvf_auth_prove(fr, sizeof(fr), KVF_RECEIVER, &id,
							      "secret"));
	put("proto", "auth_refusal", fr, (size_t)kvf_auth_refuse(fr, sizeof(fr), KVF_SENDER,
								 KVF_AUTH_BAD_TOKEN, &id));
}

/* A whole info of n ids for room, 12 bytes a frame, each record op. */
static void list(struct seq *s, uint8_t op, uint64_t room, uint32_t n)
{
	uint32_t total = make_info(n, true);

	for (uint32_t off = 0; off < total; off += 12)
		rec(s, op, fr, part(room, n, off));
}

static void reasm_seeds(void)
{
	static struct seq s;

	memset(&s, 0, sizeof(s));
	list(&s, 0, 5, 10);
	put("reasm", "whole_list", s.b, s.n);

	memset(&s, 0, sizeof(s)); /* another room's ROOM_INFO cuts it short */
	rec(&s, 0, fr, part(5, 10, 0));
	list(&s, 0, 6, 7);
	put("reasm", "cut_short", s.b, s.n);

	memset(&s, 0, sizeof(s)); /* a gap */
	rec(&s, 0, fr, part(5, 10, 0));
	rec(&s, 0, fr, part(5, 10, 24));
	put("reasm", "gap", s.b, s.n);

	memset(&s, 0, sizeof(s)); /* hangs past the bound, then its CONT */
	rec(&s, 0, fr, part(5, 10, 0));
	rec(&s, 0x7f, fr, kvf_proto_encode_heartbeat(fr, sizeof(fr)));
	rec(&s, 0x80, fr, part(5, 10, 12));
	put("reasm", "expired", s.b, s.n);
}

/* fuzz_engine's ops: kind | arg << 3. */
#define OP(kind, arg) ((uint8_t)((kind) | (arg) << 3))

static void engine_seeds(void)
{
	static struct seq s;

	/* prefill side: HELLO, room 1's list, send, the write completes */
	memset(&s, 0, sizeof(s));
	rec(&s, OP(0, 0), fr, hello());
	rec(&s, OP(0, 0), fr, whole(1, 0x100000000ull, 4));
	rec(&s, OP(5, 12), NULL, 0);
	rec(&s, OP(7, 1), NULL, 0);
	put("engine", "sender_success", s.b, s.n);

	/* a split list for room 3, another room's ABORT, a clock step */
	memset(&s, 0, sizeof(s));
	rec(&s, OP(0, 0), fr, hello());
	list(&s, OP(2, 0), 3, 10);
	rec(&s, OP(0, 0), fr, kvf_proto_encode_abort(fr, sizeof(fr), 2, KVF_SENDER, 1));
	rec(&s, OP(4, 31), NULL, 0);
	put("engine", "split_list_and_abort", s.b, s.n);

	/* decode side: HELLO, an ABORT for receiver room 2, then its
	 * ABORT_ACK; receiver room 1's data lands */
	memset(&s, 0, sizeof(s));
	rec(&s, OP(1, 0), fr, hello());
	rec(&s, OP(1, 0), fr, kvf_proto_encode_abort(fr, sizeof(fr), 2, KVF_RECEIVER, 3));
	rec(&s, OP(6, 6), NULL, 0);
	rec(&s, OP(1, 0), fr, kvf_proto_encode_abort_ack(fr, sizeof(fr), 2));
	rec(&s, OP(7, 0), NULL, 0);
	rec(&s, OP(1, 0), fr, kvf_proto_encode_heartbeat(fr, sizeof(fr)));
	put("engine", "receiver_abort_ack", s.b, s.n);

	/* a ROOM_INFO left hanging, heartbeats past the bound */
	memset(&s, 0, sizeof(s));
	rec(&s, OP(0, 0), fr, hello());
	rec(&s, OP(0, 0), fr, part(4, 10, 0));
	for (int i = 0; i < 5; i++) {
		rec(&s, OP(4, 20), NULL, 0);
		rec(&s, OP(0, 0), fr, kvf_proto_encode_heartbeat(fr, sizeof(fr)));
	}
	put("engine", "hanging_sequence", s.b, s.n);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seed_gen DIR\n");
		return 2;
	}
	root = argv[1];
	proto_seeds();
	reasm_seeds();
	engine_seeds();
	return 0;
}
