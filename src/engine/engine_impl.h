/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's fields: the room table, its indexes and deadlines, the ring
 * from the poller, the transport, regions, observability, and the guards.
 * For the files that are the engine (engine, api, room*, fan, wait, guard,
 * names), observability (src/obs/) and src/open.c; a transport sees only
 * engine.h. Owned by the
 * scheduler thread alone, except where a field says otherwise. */
#ifndef KVF_ENGINE_IMPL_H
#define KVF_ENGINE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "config/config.h"
#include "engine/conn_rooms.h"
#include "engine/early.h"
#include "base/hist.h"
#include "base/idmap.h"
#include "engine/region.h"
#include "engine/room.h"
#include "engine/timer.h"
#include "engine/transport.h"

struct kvf_metrics;
struct kvf_engine;

/* Observability's hooks into kvf_progress and kvf_wait (src/obs/ installs
 * them in kvf_metrics_init): the engine takes its snapshots without
 * including obs. Each does nothing while the engine's metrics are NULL. */
struct kvf_metrics_hooks {
	/* take and publish a snapshot when one is due */
	void (*tick)(struct kvf_engine *eng, uint64_t now);
	/* when the next one is due, in *when; false: metrics are off */
	bool (*next)(const struct kvf_engine *eng, uint64_t *when);
};
struct kvf_ring;
struct kvf_watch;

struct kvf_engine {
	struct kvf_config cfg;
	uint64_t (*now_fn)(void *arg);
	void *now_arg;
	uint64_t now_held;        /* != 0: the time of the call in progress */

	struct kvf_slot *slots;
	uint32_t nslots;
	uint32_t *free_stack;     /* free slots; LIFO keeps reused slots warm */
	uint32_t nfree;
	struct kvf_idmap ids;     /* (room id, role) -> slot */
	struct kvf_timers timers; /* one deadline per room */
	struct kvf_early early;   /* tombstones and parked ROOM_INFOs */
	uint32_t inflight_head;   /* oldest TRANSFERRING sender, slot + 1 */
	uint32_t inflight_tail;
	struct kvf_conn_rooms by_conn; /* each connection's rooms */

	struct kvf_ring *ring;    /* rail 0's: the poller of a one-device engine */
	struct kvf_ring *xrings[KVF_MAX_RAILS - 1]; /* rails 1.., each its poller's */
	uint32_t nxrings;
	int wake_fd;              /* eventfd the poller writes for a sleeping scheduler (wait.c) */
	bool wait_armed;          /* kvf_engine_wait_prepare announced a sleep; progress ends it */
	struct kvf_event *batch;
	uint32_t batch_cap;

	const struct kvf_transport_ops *ops;
	void *t;

	struct kvf_regions regions; /* kvf_region_register's */

	struct kvf_room_obs *obs; /* per slot, beside slots */
	struct kvf_watch *watch;  /* NULL until the first kvf_watch (watch.h) */
	struct kvf_obs_counters oc;
	struct kvf_metrics *metrics; /* NULL: no snapshots (metrics.listen_port 0) */
	const struct kvf_metrics_hooks *metrics_hooks; /* NULL until kvf_metrics_init */

	char **peers;             /* interned "host:port" strings */
	uint32_t *peer_conns;     /* per peer and rail (peer * KVF_MAX_RAILS + rail): the
	                             connection its last ROOM_INFO on that rail went on */
	uint32_t npeers;

	uint64_t next_summary_ns;
	struct kvf_stats st;
	/* guard.c: a second thread in progress/wait, a child after fork() */
	atomic_flag busy;
	_Atomic uint64_t calls_concurrent;
	bool forked;
	uint32_t fork_logged;
	/* Transitions taken, per role, from, to: the table's walk test reads
	 * it; a disallowed one stays 0 (debug builds assert it). */
	uint64_t transitions[2][KVF_ROOM_NSTATES][KVF_ROOM_NSTATES];
};

/* Handle <-> slot. */
static inline kvf_room kvf_room_handle(const struct kvf_engine *eng, const struct kvf_slot *r)
{
	return (kvf_room){ .v = (uint64_t)r->gen << 32 | (uint32_t)(r - eng->slots) };
}
static inline uint32_t kvf_slot_index(const struct kvf_engine *eng, const struct kvf_slot *r)
{
	return (uint32_t)(r - eng->slots);
}
/* The one room-handle validator: the live room at slot whose generation
 * matches gen in the bits of gen_mask (a handle and a wr_id carry all 32,
 * an immediate the low 12), or NULL. Every name of a room from outside
 * (API handle, work completion, immediate) passes here. */
static inline struct kvf_slot *kvf_room_at(const struct kvf_engine *eng, uint32_t slot,
					   uint32_t gen, uint32_t gen_mask)
{
	struct kvf_slot *r;

	if (!eng || slot >= eng->nslots)
		return NULL;
	r = &eng->slots[slot];
	return kvf_live(r) && ((r->gen ^ gen) & gen_mask) == 0 ? r : NULL;
}

/* The clock read once for a whole call (kvf_progress, a send, a create, a
 * release): every timestamp and deadline the call sets is the call's time,
 * and a room's life reads the clock a few times instead of a dozen. Nests:
 * only the outermost hold drops it. A held 0 reads as not held (a test
 * clock may start at 0), which only costs a read. */
static inline bool kvf_clock_hold(struct kvf_engine *eng)
{
	if (eng->now_held)
		return false;
	eng->now_held = eng->now_fn(eng->now_arg);
	return true;
}

static inline void kvf_clock_drop(struct kvf_engine *eng, bool held)
{
	if (held)
		eng->now_held = 0;
}

/* What last happened to the room, and when (kvf_dump, /rooms). */
static inline void kvf_room_last(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_last l)
{
	r->last = (uint8_t)l;
	eng->obs[kvf_slot_index(eng, r)].last_ns = kvf_now(eng);
}

static inline struct kvf_room_obs *kvf_obs(struct kvf_engine *eng, const struct kvf_slot *r)
{
	return &eng->obs[kvf_slot_index(eng, r)];
}

/* The record of room r at now: kvf_room_stats() and each room of a
 * metrics snapshot (src/obs/) share it (room_stats.c). */
void kvf_room_record(const struct kvf_engine *eng, const struct kvf_slot *r, uint64_t now,
		     struct kvf_room_stats *out);

/* Free the engine's tables and the engine, once the HTTP server and the
 * transport are stopped (kvf_engine_close, src/open.c). */
void kvf_engine_destroy(struct kvf_engine *eng);

#endif
