/* SPDX-License-Identifier: Apache-2.0 */
/* A room's record: what kvf_room_stats() returns and what each room of a
 * metrics snapshot (src/obs/) holds. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/sized.h"
#include "engine/engine_impl.h"

static void record_peer(const struct kvf_engine *eng, const struct kvf_slot *r, char *out,
			size_t len)
{
	if (r->role == KVF_RECEIVER && r->peer < eng->npeers)
		snprintf(out, len, "%s", eng->peers[r->peer]);
	else if (r->conn)
		snprintf(out, len, "conn %u", r->conn);
	else
		out[0] = '\0';
}

void kvf_room_record(const struct kvf_engine *eng, const struct kvf_slot *r, uint64_t now,
		     struct kvf_room_stats *out)
{
	const struct kvf_room_obs *o = &eng->obs[kvf_slot_index(eng, r)];
	uint64_t len = 0;

	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->role = r->role;
	out->state = r->fail_reason ? KVF_FAILED : r->state;
	out->deadline = r->deadline;
	out->quiescent = (r->flags & KVF_RF_QUIESCENT) != 0;
	out->room_id = r->id;
	out->handle = kvf_room_handle(eng, r);
	out->now_ns = now;
	out->created_ns = r->created_ns;
	out->info_ns = o->info_ns;
	out->send_ns = o->send_ns;
	out->first_chunk_ns = o->first_chunk_ns;
	out->last_chunk_ns = o->last_chunk_ns;
	out->success_ns = o->success_ns;
	out->state_ns = r->state_ns;
	if (r->deadline != KVF_DL_NONE) {
		kvf_room_deadline(eng, r, &len);
		out->deadline_ns = r->state_ns + len;
	}
	out->last_event_ns = o->last_ns;
	out->bytes = o->bytes;
	out->chunks_done = o->chunks_done;
	out->chunks_total = o->chunks_total;
	out->outstanding = r->outstanding;
	out->conn = r->conn;
	out->fail_reason = r->fail_reason;
	out->fail_deadline = r->fail_deadline;
	snprintf(out->last_event, sizeof(out->last_event), "%s",
		 kvf_last_str((enum kvf_last)r->last));
	record_peer(eng, r, out->peer, sizeof(out->peer));
}

int kvf_room_stats(const kvf_engine *eng, kvf_room room, struct kvf_room_stats *out)
{
	const struct kvf_slot *r = kvf_room_at(eng, (uint32_t)room.v, (uint32_t)(room.v >> 32),
					       UINT32_MAX);
	struct kvf_room_stats rs;

	if (!r || !out)
		return -EINVAL;
	kvf_room_record(eng, r, kvf_now(eng), &rs);
	return kvf_sized_copy(out, &rs, sizeof(rs), offsetof(struct kvf_room_stats, role));
}
