/* SPDX-License-Identifier: Apache-2.0 */
#include "engine/timer.h"

#include <errno.h>
#include <stdlib.h>

#include "base/mem.h"

int kvf_timers_init(struct kvf_timers *t, uint32_t nslots)
{
	t->heap = kvf_table_alloc(nslots, sizeof(*t->heap));
	t->pos = kvf_table_alloc(nslots, sizeof(*t->pos));
	t->n = 0;
	t->nslots = nslots;
	if (!t->heap || !t->pos) {
		kvf_timers_fini(t);
		return -ENOMEM;
	}
	return 0;
}

void kvf_timers_fini(struct kvf_timers *t)
{
	kvf_table_free(t->heap, t->nslots, sizeof(*t->heap));
	kvf_table_free(t->pos, t->nslots, sizeof(*t->pos));
	t->heap = NULL;
	t->pos = NULL;
	t->n = 0;
}

static void place(struct kvf_timers *t, uint32_t i, struct kvf_timer_ent e)
{
	t->heap[i] = e;
	t->pos[e.slot] = i + 1;
}

static void sift_up(struct kvf_timers *t, uint32_t i)
{
	struct kvf_timer_ent e = t->heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (t->heap[parent].when <= e.when)
			break;
		place(t, i, t->heap[parent]);
		i = parent;
	}
	place(t, i, e);
}

static void sift_down(struct kvf_timers *t, uint32_t i)
{
	struct kvf_timer_ent e = t->heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= t->n)
			break;
		if (c + 1 < t->n && t->heap[c + 1].when < t->heap[c].when)
			c++;
		if (e.when <= t->heap[c].when)
			break;
		place(t, i, t->heap[c]);
		i = c;
	}
	place(t, i, e);
}

bool kvf_timers_armed(const struct kvf_timers *t, uint32_t slot)
{
	return t->pos[slot] != 0;
}

void kvf_timers_set(struct kvf_timers *t, uint32_t slot, uint64_t when)
{
	uint32_t i;

	if (!t->pos[slot]) {
		i = t->n++;
		place(t, i, (struct kvf_timer_ent){ .when = when, .slot = slot });
		sift_up(t, i);
		return;
	}
	/* A move goes one way only: earlier up, later down. */
	i = t->pos[slot] - 1;
	if (when < t->heap[i].when) {
		t->heap[i].when = when;
		sift_up(t, i);
	} else if (when > t->heap[i].when) {
		t->heap[i].when = when;
		sift_down(t, i);
	}
}

void kvf_timers_cancel(struct kvf_timers *t, uint32_t slot)
{
	uint32_t i;

	if (!t->pos[slot])
		return;
	i = t->pos[slot] - 1;
	t->pos[slot] = 0;
	if (i == --t->n)
		return;
	/* Fill the hole with the last entry, then restore order around it:
	 * it may belong above the hole or below it. */
	struct kvf_timer_ent moved = t->heap[t->n];

	place(t, i, moved);
	sift_up(t, i);
	sift_down(t, t->pos[moved.slot] - 1);
}

bool kvf_timers_next(const struct kvf_timers *t, uint64_t *when)
{
	if (t->n == 0)
		return false;
	*when = t->heap[0].when;
	return true;
}

bool kvf_timers_pop_due(struct kvf_timers *t, uint64_t now, uint32_t *slot)
{
	if (t->n == 0 || t->heap[0].when > now)
		return false;
	*slot = t->heap[0].slot;
	kvf_timers_cancel(t, *slot);
	return true;
}
