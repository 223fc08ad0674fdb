/* SPDX-License-Identifier: Apache-2.0 */
#include "early.h"

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

void kvf_early_fini(struct kvf_early *e)
{
	if (!e->ent)
		return; /* never made, or failed half way: nothing is ours */
	for (uint32_t i = e->head; i; i = e->ent[i - 1].next)
		free(e->ent[i - 1].info);
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
		e->ninfo--;
		e->info_bytes -= kvf_early_info_bytes(x->info);
	}
	x->next = e->free_head;
	e->free_head = i;
}

static void take_at(struct kvf_early *e, uint32_t i, struct kvf_early_ent *out)
{
	*out = e->ent[i - 1];
	unlink_ent(e, i); /* counts info_bytes off while info is still set */
	e->ent[i - 1].info = NULL;
}

int kvf_early_put(struct kvf_early *e, const struct kvf_early_ent *ent)
{
	uint32_t slot, i;
	int rc, replaced = 0;

	if (kvf_idmap_find(&e->map, ent->id, ent->role, &slot)) {
		if (e->ent[slot].conn != ent->conn)
			return -EPERM;
		if (ent->kind != KVF_EARLY_TOMBSTONE || e->ent[slot].kind == KVF_EARLY_TOMBSTONE)
			return -EEXIST;
		struct kvf_early_ent old;

		take_at(e, slot + 1, &old);
		free(old.info);
		replaced = 1;
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
		e->ninfo++;
		e->info_bytes += kvf_early_info_bytes(ent->info);
	}
	return replaced;
}

size_t kvf_early_info_bytes(const struct kvf_peer_info *info)
{
	return info ? sizeof(*info) + (size_t)info->nids * sizeof(info->ids[0]) : 0;
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

bool kvf_early_pop_expired(struct kvf_early *e, uint64_t now, struct kvf_early_ent *out)
{
	if (!e->head || e->ent[e->head - 1].expires > now)
		return false;
	take_at(e, e->head, out);
	return true;
}
