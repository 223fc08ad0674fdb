/* SPDX-License-Identifier: Apache-2.0 */
/* docs/wire.md against the code. wire_doc.h is generated from the
 * document's tables at build time (tools/wire_doc_h.py); every value in it
 * is compared here with src/transfer/proto.h, src/engine/transport.h and the public enums,
 * and every layout is checked by encoding with src/transfer/proto.c and reading at
 * the document's offsets, and by encoding at the document's offsets
 * (tests/rxe/wire_codec.c, the codec tests/rxe/fake_peer speaks with) and
 * decoding with src/transfer/proto.c. A value changed on one side only fails here. */
#include <criterion/criterion.h>

#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "transfer/auth.h"
#include "transfer/proto.h"
#include "base/event.h"
#include "engine/transport.h"
#include "wire_codec.h"
#include "wire_doc.h"

/* doc: a docs/wire.md value, or the code's bytes read at a docs/wire.md offset. */
#define EQ(doc, code) cr_expect_eq((uint64_t)(doc), (uint64_t)(code), \
				   "docs/wire.md and the code differ: %s = %#llx, %s = %#llx", #doc, \
				   (unsigned long long)(doc), #code, (unsigned long long)(code))

/* Field F of frame p, read at the document's offset and size. */
#define DOC(p, F) KW_GET(p, F)

static const struct kvf_hello_region lim_regions[2] = {
	{ .name = "kv", .id = 0, .nitems = 1u << 30, .nbufs = 2 },
	{ .name = "aux", .id = 5, .nitems = 64, .nbufs = 1 },
};
static const struct kvf_proto_limits lim = {.max_blocks = 1u << 20, .max_bufs = 1024,
					    .regions = lim_regions, .nregions = 2};

Test(wire_doc, constants_are_the_codes)
{
	EQ(KVF_WIRE_MAGIC, KVF_PROTO_MAGIC);
	EQ(KVF_WIRE_VERSION, KVF_PROTO_VERSION);
	EQ(KVF_WIRE_HDR_LEN, KVF_PROTO_HDR_LEN);
	EQ(KVF_WIRE_CM_LEN, KVF_PROTO_CM_LEN);
	EQ(KVF_WIRE_CM_ENGINE_ID_LEN, sizeof(((struct kvf_cm_hello *)0)->engine_id) - 1);
	EQ(KVF_WIRE_NONCE_LEN, KVF_PROTO_NONCE_LEN);
	EQ(KVF_WIRE_NONCE_LEN, sizeof(((struct kvf_cm_hello *)0)->nonce));
	EQ(KVF_WIRE_GID_LEN, KVF_PROTO_GID_LEN);
	EQ(KVF_WIRE_MAC_LEN, KVF_PROTO_MAC_LEN);
	EQ(KVF_WIRE_AUTH_LEN, KVF_PROTO_AUTH_LEN);
	EQ(KVF_WIRE_REJ_LEN, KVF_PROTO_REJ_LEN);
	EQ(KVF_WIRE_REJ_TEXT_LEN, KVF_PROTO_REJ_TEXT);
	EQ(KVF_WIRE_ENGINE_ID_LEN, KVF_PROTO_ENGINE_ID_LEN);
	EQ(KVF_WIRE_HELLO_FIXED, KVF_PROTO_HELLO_FIXED);
	EQ(KVF_WIRE_HELLO_BUF_LEN, KVF_PROTO_HELLO_BUF_LEN);
	EQ(KVF_WIRE_HELLO_REGION_LEN, KVF_PROTO_HELLO_REGION_LEN);
	EQ(KVF_WIRE_REGION_NAME_LEN, KVF_PROTO_REGION_NAME_LEN);
	EQ(KVF_WIRE_MAX_REGIONS, KVF_PROTO_MAX_REGIONS);
	EQ(KVF_WIRE_MAX_REGIONS, KVF_MAX_REGIONS);
	EQ(KVF_WIRE_REGION_NAME_LEN - 1, KVF_REGION_NAME_MAX);
	EQ(KVF_WIRE_INFO_FIXED, KVF_PROTO_INFO_FIXED);
	EQ(KVF_WIRE_INFO_LIST_FIXED, KVF_PROTO_INFO_LIST_FIXED);
	EQ(KVF_WIRE_USER_MAX, KVF_PROTO_USER_MAX);
	EQ(KVF_WIRE_USER_MAX, KVF_USER_DATA_MAX);
	EQ(KVF_WIRE_ROOM_INFO_FIXED, KVF_PROTO_ROOM_INFO_FIXED);
	EQ(KVF_WIRE_ROOM_INFO_CONT_FIXED, KVF_PROTO_ROOM_INFO_CONT_FIXED);
	EQ(KVF_WIRE_ABORT_LEN, KVF_PROTO_ABORT_LEN);
	EQ(KVF_WIRE_BLOCK_ID_LEN, sizeof(uint32_t));
	/* cm.c refuses a peer whose frames are below this */
	EQ(KVF_WIRE_MIN_FRAME_MAX, KVF_PROTO_MIN_FRAME_MAX);
	cr_expect_geq(KVF_WIRE_MIN_FRAME_MAX, KVF_PROTO_ROOM_INFO_FIXED + 4u,
		      "a frame_max that takes AUTH takes a ROOM_INFO of one id");
	EQ(KVF_WIRE_ROLE_SENDER, KVF_SENDER);
	EQ(KVF_WIRE_ROLE_RECEIVER, KVF_RECEIVER);
}

/* Each layout table ends where the constant says its structure ends. */
Test(wire_doc, layouts_end_at_the_lengths)
{
	EQ(KVF_WIRE_HDR_END, KVF_PROTO_HDR_LEN);
	EQ(KVF_WIRE_CM_END, KVF_PROTO_CM_LEN);
	EQ(KVF_WIRE_REJ_END, KVF_PROTO_REJ_LEN);
	EQ(KVF_WIRE_REJ_TEXT_SIZE, KVF_PROTO_REJ_TEXT);
	EQ(KVF_WIRE_CM_ENGINE_ID_SIZE, KVF_WIRE_CM_ENGINE_ID_LEN);
	EQ(KVF_WIRE_HELLO_END, KVF_PROTO_HELLO_FIXED);
	EQ(KVF_WIRE_HELLO_REGIONS_OFF, KVF_PROTO_HELLO_FIXED);
	EQ(KVF_WIRE_HELLO_REGIONS_ELEM, KVF_PROTO_HELLO_REGION_LEN);
	EQ(KVF_WIRE_HELLO_REGION_END, KVF_PROTO_HELLO_REGION_LEN);
	EQ(KVF_WIRE_HELLO_REGION_NAME_SIZE, KVF_PROTO_REGION_NAME_LEN);
	EQ(KVF_WIRE_HELLO_BUF_END, KVF_PROTO_HELLO_BUF_LEN);
	EQ(KVF_WIRE_HELLO_ENGINE_ID_SIZE, KVF_PROTO_ENGINE_ID_LEN);
	EQ(KVF_WIRE_ROOM_INFO_END, KVF_PROTO_ROOM_INFO_FIXED);
	EQ(KVF_WIRE_ROOM_INFO_INFO_ELEM, 1);
	EQ(KVF_WIRE_ROOM_INFO_CONT_END, KVF_PROTO_ROOM_INFO_CONT_FIXED);
	EQ(KVF_WIRE_ROOM_INFO_CONT_INFO_ELEM, 1);
	EQ(KVF_WIRE_INFO_USER_OFF, KVF_PROTO_INFO_FIXED);
	EQ(KVF_WIRE_INFO_LIST_ITEMS_OFF, KVF_PROTO_INFO_LIST_FIXED);
	EQ(KVF_WIRE_INFO_LIST_ITEMS_ELEM, KVF_WIRE_BLOCK_ID_LEN);
	EQ(KVF_WIRE_ABORT_END, KVF_PROTO_ABORT_LEN);
	EQ(KVF_WIRE_HELLO_HDR_SIZE, KVF_PROTO_HDR_LEN);
	EQ(KVF_WIRE_AUTH_END, KVF_PROTO_AUTH_LEN);
	EQ(KVF_WIRE_AUTH_MAC_OFF, KVF_PROTO_AUTH_MAC_OFF);
	EQ(KVF_WIRE_AUTH_MAC_SIZE, KVF_PROTO_MAC_LEN);
	EQ(KVF_WIRE_AUTH_HDR_SIZE, KVF_PROTO_HDR_LEN);
	EQ(KVF_WIRE_CM_NONCE_SIZE, KVF_PROTO_NONCE_LEN);
}

/* The enum tables: the same values under the same names, and all of them. */
Test(wire_doc, frame_types_reject_codes_reasons_mtus)
{
#define FR(name, value, text) cr_expect_str_eq(kvf_frame_type_str(value), text, \
					       "frame type %u", value);
	KVF_WIRE_FR_LIST(FR)
#undef FR
	EQ(KVF_WIRE_FR_COUNT, KVF_FR_NUM - 1);
	EQ(KVF_WIRE_FR_HELLO, KVF_FR_HELLO);
	EQ(KVF_WIRE_FR_ROOM_INFO, KVF_FR_ROOM_INFO);
	EQ(KVF_WIRE_FR_ABORT, KVF_FR_ABORT);
	EQ(KVF_WIRE_FR_ABORT_ACK, KVF_FR_ABORT_ACK);
	EQ(KVF_WIRE_FR_HEARTBEAT, KVF_FR_HEARTBEAT);
	EQ(KVF_WIRE_FR_ROOM_INFO_CONT, KVF_FR_ROOM_INFO_CONT);
	EQ(KVF_WIRE_FR_AUTH, KVF_FR_AUTH);
	/* The refusal codes are enum kvf_auth_refusal from 1, named the same. */
#define AUTH(name, value, text) if (value) cr_expect_str_eq( \
	kvf_auth_refusal_str((enum kvf_auth_refusal)value), text, "refusal %u", value);
	KVF_WIRE_AUTH_LIST(AUTH)
#undef AUTH
	EQ(KVF_WIRE_AUTH_COUNT, KVF_AUTH_NUM);
	EQ(KVF_WIRE_AUTH_PROOF, KVF_AUTH_PROOF);
	EQ(KVF_WIRE_AUTH_BAD_TOKEN, KVF_AUTH_BAD_TOKEN);
	EQ(KVF_WIRE_AUTH_REPLAY, KVF_AUTH_REPLAY);
	EQ(KVF_WIRE_AUTH_IDENTITY, KVF_AUTH_IDENTITY);
	EQ(KVF_WIRE_AUTH_MALFORMED, KVF_AUTH_MALFORMED);
	EQ(KVF_WIRE_AUTH_EARLY, KVF_AUTH_EARLY);
	EQ(KVF_WIRE_AUTH_TIMEOUT, KVF_AUTH_TIMEOUT);
#define REJ(name, value, text) cr_expect_str_eq(kvf_rej_code_str(value), text, \
						"reject code %u", value);
	KVF_WIRE_REJ_LIST(REJ)
#undef REJ
	EQ(KVF_WIRE_REJ_COUNT, KVF_REJ_NUM);
	EQ(KVF_WIRE_REJ_VERSION, KVF_REJ_VERSION);
	EQ(KVF_WIRE_REJ_TOKEN, KVF_REJ_TOKEN);
	EQ(KVF_WIRE_REJ_MALFORMED, KVF_REJ_MALFORMED);
	EQ(KVF_WIRE_REJ_RESOURCES, KVF_REJ_RESOURCES);
#define REASON(name, value, text) cr_expect_str_eq(kvf_fail_reason_str(value), text, \
						   "fail reason %u", value);
	KVF_WIRE_REASON_LIST(REASON)
#undef REASON
	EQ(KVF_WIRE_REASON_COUNT, KVF_FAIL_NUM);
	EQ(KVF_WIRE_REASON_PEER_ABORT, KVF_FAIL_PEER_ABORT);
	EQ(KVF_WIRE_REASON_DEADLINE, KVF_FAIL_DEADLINE);
	EQ(KVF_WIRE_REASON_BAD_FRAME, KVF_FAIL_BAD_FRAME);
	EQ(KVF_WIRE_MTU_256, IBV_MTU_256);
	EQ(KVF_WIRE_MTU_512, IBV_MTU_512);
	EQ(KVF_WIRE_MTU_1024, IBV_MTU_1024);
	EQ(KVF_WIRE_MTU_2048, IBV_MTU_2048);
	EQ(KVF_WIRE_MTU_4096, IBV_MTU_4096);
}

/* ------------------------------------------- proto.c's bytes, doc offsets */

Test(wire_doc, header_and_abort_where_the_doc_says)
{
	uint8_t b[64];

	memset(b, 0xee, sizeof(b));
	cr_assert_eq(kvf_proto_encode_abort(b, sizeof(b), 0x1122334455667788ull, 1, 0xa5c3),
		     (int)KVF_WIRE_ABORT_LEN);
	EQ(DOC(b, HDR_MAGIC), KVF_WIRE_MAGIC);
	EQ(DOC(b, HDR_VERSION), KVF_WIRE_VERSION);
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_ABORT);
	EQ(DOC(b, HDR_FLAGS), 0);
	EQ(DOC(b, HDR_LENGTH), KVF_WIRE_ABORT_LEN);
	EQ(DOC(b, HDR_RESERVED), 0);
	EQ(DOC(b, HDR_ROOM_ID), 0x1122334455667788ull);
	EQ(DOC(b, ABORT_TO_ROLE), 1);
	EQ(DOC(b, ABORT_RESERVED1), 0);
	EQ(DOC(b, ABORT_REASON), 0xa5c3);
	EQ(DOC(b, ABORT_RESERVED2), 0);
	cr_expect_eq(memcmp(b, "KVFR", 4), 0, "the magic's bytes are K V F R");

	cr_assert_eq(kvf_proto_encode_abort_ack(b, sizeof(b), 42), (int)KVF_WIRE_HDR_LEN);
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_ABORT_ACK);
	EQ(DOC(b, HDR_LENGTH), KVF_WIRE_HDR_LEN);
	EQ(DOC(b, HDR_ROOM_ID), 42);
	cr_assert_eq(kvf_proto_encode_heartbeat(b, sizeof(b)), (int)KVF_WIRE_HDR_LEN);
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_HEARTBEAT);
	EQ(DOC(b, HDR_ROOM_ID), 0);
}

Test(wire_doc, hello_where_the_doc_says)
{
	struct kvf_hello_region hr[2] = {
		{ .name = "kv", .id = 0, .nitems = 0x0badcafe, .nbufs = 2 },
		{ .name = "aux", .id = 7, .nitems = 33, .nbufs = 1 },
	};
	struct kvf_hello_buf hb[3] = {
		{.addr = 0x0102030405060708ull, .item_size = 0x1000, .rkey = 0xa1b2c3d4},
		{.addr = 0x1112131415161718ull, .item_size = 0x2000, .rkey = 0x55667788},
		{.addr = 0x2122232425262728ull, .item_size = 0x30, .rkey = 0x99,
		 .geom = {.page_tokens = 2, .heads = 3, .head0 = 5, .head_bytes = 8, .layer = 17,
			  .kind = 1}},
	};
	uint8_t b[512];
	int len = kvf_proto_encode_hello(b, sizeof(b), "engine-x", hr, 2, hb);
	const uint8_t *e = b + KVF_WIRE_HELLO_REGIONS_OFF;

	cr_assert_eq(len, (int)(KVF_WIRE_HELLO_FIXED + 2 * KVF_WIRE_HELLO_REGION_LEN +
				3 * KVF_WIRE_HELLO_BUF_LEN));
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_HELLO);
	EQ(DOC(b, HDR_LENGTH), len);
	EQ(DOC(b, HDR_ROOM_ID), 0);
	cr_expect_str_eq((const char *)b + KVF_WIRE_HELLO_ENGINE_ID_OFF, "engine-x");
	EQ(DOC(b, HELLO_NREGIONS), 2);
	EQ(DOC(b, HELLO_NBUFS), 3);
	for (unsigned r = 0, k = 0; r < 2; r++) {
		cr_expect_str_eq((const char *)e + KVF_WIRE_HELLO_REGION_NAME_OFF, hr[r].name);
		EQ(DOC(e, HELLO_REGION_ID), hr[r].id);
		EQ(DOC(e, HELLO_REGION_NITEMS), hr[r].nitems);
		EQ(DOC(e, HELLO_REGION_NBUFS), hr[r].nbufs);
		EQ(DOC(e, HELLO_REGION_RESERVED), 0);
		e += KVF_WIRE_HELLO_REGION_LEN;
		for (unsigned i = 0; i < hr[r].nbufs; i++, k++, e += KVF_WIRE_HELLO_BUF_LEN) {
			EQ(DOC(e, HELLO_BUF_ADDR), hb[k].addr);
			EQ(DOC(e, HELLO_BUF_ITEM_SIZE), hb[k].item_size);
			EQ(DOC(e, HELLO_BUF_RKEY), hb[k].rkey);
			EQ(DOC(e, HELLO_BUF_RESERVED), 0);
			EQ(DOC(e, HELLO_BUF_PAGE_TOKENS), hb[k].geom.page_tokens);
			EQ(DOC(e, HELLO_BUF_HEADS), hb[k].geom.heads);
			EQ(DOC(e, HELLO_BUF_HEAD0), hb[k].geom.head0);
			EQ(DOC(e, HELLO_BUF_HEAD_BYTES), hb[k].geom.head_bytes);
			EQ(DOC(e, HELLO_BUF_LAYER), hb[k].geom.layer);
			EQ(DOC(e, HELLO_BUF_KIND), hb[k].geom.kind);
		}
	}
	EQ(e - b, len);
}

Test(wire_doc, room_info_and_cont_where_the_doc_says)
{
	uint32_t kv[3] = {7, 0x01020304, 9}, aux = 5, n = 0;
	struct kvf_proto_list l[2] = { { 0, 3, kv }, { 5, 1, &aux } };
	uint8_t info[128], b[256];
	int total = kvf_proto_encode_info(info, sizeof(info), l, 2, "abcde", 5);
	size_t cap = KVF_WIRE_ROOM_INFO_FIXED + 12;
	int len = kvf_proto_encode_room_info_part(b, cap, 0xabcdef, 0x0000000500000003ull, info,
						  (uint32_t)total, 0, &n);
	const uint8_t *p = info + KVF_WIRE_INFO_USER_OFF + 8;

	/* the info */
	EQ(DOC(info, INFO_NLISTS), 2);
	EQ(DOC(info, INFO_USER_LEN), 5);
	cr_expect_eq(memcmp(info + KVF_WIRE_INFO_USER_OFF, "abcde\0\0\0", 8), 0, "padded with 0");
	EQ(DOC(p, INFO_LIST_REGION), 0);
	EQ(DOC(p, INFO_LIST_N), 3);
	for (unsigned i = 0; i < 3; i++)
		EQ(kw_get(p + KVF_WIRE_INFO_LIST_ITEMS_OFF + i * KVF_WIRE_INFO_LIST_ITEMS_ELEM,
			  KVF_WIRE_BLOCK_ID_LEN), kv[i]);
	p += KVF_WIRE_INFO_LIST_ITEMS_OFF + 3 * KVF_WIRE_INFO_LIST_ITEMS_ELEM;
	EQ(DOC(p, INFO_LIST_REGION), 5);
	EQ(DOC(p, INFO_LIST_N), 1);
	EQ(p + KVF_WIRE_INFO_LIST_ITEMS_OFF + KVF_WIRE_INFO_LIST_ITEMS_ELEM - info, total);

	/* its frames */
	cr_assert_eq(n, 12);
	EQ(len, cap);
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_ROOM_INFO);
	EQ(DOC(b, HDR_ROOM_ID), 0xabcdef);
	EQ(DOC(b, ROOM_INFO_RECV_HANDLE), 0x0000000500000003ull);
	EQ(DOC(b, ROOM_INFO_LEN), 12);
	EQ(DOC(b, ROOM_INFO_TOTAL), total);
	cr_expect_eq(memcmp(b + KVF_WIRE_ROOM_INFO_INFO_OFF, info, 12), 0);

	cap = KVF_WIRE_ROOM_INFO_CONT_FIXED + 8;
	len = kvf_proto_encode_room_info_part(b, cap, 0xabcdef, 0, info, (uint32_t)total, 12, &n);
	cr_assert_eq(n, 8);
	EQ(len, cap);
	EQ(DOC(b, HDR_TYPE), KVF_WIRE_FR_ROOM_INFO_CONT);
	EQ(DOC(b, ROOM_INFO_CONT_OFFSET), 12);
	EQ(DOC(b, ROOM_INFO_CONT_LEN), 8);
	cr_expect_eq(memcmp(b + KVF_WIRE_ROOM_INFO_CONT_INFO_OFF, info + 12, 8), 0);

	/* "total 0 means len": an info that fits one frame says 0 */
	kvf_proto_encode_room_info_part(b, sizeof(b), 1, 2, info, (uint32_t)total, 0, &n);
	EQ(DOC(b, ROOM_INFO_TOTAL), 0);
}

Test(wire_doc, connect_and_reject_data_where_the_doc_says)
{
	struct kvf_cm_hello h = {.version = 0x1234, .mtu = 4, .frame_max = 0x00a0b0c0};
	uint8_t cm[KVF_WIRE_CM_LEN], rej[KVF_WIRE_REJ_LEN];
	char text[KVF_PROTO_REJ_TEXT + 32], mine[KVF_PROTO_REJ_TEXT + 32];

	for (unsigned i = 0; i < sizeof(h.nonce); i++)
		h.nonce[i] = (uint8_t)(0x40 + i);
	snprintf(h.engine_id, sizeof(h.engine_id), "an-engine-id-of-exactly-28-b");
	kvf_proto_encode_cm(cm, &h);
	EQ(DOC(cm, CM_MAGIC), KVF_WIRE_MAGIC);
	EQ(DOC(cm, CM_VERSION), 0x1234);
	EQ(DOC(cm, CM_MTU), 4);
	EQ(DOC(cm, CM_RESERVED), 0);
	EQ(DOC(cm, CM_FRAME_MAX), 0x00a0b0c0);
	cr_expect_eq(memcmp(cm + KVF_WIRE_CM_NONCE_OFF, h.nonce, KVF_WIRE_NONCE_LEN), 0);
	cr_expect_eq(memcmp(cm + KVF_WIRE_CM_ENGINE_ID_OFF, h.engine_id, KVF_WIRE_CM_ENGINE_ID_SIZE), 0);

	kvf_proto_encode_rej(rej, KVF_REJ_TOKEN, "peer x has a different auth token");
	EQ(DOC(rej, REJ_MAGIC), KVF_WIRE_MAGIC);
	EQ(DOC(rej, REJ_CODE), KVF_WIRE_REJ_TOKEN);
	EQ(DOC(rej, REJ_RESERVED), 0);
	cr_expect_str_eq((const char *)rej + KVF_WIRE_REJ_TEXT_OFF, "peer x has a different auth token");
	kvf_proto_decode_rej(rej, sizeof(rej), text, sizeof(text));
	kw_decode_rej(rej, sizeof(rej), mine, sizeof(mine));
	cr_expect_str_eq(mine, text);
	/* the shortest reject a decoder takes, and one byte less */
	kvf_proto_decode_rej(rej, KVF_WIRE_REJ_MIN_LEN, text, sizeof(text));
	cr_expect_str_eq(text, "bad token");
	kvf_proto_decode_rej(rej, KVF_WIRE_REJ_MIN_LEN - 1, text, sizeof(text));
	cr_expect_str_eq(text, "no reason given");
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* 2n hex digits into n bytes. */
static void unhex(const char *h, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sscanf(h + 2 * i, "%2hhx", &out[i]);
}

/* A vector's connection, for both codecs. */
static void vector_id(uint32_t dq, uint32_t pq, const char *dn, const char *pn, const char *dg,
		      const char *pg, struct kvf_auth_id *k, struct kw_auth_id *w)
{
	k->decode_qpn = w->decode_qpn = dq;
	k->prefill_qpn = w->prefill_qpn = pq;
	unhex(dn, k->decode_nonce, 16);
	unhex(pn, k->prefill_nonce, 16);
	unhex(dg, k->decode_gid, 16);
	unhex(pg, k->prefill_gid, 16);
	memcpy(w->decode_nonce, k->decode_nonce, 16);
	memcpy(w->prefill_nonce, k->prefill_nonce, 16);
	memcpy(w->decode_gid, k->decode_gid, 16);
	memcpy(w->prefill_gid, k->prefill_gid, 16);
}

/* Each vector: kvferry's proof and the doc-built one carry its MAC, and
 * each side's check takes the other's frame. */
static void auth_vector(const char *token, uint8_t role, uint32_t dq, uint32_t pq,
			const char *dn, const char *pn, const char *dg, const char *pg,
			const char *mac)
{
	struct kvf_auth_id k;
	struct kw_auth_id w;
	struct kvf_frame f;
	uint8_t code[KVF_PROTO_AUTH_LEN], doc[KVF_WIRE_AUTH_LEN];
	char hc[65], hd[65], why[400];

	vector_id(dq, pq, dn, pn, dg, pg, &k, &w);
	cr_assert_eq(kvf_auth_prove(code, sizeof(code), role, &k, token), (int)KVF_PROTO_AUTH_LEN);
	cr_assert_eq(kw_encode_auth(doc, sizeof(doc), role, KVF_WIRE_AUTH_PROOF, &w, token),
		     KVF_WIRE_AUTH_LEN);
	hex(code + KVF_WIRE_AUTH_MAC_OFF, 32, hc);
	hex(doc + KVF_WIRE_AUTH_MAC_OFF, 32, hd);
	cr_expect_str_eq(hc, mac, "kvferry's MAC for \"%s\" role %u is %s, not the doc's", token,
			 role, hc);
	cr_expect_str_eq(hd, mac, "the doc's layout for \"%s\" role %u is not its vector", token, role);
	cr_expect_eq(memcmp(code, doc, sizeof(doc)), 0, "the two frames differ byte for byte");
	cr_assert_eq(kvf_proto_decode(doc, sizeof(doc), &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(kvf_auth_check(&f, role, &k, token, why, sizeof(why)), 0, "%s", why);
	cr_expect(kw_auth_holds(code, role, &w, token), "the doc's check refuses kvferry's proof");
}

Test(wire_doc, auth_vectors)
{
	unsigned n = 0;

#define VEC(token, role, dq, pq, dn, pn, dg, pg, mac) \
	auth_vector(token, (uint8_t)(role), dq, pq, dn, pn, dg, pg, mac); n++;
	KVF_WIRE_AUTH_VECTORS(VEC)
#undef VEC
	cr_expect_geq(n, 4, "docs/wire.md lists %u AUTH vectors", n);
}

/* A refusal built at the doc's offsets decodes to its code and view, and
 * kvferry's refusal to the doc's reading: no MAC in either. */
Test(wire_doc, auth_refusal_both_ways)
{
	struct kvf_auth_id k = {.decode_qpn = 0x77, .prefill_qpn = 0x78};
	struct kw_auth_id w = {.decode_qpn = 0x77, .prefill_qpn = 0x78};
	struct kvf_frame f;
	struct kw_frame kf;
	uint8_t b[KVF_WIRE_AUTH_LEN], zero[32] = {0};
	char why[200];

	cr_assert_eq(kw_encode_auth(b, sizeof(b), KVF_WIRE_ROLE_SENDER, KVF_WIRE_AUTH_REPLAY, &w, NULL),
		     KVF_WIRE_AUTH_LEN);
	cr_assert_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.auth.status, KVF_AUTH_REPLAY);
	cr_expect_eq(f.auth.id.prefill_qpn, 0x78);
	cr_expect_eq(memcmp(f.auth.mac, zero, 32), 0);
	cr_assert_eq(kvf_auth_refuse(b, sizeof(b), KVF_RECEIVER, KVF_AUTH_TIMEOUT, &k),
		     (int)KVF_PROTO_AUTH_LEN);
	cr_assert_eq(kw_decode(b, sizeof(b), &kf, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(kf.type, KVF_WIRE_FR_AUTH);
	cr_expect_eq(kf.role, KVF_WIRE_ROLE_RECEIVER);
	cr_expect_eq(kf.status, KVF_WIRE_AUTH_TIMEOUT);
	cr_expect_str_eq(kw_auth_name(kf.status), "no proof in time");
	cr_expect_eq(kf.auth.decode_qpn, 0x77);
	cr_expect_eq(memcmp(kf.mac, zero, 32), 0);
}

Test(wire_doc, immediate_bits)
{
	static const uint32_t slots[] = {0, 1, 0xfffff, 0x12345, 0x100000 | 7};
	static const uint32_t gens[] = {0, 1, 0xfff, 0x1000 | 5, 0xdeadbeef};

	EQ(KVF_WIRE_IMM_SLOT_BITS, KVF_IMM_SLOT_BITS);
	EQ((1u << KVF_WIRE_IMM_GEN_BITS) - 1, KVF_IMM_GEN_MASK);
	EQ(KVF_WIRE_IMM_SLOT_BITS + KVF_WIRE_IMM_GEN_BITS, 32);
	for (unsigned i = 0; i < 5; i++)
		for (unsigned j = 0; j < 5; j++)
			cr_expect_eq(kw_imm(kw_recv_handle(slots[i], gens[j])), kvf_imm(slots[i], gens[j]),
				     "slot %#x gen %#x", slots[i], gens[j]);
}

/* ------------------------------------------- doc's bytes, proto.c decodes */

Test(wire_doc, frames_built_from_the_doc_decode_in_kvferry)
{
	struct kw_hello_buf hb[2] = {{.addr = 0x7000, .item_size = 512, .rkey = 0x99,
				      .page_tokens = 4, .heads = 2, .head0 = 6, .head_bytes = 64,
				      .layer = 31, .kind = 1},
				     {.addr = 0x9000, .item_size = 8, .rkey = 0x9a}};
	struct kw_region kr[2] = {{"kv", 0, 4096, 1, &hb[0]}, {"aux", 5, 64, 1, &hb[1]}};
	uint32_t ids[3] = {5, 6, 1000}, aux = 63;
	struct kw_list kl[2] = {{0, 3, ids}, {5, 1, &aux}};
	struct kvf_room_reasm ra = {0};
	struct kvf_reasm_drop drop;
	struct kvf_peer_info *pi = NULL;
	struct kvf_hello_region r;
	struct kvf_hello_buf hbuf;
	struct kvf_frame f;
	uint8_t b[512];
	char why[200];
	size_t len;

	len = kw_encode_hello(b, sizeof(b), "doc-peer", kr, 2);
	cr_assert_eq(kvf_proto_decode(b, len, &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_FR_HELLO);
	cr_expect_str_eq(f.hello.engine_id, "doc-peer");
	cr_expect_eq(f.hello.nregions, 2);
	kvf_proto_hello_region(&f, 1, &r);
	cr_expect_str_eq(r.name, "aux");
	cr_expect_eq(r.nitems, 64);
	kvf_proto_hello_buf(&f, 0, 0, &hbuf);
	cr_expect_eq(hbuf.geom.page_tokens, 4);
	cr_expect_eq(hbuf.geom.heads, 2);
	cr_expect_eq(hbuf.geom.head0, 6);
	cr_expect_eq(hbuf.geom.head_bytes, 64);
	cr_expect_eq(hbuf.geom.layer, 31);
	cr_expect_eq(hbuf.geom.kind, 1);

	len = kw_encode_room_info(b, sizeof(b), 0x77, kw_recv_handle(3, 9), kl, 2, "pfx=7", 5);
	cr_assert_eq(kvf_proto_decode(b, len, &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_FR_ROOM_INFO);
	cr_expect_eq(f.room_id, 0x77);
	cr_expect_eq(f.room_info.recv_handle, (uint64_t)9 << 32 | 3);
	cr_assert_eq(kvf_proto_reasm_feed(&ra, &f, &lim, 0, &pi, &drop, why, sizeof(why)), 1,
		     "%s", why);
	cr_expect_eq(pi->nids, 4);
	cr_expect_eq(pi->ids[2], 1000);
	cr_expect_str_eq(pi->lists[1].name, "aux");
	cr_expect_eq(pi->ids[3], 63);
	cr_expect_eq(memcmp(pi->user, "pfx=7", 5), 0);
	free(pi);

	len = kw_encode_abort(b, sizeof(b), 0x78, KVF_WIRE_ROLE_SENDER, KVF_WIRE_REASON_DEADLINE);
	cr_assert_eq(kvf_proto_decode(b, len, &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_FR_ABORT);
	cr_expect_eq(f.abort.to_role, KVF_SENDER);
	cr_expect_eq(f.abort.reason, KVF_FAIL_DEADLINE);

	len = kw_encode_heartbeat(b, sizeof(b));
	cr_assert_eq(kvf_proto_decode(b, len, &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_FR_HEARTBEAT);
}

Test(wire_doc, connect_data_built_from_the_doc_decodes_in_kvferry)
{
	struct kw_cm mine = {.version = KVF_WIRE_VERSION, .mtu = KVF_WIRE_MTU_1024,
			     .frame_max = 32768, .engine_id = "doc-peer"};
	struct kvf_cm_hello h;
	uint8_t cm[KVF_WIRE_CM_LEN];
	char why[200];

	for (unsigned i = 0; i < sizeof(mine.nonce); i++)
		mine.nonce[i] = (uint8_t)(0xf0 ^ i);
	kw_encode_cm(cm, &mine);
	cr_assert_eq(kvf_proto_decode_cm(cm, sizeof(cm), &h, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(h.version, KVF_PROTO_VERSION);
	cr_expect_eq(h.mtu, IBV_MTU_1024);
	cr_expect_eq(h.frame_max, 32768);
	cr_expect_str_eq(h.engine_id, "doc-peer");
	cr_expect_eq(memcmp(h.nonce, mine.nonce, 16), 0);
}

/* ------------------------------------------- proto.c's bytes, doc decodes */

Test(wire_doc, kvferry_frames_decode_with_the_doc)
{
	struct kvf_hello_buf hb = {.addr = 0x8000, .item_size = 64, .rkey = 7};
	struct kvf_hello_region hr = {.name = "kv", .id = 0, .nitems = 100, .nbufs = 1};
	struct kvf_cm_hello h = {.version = KVF_PROTO_VERSION, .frame_max = 28672,
				 .engine_id = "prefill-1"};
	struct kw_frame f;
	struct kw_cm c;
	uint8_t b[256], cm[KVF_PROTO_CM_LEN];
	char why[200];
	int len;

	len = kvf_proto_encode_hello(b, sizeof(b), "prefill-1", &hr, 1, &hb);
	cr_assert_eq(kw_decode(b, (size_t)len, &f, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_WIRE_FR_HELLO);
	cr_expect_str_eq(f.engine_id, "prefill-1");
	cr_expect_eq(f.nregions, 1);
	cr_expect_eq(f.nbufs, 1);
	len = kvf_proto_encode_abort(b, sizeof(b), 0x99, KVF_RECEIVER, KVF_FAIL_BAD_FRAME);
	cr_assert_eq(kw_decode(b, (size_t)len, &f, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_WIRE_FR_ABORT);
	cr_expect_eq(f.room_id, 0x99);
	cr_expect_eq(f.to_role, KVF_WIRE_ROLE_RECEIVER);
	cr_expect_eq(f.reason, KVF_WIRE_REASON_BAD_FRAME);
	len = kvf_proto_encode_abort_ack(b, sizeof(b), 0x9a);
	cr_assert_eq(kw_decode(b, (size_t)len, &f, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.type, KVF_WIRE_FR_ABORT_ACK);

	kvf_proto_encode_cm(cm, &h);
	cr_assert_eq(kw_decode_cm(cm, sizeof(cm), &c, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(c.version, KVF_WIRE_VERSION);
	cr_expect_eq(c.frame_max, 28672);
	cr_expect_str_eq(c.engine_id, "prefill-1");
}
