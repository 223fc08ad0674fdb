/* SPDX-License-Identifier: Apache-2.0 */
/* Watched rooms (kvf_watch, kvf_changed): the rooms whose kvf_poll state
 * changed since the caller last asked, so a scheduler iteration over 1,000
 * rooms costs its changes, not its rooms. Each state change of a watched
 * room (its own, or a fan member's for the lead) queues the room's slot,
 * once: a slot is queued at most once, so a queue of nslots never fills.
 * kvf_changed reports a queued slot only when its state differs from the
 * one it last reported, so a fan member's change that leaves the room's
 * state as it was says nothing. The table comes at the first kvf_watch; an
 * engine that never watches pays one pointer test per state change.
 * Scheduler thread only. */
#ifndef KVF_WATCH_H
#define KVF_WATCH_H

#include <stdint.h>

#include "engine/engine_impl.h"

struct kvf_watch_slot {
	void *tag;     /* the caller's, handed back with each change */
	uint8_t said;  /* the state last reported (at kvf_watch: the state then) */
	uint8_t queued;
};

struct kvf_watch {
	struct kvf_watch_slot *slot; /* per engine slot */
	uint32_t *q;                 /* ring of queued slots, nslots long */
	uint32_t head, n;
	uint32_t watched;            /* rooms watched now */
};

/* Room r's state may have changed (room.c: a state entered, a failure
 * written). */
void kvf_watch_queue(struct kvf_engine *eng, struct kvf_slot *r);

static inline void kvf_watch_note(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (eng->watch && eng->watch->watched)
		kvf_watch_queue(eng, r);
}

/* Room r's slot is being freed: it is watched no more. */
void kvf_watch_forget(struct kvf_engine *eng, struct kvf_slot *r);

void kvf_watch_free(struct kvf_engine *eng);

#endif
