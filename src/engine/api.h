/* SPDX-License-Identifier: Apache-2.0 */
/* What the API's files share (api.c: create, init; api_send.c: send;
 * api_room.c: poll, abort, release, fan-out and fan-in). Scheduler thread
 * only. */
#ifndef KVF_API_H
#define KVF_API_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/fan.h"
#include "engine/engine_impl.h"

/* The region the calls of earlier versions name (kvf_pool_register). */
#define KVF_API_KV_REGION "kv"

/* A handle's room, or NULL when the handle is stale or out of range, or
 * names a fan's member slot (no handle of the API does). */
static inline struct kvf_slot *kvf_api_room(kvf_engine *eng, kvf_room h)
{
	struct kvf_slot *r = kvf_room_at(eng, (uint32_t)h.v, (uint32_t)(h.v >> 32), UINT32_MAX);

	return r && kvf_fan_member(eng, r) ? NULL : r;
}

/* The slots of room r: its fan's, or r alone. */
static inline uint32_t kvf_api_nslots(const struct kvf_slot *r)
{
	return r->fan ? r->fan->n : 1;
}

static inline struct kvf_slot *kvf_api_slot(kvf_engine *eng, struct kvf_slot *r, uint32_t k)
{
	return r->fan ? kvf_fan_at(eng, r->fan, k) : r;
}

/* The room's state as kvf_poll says it: a fan's slots together. */
static inline int kvf_api_state(kvf_engine *eng, struct kvf_slot *r)
{
	if (r->fan)
		return kvf_fan_state(eng, r->fan);
	/* The failure field first: whatever else is in flight, a failed
	 * room is FAILED. */
	return r->fail_reason != KVF_FAIL_NONE ? KVF_FAILED : r->state;
}

/* What arrived before the room (tombstone, parked ROOM_INFOs) applied to
 * a room just created or just bound: only an entry that conn left (0: any,
 * for a sender not bound yet). */
void kvf_api_apply_early(kvf_engine *eng, struct kvf_slot *r, uint32_t conn);
/* A sender room with flags (enum kvf_room_flag), the ROOM_INFOs parked for
 * it applied (kvf_sender_create and its learned fan-out). */
int kvf_api_sender_new(kvf_engine *eng, uint64_t room_id, uint8_t flags, kvf_room *out);
/* The same from the connection of every rail to peer idx: a receiver room
 * is created before it is bound to one. */
void kvf_api_apply_early_peer(kvf_engine *eng, struct kvf_slot *r, uint16_t idx);

/* "host:port" with a numeric port in [1, 65535], or a rail list of them
 * ("host:port,host:port": kvf_engine_endpoint). */
bool kvf_api_peer_valid(const char *peer);

/* The index of peer in the engine's peers (added on first use). Returns 0,
 * -ENOSPC or -ENOMEM. */
int kvf_api_peer_intern(kvf_engine *eng, const char *peer, uint16_t *idx);

/* -ERANGE and the room FAILED (BAD_REQUEST) when an item is outside its
 * region. what: "list" (receiver) or "chunk part" (sender). */
int kvf_api_check_items(kvf_engine *eng, struct kvf_slot *r, const char *what, uint32_t k,
			uint32_t region, const uint32_t *items, uint32_t n);

/* A sender room whose receivers' ROOM_INFOs all arrived, or the error
 * saying why not (-EINVAL, -EAGAIN, -ECANCELED). */
int kvf_api_sender_info(kvf_engine *eng, kvf_room room, struct kvf_slot **out);

#endif
