/* SPDX-License-Identifier: Apache-2.0 */
#include "proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"

/* ------------------------------------------------------ byte helpers */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ---------------------------------------------------------- encoding */

size_t kvf_proto_hello_len(uint32_t nbufs)
{
	return KVF_PROTO_HELLO_FIXED + (size_t)nbufs * KVF_PROTO_HELLO_BUF_LEN;
}

size_t kvf_proto_room_info_len(uint32_t nblocks)
{
	return KVF_PROTO_ROOM_INFO_FIXED + (size_t)nblocks * 4u;
}

size_t kvf_proto_room_info_cont_len(uint32_t nblocks)
{
	return KVF_PROTO_ROOM_INFO_CONT_FIXED + (size_t)nblocks * 4u;
}

uint32_t kvf_proto_room_info_frames(uint32_t total, size_t frame_max)
{
	size_t first, more;

	if (frame_max < KVF_PROTO_ROOM_INFO_FIXED + 4u)
		return 0;
	first = (frame_max - KVF_PROTO_ROOM_INFO_FIXED) / 4u;
	more = (frame_max - KVF_PROTO_ROOM_INFO_CONT_FIXED) / 4u;
	if (total <= first)
		return 1;
	return 1 + (uint32_t)((total - first + more - 1) / more);
}

static void put_hdr(uint8_t *p, uint8_t type, size_t len, uint64_t room_id)
{
	memset(p, 0, KVF_PROTO_HDR_LEN);
	put32(p, KVF_PROTO_MAGIC);
	put16(p + 4, KVF_PROTO_VERSION);
	p[6] = type;
	put32(p + 8, (uint32_t)len);
	put64(p + 16, room_id);
}

int kvf_proto_encode_hello(void *buf, size_t cap, const char *engine_id,
			   uint32_t nblocks, const struct kvf_hello_buf *bufs,
			   uint32_t nbufs)
{
	size_t len = kvf_proto_hello_len(nbufs);
	uint8_t *p = buf;

	if (!buf || !engine_id || (nbufs && !bufs))
		return -EINVAL;
	if (len > cap || len > UINT32_MAX)
		return -EMSGSIZE;
	put_hdr(p, KVF_FR_HELLO, len, 0);
	p += KVF_PROTO_HDR_LEN;
	memset(p, 0, KVF_PROTO_ENGINE_ID_LEN);
	memcpy(p, engine_id, strnlen(engine_id, KVF_PROTO_ENGINE_ID_LEN));
	p += KVF_PROTO_ENGINE_ID_LEN;
	put32(p, nbufs);
	put32(p + 4, nblocks);
	p += 8;
	for (uint32_t i = 0; i < nbufs; i++, p += KVF_PROTO_HELLO_BUF_LEN) {
		put64(p, bufs[i].addr);
		put64(p + 8, bufs[i].block_size);
		put32(p + 16, bufs[i].rkey);
		put32(p + 20, 0);
	}
	return (int)len;
}

int kvf_proto_encode_room_info(void *buf, size_t cap, uint64_t room_id,
			       uint64_t recv_handle, const uint32_t *blocks,
			       uint32_t n)
{
	size_t len = kvf_proto_room_info_len(n);
	uint8_t *p = buf;

	if (!buf || (n && !blocks))
		return -EINVAL;
	if (len > cap || len > UINT32_MAX)
		return -EMSGSIZE;
	put_hdr(p, KVF_FR_ROOM_INFO, len, room_id);
	p += KVF_PROTO_HDR_LEN;
	put64(p, recv_handle);
	put32(p + 8, n);
	put32(p + 12, 0); /* total: 0 = this frame's n, the whole list */
	p += 16;
	for (uint32_t i = 0; i < n; i++, p += 4)
		put32(p, blocks[i]);
	return (int)len;
}

int kvf_proto_encode_room_info_part(void *buf, size_t cap, uint64_t room_id,
				    uint64_t recv_handle, const uint32_t *blocks,
				    uint32_t total, uint32_t offset, uint32_t *n)
{
	size_t fixed = offset ? KVF_PROTO_ROOM_INFO_CONT_FIXED : KVF_PROTO_ROOM_INFO_FIXED;
	uint32_t k = total - offset, i;
	uint8_t *p = buf;
	size_t len;

	if (!buf || !blocks || !n || offset >= total)
		return -EINVAL;
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (cap < fixed + 4u)
		return -EMSGSIZE;
	if (k > (cap - fixed) / 4u)
		k = (uint32_t)((cap - fixed) / 4u);
	len = fixed + (size_t)k * 4u;
	put_hdr(p, offset ? KVF_FR_ROOM_INFO_CONT : KVF_FR_ROOM_INFO, len, room_id);
	p += KVF_PROTO_HDR_LEN;
	if (offset) {
		put32(p, offset);
		put32(p + 4, k);
		p += 8;
	} else {
		put64(p, recv_handle);
		put32(p + 8, k);
		put32(p + 12, total);
		p += 16;
	}
	for (i = 0; i < k; i++, p += 4)
		put32(p, blocks[offset + i]);
	*n = k;
	return (int)len;
}

int kvf_proto_encode_abort(void *buf, size_t cap, uint64_t room_id,
			   uint8_t to_role, uint16_t reason)
{
	uint8_t *p = buf;

	if (!buf)
		return -EINVAL;
	if (cap < KVF_PROTO_ABORT_LEN)
		return -EMSGSIZE;
	put_hdr(p, KVF_FR_ABORT, KVF_PROTO_ABORT_LEN, room_id);
	p += KVF_PROTO_HDR_LEN;
	memset(p, 0, 8);
	p[0] = to_role;
	put16(p + 2, reason);
	return (int)KVF_PROTO_ABORT_LEN;
}

static int encode_bare(void *buf, size_t cap, uint8_t type, uint64_t room_id)
{
	if (!buf)
		return -EINVAL;
	if (cap < KVF_PROTO_HDR_LEN)
		return -EMSGSIZE;
	put_hdr(buf, type, KVF_PROTO_HDR_LEN, room_id);
	return (int)KVF_PROTO_HDR_LEN;
}

int kvf_proto_encode_abort_ack(void *buf, size_t cap, uint64_t room_id)
{
	return encode_bare(buf, cap, KVF_FR_ABORT_ACK, room_id);
}

int kvf_proto_encode_heartbeat(void *buf, size_t cap)
{
	return encode_bare(buf, cap, KVF_FR_HEARTBEAT, 0);
}

/* ---------------------------------------------------------- decoding */

#define BAD(err, ...)                                   \
	do {                                            \
		if (detail && dlen)                     \
			snprintf(detail, dlen, __VA_ARGS__); \
		return (err);                           \
	} while (0)

static bool type_names_room(uint8_t type)
{
	return type == KVF_FR_ROOM_INFO || type == KVF_FR_ROOM_INFO_CONT ||
	       type == KVF_FR_ABORT || type == KVF_FR_ABORT_ACK;
}

static int decode_hello(const uint8_t *p, size_t len, const struct kvf_proto_limits *lim,
			struct kvf_frame *f, char *detail, size_t dlen)
{
	if (len < KVF_PROTO_HELLO_FIXED)
		BAD(-EBADMSG, "HELLO of %zu bytes, shorter than its fixed part (%u)",
		    len, KVF_PROTO_HELLO_FIXED);
	if (f->room_id)
		BAD(-EBADMSG, "HELLO with room id %#" PRIx64 " (reserved, 0)", f->room_id);
	p += KVF_PROTO_HDR_LEN;
	memcpy(f->hello.engine_id, p, KVF_PROTO_ENGINE_ID_LEN);
	f->hello.engine_id[KVF_PROTO_ENGINE_ID_LEN] = '\0';
	p += KVF_PROTO_ENGINE_ID_LEN;
	f->hello.nbufs = get32(p);
	f->hello.nblocks = get32(p + 4);
	f->hello.bufs = p + 8;
	if (f->hello.nbufs == 0 || f->hello.nbufs > lim->max_bufs)
		BAD(-EBADMSG, "HELLO with %" PRIu32 " buffers (1..%" PRIu32 " allowed)",
		    f->hello.nbufs, lim->max_bufs);
	if (f->hello.nblocks == 0)
		BAD(-EBADMSG, "HELLO with a pool of 0 blocks");
	if (len != kvf_proto_hello_len(f->hello.nbufs))
		BAD(-EBADMSG, "HELLO of %zu bytes, %" PRIu32 " buffers need %zu (truncated buffer list)",
		    len, f->hello.nbufs, kvf_proto_hello_len(f->hello.nbufs));
	for (uint32_t i = 0; i < f->hello.nbufs; i++) {
		struct kvf_hello_buf b;
		uint32_t resv = get32(f->hello.bufs + (size_t)i * KVF_PROTO_HELLO_BUF_LEN + 20);

		if (resv)
			BAD(-EBADMSG, "HELLO buffer %" PRIu32 ": reserved word 0x%08" PRIx32
			    " is not 0", i, resv);
		kvf_proto_hello_buf(f, i, &b);
		if (b.block_size == 0 || b.block_size > UINT64_MAX / f->hello.nblocks ||
		    b.addr + b.block_size * f->hello.nblocks < b.addr)
			BAD(-EBADMSG, "HELLO buffer %" PRIu32 ": block size %" PRIu64
			    " x %" PRIu32 " blocks at 0x%" PRIx64 " is empty or wraps",
			    i, b.block_size, f->hello.nblocks, b.addr);
	}
	return 0;
}

/* The ids of a ROOM_INFO or ROOM_INFO_CONT: length, then every id in the pool. */
static int check_ids(const uint8_t *p, size_t len, size_t fixed, const struct kvf_proto_limits *lim,
		     struct kvf_frame *f, char *detail, size_t dlen)
{
	const char *what = kvf_frame_type_str(f->type);
	uint32_t n = f->room_info.nblocks;

	f->room_info.blocks = p + fixed;
	if (len != fixed + (size_t)n * 4u)
		BAD(-EBADMSG, "%s of %zu bytes, %" PRIu32 " blocks need %zu (truncated block list)",
		    what, len, n, fixed + (size_t)n * 4u);
	if (lim->nblocks == 0)
		BAD(-EBADMSG, "%s before the peer's HELLO: no pool to check blocks against", what);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = kvf_proto_block(f, i);

		if (b >= lim->nblocks)
			BAD(-EBADMSG, "%s block %" PRIu64 " is id %" PRIu32
			    ", outside the pool of %" PRIu32 " blocks", what,
			    (uint64_t)f->room_info.offset + i, b, lim->nblocks);
	}
	return 0;
}

static int decode_room_info(const uint8_t *p, size_t len, const struct kvf_proto_limits *lim,
			    struct kvf_frame *f, char *detail, size_t dlen)
{
	uint32_t n, total;

	if (len < KVF_PROTO_ROOM_INFO_FIXED)
		BAD(-EBADMSG, "ROOM_INFO of %zu bytes, shorter than its fixed part (%u)",
		    len, KVF_PROTO_ROOM_INFO_FIXED);
	f->room_info.recv_handle = get64(p + KVF_PROTO_HDR_LEN);
	n = get32(p + KVF_PROTO_HDR_LEN + 8);
	total = get32(p + KVF_PROTO_HDR_LEN + 12);
	f->room_info.nblocks = n;
	f->room_info.total = total ? total : n;
	if (n == 0 || n > lim->max_blocks)
		BAD(-EBADMSG, "ROOM_INFO with %" PRIu32 " blocks (1..%" PRIu32 " allowed)",
		    n, lim->max_blocks);
	if (total && total < n)
		BAD(-EBADMSG, "ROOM_INFO carries %" PRIu32 " block ids of a list of %" PRIu32,
		    n, total);
	if (total > lim->max_blocks)
		BAD(-EBADMSG, "ROOM_INFO for a list of %" PRIu32 " blocks (1..%" PRIu32 " allowed)",
		    total, lim->max_blocks);
	return check_ids(p, len, KVF_PROTO_ROOM_INFO_FIXED, lim, f, detail, dlen);
}

static int decode_room_info_cont(const uint8_t *p, size_t len,
				 const struct kvf_proto_limits *lim, struct kvf_frame *f,
				 char *detail, size_t dlen)
{
	uint32_t off, n;

	if (len < KVF_PROTO_ROOM_INFO_CONT_FIXED)
		BAD(-EBADMSG, "ROOM_INFO_CONT of %zu bytes, shorter than its fixed part (%u)",
		    len, KVF_PROTO_ROOM_INFO_CONT_FIXED);
	off = get32(p + KVF_PROTO_HDR_LEN);
	n = get32(p + KVF_PROTO_HDR_LEN + 4);
	f->room_info.offset = off;
	f->room_info.nblocks = n;
	if (off == 0)
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset 0 (the list starts with a ROOM_INFO)");
	if (n == 0 || n > lim->max_blocks || off > lim->max_blocks - n)
		BAD(-EBADMSG, "ROOM_INFO_CONT with %" PRIu32 " blocks at offset %" PRIu32
		    " (lists of 1..%" PRIu32 " allowed)", n, off, lim->max_blocks);
	return check_ids(p, len, KVF_PROTO_ROOM_INFO_CONT_FIXED, lim, f, detail, dlen);
}

static int decode_abort(const uint8_t *p, size_t len, struct kvf_frame *f, char *detail,
			size_t dlen)
{
	if (len != KVF_PROTO_ABORT_LEN)
		BAD(-EBADMSG, "ABORT of %zu bytes, expected %u", len, KVF_PROTO_ABORT_LEN);
	f->abort.to_role = p[KVF_PROTO_HDR_LEN];
	f->abort.reason = get16(p + KVF_PROTO_HDR_LEN + 2);
	if (f->abort.to_role > 1)
		BAD(-EBADMSG, "ABORT for role %u (0 sender, 1 receiver)", f->abort.to_role);
	if (p[KVF_PROTO_HDR_LEN + 1] || get32(p + KVF_PROTO_HDR_LEN + 4))
		BAD(-EBADMSG, "ABORT with reserved bytes 0x%02x, 0x%08" PRIx32 " (must be 0)",
		    p[KVF_PROTO_HDR_LEN + 1], get32(p + KVF_PROTO_HDR_LEN + 4));
	return 0;
}

static int decode_body(const uint8_t *p, size_t len, const struct kvf_proto_limits *lim,
		       struct kvf_frame *f, char *detail, size_t dlen)
{
	switch (f->type) {
	case KVF_FR_HELLO:
		return decode_hello(p, len, lim, f, detail, dlen);
	case KVF_FR_ROOM_INFO:
		return decode_room_info(p, len, lim, f, detail, dlen);
	case KVF_FR_ROOM_INFO_CONT:
		return decode_room_info_cont(p, len, lim, f, detail, dlen);
	case KVF_FR_ABORT:
		return decode_abort(p, len, f, detail, dlen);
	case KVF_FR_ABORT_ACK:
	case KVF_FR_HEARTBEAT:
		if (len != KVF_PROTO_HDR_LEN)
			BAD(-EBADMSG, "%s of %zu bytes, expected %u", kvf_frame_type_str(f->type),
			    len, KVF_PROTO_HDR_LEN);
		if (f->type == KVF_FR_HEARTBEAT && f->room_id)
			BAD(-EBADMSG, "HEARTBEAT with room id %#" PRIx64 " (reserved, 0)", f->room_id);
		return 0;
	default:
		BAD(-EPROTO, "unknown frame type %u", f->type);
	}
}

int kvf_proto_decode(const void *buf, size_t len, const struct kvf_proto_limits *lim,
		     struct kvf_frame *f, bool *names_room, char *detail, size_t dlen)
{
	const uint8_t *p = buf;
	uint32_t magic, flen;
	uint16_t version;

	if (names_room)
		*names_room = false;
	if (!buf || !lim || !f)
		BAD(-EINVAL, "no frame");
	memset(f, 0, sizeof(*f));
	if (len < KVF_PROTO_HDR_LEN)
		BAD(-EBADMSG, "short frame: %zu bytes, the header alone is %u", len,
		    KVF_PROTO_HDR_LEN);
	magic = get32(p);
	if (magic != KVF_PROTO_MAGIC)
		BAD(-EBADMSG, "bad magic 0x%08" PRIx32 " (expected 0x%08x)", magic,
		    KVF_PROTO_MAGIC);
	version = get16(p + 4);
	if (version != KVF_PROTO_VERSION)
		BAD(-EPROTO, "protocol version %u, this side speaks %u", version,
		    KVF_PROTO_VERSION);
	f->type = p[6];
	flen = get32(p + 8);
	if (flen != len)
		BAD(-EBADMSG, "length mismatch: header says %" PRIu32 " bytes, received %zu",
		    flen, len);
	/* Reserved, 0: checked, so a later version may give them a meaning
	 * that this one refuses rather than misreads. */
	if (p[7] || get32(p + 12))
		BAD(-EBADMSG, "header flags 0x%02x, reserved 0x%08" PRIx32 " (must be 0)", p[7],
		    get32(p + 12));
	f->room_id = get64(p + 16);
	/* From here the header is sound: a bad body fails only its room. */
	if (names_room)
		*names_room = type_names_room(f->type);
	return decode_body(p, len, lim, f, detail, dlen);
}

uint64_t kvf_proto_frame_room(const void *frame)
{
	return get64((const uint8_t *)frame + 16);
}

uint32_t kvf_proto_block(const struct kvf_frame *f, uint32_t i)
{
	return get32(f->room_info.blocks + 4u * i);
}

void kvf_proto_hello_buf(const struct kvf_frame *f, uint32_t i, struct kvf_hello_buf *out)
{
	const uint8_t *p = f->hello.bufs + (size_t)i * KVF_PROTO_HELLO_BUF_LEN;

	out->addr = get64(p);
	out->block_size = get64(p + 8);
	out->rkey = get32(p + 16);
}

/* ---------------------------------------------- ROOM_INFO reassembly */

void kvf_proto_reasm_clear(struct kvf_room_reasm *ra)
{
	free(ra->pi);
	ra->pi = NULL;
	ra->have = 0;
	ra->cap = 0;
}

/* Room for n more ids: at least doubling (so a long list costs few
 * reallocs), never past the list's total. */
static int reasm_grow(struct kvf_room_reasm *ra, uint32_t n)
{
	uint32_t total = ra->pi->nblocks, need = ra->have + n, cap = ra->cap;
	struct kvf_peer_info *pi;

	if (need <= cap)
		return 0;
	cap = cap > total / 2 ? total : cap * 2;
	if (cap < need)
		cap = need;
	pi = realloc(ra->pi, sizeof(*pi) + (size_t)cap * sizeof(pi->blocks[0]));
	if (!pi)
		return -ENOMEM;
	ra->pi = pi;
	ra->cap = cap;
	return 0;
}

static void copy_ids(struct kvf_room_reasm *ra, const struct kvf_frame *f)
{
	for (uint32_t i = 0; i < f->room_info.nblocks; i++)
		ra->pi->blocks[ra->have + i] = kvf_proto_block(f, i);
	ra->have += f->room_info.nblocks;
}

static int reasm_done(struct kvf_room_reasm *ra, struct kvf_peer_info **done)
{
	if (ra->have < ra->pi->nblocks)
		return 0;
	*done = ra->pi;
	ra->pi = NULL;
	ra->have = 0;
	ra->cap = 0;
	return 1;
}

static void drop_pending(struct kvf_room_reasm *ra, struct kvf_reasm_drop *drop,
			 const struct kvf_frame *f)
{
	drop->set = true;
	drop->room_id = ra->pi->room_id;
	snprintf(drop->why, sizeof(drop->why), "ROOM_INFO sequence cut short: %" PRIu32
		 " of %" PRIu32 " block ids received when a %s for room %#" PRIx64 " came",
		 ra->have, ra->pi->nblocks, kvf_frame_type_str(f->type), f->room_id);
	kvf_proto_reasm_clear(ra);
}

bool kvf_proto_reasm_expire(struct kvf_room_reasm *ra, uint64_t now_ns,
			    struct kvf_reasm_drop *drop)
{
	uint64_t age = now_ns > ra->started_ns ? now_ns - ra->started_ns : 0;

	drop->set = false;
	if (!ra->pi || age <= KVF_PROTO_REASM_MAX_NS)
		return false;
	drop->set = true;
	drop->room_id = ra->pi->room_id;
	ra->expired++;
	snprintf(drop->why, sizeof(drop->why), "ROOM_INFO sequence not whole after %" PRIu64
		 " ms: %" PRIu32 " of %" PRIu32 " block ids received (%" PRIu64
		 " sequences dropped for age on this connection)", age / 1000000, ra->have,
		 ra->pi->nblocks, ra->expired);
	kvf_proto_reasm_clear(ra);
	return true;
}

static int reasm_start(struct kvf_room_reasm *ra, const struct kvf_frame *f, uint64_t now_ns,
		       struct kvf_peer_info **done, struct kvf_reasm_drop *drop,
		       char *detail, size_t dlen)
{
	const struct kvf_peer_info *pi = ra->pi;
	uint32_t n = f->room_info.nblocks;

	if (pi && pi->room_id == f->room_id) {
		uint32_t have = ra->have, total = pi->nblocks;

		kvf_proto_reasm_clear(ra);
		BAD(-EBADMSG, "a second ROOM_INFO for the room with %" PRIu32 " of its %" PRIu32
		    " block ids received", have, total);
	}
	if (pi)
		drop_pending(ra, drop, f);
	/* This frame's ids only: the declared total is the peer's word. */
	ra->pi = malloc(sizeof(*ra->pi) + (size_t)n * sizeof(ra->pi->blocks[0]));
	if (!ra->pi)
		BAD(-ENOMEM, "no memory for a ROOM_INFO of %" PRIu32 " blocks", n);
	ra->pi->room_id = f->room_id;
	ra->pi->recv_handle = f->room_info.recv_handle;
	ra->pi->peer = 0;
	ra->pi->nblocks = f->room_info.total;
	ra->have = 0;
	ra->cap = n;
	ra->started_ns = now_ns;
	copy_ids(ra, f);
	return reasm_done(ra, done);
}

int kvf_proto_reasm_feed(struct kvf_room_reasm *ra, const struct kvf_frame *f, uint64_t now_ns,
			 struct kvf_peer_info **done, struct kvf_reasm_drop *drop,
			 char *detail, size_t dlen)
{
	const struct kvf_peer_info *pi;
	uint32_t off = f->room_info.offset, n = f->room_info.nblocks;

	*done = NULL;
	/* An expired sequence is gone before the frame is taken: reasm_start
	 * then finds none to cut short, drop reports the expired one. */
	kvf_proto_reasm_expire(ra, now_ns, drop);
	if (f->type == KVF_FR_ROOM_INFO)
		return reasm_start(ra, f, now_ns, done, drop, detail, dlen);
	if (f->type != KVF_FR_ROOM_INFO_CONT)
		BAD(-EINVAL, "%s is not part of a ROOM_INFO", kvf_frame_type_str(f->type));
	pi = ra->pi;
	if (!pi)
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 " with no ROOM_INFO before it%s",
		    off, drop->set ? " (the one in progress was too old)" : "");
	if (pi->room_id != f->room_id) {
		drop_pending(ra, drop, f);
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 " while room %#" PRIx64
		    "'s ROOM_INFO was in progress", off, drop->room_id);
	}
	if (off != ra->have || n > pi->nblocks - ra->have) {
		uint32_t have = ra->have, total = pi->nblocks;

		kvf_proto_reasm_clear(ra);
		if (off != have)
			BAD(-EBADMSG, "ROOM_INFO_CONT at offset %" PRIu32 ", expected %" PRIu32
			    " (of %" PRIu32 " block ids)", off, have, total);
		BAD(-EBADMSG, "ROOM_INFO_CONT of %" PRIu32 " block ids at offset %" PRIu32
		    " runs past the list's %" PRIu32, n, off, total);
	}
	if (reasm_grow(ra, n)) {
		uint32_t total = pi->nblocks;

		kvf_proto_reasm_clear(ra);
		BAD(-ENOMEM, "no memory for %" PRIu32 " more of a ROOM_INFO's %" PRIu32 " blocks",
		    n, total);
	}
	copy_ids(ra, f);
	return reasm_done(ra, done);
}

const char *kvf_frame_type_str(unsigned type)
{
	static const char *const names[KVF_FR_NUM] = {
		[KVF_FR_HELLO] = "HELLO",
		[KVF_FR_ROOM_INFO] = "ROOM_INFO",
		[KVF_FR_ABORT] = "ABORT",
		[KVF_FR_ABORT_ACK] = "ABORT_ACK",
		[KVF_FR_HEARTBEAT] = "HEARTBEAT",
		[KVF_FR_ROOM_INFO_CONT] = "ROOM_INFO_CONT",
	};

	return type < KVF_FR_NUM && names[type] ? names[type] : "UNKNOWN";
}

/* ------------------------------------------------ rdma_cm private data */

/* FNV-1a 64 with two offset bases: cheap, stable, no crypto dependency.
 * Enough to catch a token mismatch; see the header. */
void kvf_proto_token_hash(const char *token, uint8_t out[16])
{
	uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};

	for (int k = 0; k < 2; k++) {
		for (const char *c = token ? token : ""; *c; c++) {
			h[k] ^= (uint8_t)*c;
			h[k] *= 0x100000001b3ull;
		}
		put64(out + 8 * k, h[k]);
	}
}

/* magic u32, version u16, mtu u8, reserved u8, frame_max u32,
 * token_hash[16], engine_id[28] = 56 bytes. The mtu byte was reserved (0)
 * before it was used: a peer that does not set it asks for nothing. */
void kvf_proto_encode_cm(uint8_t out[KVF_PROTO_CM_LEN], const struct kvf_cm_hello *h)
{
	memset(out, 0, KVF_PROTO_CM_LEN);
	put32(out, KVF_PROTO_MAGIC);
	put16(out + 4, h->version);
	out[6] = h->mtu;
	put32(out + 8, h->frame_max);
	memcpy(out + 12, h->token_hash, 16);
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
	memcpy(h->token_hash, p + 12, 16);
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
