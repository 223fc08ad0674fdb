/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry's wire protocol written from docs/wire.md alone: every offset,
 * size and constant here comes from wire_doc.h, which tools/wire_doc_h.py
 * generates from the document's tables at build time. It deliberately does
 * not include src/transfer/proto.h: tests/rxe/fake_peer speaks to a real kvferry
 * engine through it, so a peer built from the document is what the RDMA
 * suite proves interoperable, and tests/unit/transfer/test_wire_doc.c checks it
 * against src/transfer/proto.c byte by byte.
 *
 * Only what a decode-side peer needs: the connect private data, the reject,
 * AUTH (the token's proof: HMAC-SHA256 from OpenSSL's libcrypto, the one
 * thing not written here), HELLO (regions), ROOM_INFO (one frame), ABORT,
 * HEARTBEAT, and a decoder of the frames a prefill sends. */
#ifndef KVF_WIRE_CODEC_H
#define KVF_WIRE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire_doc.h"

/* Little-endian integers of 1, 2, 4 or 8 bytes. */
void kw_put(uint8_t *p, unsigned size, uint64_t v);
uint64_t kw_get(const uint8_t *p, unsigned size);

/* A field by the document's name, e.g. KW_PUT(buf, HDR_LENGTH, 24). */
#define KW_PUT(p, F, v) kw_put((uint8_t *)(p) + KVF_WIRE_##F##_OFF, KVF_WIRE_##F##_SIZE, (v))
#define KW_GET(p, F) kw_get((const uint8_t *)(p) + KVF_WIRE_##F##_OFF, KVF_WIRE_##F##_SIZE)

/* The connect and accept private data (docs/wire.md 4.2). */
struct kw_cm {
	uint16_t version;
	uint8_t mtu;
	uint32_t frame_max;
	uint8_t nonce[KVF_WIRE_NONCE_LEN];
	char engine_id[KVF_WIRE_CM_ENGINE_ID_LEN + 1];
};

void kw_encode_cm(uint8_t out[KVF_WIRE_CM_LEN], const struct kw_cm *h);
/* 0, or -EBADMSG (short, no magic) with why filled. */
int kw_decode_cm(const void *buf, size_t len, struct kw_cm *h, char *why, size_t wlen);
/* "<code's text>: <text>", "reason N: <text>", or "no reason given". */
void kw_decode_rej(const void *buf, size_t len, char *text, size_t tlen);

/* What an AUTH frame binds its proof to (docs/wire.md 4.4). */
struct kw_auth_id {
	uint32_t decode_qpn, prefill_qpn;
	uint8_t decode_nonce[KVF_WIRE_NONCE_LEN], prefill_nonce[KVF_WIRE_NONCE_LEN];
	uint8_t decode_gid[KVF_WIRE_GID_LEN], prefill_gid[KVF_WIRE_GID_LEN];
};

/* An AUTH frame (docs/wire.md 5.7): a proof (status KVF_WIRE_AUTH_PROOF,
 * its mac under token) or a refusal (mac zero; token unused). Returns
 * KVF_WIRE_AUTH_LEN, or 0 when it does not fit cap or the MAC failed. */
size_t kw_encode_auth(uint8_t *buf, size_t cap, uint8_t role, uint8_t status,
		      const struct kw_auth_id *id, const char *token);
/* Whether f (a decoded AUTH frame) is a proof by role that holds for id
 * under token: the MAC over our own view, compared in constant time. */
bool kw_auth_holds(const void *frame, uint8_t role, const struct kw_auth_id *id,
		   const char *token);

struct kw_hello_buf {
	uint64_t addr;
	uint64_t item_size;
	uint32_t rkey;
	/* Geometry (docs/wire.md 5.3), all zero: none. */
	uint32_t page_tokens, heads, head0, head_bytes, layer, kind;
};

/* One region of a HELLO (docs/wire.md 5.3). */
struct kw_region {
	const char *name;
	uint32_t id;
	uint32_t nitems;
	uint32_t nbufs;
	const struct kw_hello_buf *bufs;
};

/* One list of a ROOM_INFO's info (docs/wire.md 5.4). */
struct kw_list {
	uint32_t region;
	uint32_t n;
	const uint32_t *items;
};

/* Encoders return the frame's length, or 0 when it does not fit cap. */
size_t kw_encode_hello(uint8_t *buf, size_t cap, const char *engine_id,
		       const struct kw_region *regs, uint32_t nregions);
/* A whole info in one frame (total = len). */
size_t kw_encode_room_info(uint8_t *buf, size_t cap, uint64_t room_id, uint64_t recv_handle,
			   const struct kw_list *lists, uint32_t nlists, const void *user,
			   uint32_t user_len);
size_t kw_encode_abort(uint8_t *buf, size_t cap, uint64_t room_id, uint8_t to_role,
		       uint16_t reason);
size_t kw_encode_heartbeat(uint8_t *buf, size_t cap);

/* A received frame: the header, and the fields of HELLO and ABORT. */
struct kw_frame {
	uint8_t type;
	uint64_t room_id;
	char engine_id[KVF_WIRE_ENGINE_ID_LEN + 1]; /* HELLO */
	uint32_t nregions, nbufs;                    /* HELLO */
	uint8_t to_role;                             /* ABORT */
	uint16_t reason;                             /* ABORT */
	uint8_t role, status;                        /* AUTH */
	struct kw_auth_id auth;                      /* AUTH */
	const uint8_t *mac;                          /* AUTH: into the frame */
};

/* 0, or -EBADMSG / -EPROTO with why filled: the header's checks in the
 * document's order, then the body's length (and ABORT's role). */
int kw_decode(const void *buf, size_t len, struct kw_frame *f, char *why, size_t wlen);

/* The immediate of a room's last write (docs/wire.md 6.2). */
uint32_t kw_imm(uint64_t recv_handle);
uint32_t kw_imm_slot(uint32_t imm);
uint64_t kw_recv_handle(uint32_t slot, uint32_t gen);

const char *kw_frame_name(unsigned type);
const char *kw_rej_name(unsigned code);
const char *kw_auth_name(unsigned code); /* "proof", "bad token", ...; NULL unknown */

#endif
