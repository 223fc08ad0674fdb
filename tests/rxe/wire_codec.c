/* SPDX-License-Identifier: Apache-2.0 */
/* docs/wire.md as code: see wire_codec.h. Every offset is a KVF_WIRE_*
 * name from the document's tables; no number here is a layout. */
#include "wire_codec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define BAD(err, ...)                                     \
	do {                                              \
		if (why && wlen)                          \
			snprintf(why, wlen, __VA_ARGS__); \
		return (err);                             \
	} while (0)

void kw_put(uint8_t *p, unsigned size, uint64_t v)
{
	for (unsigned i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t kw_get(const uint8_t *p, unsigned size)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A NUL-padded string field of size bytes (not terminated when full). */
static void put_str(uint8_t *p, size_t size, const char *s)
{
	memset(p, 0, size);
	if (s)
		memcpy(p, s, strnlen(s, size));
}

/* ------------------------------------------------------------ private data */

void kw_encode_cm(uint8_t out[KVF_WIRE_CM_LEN], const struct kw_cm *h)
{
	memset(out, 0, KVF_WIRE_CM_LEN);
	KW_PUT(out, CM_MAGIC, KVF_WIRE_MAGIC);
	KW_PUT(out, CM_VERSION, h->version);
	KW_PUT(out, CM_MTU, h->mtu);
	KW_PUT(out, CM_FRAME_MAX, h->frame_max);
	memcpy(out + KVF_WIRE_CM_NONCE_OFF, h->nonce, KVF_WIRE_CM_NONCE_SIZE);
	put_str(out + KVF_WIRE_CM_ENGINE_ID_OFF, KVF_WIRE_CM_ENGINE_ID_SIZE, h->engine_id);
}

int kw_decode_cm(const void *buf, size_t len, struct kw_cm *h, char *why, size_t wlen)
{
	memset(h, 0, sizeof(*h));
	if (!buf || len < KVF_WIRE_CM_LEN)
		BAD(-EBADMSG, "private data of %zu bytes, expected %u", buf ? len : 0,
		    KVF_WIRE_CM_LEN);
	if (KW_GET(buf, CM_MAGIC) != KVF_WIRE_MAGIC)
		BAD(-EBADMSG, "private data without the magic");
	h->version = (uint16_t)KW_GET(buf, CM_VERSION);
	h->mtu = (uint8_t)KW_GET(buf, CM_MTU);
	h->frame_max = (uint32_t)KW_GET(buf, CM_FRAME_MAX);
	memcpy(h->nonce, (const uint8_t *)buf + KVF_WIRE_CM_NONCE_OFF, KVF_WIRE_CM_NONCE_SIZE);
	memcpy(h->engine_id, (const uint8_t *)buf + KVF_WIRE_CM_ENGINE_ID_OFF,
	       KVF_WIRE_CM_ENGINE_ID_SIZE);
	return 0;
}

void kw_decode_rej(const void *buf, size_t len, char *text, size_t tlen)
{
	const char *t = (const char *)buf + KVF_WIRE_REJ_TEXT_OFF;
	unsigned code;
	size_t n;

	if (!buf || len < KVF_WIRE_REJ_MIN_LEN || KW_GET(buf, REJ_MAGIC) != KVF_WIRE_MAGIC) {
		snprintf(text, tlen, "no reason given");
		return;
	}
	code = (unsigned)KW_GET(buf, REJ_CODE);
	if (len > KVF_WIRE_REJ_LEN)
		len = KVF_WIRE_REJ_LEN;
	n = strnlen(t, len - KVF_WIRE_REJ_TEXT_OFF);
	if (kw_rej_name(code))
		snprintf(text, tlen, "%s%s%.*s", kw_rej_name(code), n ? ": " : "", (int)n, t);
	else
		snprintf(text, tlen, "reason %u%s%.*s", code, n ? ": " : "", (int)n, t);
}

/* ----------------------------------------------------------------- frames */

static void put_hdr(uint8_t *p, unsigned type, size_t len, uint64_t room_id);

/* ------------------------------------------------------------------- AUTH */

/* HMAC-SHA256 under the token's bytes (the empty one: the empty key) of
 * the frame's bytes before auth.mac, into auth.mac. */
static bool auth_mac(const uint8_t *frame, const char *token, uint8_t *out)
{
	const char *key = token ? token : "";
	unsigned int n = 0;

	return HMAC(EVP_sha256(), key, (int)strlen(key), frame, KVF_WIRE_AUTH_MAC_OFF, out, &n) &&
	       n == KVF_WIRE_AUTH_MAC_SIZE;
}

size_t kw_encode_auth(uint8_t *buf, size_t cap, uint8_t role, uint8_t status,
		      const struct kw_auth_id *id, const char *token)
{
	if (cap < KVF_WIRE_AUTH_LEN)
		return 0;
	memset(buf, 0, KVF_WIRE_AUTH_LEN);
	put_hdr(buf, KVF_WIRE_FR_AUTH, KVF_WIRE_AUTH_LEN, 0);
	KW_PUT(buf, AUTH_ROLE, role);
	KW_PUT(buf, AUTH_STATUS, status);
	KW_PUT(buf, AUTH_DECODE_QPN, id->decode_qpn);
	KW_PUT(buf, AUTH_PREFILL_QPN, id->prefill_qpn);
	memcpy(buf + KVF_WIRE_AUTH_DECODE_NONCE_OFF, id->decode_nonce, KVF_WIRE_AUTH_DECODE_NONCE_SIZE);
	memcpy(buf + KVF_WIRE_AUTH_PREFILL_NONCE_OFF, id->prefill_nonce,
	       KVF_WIRE_AUTH_PREFILL_NONCE_SIZE);
	memcpy(buf + KVF_WIRE_AUTH_DECODE_GID_OFF, id->decode_gid, KVF_WIRE_AUTH_DECODE_GID_SIZE);
	memcpy(buf + KVF_WIRE_AUTH_PREFILL_GID_OFF, id->prefill_gid, KVF_WIRE_AUTH_PREFILL_GID_SIZE);
	if (status == KVF_WIRE_AUTH_PROOF && !auth_mac(buf, token, buf + KVF_WIRE_AUTH_MAC_OFF))
		return 0;
	return KVF_WIRE_AUTH_LEN;
}

bool kw_auth_holds(const void *frame, uint8_t role, const struct kw_auth_id *id,
		   const char *token)
{
	uint8_t want[KVF_WIRE_AUTH_LEN];
	const uint8_t *f = frame;

	if (KW_GET(f, AUTH_STATUS) != KVF_WIRE_AUTH_PROOF || KW_GET(f, AUTH_ROLE) != role ||
	    !kw_encode_auth(want, sizeof(want), role, KVF_WIRE_AUTH_PROOF, id, token))
		return false;
	return !CRYPTO_memcmp(want + KVF_WIRE_AUTH_MAC_OFF, f + KVF_WIRE_AUTH_MAC_OFF,
			      KVF_WIRE_AUTH_MAC_SIZE);
}

static void put_hdr(uint8_t *p, unsigned type, size_t len, uint64_t room_id)
{
	memset(p, 0, KVF_WIRE_HDR_LEN);
	KW_PUT(p, HDR_MAGIC, KVF_WIRE_MAGIC);
	KW_PUT(p, HDR_VERSION, KVF_WIRE_VERSION);
	KW_PUT(p, HDR_TYPE, type);
	KW_PUT(p, HDR_LENGTH, len);
	KW_PUT(p, HDR_ROOM_ID, room_id);
}

size_t kw_encode_hello(uint8_t *buf, size_t cap, const char *engine_id,
		       const struct kw_region *regs, uint32_t nregions)
{
	size_t len = KVF_WIRE_HELLO_FIXED, off = KVF_WIRE_HELLO_REGIONS_OFF;
	uint32_t nbufs = 0;

	for (uint32_t r = 0; r < nregions; r++) {
		len += KVF_WIRE_HELLO_REGION_LEN + (size_t)regs[r].nbufs * KVF_WIRE_HELLO_BUF_LEN;
		nbufs += regs[r].nbufs;
	}
	if (len > cap)
		return 0;
	memset(buf, 0, len);
	put_hdr(buf, KVF_WIRE_FR_HELLO, len, 0);
	put_str(buf + KVF_WIRE_HELLO_ENGINE_ID_OFF, KVF_WIRE_HELLO_ENGINE_ID_SIZE, engine_id);
	KW_PUT(buf, HELLO_NREGIONS, nregions);
	KW_PUT(buf, HELLO_NBUFS, nbufs);
	for (uint32_t r = 0; r < nregions; r++) {
		uint8_t *e = buf + off;

		put_str(e + KVF_WIRE_HELLO_REGION_NAME_OFF, KVF_WIRE_HELLO_REGION_NAME_SIZE,
			regs[r].name);
		KW_PUT(e, HELLO_REGION_ID, regs[r].id);
		KW_PUT(e, HELLO_REGION_NITEMS, regs[r].nitems);
		KW_PUT(e, HELLO_REGION_NBUFS, regs[r].nbufs);
		off += KVF_WIRE_HELLO_REGION_LEN;
		for (uint32_t i = 0; i < regs[r].nbufs; i++, off += KVF_WIRE_HELLO_BUF_LEN) {
			e = buf + off;
			KW_PUT(e, HELLO_BUF_ADDR, regs[r].bufs[i].addr);
			KW_PUT(e, HELLO_BUF_ITEM_SIZE, regs[r].bufs[i].item_size);
			KW_PUT(e, HELLO_BUF_RKEY, regs[r].bufs[i].rkey);
			KW_PUT(e, HELLO_BUF_PAGE_TOKENS, regs[r].bufs[i].page_tokens);
			KW_PUT(e, HELLO_BUF_HEADS, regs[r].bufs[i].heads);
			KW_PUT(e, HELLO_BUF_HEAD0, regs[r].bufs[i].head0);
			KW_PUT(e, HELLO_BUF_HEAD_BYTES, regs[r].bufs[i].head_bytes);
			KW_PUT(e, HELLO_BUF_LAYER, regs[r].bufs[i].layer);
			KW_PUT(e, HELLO_BUF_KIND, regs[r].bufs[i].kind);
		}
	}
	return len;
}

size_t kw_encode_room_info(uint8_t *buf, size_t cap, uint64_t room_id, uint64_t recv_handle,
			   const struct kw_list *lists, uint32_t nlists, const void *user,
			   uint32_t user_len)
{
	size_t pad = (user_len + 3u) & ~3u, info = KVF_WIRE_INFO_FIXED + pad, len, off;

	for (uint32_t k = 0; k < nlists; k++)
		info += KVF_WIRE_INFO_LIST_FIXED + (size_t)lists[k].n * KVF_WIRE_INFO_LIST_ITEMS_ELEM;
	len = KVF_WIRE_ROOM_INFO_FIXED + info;
	if (len > cap)
		return 0;
	memset(buf, 0, len);
	put_hdr(buf, KVF_WIRE_FR_ROOM_INFO, len, room_id);
	KW_PUT(buf, ROOM_INFO_RECV_HANDLE, recv_handle);
	KW_PUT(buf, ROOM_INFO_LEN, info);
	KW_PUT(buf, ROOM_INFO_TOTAL, info);
	off = KVF_WIRE_ROOM_INFO_INFO_OFF;
	KW_PUT(buf + off, INFO_NLISTS, nlists);
	KW_PUT(buf + off, INFO_USER_LEN, user_len);
	if (user_len)
		memcpy(buf + off + KVF_WIRE_INFO_USER_OFF, user, user_len);
	off += KVF_WIRE_INFO_USER_OFF + pad;
	for (uint32_t k = 0; k < nlists; k++) {
		KW_PUT(buf + off, INFO_LIST_REGION, lists[k].region);
		KW_PUT(buf + off, INFO_LIST_N, lists[k].n);
		off += KVF_WIRE_INFO_LIST_ITEMS_OFF;
		for (uint32_t i = 0; i < lists[k].n; i++, off += KVF_WIRE_INFO_LIST_ITEMS_ELEM)
			kw_put(buf + off, KVF_WIRE_BLOCK_ID_LEN, lists[k].items[i]);
	}
	return len;
}

size_t kw_encode_abort(uint8_t *buf, size_t cap, uint64_t room_id, uint8_t to_role,
		       uint16_t reason)
{
	if (cap < KVF_WIRE_ABORT_LEN)
		return 0;
	memset(buf, 0, KVF_WIRE_ABORT_LEN);
	put_hdr(buf, KVF_WIRE_FR_ABORT, KVF_WIRE_ABORT_LEN, room_id);
	KW_PUT(buf, ABORT_TO_ROLE, to_role);
	KW_PUT(buf, ABORT_REASON, reason);
	return KVF_WIRE_ABORT_LEN;
}

size_t kw_encode_heartbeat(uint8_t *buf, size_t cap)
{
	if (cap < KVF_WIRE_HDR_LEN)
		return 0;
	put_hdr(buf, KVF_WIRE_FR_HEARTBEAT, KVF_WIRE_HDR_LEN, 0);
	return KVF_WIRE_HDR_LEN;
}

/* The body of a frame whose header is sound: its length, and the fields of
 * the types a decode peer reads. */
static int decode_body(const uint8_t *p, size_t len, struct kw_frame *f, char *why, size_t wlen)
{
	const char *name = kw_frame_name(f->type);

	switch (f->type) {
	case KVF_WIRE_FR_HELLO:
		if (len < KVF_WIRE_HELLO_FIXED)
			BAD(-EBADMSG, "HELLO of %zu bytes, shorter than %u", len, KVF_WIRE_HELLO_FIXED);
		memcpy(f->engine_id, p + KVF_WIRE_HELLO_ENGINE_ID_OFF, KVF_WIRE_HELLO_ENGINE_ID_SIZE);
		f->nregions = (uint32_t)KW_GET(p, HELLO_NREGIONS);
		f->nbufs = (uint32_t)KW_GET(p, HELLO_NBUFS);
		if (len != KVF_WIRE_HELLO_FIXED + (size_t)f->nregions * KVF_WIRE_HELLO_REGION_LEN +
			   (size_t)f->nbufs * KVF_WIRE_HELLO_BUF_LEN)
			BAD(-EBADMSG, "HELLO of %zu bytes for %u regions, %u buffers", len, f->nregions,
			    f->nbufs);
		return 0;
	case KVF_WIRE_FR_ABORT:
		if (len != KVF_WIRE_ABORT_LEN)
			BAD(-EBADMSG, "ABORT of %zu bytes, expected %u", len, KVF_WIRE_ABORT_LEN);
		f->to_role = (uint8_t)KW_GET(p, ABORT_TO_ROLE);
		f->reason = (uint16_t)KW_GET(p, ABORT_REASON);
		if (f->to_role > KVF_WIRE_ROLE_RECEIVER)
			BAD(-EBADMSG, "ABORT for role %u", f->to_role);
		return 0;
	case KVF_WIRE_FR_ABORT_ACK:
	case KVF_WIRE_FR_HEARTBEAT:
		if (len != KVF_WIRE_HDR_LEN)
			BAD(-EBADMSG, "%s of %zu bytes, expected %u", name, len, KVF_WIRE_HDR_LEN);
		return 0;
	case KVF_WIRE_FR_AUTH:
		if (len != KVF_WIRE_AUTH_LEN)
			BAD(-EBADMSG, "AUTH of %zu bytes, expected %u", len, KVF_WIRE_AUTH_LEN);
		f->role = (uint8_t)KW_GET(p, AUTH_ROLE);
		f->status = (uint8_t)KW_GET(p, AUTH_STATUS);
		f->auth.decode_qpn = (uint32_t)KW_GET(p, AUTH_DECODE_QPN);
		f->auth.prefill_qpn = (uint32_t)KW_GET(p, AUTH_PREFILL_QPN);
		memcpy(f->auth.decode_nonce, p + KVF_WIRE_AUTH_DECODE_NONCE_OFF, KVF_WIRE_NONCE_LEN);
		memcpy(f->auth.prefill_nonce, p + KVF_WIRE_AUTH_PREFILL_NONCE_OFF, KVF_WIRE_NONCE_LEN);
		memcpy(f->auth.decode_gid, p + KVF_WIRE_AUTH_DECODE_GID_OFF, KVF_WIRE_GID_LEN);
		memcpy(f->auth.prefill_gid, p + KVF_WIRE_AUTH_PREFILL_GID_OFF, KVF_WIRE_GID_LEN);
		f->mac = p + KVF_WIRE_AUTH_MAC_OFF;
		if (f->room_id || f->role > KVF_WIRE_ROLE_RECEIVER || KW_GET(p, AUTH_RESERVED))
			BAD(-EBADMSG, "AUTH with room id, role %u or reserved bits set", f->role);
		return 0;
	case KVF_WIRE_FR_ROOM_INFO:
	case KVF_WIRE_FR_ROOM_INFO_CONT:
		return 0; /* a decode peer is never sent one: taken as is */
	default:
		BAD(-EPROTO, "unknown frame type %u", f->type);
	}
}

int kw_decode(const void *buf, size_t len, struct kw_frame *f, char *why, size_t wlen)
{
	const uint8_t *p = buf;
	uint64_t v;

	memset(f, 0, sizeof(*f));
	if (len < KVF_WIRE_HDR_LEN)
		BAD(-EBADMSG, "short frame: %zu bytes", len);
	if ((v = KW_GET(p, HDR_MAGIC)) != KVF_WIRE_MAGIC)
		BAD(-EBADMSG, "bad magic 0x%08llx", (unsigned long long)v);
	if ((v = KW_GET(p, HDR_VERSION)) != KVF_WIRE_VERSION)
		BAD(-EPROTO, "protocol version %llu", (unsigned long long)v);
	if ((v = KW_GET(p, HDR_LENGTH)) != len)
		BAD(-EBADMSG, "length mismatch: header %llu, received %zu", (unsigned long long)v, len);
	f->type = (uint8_t)KW_GET(p, HDR_TYPE);
	f->room_id = KW_GET(p, HDR_ROOM_ID);
	return decode_body(p, len, f, why, wlen);
}

/* -------------------------------------------------------------- immediate */

static uint64_t bits(uint64_t v, unsigned shift, unsigned n)
{
	return (v >> shift) & (n >= 64 ? ~0ull : (1ull << n) - 1);
}

uint32_t kw_imm(uint64_t recv_handle)
{
	uint64_t slot = bits(recv_handle, KVF_WIRE_HANDLE_SLOT_SHIFT, KVF_WIRE_HANDLE_SLOT_BITS);
	uint64_t gen = bits(recv_handle, KVF_WIRE_HANDLE_GEN_SHIFT, KVF_WIRE_HANDLE_GEN_BITS);

	return (uint32_t)(bits(slot, 0, KVF_WIRE_IMM_SLOT_BITS) << KVF_WIRE_IMM_SLOT_SHIFT |
			  bits(gen, 0, KVF_WIRE_IMM_GEN_BITS) << KVF_WIRE_IMM_GEN_SHIFT);
}

uint32_t kw_imm_slot(uint32_t imm)
{
	return (uint32_t)bits(imm, KVF_WIRE_IMM_SLOT_SHIFT, KVF_WIRE_IMM_SLOT_BITS);
}

uint64_t kw_recv_handle(uint32_t slot, uint32_t gen)
{
	return (uint64_t)slot << KVF_WIRE_HANDLE_SLOT_SHIFT | (uint64_t)gen << KVF_WIRE_HANDLE_GEN_SHIFT;
}

/* ------------------------------------------------------------------ names */

const char *kw_frame_name(unsigned type)
{
#define X(name, value, text) case value: return text;
	switch (type) {
	KVF_WIRE_FR_LIST(X)
	default: return "UNKNOWN";
	}
#undef X
}

const char *kw_auth_name(unsigned code)
{
#define X(name, value, text) case value: return text;
	switch (code) {
	KVF_WIRE_AUTH_LIST(X)
	default: return NULL;
	}
#undef X
}

const char *kw_rej_name(unsigned code)
{
#define X(name, value, text) case value: return text;
	switch (code) {
	KVF_WIRE_REJ_LIST(X)
	default: return NULL;
	}
#undef X
}
