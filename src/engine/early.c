/* SPDX-License-Identifier: Apache-2.0 */
#include "engine/early.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t entry_id(const void *ctx, uint32_t i)
{
	return ((const struct kvf_early *)ctx)->ent[i].id;
}

int kvf_early_init(struct kvf_early *e, uint32_t cap)
{
	int rc;

	e->ent = calloc(cap ? cap : 1, sizeof(*e->ent));
	if (!e->ent)
		return -ENOMEM;
	rc = kvf_idmap_init(&e->map, cap, entry_id, e);
	if (rc) {
		/* Forget it too: the engine's cleanup runs kvf_early_fini on a
		 * table that failed half way. */
		free(e->ent);
		e->ent = NULL;
		return rc;
	}
	e->cap = cap;
	e->head = e->tail = 0;
	e->ntomb = e->ninfo = 0;
	e->info_bytes = 0;
	/* Thread every entry onto the free list. */
	e->free_head = cap ? 1 : 0;
	for (uint32_t i = 0; i < cap; i++)
		e->ent[i].next = i + 1 < cap ? i + 2 : 0;
	return 0;
}

/* Free a chain of parked infos; returns how many there were. */
static uint32_t free_infos(struct kvf_peer_info *pi)
{
	uint32_t n = 0;

	for (struct kvf_peer_info *next; pi; pi = next, n++) {
		next = pi->next;
		free(pi);
	}
	return n;
}

static uint32_t count_infos(const struct kvf_peer_info *pi)
{
	uint32_t n = 0;

	for (; pi; pi = pi->next)
		n++;
	return n;
}

void kvf_early_fini(struct kvf_early *e)
{
	if (!e->ent)
		return; /* never made, or failed half way: nothing is ours */
	for (uint32_t i = e->head; i; i = e->ent[i - 1].next)
		free_infos(e->ent[i - 1].info);
	kvf_idmap_fini(&e->map);
	free(e->ent);
	e->ent = NULL;
}

static void unlink_ent(struct kvf_early *e, uint32_t i)
{
	struct kvf_early_ent *x = &e->ent[i - 1];

	if (x->prev)
		e->ent[x->prev - 1].next = x->next;
	else
		e->head = x->next;
	if (x->next)
		e->ent[x->next - 1].prev = x->prev;
	else
		e->tail = x->prev;
	kvf_idmap_remove(&e->map, x->id, x->role);
	if (x->kind == KVF_EARLY_TOMBSTONE) {
		e->ntomb--;
	} else {
		e->ninfo -= count_infos(x->info);
		e->info_bytes -= kvf_early_info_bytes(x->info);
	}
	x->next = e->free_head;
	e->free_head = i;
}

static void take_at(struct kvf_early *e, uint32_t i, struct kvf_early_ent *out)
{
	*out = e->ent[i - 1];
	unlink_ent(e, i);
	e->ent[i - 1].info = NULL;
}

/* Another receiver's ROOM_INFO for a parked one's room (a fan-out). */
static int chain_info(struct kvf_early *e, struct kvf_early_ent *x, struct kvf_peer_info *info)
{
	struct kvf_peer_info **at = &x->info;

	for (; *at; at = &(*at)->next)
		if ((*at)->peer == info->peer)
			return -EEXIST;
	*at = info;
	e->ninfo++;
	e->info_bytes += kvf_early_info_bytes(info);
	return 0;
}

int kvf_early_put(struct kvf_early *e, const struct kvf_early_ent *ent)
{
	uint32_t slot, i;
	int rc, replaced = 0;

	if (kvf_idmap_find(&e->map, ent->id, ent->role, &slot)) {
		if (ent->kind == KVF_EARLY_INFO && e->ent[slot].kind == KVF_EARLY_INFO &&
		    e->ent[slot].conn != ent->conn)
			return chain_info(e, &e->ent[slot], ent->info);
		if (e->ent[slot].conn != ent->conn)
			return -EPERM;
		if (ent->kind != KVF_EARLY_TOMBSTONE || e->ent[slot].kind == KVF_EARLY_TOMBSTONE)
			return -EEXIST;
		struct kvf_early_ent old;

		take_at(e, slot + 1, &old);
		replaced = (int)free_infos(old.info);
	}
	if (!e->free_head)
		return -ENOSPC;
	i = e->free_head;
	rc = kvf_idmap_insert(&e->map, ent->id, ent->role, i - 1);
	if (rc)
		return rc;
	e->free_head = e->ent[i - 1].next;
	e->ent[i - 1] = *ent;
	e->ent[i - 1].prev = e->tail;
	e->ent[i - 1].next = 0;
	if (e->tail)
		e->ent[e->tail - 1].next = i;
	else
		e->head = i;
	e->tail = i;
	if (ent->kind == KVF_EARLY_TOMBSTONE) {
		e->ntomb++;
	} else {
		e->ninfo += count_infos(ent->info);
		e->info_bytes += kvf_early_info_bytes(ent->info);
	}
	return replaced;
}

size_t kvf_early_info_bytes(const struct kvf_peer_info *info)
{
	size_t n = 0;

	for (; info; info = info->next) /* a fan-out's infos are chained */
		n += sizeof(*info) + (size_t)info->nids * sizeof(info->ids[0]);
	return n;
}

bool kvf_early_take(struct kvf_early *e, uint64_t id, uint32_t role, uint32_t conn,
		    struct kvf_early_ent *out)
{
	uint32_t slot;

	if (!kvf_idmap_find(&e->map, id, role, &slot) || (conn && e->ent[slot].conn != conn))
		return false;
	take_at(e, slot + 1, out);
	return true;
}

const struct kvf_early_ent *kvf_early_peek(const struct kvf_early *e, uint64_t id, uint32_t role)
{
	uint32_t slot;

	if (kvf_early_empty(e) || !kvf_idmap_find(&e->map, id, role, &slot))
		return NULL;
	return &e->ent[slot];
}

bool kvf_early_next(const struct kvf_early *e, uint64_t *when)
{
	if (!e->head)
		return false;
	*when = e->ent[e->head - 1].expires;
	return true;
}

bool kvf_early_pop_expired(struct kvf_early *e, uint64_t now, struct kvf_early_ent *out)
{
	if (!e->head || e->ent[e->head - 1].expires > now)
		return false;
	take_at(e, e->head, out);
	return true;
}
