/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for every decoder of src/rdma/proto.c: one input is
 * taken as a control frame (kvf_proto_decode, under two sets of limits),
 * as connect private data (kvf_proto_decode_cm) and as reject private data
 * (kvf_proto_decode_rej), and escaped for a log line (kvf_log_escape).
 *
 * Beyond "no crash, no sanitizer report", it checks what the decoders
 * promise: the result is 0, -EBADMSG or -EPROTO with a reason; a frame
 * names a room only once its header is sound; a decoded frame re-encodes
 * to the same bytes (every field is checked, reserved ones are 0); decoded
 * block ids are inside the pool; the reject text and an escaped string fit
 * their buffers and an escaped one is printable.
 * Run it with scripts/fuzz.sh proto SECONDS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_report.h"
#include "fuzz_records.h"
#include "log.h"
#include "rdma/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *detail)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "fuzz_proto: %s: '%s'", what, detail);
	fuzz_broken(msg);
}

/* The frame again, from what was decoded: its bytes must come back (the
 * engine id only up to its first NUL, total 0 as "the whole list"). */
static int reencode(const struct kvf_frame *f, uint8_t *out, size_t cap)
{
	struct kvf_hello_buf hb[64];
	uint32_t ids[1024], n;

	switch (f->type) {
	case KVF_FR_HELLO:
		if (f->hello.nbufs > 64)
			return -1;
		for (uint32_t i = 0; i < f->hello.nbufs; i++)
			kvf_proto_hello_buf(f, i, &hb[i]);
		return kvf_proto_encode_hello(out, cap, f->hello.engine_id, f->hello.nblocks, hb,
					      f->hello.nbufs);
	case KVF_FR_ROOM_INFO:
	case KVF_FR_ROOM_INFO_CONT:
		if (f->room_info.offset + f->room_info.nblocks > 1024)
			return -1;
		for (uint32_t i = 0; i < f->room_info.nblocks; i++)
			ids[f->room_info.offset + i] = kvf_proto_block(f, i);
		if (f->type == KVF_FR_ROOM_INFO && f->room_info.total == f->room_info.nblocks)
			return kvf_proto_encode_room_info(out, cap, f->room_id,
							  f->room_info.recv_handle, ids,
							  f->room_info.nblocks);
		return kvf_proto_encode_room_info_part(out, kvf_proto_room_info_len(0) +
						       f->room_info.nblocks * 4u -
						       (f->room_info.offset ? 8u : 0u),
						       f->room_id, f->room_info.recv_handle, ids,
						       f->type == KVF_FR_ROOM_INFO ?
						       f->room_info.total :
						       f->room_info.offset + f->room_info.nblocks,
						       f->room_info.offset, &n);
	case KVF_FR_ABORT:
		return kvf_proto_encode_abort(out, cap, f->room_id, f->abort.to_role,
					      f->abort.reason);
	case KVF_FR_ABORT_ACK:
		return kvf_proto_encode_abort_ack(out, cap, f->room_id);
	default:
		return kvf_proto_encode_heartbeat(out, cap);
	}
}

/* Where a re-encoded frame may differ: the engine id after its first NUL
 * (a string field, kept up to there), ROOM_INFO's total (0 and nblocks
 * mean the same). */
static void mask(uint8_t *p, size_t len, const struct kvf_frame *f)
{
	if (f->type == KVF_FR_HELLO) {
		size_t k = strlen(f->hello.engine_id);

		memset(p + KVF_PROTO_HDR_LEN + k, 0, KVF_PROTO_ENGINE_ID_LEN - k);
	}
	if (f->type == KVF_FR_ROOM_INFO && len >= KVF_PROTO_ROOM_INFO_FIXED &&
	    f->room_info.total == f->room_info.nblocks)
		memset(p + KVF_PROTO_HDR_LEN + 12, 0, 4);
}

static void check_frame(const uint8_t *data, size_t size, const struct kvf_proto_limits *lim)
{
	static uint8_t in[1u << 16], out[1u << 16];
	struct kvf_frame f;
	char why[256] = "";
	bool names = true;
	int rc = kvf_proto_decode(data, size, lim, &f, &names, why, sizeof(why));
	int len;

	if (rc == -EBADMSG || rc == -EPROTO) {
		if (!why[0])
			broken("a refused frame without a reason", "");
		if (names && size < KVF_PROTO_HDR_LEN)
			broken("a frame shorter than its header names a room", why);
		return;
	}
	if (rc != 0)
		broken("unexpected return", strerror(-rc));
	if (f.type == KVF_FR_ROOM_INFO || f.type == KVF_FR_ROOM_INFO_CONT)
		for (uint32_t i = 0; i < f.room_info.nblocks; i++)
			if (kvf_proto_block(&f, i) >= lim->nblocks)
				broken("a block id outside the pool decoded", "");
	if (size > sizeof(in))
		return;
	len = reencode(&f, out, sizeof(out));
	if (len < 0)
		return; /* more than the harness re-encodes */
	memcpy(in, data, size);
	mask(in, size, &f);
	mask(out, (size_t)len, &f);
	if ((size_t)len != size || memcmp(in, out, size))
		broken("a decoded frame does not re-encode to its bytes", kvf_frame_type_str(f.type));
}

static void check_cm(const uint8_t *data, size_t size)
{
	struct kvf_cm_hello h, h2;
	uint8_t pd[KVF_PROTO_CM_LEN];
	char why[256] = "";
	int rc = kvf_proto_decode_cm(data, size, &h, why, sizeof(why));

	if (rc == -EBADMSG && why[0])
		return;
	if (rc != 0)
		broken("connect data: unexpected return or no reason", why);
	if (strlen(h.engine_id) >= sizeof(h.engine_id))
		broken("connect data: engine id not terminated", "");
	kvf_proto_encode_cm(pd, &h);
	if (kvf_proto_decode_cm(pd, sizeof(pd), &h2, why, sizeof(why)) ||
	    h2.version != h.version || h2.mtu != h.mtu || h2.frame_max != h.frame_max ||
	    memcmp(h2.token_hash, h.token_hash, 16) || strcmp(h2.engine_id, h.engine_id))
		broken("connect data does not round-trip", why);
}

static void check_text(const uint8_t *data, size_t size)
{
	char text[KVF_PROTO_REJ_TEXT + 32], esc[64];

	memset(text, 'Z', sizeof(text));
	kvf_proto_decode_rej(data, size, text, sizeof(text));
	if (!memchr(text, '\0', sizeof(text)))
		broken("reject text not terminated", "");
	kvf_log_escape(esc, sizeof(esc), data, size);
	for (const char *p = esc; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			broken("escaped text not printable", "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Small limits reach the limit checks; the pool of 100 blocks makes
	 * ids fall on both sides of it. No pool: every ROOM_INFO refused. */
	static const struct kvf_proto_limits lim = {.max_blocks = 64, .max_bufs = 8,
						    .nblocks = 100};
	static const struct kvf_proto_limits nopool = {.max_blocks = 1u << 24,
						       .max_bufs = 2728, .nblocks = 0};

	check_frame(data, size, &lim);
	check_frame(data, size, &nopool);
	check_cm(data, size);
	check_text(data, size);
	return 0;
}
