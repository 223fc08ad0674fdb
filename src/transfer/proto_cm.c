/* SPDX-License-Identifier: Apache-2.0 */
/* rdma_cm private data: the connect and accept hello, and the reject
 * reason (docs/wire.md 4). */
#include "transfer/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/proto_bytes.h"

/* ------------------------------------------------ rdma_cm private data */

/* magic u32, version u16, mtu u8, reserved u8, frame_max u32, nonce[16],
 * engine_id[28] = 56 bytes. The mtu byte was reserved (0) before it was
 * used: a peer that does not set it asks for nothing. The nonce sits where
 * versions up to 4 sent the token's hash. */
void kvf_proto_encode_cm(uint8_t out[KVF_PROTO_CM_LEN], const struct kvf_cm_hello *h)
{
	memset(out, 0, KVF_PROTO_CM_LEN);
	put32(out, KVF_PROTO_MAGIC);
	put16(out + 4, h->version);
	out[6] = h->mtu;
	put32(out + 8, h->frame_max);
	memcpy(out + 12, h->nonce, KVF_PROTO_NONCE_LEN);
	memcpy(out + 28, h->engine_id, strnlen(h->engine_id, sizeof(h->engine_id) - 1));
}

int kvf_proto_decode_cm(const void *buf, size_t len, struct kvf_cm_hello *h,
			char *detail, size_t dlen)
{
	const uint8_t *p = buf;

	memset(h, 0, sizeof(*h));
	/* The CM may pad private data with zeros: longer is fine. */
	if (!buf || len < KVF_PROTO_CM_LEN)
		BAD(-EBADMSG, "connection private data of %zu bytes, expected %u", buf ? len : 0,
		    KVF_PROTO_CM_LEN);
	if (get32(p) != KVF_PROTO_MAGIC)
		BAD(-EBADMSG, "connection private data without the kvferry magic");
	h->version = get16(p + 4);
	/* Another version may use it: the caller's version check says so. */
	if (h->version == KVF_PROTO_VERSION && p[7])
		BAD(-EBADMSG, "connection private data with reserved byte 0x%02x (must be 0)", p[7]);
	h->mtu = p[6];
	h->frame_max = get32(p + 8);
	memcpy(h->nonce, p + 12, KVF_PROTO_NONCE_LEN);
	memcpy(h->engine_id, p + 28, sizeof(h->engine_id) - 1);
	h->engine_id[sizeof(h->engine_id) - 1] = '\0';
	if (h->frame_max < KVF_PROTO_HDR_LEN)
		BAD(-EBADMSG, "peer receive buffers of %" PRIu32 " bytes", h->frame_max);
	return 0;
}

/* magic u32, code u16, reserved u16, text[140] (NUL-padded). */
_Static_assert(KVF_PROTO_REJ_LEN <= 148, "the IB CM's REJ carries 148 bytes of private data");

void kvf_proto_encode_rej(uint8_t out[KVF_PROTO_REJ_LEN], enum kvf_rej_code code,
			  const char *text)
{
	memset(out, 0, KVF_PROTO_REJ_LEN);
	put32(out, KVF_PROTO_MAGIC);
	put16(out + 4, (uint16_t)code);
	if (text)
		memcpy(out + 8, text, strnlen(text, KVF_PROTO_REJ_TEXT));
}

void kvf_proto_decode_rej(const void *buf, size_t len, char *text, size_t tlen)
{
	const uint8_t *p = buf;
	unsigned code;
	size_t n;

	if (!text || !tlen)
		return;
	if (!buf || len < 8 || get32(p) != KVF_PROTO_MAGIC) {
		snprintf(text, tlen, "no reason given");
		return;
	}
	code = get16(p + 4);
	n = strnlen((const char *)p + 8, (len > KVF_PROTO_REJ_LEN ? KVF_PROTO_REJ_LEN : len) - 8);
	if (code < KVF_REJ_NUM)
		snprintf(text, tlen, "%s%s%.*s", kvf_rej_code_str(code), n ? ": " : "", (int)n,
			 (const char *)p + 8);
	else
		snprintf(text, tlen, "reason %u%s%.*s", code, n ? ": " : "", (int)n,
			 (const char *)p + 8);
}

const char *kvf_rej_code_str(unsigned code)
{
	static const char *const names[KVF_REJ_NUM] = {
		[KVF_REJ_NONE] = "no reason",
		[KVF_REJ_VERSION] = "bad version",
		[KVF_REJ_TOKEN] = "bad token",
		[KVF_REJ_MALFORMED] = "malformed connect data",
		[KVF_REJ_RESOURCES] = "no resources",
	};

	return code < KVF_REJ_NUM ? names[code] : "unknown reason";
}
