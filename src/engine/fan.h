/* SPDX-License-Identifier: Apache-2.0 */
/* Rooms across ranks: one sender room serving n receivers (fan-out), one
 * receiver room fed by m senders (fan-in). Each pairing of the room with
 * one peer is a slot of its own, bound to that peer's connection, so the
 * one-room-one-connection machinery (frame ownership, deadlines, the
 * connection's room list, quiescence) works per pairing unchanged. The
 * slots are linked by a struct kvf_fan; slot[0] is the lead, the slot the
 * API's handle and the id map name; the others are members, named only by
 * their own work requests, immediates and connections. The room's state is
 * the members' together (kvf_fan_state), a member's failure fails them all
 * (kvf_fan_failed). Scheduler thread only. docs/design.md, "Fan-out and
 * fan-in". */
#ifndef KVF_FAN_H
#define KVF_FAN_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine_impl.h"

/* KVF_FAN_MAX (kvferry.h), the most peers one room may have: a TP or
 * pipeline degree, not a cluster size. */

struct kvf_fan {
	uint32_t n;
	uint32_t first_failed; /* slot + 1 of the member whose failure is the room's, 0 none */
	bool failed;           /* the room failed: members were failed after it */
	uint32_t slot[];       /* n slots, slot[0] the lead */
};

static inline struct kvf_slot *kvf_fan_at(struct kvf_engine *eng, const struct kvf_fan *fan,
					  uint32_t k)
{
	return &eng->slots[fan->slot[k]];
}

/* A member slot that is not its fan's lead: no handle names it. */
static inline bool kvf_fan_member(const struct kvf_engine *eng, const struct kvf_slot *r)
{
	return r->fan && r->fan->slot[0] != kvf_slot_index(eng, r);
}

/* A fan of n slots, none attached yet; NULL: no memory. */
struct kvf_fan *kvf_fan_alloc(uint32_t n);

/* Make lead (just created, BOOTSTRAPPING) slot 0 of fan and give it
 * fan->n - 1 member slots of its id and role; the caller made sure that
 * many slots are free. peers: for a receiver, each slot's peer index
 * (peers[k] for slot k). */
void kvf_fan_attach(struct kvf_engine *eng, struct kvf_fan *fan, struct kvf_slot *lead,
		    const uint16_t *peers);

/* The slot of lead's fan that a frame from conn is for: the member bound
 * to conn, else (a sender's peer not joined yet) the first live member
 * bound to none, else the lead. */
struct kvf_slot *kvf_fan_pick(struct kvf_engine *eng, struct kvf_slot *lead, uint32_t conn);

/* lead (KVF_RF_LEARN, just bound to the first receiver's info) learns
 * its fan-out's size from that info's fan-out tag (kvferry/fan.h): n > 1
 * attaches n - 1 members, their bootstrap deadline the lead's. Returns 0,
 * or -EPROTO (a tag out of range) or -ENOSPC (not enough free slots, or no
 * memory) after failing lead. */
int kvf_fan_learn(struct kvf_engine *eng, struct kvf_slot *lead);

/* Sender members whose receiver's ROOM_INFO arrived. */
uint32_t kvf_fan_joined(struct kvf_engine *eng, const struct kvf_fan *fan);

/* The room's state (enum kvf_poll): FAILED when a member failed, else the
 * least advanced member's (SUCCESS when all are). */
int kvf_fan_state(struct kvf_engine *eng, const struct kvf_fan *fan);

/* Every member quiescent (terminal ones only can be). */
bool kvf_fan_quiescent(struct kvf_engine *eng, const struct kvf_fan *fan);

/* Member r failed: the first failure is the room's; every other member
 * not terminal fails after it, telling its own peer (ABORT). */
void kvf_fan_failed(struct kvf_engine *eng, struct kvf_slot *r);

/* Release every member, then the lead; the fan is freed once, its
 * members' pointers cleared first. The caller checked quiescence. */
void kvf_fan_release(struct kvf_engine *eng, struct kvf_slot *lead);

/* Engine close: free the fan that slot i leads, clearing its members'
 * pointers so no later slot reads it. */
void kvf_fan_drop(struct kvf_engine *eng, uint32_t i);

#endif
