/* SPDX-License-Identifier: Apache-2.0 */
/* Deadlines: a binary min-heap of (when, slot), one entry per room at most.
 * Set, move and cancel cost O(log n); peeking at the earliest costs O(1), so
 * a progress call with nothing due does not depend on the number of rooms. */
#ifndef KVF_TIMER_H
#define KVF_TIMER_H

#include <stdbool.h>
#include <stdint.h>

struct kvf_timer_ent {
	uint64_t when;
	uint32_t slot;
};

struct kvf_timers {
	struct kvf_timer_ent *heap;
	uint32_t *pos;  /* pos[slot] = heap index + 1, 0 = not armed */
	uint32_t n;
	uint32_t nslots;
};

int kvf_timers_init(struct kvf_timers *t, uint32_t nslots);
void kvf_timers_fini(struct kvf_timers *t);
/* Arm or move slot's deadline. */
void kvf_timers_set(struct kvf_timers *t, uint32_t slot, uint64_t when);
/* Disarm; no-op when not armed. */
void kvf_timers_cancel(struct kvf_timers *t, uint32_t slot);
bool kvf_timers_armed(const struct kvf_timers *t, uint32_t slot);
/* The earliest deadline armed, in *when. false if none (O(1)). */
bool kvf_timers_next(const struct kvf_timers *t, uint64_t *when);
/* The earliest entry with when <= now: its slot, disarmed. false if none. */
bool kvf_timers_pop_due(struct kvf_timers *t, uint64_t now, uint32_t *slot);

#endif
