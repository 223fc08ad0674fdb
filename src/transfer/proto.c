/* SPDX-License-Identifier: Apache-2.0 */
/* The wire frames: their lengths, encoders and the checked decoder (HELLO,
 * ROOM_INFO and its continuations, ABORT, ABORT_ACK, HEARTBEAT, AUTH).
 * The ROOM_INFO body is proto_info.c's, its reassembly proto_reasm.c's,
 * the rdma_cm private data proto_cm.c's. */
#include "transfer/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/event.h"
#include "transfer/geom.h"
#include "transfer/proto_bytes.h"

/* ---------------------------------------------------------- encoding */

size_t kvf_proto_hello_len(uint32_t nregions, uint32_t nbufs)
{
	return KVF_PROTO_HELLO_FIXED + (size_t)nregions * KVF_PROTO_HELLO_REGION_LEN +
	       (size_t)nbufs * KVF_PROTO_HELLO_BUF_LEN;
}

size_t kvf_proto_room_info_len(uint32_t len)
{
	return KVF_PROTO_ROOM_INFO_FIXED + (size_t)len;
}

size_t kvf_proto_room_info_cont_len(uint32_t len)
{
	return KVF_PROTO_ROOM_INFO_CONT_FIXED + (size_t)len;
}

uint32_t kvf_proto_room_info_frames(uint32_t total, size_t frame_max)
{
	size_t first, more;

	if (frame_max < KVF_PROTO_ROOM_INFO_FIXED + 4u)
		return 0;
	first = frame_max - KVF_PROTO_ROOM_INFO_FIXED;
	more = frame_max - KVF_PROTO_ROOM_INFO_CONT_FIXED;
	if (total <= first)
		return 1;
	return 1 + (uint32_t)((total - first + more - 1) / more);
}

uint32_t kvf_proto_info_max(uint32_t max_blocks)
{
	uint64_t m = KVF_PROTO_INFO_FIXED + KVF_PROTO_USER_MAX +
		     (uint64_t)KVF_PROTO_MAX_REGIONS * KVF_PROTO_INFO_LIST_FIXED +
		     (uint64_t)max_blocks * 4u;

	return m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
}

/* Runs of consecutive ids in items[0..n). */
static uint32_t count_runs(const uint32_t *items, uint32_t n)
{
	uint32_t runs = n ? 1 : 0;

	for (uint32_t i = 1; i < n; i++)
		runs += items[i] != items[i - 1] + 1;
	return runs;
}

/* A list's body in bytes, and whether it goes as runs (smaller only). */
static size_t list_body(const struct kvf_proto_list *l, bool *as_runs)
{
	uint32_t runs = count_runs(l->items, l->n);

	*as_runs = (uint64_t)runs * KVF_PROTO_RUN_LEN < (uint64_t)l->n * 4u;
	return *as_runs ? (size_t)runs * KVF_PROTO_RUN_LEN : (size_t)l->n * 4u;
}

size_t kvf_proto_info_len(const struct kvf_proto_list *lists, uint32_t nlists, uint32_t user_len)
{
	size_t len = KVF_PROTO_INFO_FIXED + pad4(user_len);
	bool runs;

	for (uint32_t k = 0; k < nlists; k++)
		len += KVF_PROTO_INFO_LIST_FIXED + list_body(&lists[k], &runs);
	return len;
}

/* One list at p, as list_body chose; returns the end. */
static uint8_t *put_list(uint8_t *p, const struct kvf_proto_list *l)
{
	bool runs;

	list_body(l, &runs);
	put32(p, l->region | (runs ? KVF_PROTO_INFO_RUNS : 0));
	put32(p + 4, runs ? count_runs(l->items, l->n) : l->n);
	p += KVF_PROTO_INFO_LIST_FIXED;
	for (uint32_t i = 0; i < l->n; i++) {
		uint32_t j = i;

		if (!runs) {
			put32(p, l->items[i]);
			p += 4;
			continue;
		}
		while (j + 1 < l->n && l->items[j + 1] == l->items[j] + 1)
			j++;
		put32(p, l->items[i]);
		put32(p + 4, j - i + 1);
		p += KVF_PROTO_RUN_LEN;
		i = j;
	}
	return p;
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
			   const struct kvf_hello_region *regs, uint32_t nregions,
			   const struct kvf_hello_buf *bufs)
{
	uint32_t nbufs = 0, at = 0;
	uint8_t *p = buf;
	size_t len;

	if (!buf || !engine_id || (nregions && (!regs || !bufs)))
		return -EINVAL;
	for (uint32_t i = 0; i < nregions; i++)
		nbufs += regs[i].nbufs;
	len = kvf_proto_hello_len(nregions, nbufs);
	if (len > cap || len > UINT32_MAX)
		return -EMSGSIZE;
	put_hdr(p, KVF_FR_HELLO, len, 0);
	p += KVF_PROTO_HDR_LEN;
	memset(p, 0, KVF_PROTO_ENGINE_ID_LEN);
	memcpy(p, engine_id, strnlen(engine_id, KVF_PROTO_ENGINE_ID_LEN));
	p += KVF_PROTO_ENGINE_ID_LEN;
	put32(p, nregions);
	put32(p + 4, nbufs);
	p += 8;
	for (uint32_t i = 0; i < nregions; i++) {
		memset(p, 0, KVF_PROTO_HELLO_REGION_LEN);
		memcpy(p, regs[i].name, strnlen(regs[i].name, KVF_PROTO_REGION_NAME_LEN - 1));
		put32(p + 32, regs[i].id);
		put32(p + 36, regs[i].nitems);
		put32(p + 40, regs[i].nbufs);
		p += KVF_PROTO_HELLO_REGION_LEN;
		for (uint32_t b = 0; b < regs[i].nbufs; b++, at++, p += KVF_PROTO_HELLO_BUF_LEN) {
			put64(p, bufs[at].addr);
			put64(p + 8, bufs[at].item_size);
			put32(p + 16, bufs[at].rkey);
			put32(p + 20, 0);
			put32(p + 24, bufs[at].geom.page_tokens);
			put32(p + 28, bufs[at].geom.heads);
			put32(p + 32, bufs[at].geom.head0);
			put32(p + 36, bufs[at].geom.head_bytes);
			put32(p + 40, bufs[at].geom.layer);
			put32(p + 44, bufs[at].geom.kind);
		}
	}
	return (int)len;
}

int kvf_proto_encode_info(void *buf, size_t cap, const struct kvf_proto_list *lists,
			  uint32_t nlists, const void *user, uint32_t user_len)
{
	size_t len;
	uint8_t *p = buf;

	if (!buf || (nlists && !lists) || (user_len && !user))
		return -EINVAL;
	len = kvf_proto_info_len(lists, nlists, user_len);
	if (len > cap || len > UINT32_MAX)
		return -EMSGSIZE;
	put32(p, nlists);
	put32(p + 4, user_len);
	p += KVF_PROTO_INFO_FIXED;
	memset(p, 0, pad4(user_len));
	if (user_len)
		memcpy(p, user, user_len);
	p += pad4(user_len);
	for (uint32_t k = 0; k < nlists; k++)
		p = put_list(p, &lists[k]);
	return (int)len;
}

int kvf_proto_encode_room_info_part(void *buf, size_t cap, uint64_t room_id,
				    uint64_t recv_handle, const uint8_t *info,
				    uint32_t total, uint32_t offset, uint32_t *n)
{
	size_t fixed = offset ? KVF_PROTO_ROOM_INFO_CONT_FIXED : KVF_PROTO_ROOM_INFO_FIXED;
	uint32_t k = total - offset;
	uint8_t *p = buf;
	size_t len;

	if (!buf || !info || !n || offset >= total)
		return -EINVAL;
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	if (cap < fixed + 4u)
		return -EMSGSIZE;
	if (k > cap - fixed)
		k = (uint32_t)(cap - fixed);
	len = fixed + k;
	put_hdr(p, offset ? KVF_FR_ROOM_INFO_CONT : KVF_FR_ROOM_INFO, len, room_id);
	p += KVF_PROTO_HDR_LEN;
	if (offset) {
		put32(p, offset);
		put32(p + 4, k);
		p += 8;
	} else {
		put64(p, recv_handle);
		put32(p + 8, k);
		put32(p + 12, total == k ? 0 : total); /* 0: this frame is the whole info */
		p += 16;
	}
	memcpy(p, info + offset, k);
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

/* role u8, status u8, reserved u16, decode_qpn u32, prefill_qpn u32, the
 * two nonces, the two GIDs, mac[32]: the mac's input is every byte before
 * it, header included (version and type bind it to this protocol). */
int kvf_proto_encode_auth(void *buf, size_t cap, uint8_t role, uint8_t status,
			  const struct kvf_auth_id *id)
{
	uint8_t *p = buf;

	if (!buf || !id || role > 1)
		return -EINVAL;
	if (cap < KVF_PROTO_AUTH_LEN)
		return -EMSGSIZE;
	memset(p, 0, KVF_PROTO_AUTH_LEN);
	put_hdr(p, KVF_FR_AUTH, KVF_PROTO_AUTH_LEN, 0);
	p += KVF_PROTO_HDR_LEN;
	p[0] = role;
	p[1] = status;
	put32(p + 4, id->decode_qpn);
	put32(p + 8, id->prefill_qpn);
	p += 12;
	memcpy(p, id->decode_nonce, KVF_PROTO_NONCE_LEN);
	memcpy(p + 16, id->prefill_nonce, KVF_PROTO_NONCE_LEN);
	memcpy(p + 32, id->decode_gid, KVF_PROTO_GID_LEN);
	memcpy(p + 48, id->prefill_gid, KVF_PROTO_GID_LEN);
	return (int)KVF_PROTO_AUTH_LEN;
}

/* ---------------------------------------------------------- decoding */

static bool type_names_room(uint8_t type)
{
	return type == KVF_FR_ROOM_INFO || type == KVF_FR_ROOM_INFO_CONT ||
	       type == KVF_FR_ABORT || type == KVF_FR_ABORT_ACK;
}

/* A region name: 1..31 bytes, then NULs only. */
static bool name_ok(const uint8_t *p)
{
	size_t n = strnlen((const char *)p, KVF_PROTO_REGION_NAME_LEN);

	if (n == 0 || n == KVF_PROTO_REGION_NAME_LEN)
		return false;
	for (size_t i = n; i < KVF_PROTO_REGION_NAME_LEN; i++)
		if (p[i])
			return false;
	return true;
}

/* A buffer's geometry: none (all zero), or one that describes its items
 * (what kvf_region_register checks on the peer's side). */
static bool geom_ok(const struct kvf_hello_buf *hb)
{
	const struct kvf_buf_geometry *g = &hb->geom;

	if (kvf_geom_none(g))
		return true;
	return g->page_tokens && g->heads && g->head_bytes &&
	       g->head0 <= UINT32_MAX - g->heads &&
	       (uint64_t)g->page_tokens * g->heads * g->head_bytes == hb->item_size;
}

/* Region i of a HELLO (its header checked): its buffers. */
static int check_hello_bufs(const struct kvf_frame *f, uint32_t i,
			    const struct kvf_hello_region *r, char *detail, size_t dlen)
{
	for (uint32_t b = 0; b < r->nbufs; b++) {
		const uint8_t *e = f->hello.body + f->hello.at[i] + KVF_PROTO_HELLO_REGION_LEN +
				   (size_t)b * KVF_PROTO_HELLO_BUF_LEN;
		struct kvf_hello_buf hb;
		uint32_t resv = get32(e + 20);

		if (resv)
			BAD(-EBADMSG, "HELLO region '%s' buffer %" PRIu32 ": reserved word 0x%08"
			    PRIx32 " is not 0", r->name, b, resv);
		kvf_proto_hello_buf(f, i, b, &hb);
		if (hb.item_size == 0 || hb.item_size > UINT64_MAX / r->nitems ||
		    hb.addr + hb.item_size * r->nitems < hb.addr)
			BAD(-EBADMSG, "HELLO region '%s' buffer %" PRIu32 ": item size %" PRIu64
			    " x %" PRIu32 " items at 0x%" PRIx64 " is empty or wraps", r->name, b,
			    hb.item_size, r->nitems, hb.addr);
		if (!geom_ok(&hb))
			BAD(-EBADMSG, "HELLO region '%s' buffer %" PRIu32 ": geometry page_tokens %"
			    PRIu32 " x heads %" PRIu32 " x head_bytes %" PRIu32 " is not its item "
			    "size %" PRIu64 ", or head0 + heads wraps", r->name, b,
			    hb.geom.page_tokens, hb.geom.heads, hb.geom.head_bytes, hb.item_size);
	}
	return 0;
}

/* The region list: each header, name and id unique, its buffers inside
 * the frame; the buffers add up to the header's count and the frame ends
 * with the last. */
static int check_hello_regions(size_t len, const struct kvf_proto_limits *lim,
			       struct kvf_frame *f, char *detail, size_t dlen)
{
	size_t off = 0, room = len - KVF_PROTO_HELLO_FIXED;
	uint32_t nbufs = 0, ids = 0;
	int rc;

	for (uint32_t i = 0; i < f->hello.nregions; i++) {
		struct kvf_hello_region r;
		const uint8_t *e = f->hello.body + off;

		if (room - off < KVF_PROTO_HELLO_REGION_LEN)
			BAD(-EBADMSG, "HELLO ends inside region %" PRIu32 "'s header", i);
		if (!name_ok(e) || get32(e + 44))
			BAD(-EBADMSG, "HELLO region %" PRIu32 ": %s", i, get32(e + 44) ?
			    "reserved word not 0" : "name empty, over 31 bytes or not NUL-padded");
		f->hello.at[i] = (uint32_t)off;
		kvf_proto_hello_region(f, i, &r);
		if (r.id >= KVF_PROTO_MAX_REGIONS || (ids >> r.id & 1u) || !r.nitems || !r.nbufs ||
		    r.nbufs > lim->max_bufs - nbufs)
			BAD(-EBADMSG, "HELLO region '%s': %s (id %" PRIu32 ", %" PRIu32 " items, %"
			    PRIu32 " buffers)", r.name, r.id >= KVF_PROTO_MAX_REGIONS ? "id out of range" :
			    (ids >> r.id & 1u) ? "id given twice" : !r.nitems ? "no items" :
			    !r.nbufs ? "no buffers" : "buffers over the limit", r.id, r.nitems, r.nbufs);
		for (uint32_t j = 0; j < i; j++) {
			struct kvf_hello_region o;

			kvf_proto_hello_region(f, j, &o);
			if (strcmp(o.name, r.name) == 0)
				BAD(-EBADMSG, "HELLO names region '%s' twice", r.name);
		}
		ids |= 1u << r.id;
		nbufs += r.nbufs;
		off += KVF_PROTO_HELLO_REGION_LEN;
		if ((room - off) / KVF_PROTO_HELLO_BUF_LEN < r.nbufs)
			BAD(-EBADMSG, "HELLO ends inside region '%s''s %" PRIu32 " buffers", r.name,
			    r.nbufs);
		off += (size_t)r.nbufs * KVF_PROTO_HELLO_BUF_LEN;
		rc = check_hello_bufs(f, i, &r, detail, dlen);
		if (rc)
			return rc;
	}
	if (nbufs != f->hello.nbufs || off != room)
		BAD(-EBADMSG, "HELLO says %" PRIu32 " buffers, its regions have %" PRIu32 " (%zu of "
		    "%zu bytes used)", f->hello.nbufs, nbufs, off, room);
	return 0;
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
	f->hello.nregions = get32(p);
	f->hello.nbufs = get32(p + 4);
	f->hello.body = p + 8;
	if (f->hello.nregions == 0 || f->hello.nregions > KVF_PROTO_MAX_REGIONS)
		BAD(-EBADMSG, "HELLO with %" PRIu32 " regions (1..%u allowed)", f->hello.nregions,
		    KVF_PROTO_MAX_REGIONS);
	if (f->hello.nbufs == 0 || f->hello.nbufs > lim->max_bufs)
		BAD(-EBADMSG, "HELLO with %" PRIu32 " buffers (1..%" PRIu32 " allowed)",
		    f->hello.nbufs, lim->max_bufs);
	return check_hello_regions(len, lim, f, detail, dlen);
}

static int decode_room_info(const uint8_t *p, size_t len, const struct kvf_proto_limits *lim,
			    struct kvf_frame *f, char *detail, size_t dlen)
{
	uint32_t n, total, max = kvf_proto_info_max(lim->max_blocks);

	if (len < KVF_PROTO_ROOM_INFO_FIXED)
		BAD(-EBADMSG, "ROOM_INFO of %zu bytes, shorter than its fixed part (%u)",
		    len, KVF_PROTO_ROOM_INFO_FIXED);
	f->room_info.recv_handle = get64(p + KVF_PROTO_HDR_LEN);
	n = get32(p + KVF_PROTO_HDR_LEN + 8);
	total = get32(p + KVF_PROTO_HDR_LEN + 12);
	f->room_info.len = n;
	f->room_info.total = total ? total : n;
	f->room_info.bytes = p + KVF_PROTO_ROOM_INFO_FIXED;
	if (n == 0 || (total && total < n) || f->room_info.total > max)
		BAD(-EBADMSG, "ROOM_INFO carries %" PRIu32 " bytes of an info of %" PRIu32
		    " (1..%" PRIu32 " allowed)", n, f->room_info.total, max);
	if (len != kvf_proto_room_info_len(n))
		BAD(-EBADMSG, "ROOM_INFO of %zu bytes, %" PRIu32 " info bytes need %zu (truncated)",
		    len, n, kvf_proto_room_info_len(n));
	if (lim->nregions == 0)
		BAD(-EBADMSG, "ROOM_INFO before the peer's HELLO: no regions to check it against");
	return 0;
}

static int decode_room_info_cont(const uint8_t *p, size_t len,
				 const struct kvf_proto_limits *lim, struct kvf_frame *f,
				 char *detail, size_t dlen)
{
	uint32_t off, n, max = kvf_proto_info_max(lim->max_blocks);

	if (len < KVF_PROTO_ROOM_INFO_CONT_FIXED)
		BAD(-EBADMSG, "ROOM_INFO_CONT of %zu bytes, shorter than its fixed part (%u)",
		    len, KVF_PROTO_ROOM_INFO_CONT_FIXED);
	off = get32(p + KVF_PROTO_HDR_LEN);
	n = get32(p + KVF_PROTO_HDR_LEN + 4);
	f->room_info.offset = off;
	f->room_info.len = n;
	f->room_info.bytes = p + KVF_PROTO_ROOM_INFO_CONT_FIXED;
	if (off == 0)
		BAD(-EBADMSG, "ROOM_INFO_CONT at offset 0 (the info starts with a ROOM_INFO)");
	if (n == 0 || n > max || off > max - n)
		BAD(-EBADMSG, "ROOM_INFO_CONT with %" PRIu32 " bytes at offset %" PRIu32
		    " (infos of 1..%" PRIu32 " bytes allowed)", n, off, max);
	if (len != kvf_proto_room_info_cont_len(n))
		BAD(-EBADMSG, "ROOM_INFO_CONT of %zu bytes, %" PRIu32 " info bytes need %zu "
		    "(truncated)", len, n, kvf_proto_room_info_cont_len(n));
	if (lim->nregions == 0)
		BAD(-EBADMSG, "ROOM_INFO_CONT before the peer's HELLO: no regions to check it against");
	return 0;
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

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* A refusal carries no MAC: its mac field is 0, like a reserved one. */
static int decode_auth(const uint8_t *p, size_t len, struct kvf_frame *f, char *detail,
		       size_t dlen)
{
	const uint8_t *b = p + KVF_PROTO_HDR_LEN;

	if (len != KVF_PROTO_AUTH_LEN)
		BAD(-EBADMSG, "AUTH of %zu bytes, expected %u", len, KVF_PROTO_AUTH_LEN);
	if (f->room_id)
		BAD(-EBADMSG, "AUTH with room id %#" PRIx64 " (reserved, 0)", f->room_id);
	f->auth.role = b[0];
	f->auth.status = b[1];
	if (f->auth.role > 1)
		BAD(-EBADMSG, "AUTH from role %u (0 sender, 1 receiver)", f->auth.role);
	if (get16(b + 2))
		BAD(-EBADMSG, "AUTH with reserved 0x%04x (must be 0)", get16(b + 2));
	f->auth.id.decode_qpn = get32(b + 4);
	f->auth.id.prefill_qpn = get32(b + 8);
	memcpy(f->auth.id.decode_nonce, b + 12, KVF_PROTO_NONCE_LEN);
	memcpy(f->auth.id.prefill_nonce, b + 28, KVF_PROTO_NONCE_LEN);
	memcpy(f->auth.id.decode_gid, b + 44, KVF_PROTO_GID_LEN);
	memcpy(f->auth.id.prefill_gid, b + 60, KVF_PROTO_GID_LEN);
	f->auth.mac = p + KVF_PROTO_AUTH_MAC_OFF;
	if (f->auth.status != KVF_AUTH_PROOF && !all_zero(f->auth.mac, KVF_PROTO_MAC_LEN))
		BAD(-EBADMSG, "AUTH refusal %u with a mac (must be 0)", f->auth.status);
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
	case KVF_FR_AUTH:
		return decode_auth(p, len, f, detail, dlen);
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

void kvf_proto_hello_region(const struct kvf_frame *f, uint32_t i, struct kvf_hello_region *out)
{
	const uint8_t *p = f->hello.body + f->hello.at[i];

	memcpy(out->name, p, KVF_PROTO_REGION_NAME_LEN);
	out->name[KVF_PROTO_REGION_NAME_LEN - 1] = '\0';
	out->id = get32(p + 32);
	out->nitems = get32(p + 36);
	out->nbufs = get32(p + 40);
}

void kvf_proto_hello_buf(const struct kvf_frame *f, uint32_t i, uint32_t b,
			 struct kvf_hello_buf *out)
{
	const uint8_t *p = f->hello.body + f->hello.at[i] + KVF_PROTO_HELLO_REGION_LEN +
			   (size_t)b * KVF_PROTO_HELLO_BUF_LEN;

	out->addr = get64(p);
	out->item_size = get64(p + 8);
	out->rkey = get32(p + 16);
	out->geom = (struct kvf_buf_geometry){.page_tokens = get32(p + 24), .heads = get32(p + 28),
					      .head0 = get32(p + 32), .head_bytes = get32(p + 36),
					      .layer = get32(p + 40), .kind = get32(p + 44)};
}

bool kvf_proto_same_shape(const char *name, const uint64_t *ours, uint32_t nours,
			  const uint64_t *theirs, uint32_t ntheirs, char *why, size_t wlen)
{
	if (nours != ntheirs) {
		snprintf(why, wlen, "region '%s': nbufs %" PRIu32 " here, %" PRIu32 " at the peer",
			 name, nours, ntheirs);
		return false;
	}
	for (uint32_t b = 0; b < nours; b++) {
		if (ours[b] != theirs[b]) {
			snprintf(why, wlen, "region '%s': buffer %" PRIu32 " item size %" PRIu64
				 " here, %" PRIu64 " at the peer", name, b, ours[b], theirs[b]);
			return false;
		}
	}
	return true;
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
		[KVF_FR_AUTH] = "AUTH",
	};

	return type < KVF_FR_NUM && names[type] ? names[type] : "UNKNOWN";
}
