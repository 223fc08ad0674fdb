/* SPDX-License-Identifier: Apache-2.0 */
/* What arrives for a room before the room exists, kept until it does (or a
 * TTL passes) instead of being dropped:
 *  - a tombstone: the peer's ABORT; the room is FAILED the moment it is
 *    created;
 *  - a parked ROOM_INFO: the decode side may ask before the prefill engine
 *    has created its sender room; it is applied at creation.
 * Entries expire in insertion order (one TTL for all), so a FIFO list is the
 * whole timer structure: O(1) to check. */
#ifndef KVF_EARLY_H
#define KVF_EARLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/event.h"
#include "base/idmap.h"

enum kvf_early_kind {
	KVF_EARLY_TOMBSTONE = 1,
	KVF_EARLY_INFO = 2,
};

struct kvf_early_ent {
	uint64_t id;
	uint64_t expires;
	struct kvf_peer_info *info; /* KVF_EARLY_INFO: owned by the entry */
	uint32_t role;
	uint32_t conn;
	uint16_t reason;            /* KVF_EARLY_TOMBSTONE: the peer's reason */
	uint8_t kind;
	uint32_t prev, next;        /* FIFO links, index + 1; 0 = none */
};

struct kvf_early {
	struct kvf_early_ent *ent;
	uint32_t cap;
	uint32_t free_head;         /* index + 1 */
	uint32_t head, tail;        /* oldest, newest; index + 1 */
	uint32_t ntomb, ninfo;      /* entries kept now, per kind */
	uint64_t info_bytes;        /* bytes of the parked infos (kvf_early_info_bytes) */
	struct kvf_idmap map;
};

int kvf_early_init(struct kvf_early *e, uint32_t cap);
/* Frees parked infos. Harmless on a zeroed table or one whose init failed
 * (the engine's cleanup calls it either way). */
void kvf_early_fini(struct kvf_early *e);
/* Keep ent (kind, id, role, conn, reason, info, expires). An entry belongs
 * to the connection that left it: one from another connection for the same
 * key is refused with -EPERM and the kept one is unchanged, but for a
 * ROOM_INFO joining parked ones: the receivers of a fan-out each send their
 * own, so it is chained to them (info->next; -EEXIST when one of its
 * connection is there already) and they go together. From the same
 * connection, a tombstone replaces a parked info (freed); an info for a key
 * that has a tombstone, or a second of either, is refused with -EEXIST (the
 * caller counts it). Returns 0, n > 0 (kept, and the n parked infos it replaced were
 * freed), -EPERM, -EEXIST, or -ENOSPC when full. On error the caller keeps
 * ownership of ent->info. */
int kvf_early_put(struct kvf_early *e, const struct kvf_early_ent *ent);
/* Nothing kept: the usual case, checked before paying for a lookup. */
static inline bool kvf_early_empty(const struct kvf_early *e)
{
	return e->head == 0;
}

/* Remove and return the entry for (id, role) if conn left it; conn 0 takes
 * it whichever connection left it (a sender room is bound to none when it
 * is created). An entry of another connection stays (its TTL ends it). The
 * caller owns out->info. */
bool kvf_early_take(struct kvf_early *e, uint64_t id, uint32_t role, uint32_t conn,
		    struct kvf_early_ent *out);
/* The entry for (id, role), left in place; NULL if none. */
const struct kvf_early_ent *kvf_early_peek(const struct kvf_early *e, uint64_t id, uint32_t role);
/* What a parked info holds in memory, with the infos chained to it (a
 * fan-out's): what engine.max_parked_info_bytes bounds (the sum over the
 * parked ones is info_bytes). */
size_t kvf_early_info_bytes(const struct kvf_peer_info *info);
/* When the oldest entry expires, in *when. false if none. */
bool kvf_early_next(const struct kvf_early *e, uint64_t *when);
/* Remove and return the oldest entry if it expired at now. */
bool kvf_early_pop_expired(struct kvf_early *e, uint64_t now, struct kvf_early_ent *out);

#endif
