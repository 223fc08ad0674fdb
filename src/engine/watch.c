/* SPDX-License-Identifier: Apache-2.0 */
/* Watched rooms: kvf_watch, kvf_unwatch, kvf_changed (watch.h). */
#include "engine/watch.h"

#include <errno.h>
#include <stdlib.h>

#include "engine/api.h"
#include "engine/fan.h"

static struct kvf_watch *watch_table(struct kvf_engine *eng)
{
	struct kvf_watch *w = eng->watch;

	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->slot = calloc(eng->nslots, sizeof(*w->slot));
	w->q = malloc((size_t)eng->nslots * sizeof(*w->q));
	if (!w->slot || !w->q) {
		free(w->slot);
		free(w->q);
		free(w);
		return NULL;
	}
	eng->watch = w;
	return w;
}

void kvf_watch_free(struct kvf_engine *eng)
{
	if (!eng->watch)
		return;
	free(eng->watch->slot);
	free(eng->watch->q);
	free(eng->watch);
	eng->watch = NULL;
}

void kvf_watch_queue(struct kvf_engine *eng, struct kvf_slot *r)
{
	struct kvf_watch *w = eng->watch;
	uint32_t i;

	if (r->fan)
		r = kvf_fan_at(eng, r->fan, 0); /* the room is its lead's */
	if (!(r->flags & KVF_RF_WATCHED))
		return;
	i = kvf_slot_index(eng, r);
	if (w->slot[i].queued)
		return;
	w->slot[i].queued = 1;
	w->q[(w->head + w->n++) % eng->nslots] = i;
}

void kvf_watch_forget(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (!(r->flags & KVF_RF_WATCHED))
		return;
	r->flags &= (uint8_t)~KVF_RF_WATCHED;
	eng->watch->watched--;
	/* A queued entry stays: kvf_changed skips a slot not watched. */
}

int kvf_watch(kvf_engine *eng, kvf_room room, void *tag)
{
	struct kvf_slot *r = kvf_api_room(eng, room);
	struct kvf_watch *w;
	uint32_t i;

	if (!r)
		return -EINVAL;
	w = watch_table(eng);
	if (!w)
		return -ENOMEM;
	i = kvf_slot_index(eng, r);
	w->slot[i].tag = tag;
	w->slot[i].said = (uint8_t)kvf_api_state(eng, r);
	if (!(r->flags & KVF_RF_WATCHED)) {
		r->flags |= KVF_RF_WATCHED;
		w->watched++;
	}
	return 0;
}

int kvf_unwatch(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = kvf_api_room(eng, room);

	if (!r || !(r->flags & KVF_RF_WATCHED))
		return -EINVAL;
	kvf_watch_forget(eng, r);
	return 0;
}

int kvf_changed(kvf_engine *eng, struct kvf_change *out, uint32_t max)
{
	struct kvf_watch *w;
	uint32_t got = 0;

	if (!eng || !out)
		return -EINVAL;
	w = eng->watch;
	while (w && w->n && got < max) {
		uint32_t i = w->q[w->head];
		struct kvf_slot *r = &eng->slots[i];
		int state;

		w->head = (w->head + 1) % eng->nslots;
		w->n--;
		w->slot[i].queued = 0;
		if (!kvf_live(r) || !(r->flags & KVF_RF_WATCHED))
			continue; /* released or unwatched since it was queued */
		state = kvf_api_state(eng, r);
		if (state == w->slot[i].said)
			continue;
		w->slot[i].said = (uint8_t)state;
		out[got++] = (struct kvf_change){ .room = kvf_room_handle(eng, r), .state = state,
						  .tag = w->slot[i].tag };
	}
	return (int)got;
}
