/* SPDX-License-Identifier: Apache-2.0 */
/* A ROOM_INFO sequence put back together (ROOM_INFO, then ROOM_INFO_CONT
 * frames): one in progress per connection, with a deadline. */
#include "transfer/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/proto_bytes.h"

/* ---------------------------------------------- ROOM_INFO reassembly */

void kvf_proto_reasm_clear(struct kvf_room_reasm *ra)
{
	free(ra->buf);
	ra->buf = NULL;
	ra->have = 0;
	ra->cap = 0;
	ra->total = 0;
}

/* Room for n more bytes: at least doubling (so a long info costs few
 * reallocs), never past the info's total. */
static int reasm_grow(struct kvf_room_reasm *ra, uint32_t n)
{
	uint32_t need = ra->have + n, cap = ra->cap;
	uint8_t *b;

	if (need <= cap)
		return 0;
	cap = cap > ra->total / 2 ? ra->total : cap * 2;
	if (cap < need)
		cap = need;
	b = realloc(ra->buf, cap);
	if (!b)
		return -ENOMEM;
	ra->buf = b;
	ra->cap = cap;
	return 0;
}

/* Whole: decode the info, and the sequence is over either way. */
static int reasm_done(struct kvf_room_reasm *ra, const struct kvf_proto_limits *lim,
		      struct kvf_peer_info **done, char *detail, size_t dlen)
{
	int rc;

	if (ra->have < ra->total)
		return 0;
	rc = kvf_proto_decode_info(ra->buf, ra->total, lim, ra->room_id, ra->recv_handle, done,
				   detail, dlen);
	kvf_proto_reasm_clear(ra);
	return rc ? rc : 1;
}

static void drop_pending(struct kvf_room_reasm *ra, struct kvf_reasm_drop *drop,
			 const struct kvf_frame *f)
{
	drop->set = true;
	drop->room_id = ra->room_id;
	snprintf(drop->why, sizeof(drop->why), "ROOM_INFO sequence cut short: %" PRIu32
		 " of %" PRIu32 " info bytes received when a %s for room %#" PRIx64 " came",
		 ra->have, ra->total, kvf_frame_type_str(f->type), f->room_id);
	kvf_proto_reasm_clear(ra);
}

bool kvf_proto_reasm_expire(struct kvf_room_reasm *ra, uint64_t now_ns,
			    struct kvf_reasm_drop *drop)
{
	uint64_t age = now_ns > ra->started_ns ? now_ns - ra->started_ns : 0;

	drop->set = false;
	if (!ra->buf || age <= KVF_PROTO_REASM_MAX_NS)
		return false;
	drop->set = true;
	drop->room_id = ra->room_id;
	ra->expired++;
	snprintf(drop->why, sizeof(drop->why), "ROOM_INFO sequence not whole after %" PRIu64
		 " ms: %" PRIu32 " of %" PRIu32 " info bytes received (%" PRIu64
		 " sequences dropped for age on this connection)", age / 1000000, ra->have,
		 ra->total, ra->expired);
	kvf_proto_reasm_clear(ra);
	return true;
}

static int reasm_start(struct kvf_room_reasm *ra, const struct kvf_frame *f,
		       const struct kvf_proto_limits *lim, uint64_t now_ns,
		       struct kvf_peer_info **done, struct kvf_reasm_drop *drop,
		       char *detail, size_t dlen)
{
	uint32_t n = f->room_info.len;

	if (ra->buf && ra->room_id == f->room_id) {
		uint32_t have = ra->have, total = ra->total;

		kvf_proto_reasm_clear(ra);
		BAD(-EBADMSG, "a second ROOM_INFO for the room with %" PRIu32 " of its %" PRIu32
		    " info bytes received", have, total);
	}
	if (ra->buf)
		drop_pending(ra, drop, f);
	/* This frame's bytes only: the declared total is the peer's word. */
	ra->buf = malloc(n);
	if (!ra->buf)
		BAD(-ENOMEM, "no memory for a ROOM_INFO of %" PRIu32 " bytes", n);
	ra->room_id = f->room_id;
	ra->recv_handle = f->room_info.recv_handle;
	ra->total = f->room_info.total;
	ra->have = n;
	ra->cap = n;
	ra->started_ns = now_ns;
	memcpy(ra->buf, f->room_info.bytes, n);
	return reasm_done(ra, lim, done, detail, dlen);
}

int kvf_proto_reasm_feed(struct kvf_room_reasm *ra, const struct kvf_frame *f,
			 const struct kvf_proto_limits *lim, uint64_t now_ns,
			 struct kvf_peer_info **done, struct kvf_reasm_drop *drop,
			 char *detail, size_t dlen)
{
	uint32_t off = f->room_info.offset, n = f->room_info.len;

	*done = NULL;
	/* An expired sequence is gone before the frame is taken: reasm_start
	 * then finds none to cut short, drop reports the expired one. */
	kvf_proto_reasm_expire(ra, now_ns, drop);
	if (f->type == KVF_FR_ROOM_INFO)
		return reasm_start(ra, f, lim, now_ns, done, drop, detail, dlen);
	if (f->type != KVF_FR_ROOM_INFO_CONT)
		BAD(-EINVAL, "%s is not part of a ROOM_INFO", kvf_frame_type_str(f->type));
	if (!ra->buf)
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 " with no ROOM_INFO before it%s",
		    off, drop->set ? " (the one in progress was too old)" : "");
	if (ra->room_id != f->room_id) {
		drop_pending(ra, drop, f);
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 " while room %#" PRIx64
		    "'s ROOM_INFO was in progress", off, drop->room_id);
	}
	if (off != ra->have || n > ra->total - ra->have) {
		uint32_t have = ra->have, total = ra->total;

		kvf_proto_reasm_clear(ra);
		if (off != have)
			BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 ", expected %" PRIu32
			    " (of %" PRIu32 " info bytes)", off, have, total);
		BAD(-EBADMSG, "ROOM_INFO_CONT of %" PRIu32 " bytes at offset %" PRIu32
		    " runs past the info's %" PRIu32, n, off, total);
	}
	if (reasm_grow(ra, n)) {
		uint32_t total = ra->total;

		kvf_proto_reasm_clear(ra);
		BAD(-ENOMEM, "no memory for %" PRIu32 " more of a ROOM_INFO's %" PRIu32 " bytes",
		    n, total);
	}
	memcpy(ra->buf + ra->have, f->room_info.bytes, n);
	ra->have += n;
	return reasm_done(ra, lim, done, detail, dlen);
}
