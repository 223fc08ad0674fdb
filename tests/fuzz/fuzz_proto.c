/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for every decoder of src/transfer/proto.c: one input is
 * taken as a control frame (kvf_proto_decode, under two sets of limits),
 * as connect private data (kvf_proto_decode_cm) and as reject private data
 * (kvf_proto_decode_rej), and escaped for a log line (kvf_log_escape).
 *
 * Beyond "no crash, no sanitizer report", it checks what the decoders
 * promise: the result is 0, -EBADMSG or -EPROTO with a reason; a frame
 * names a room only once its header is sound; a decoded frame re-encodes
 * to the same bytes (every field is checked, reserved ones are 0); a
 * ROOM_INFO that is a whole info decodes (kvf_proto_decode_info) only to
 * lists of the HELLO's regions with items inside them, and re-encodes to
 * its bytes, or (a list sent as runs where items are smaller, which the
 * encoder would not choose) to bytes that decode to the same info; the reject text and an escaped string fit their buffers and
 * an escaped one is printable.
 * Run it with scripts/fuzz.sh proto SECONDS.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/event.h"
#include "fuzz_report.h"
#include "fuzz_records.h"
#include "base/log.h"
#include "transfer/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *detail)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "fuzz_proto: %s: '%s'", what, detail);
	fuzz_broken(msg);
}

/* The frame again, from what was decoded: its bytes must come back (the
 * engine id only up to its first NUL, total 0 as "the whole info"). */
static int reencode(const struct kvf_frame *f, uint8_t *out, size_t cap)
{
	struct kvf_hello_region hr[KVF_PROTO_MAX_REGIONS];
	struct kvf_hello_buf hb[64];
	uint32_t n, k = 0;

	switch (f->type) {
	case KVF_FR_HELLO:
		if (f->hello.nbufs > 64)
			return -1;
		for (uint32_t i = 0; i < f->hello.nregions; i++) {
			kvf_proto_hello_region(f, i, &hr[i]);
			for (uint32_t b = 0; b < hr[i].nbufs; b++)
				kvf_proto_hello_buf(f, i, b, &hb[k++]);
		}
		return kvf_proto_encode_hello(out, cap, f->hello.engine_id, hr, f->hello.nregions,
					      hb);
	case KVF_FR_ROOM_INFO:
	case KVF_FR_ROOM_INFO_CONT: {
		static uint8_t info[1u << 17];
		uint32_t off = f->room_info.offset, total = f->type == KVF_FR_ROOM_INFO ?
			       f->room_info.total : off + f->room_info.len;

		if (total > sizeof(info))
			return -1;
		memcpy(info + off, f->room_info.bytes, f->room_info.len);
		return kvf_proto_encode_room_info_part(out, (off ? KVF_PROTO_ROOM_INFO_CONT_FIXED :
							     KVF_PROTO_ROOM_INFO_FIXED) +
						       f->room_info.len, f->room_id,
						       f->room_info.recv_handle, info, total, off, &n);
	}
	case KVF_FR_ABORT:
		return kvf_proto_encode_abort(out, cap, f->room_id, f->abort.to_role,
					      f->abort.reason);
	case KVF_FR_ABORT_ACK:
		return kvf_proto_encode_abort_ack(out, cap, f->room_id);
	case KVF_FR_AUTH: {
		int len = kvf_proto_encode_auth(out, cap, f->auth.role, f->auth.status, &f->auth.id);

		/* The mac is the input's (a refusal's is 0, checked). */
		if (len > 0)
			memcpy(out + KVF_PROTO_AUTH_MAC_OFF, f->auth.mac, KVF_PROTO_MAC_LEN);
		return len;
	}
	default:
		return kvf_proto_encode_heartbeat(out, cap);
	}
}

/* Where a re-encoded frame may differ: the engine id after its first NUL
 * (a string field, kept up to there), ROOM_INFO's total (0 and len mean
 * the same). */
static void mask(uint8_t *p, size_t len, const struct kvf_frame *f)
{
	if (f->type == KVF_FR_HELLO) {
		size_t k = strlen(f->hello.engine_id);

		memset(p + KVF_PROTO_HDR_LEN + k, 0, KVF_PROTO_ENGINE_ID_LEN - k);
	}
	if (f->type == KVF_FR_ROOM_INFO && len >= KVF_PROTO_ROOM_INFO_FIXED &&
	    f->room_info.total == f->room_info.len)
		memset(p + KVF_PROTO_HDR_LEN + 12, 0, 4);
}

/* The same lists, items and user data. */
static bool same_info(const struct kvf_peer_info *a, const struct kvf_peer_info *b)
{
	if (a->nlists != b->nlists || a->nids != b->nids || a->user_len != b->user_len ||
	    memcmp(a->user, b->user, a->user_len) || memcmp(a->ids, b->ids, a->nids * sizeof(a->ids[0])))
		return false;
	for (uint32_t k = 0; k < a->nlists; k++)
		if (a->lists[k].peer_region != b->lists[k].peer_region || a->lists[k].n != b->lists[k].n ||
		    a->lists[k].first != b->lists[k].first)
			return false;
	return true;
}

/* The encoder writes a list as runs only where that is smaller (wire.md
 * 5.4); a peer may send runs anyway, which decode to the same items. So a
 * re-encoding that differs in its bytes must decode to the same info. */
static void check_reencoded(const struct kvf_frame *f, const struct kvf_proto_limits *lim,
			    const struct kvf_peer_info *pi, const uint8_t *out, int len)
{
	struct kvf_peer_info *again = NULL;
	char why[256] = "";

	if (len == (int)f->room_info.len && !memcmp(out, f->room_info.bytes, (size_t)len))
		return;
	if (len < 0 || kvf_proto_decode_info(out, (uint32_t)len, lim, f->room_id, 1, &again, why,
					     sizeof(why)) || !same_info(pi, again))
		broken("a decoded info does not re-encode to the same info", why);
	free(again);
}

/* A whole info: lists of the limits' regions, items inside, and the same
 * info again from what was decoded. */
static void check_info(const struct kvf_frame *f, const struct kvf_proto_limits *lim)
{
	static uint8_t out[1u << 17];
	struct kvf_proto_list l[KVF_PROTO_MAX_REGIONS];
	struct kvf_peer_info *pi = NULL;
	char why[256] = "";
	int rc, len;

	if (f->type != KVF_FR_ROOM_INFO || f->room_info.total != f->room_info.len)
		return;
	rc = kvf_proto_decode_info(f->room_info.bytes, f->room_info.len, lim, f->room_id, 1, &pi,
				   why, sizeof(why));
	if (rc) {
		if (rc != -EBADMSG || !why[0])
			broken("an info refused without -EBADMSG and a reason", why);
		return;
	}
	for (uint32_t k = 0; k < pi->nlists; k++) {
		const struct kvf_peer_list *pl = &pi->lists[k];
		uint32_t nitems = 0;

		for (uint32_t i = 0; i < lim->nregions; i++)
			if (lim->regions[i].id == pl->peer_region)
				nitems = lim->regions[i].nitems;
		for (uint32_t i = 0; i < pl->n; i++)
			if (pi->ids[pl->first + i] >= nitems)
				broken("an item outside its region decoded", pl->name);
		l[k] = (struct kvf_proto_list){pl->peer_region, pl->n, pi->ids + pl->first};
	}
	len = kvf_proto_encode_info(out, sizeof(out), l, pi->nlists, pi->user, pi->user_len);
	check_reencoded(f, lim, pi, out, len);
	free(pi);
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
	check_info(&f, lim);
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
	    memcmp(h2.nonce, h.nonce, sizeof(h.nonce)) || strcmp(h2.engine_id, h.engine_id))
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
	/* Small limits reach the limit checks; regions of 100 and 4 items make
	 * ids fall on both sides of them. No HELLO: every ROOM_INFO refused. */
	static const struct kvf_hello_region regions[2] = {
		{.name = "kv", .id = 0, .nitems = 100, .nbufs = 2},
		{.name = "aux", .id = 3, .nitems = 4, .nbufs = 3},
	};
	static const struct kvf_proto_limits lim = {.max_blocks = 64, .max_bufs = 8,
						    .regions = regions, .nregions = 2};
	static const struct kvf_proto_limits nopool = {.max_blocks = 1u << 24,
						       .max_bufs = 2728, .nregions = 0};

	check_frame(data, size, &lim);
	check_frame(data, size, &nopool);
	check_cm(data, size);
	check_text(data, size);
	return 0;
}
