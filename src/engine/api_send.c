/* SPDX-License-Identifier: Apache-2.0 */
/* The sender's send path of kvferry.h: a chunk checked against every
 * receiver's lists and posted on each one's connection. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine/chunk.h"
#include "engine/api.h"
#include "engine/engine.h"
#include "base/log.h"
#include "engine/engine_impl.h"

/* Why posting failed, as a room failure reason. */
static enum kvf_fail_reason post_reason(int rc)
{
	switch (rc) {
	case -ENOTCONN:
	case -ECONNRESET:
	case -EPIPE:
		return KVF_FAIL_PEER_LOST;
	case -EPROTO:
	case -EBADMSG:
		return KVF_FAIL_BAD_FRAME;   /* the peer's region layout does not fit */
	case -ERANGE:
	case -EMSGSIZE:
		return KVF_FAIL_BAD_REQUEST; /* items outside what the peer has */
	default:
		return KVF_FAIL_DEVICE;
	}
}

static int post_failed(kvf_engine *eng, struct kvf_slot *r, int rc)
{
	kvf_room_fail(eng, r, post_reason(rc), -rc, "posting the writes on conn %u failed: %s",
		      r->conn, strerror(-rc));
	return rc;
}

/* The chunk's parts: known regions, items, sources inside our regions. */
static int check_parts(kvf_engine *eng, struct kvf_slot *r, const struct kvf_chunk_part *parts,
		       uint32_t nparts)
{
	int rc;

	if (nparts > KVF_MAX_REGIONS || (nparts && !parts))
		return -EINVAL;
	for (uint32_t i = 0; i < nparts; i++) {
		if (!kvf_regions_get(&eng->regions, parts[i].region) || !parts[i].n ||
		    !parts[i].src) {
			kvf_err("api", "room %#" PRIx64 ": chunk part %u: %s", r->id, i,
				!parts[i].n || !parts[i].src ? "no items" : "unknown region id");
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < nparts; i++) {
		rc = kvf_api_check_items(eng, r, "chunk part", i, parts[i].region, parts[i].src, parts[i].n);
		if (rc)
			return rc;
	}
	return 0;
}

/* The chunk's bytes as handed to the transport. */
static uint64_t chunk_bytes(const kvf_engine *eng, const struct kvf_chunk_part *parts,
			    uint32_t nparts)
{
	uint64_t bytes = 0;

	for (uint32_t i = 0; i < nparts; i++)
		bytes += (uint64_t)parts[i].n * eng->regions.r[parts[i].region].item_bytes;
	return bytes;
}

/* What the room owes the receiver when its chunks are checked: the
 * writes of this chunk, then after LAST the immediate. */
static int post_chunk(kvf_engine *eng, struct kvf_slot *r, const struct kvf_xfer_part *xp,
		      uint32_t nparts, bool last)
{
	const struct kvf_peer_info *info = r->info;
	uint32_t imm = kvf_imm((uint32_t)info->recv_handle, (uint32_t)(info->recv_handle >> 32));
	int rc = eng->ops ? eng->ops->post_chunk(eng->t, r->conn,
						 kvf_wr_id(KVF_WR_DATA, r->gen,
							   kvf_slot_index(eng, r)),
						 xp, nparts, last ? &imm : NULL)
			  : -ENOTCONN;

	if (rc < 0 || (last && rc == 0))
		return post_failed(eng, r, rc ? rc : -EIO);
	r->outstanding += (uint32_t)rc;
	return rc;
}

/* One receiver's part of a chunk: checked against its own lists, posted
 * on its own connection. A dummy (no lists) gets no writes but the last,
 * the zero-length write-with-immediate that tells it the room is done. */
static int send_to(kvf_engine *eng, struct kvf_slot *r, uint32_t k,
		   const struct kvf_chunk_part *parts, uint32_t nparts, bool last)
{
	struct kvf_xfer_part xp[KVF_MAX_REGIONS];
	bool dummy = r->info->nlists == 0;
	char why[160];
	int rc = 0;

	if (!dummy) {
		rc = kvf_chunks_take(r->chunks, r->info, parts, nparts, xp, why, sizeof(why));
		if (!rc && last)
			rc = kvf_chunks_whole(r->chunks, r->info, why, sizeof(why));
	}
	if (rc) {
		if (r->fan)
			kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, EMSGSIZE, "receiver %u: %s", k, why);
		else
			kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, EMSGSIZE, "%s", why);
		return rc;
	}
	kvf_room_last(eng, r, KVF_LAST_SEND);
	if (!dummy || last) {
		rc = post_chunk(eng, r, xp, dummy ? 0 : nparts, last);
		if (rc < 0)
			return rc;
	}
	kvf_room_chunk_sent(eng, r, !dummy || last, dummy ? 0 : chunk_bytes(eng, parts, nparts),
			    (uint32_t)rc, last);
	return 0;
}

static int send_chunk(kvf_engine *eng, kvf_room room, const struct kvf_chunk_part *parts,
		      uint32_t nparts, uint32_t flags)
{
	bool last = flags & KVF_SEND_LAST;
	struct kvf_slot *r;
	int rc = kvf_api_sender_info(eng, room, &r), state;

	if (rc)
		return rc;
	if (flags & ~KVF_SEND_LAST)
		return -EINVAL;
	state = kvf_api_state(eng, r);
	if (state == KVF_FAILED)
		return -ECANCELED;
	if (r->flags & KVF_RF_LAST_SENT || state == KVF_SUCCESS)
		return -EALREADY;
	rc = check_parts(eng, r, parts, nparts);
	if (rc)
		return rc;
	/* Receiver after receiver: one refusing the chunk fails the room,
	 * and every other one is told (kvf_fan_failed). */
	for (uint32_t k = 0; k < kvf_api_nslots(r); k++) {
		rc = send_to(eng, kvf_api_slot(eng, r, k), k, parts, nparts, last);
		if (rc)
			return rc;
	}
	return 0;
}

int kvf_sender_send_chunk(kvf_engine *eng, kvf_room room, const struct kvf_chunk_part *parts,
			  uint32_t nparts, uint32_t flags)
{
	bool held;
	int rc;

	if (!eng)
		return -EINVAL;
	held = kvf_clock_hold(eng);
	rc = send_chunk(eng, room, parts, nparts, flags);
	kvf_clock_drop(eng, held);
	return rc;
}

int kvf_sender_send(kvf_engine *eng, kvf_room room, const uint32_t *blocks, uint32_t nblocks)
{
	struct kvf_chunk_part p = { .dst_offset = 0, .n = nblocks, .src = blocks };
	struct kvf_slot *r = kvf_api_room(eng, room);
	uint32_t count = 0;
	int rc;

	if (!r || r->role != KVF_SENDER || !blocks || !nblocks)
		return -EINVAL;
	p.region = kvf_regions_find(&eng->regions, KVF_API_KV_REGION);
	if (p.region == KVF_NO_REGION) {
		kvf_err("api", "kvf_sender_send: no pool registered (kvf_pool_register)");
		return -ENOBUFS;
	}
	rc = kvf_sender_peer_count(eng, room, p.region, &count);
	if (rc == 0 && !r->fan && r->state == KVF_WAITING_FOR_INPUT && count != nblocks) {
		/* One send carries the whole list: say it in its own words. */
		kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, EMSGSIZE,
			      "send() has %u source blocks, the receiver asked for %u", nblocks,
			      count);
		return -EMSGSIZE;
	}
	if (rc == 0 && kvf_api_state(eng, r) == KVF_TRANSFERRING)
		return -EALREADY;
	return kvf_sender_send_chunk(eng, room, &p, 1, KVF_SEND_LAST);
}
