/* SPDX-License-Identifier: Apache-2.0 */
/* The engine: create and destroy, progress(), stats and dump. Opening one
 * from a configuration (the transport, the HTTP server) and closing it are
 * src/open.c's; the room API is in api.c, the state machine in room.c. */
#include "engine/engine.h"
#include "engine/guard.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/fan.h"
#include "base/log.h"
#include "base/mem.h"
#include "engine/engine_impl.h"
#include "base/sized.h"
#include "engine/watch.h"
#include "engine/fault_ring.h"

#define KVF_BATCH 256

static uint64_t monotonic_ns(void *arg)
{
	(void)arg;
	return kvf_monotonic_ns();
}

static uint64_t slot_id(const void *ctx, uint32_t slot)
{
	return ((const struct kvf_engine *)ctx)->slots[slot].id;
}

static int alloc_tables(struct kvf_engine *eng)
{
	uint32_t n = eng->cfg.max_rooms;
	int rc;

	eng->slots = kvf_table_alloc(n, sizeof(*eng->slots));
	eng->free_stack = kvf_table_alloc(n, sizeof(*eng->free_stack));
	eng->obs = kvf_table_alloc(n, sizeof(*eng->obs));
	eng->batch = calloc(KVF_BATCH, sizeof(*eng->batch));
	eng->ring = kvf_ring_create(eng->cfg.ring_size);
	if (!eng->slots || !eng->free_stack || !eng->obs || !eng->batch || !eng->ring)
		return -ENOMEM;
	/* Nonblocking: the poller's write never waits, the drain never blocks. */
	eng->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng->wake_fd < 0)
		return -errno;
	kvf_ring_set_wake_fd(eng->ring, eng->wake_fd);
	eng->batch_cap = KVF_BATCH;
	eng->nslots = n;
	/* Slot 0 on top: the first room gets slot 0, gen 1. */
	for (uint32_t i = 0; i < n; i++) {
		eng->slots[i].gen = 1;
		eng->slots[i].state = KVF_ROOM_FREE;
		eng->free_stack[i] = n - 1 - i;
	}
	eng->nfree = n;
	rc = kvf_idmap_init(&eng->ids, n, slot_id, eng);
	if (!rc)
		rc = kvf_timers_init(&eng->timers, n);
	if (!rc)
		rc = kvf_early_init(&eng->early, eng->cfg.max_tombstones);
	return rc;
}

static void free_tables(struct kvf_engine *eng)
{
	struct kvf_event ev;

	for (uint32_t k = 0; k <= eng->nxrings; k++) {
		struct kvf_ring *ring = kvf_engine_rail_ring(eng, k);

		while (ring && kvf_ring_pop_batch(ring, &ev, 1))
			free(ev.data);
		kvf_ring_destroy(ring);
	}
	if (eng->wake_fd >= 0)
		close(eng->wake_fd);
	for (uint32_t i = 0; eng->slots && i < eng->nslots; i++) {
		kvf_fan_drop(eng, i); /* once, by its lead; members' pointers cleared */
		free(eng->slots[i].info);
		free(eng->slots[i].chunks);
		free(eng->slots[i].fail);
	}
	kvf_early_fini(&eng->early);
	kvf_watch_free(eng);
	kvf_conn_rooms_fini(&eng->by_conn);
	kvf_timers_fini(&eng->timers);
	kvf_idmap_fini(&eng->ids);
	for (uint32_t i = 0; i < eng->npeers; i++)
		free(eng->peers[i]);
	free(eng->peers);
	free(eng->peer_conns);
	free(eng->batch);
	kvf_table_free(eng->obs, eng->cfg.max_rooms, sizeof(*eng->obs));
	kvf_table_free(eng->free_stack, eng->cfg.max_rooms, sizeof(*eng->free_stack));
	kvf_table_free(eng->slots, eng->cfg.max_rooms, sizeof(*eng->slots));
}

int kvf_engine_create(const struct kvf_config *cfg, const struct kvf_transport_ops *ops,
		      void *tctx, kvf_engine **out)
{
	struct kvf_engine *eng;
	int rc;

	if (!cfg || !out || cfg->max_rooms == 0 || cfg->max_rooms > (1u << KVF_IMM_SLOT_BITS))
		return -EINVAL;
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return -ENOMEM;
	eng->cfg = *cfg;
	eng->wake_fd = -1;
	eng->now_fn = monotonic_ns;
	eng->ops = ops;
	eng->t = tctx;
	rc = alloc_tables(eng);
	if (rc) {
		free_tables(eng);
		free(eng);
		return rc;
	}
	eng->next_summary_ns = kvf_now(eng) + (uint64_t)cfg->summary_interval_s * 1000000000ull;
	atomic_flag_clear(&eng->busy);
	kvf_guard_track(eng);
	*out = eng;
	return 0;
}

int kvf_engine_rails(const kvf_engine *eng, struct kvf_rail_stats *out, uint32_t max)
{
	uint32_t stride = out ? out->size : 0; /* the caller's struct: its array's step */
	int n = 0;

	if (!eng || (!out && max))
		return -EINVAL;
	if (!eng->ops || !eng->ops->rail_stats)
		return -ENOTCONN;
	for (uint32_t i = 0; i < max || !n; i++) {
		struct kvf_rail_stats rs;
		void *to = (char *)out + (size_t)i * stride;
		int rc = eng->ops->rail_stats(eng->t, i, &rs);

		if (rc < 0)
			return rc;
		n = rc;
		if (i < max && (memcpy(to, &stride, sizeof(stride)),
				kvf_sized_copy(to, &rs, sizeof(rs), offsetof(struct kvf_rail_stats, rail) + 4)))
			return -EINVAL;
		if (i + 1 >= (uint32_t)n)
			break;
	}
	return n;
}

/* Free the engine's tables and the engine (kvf_engine_close, src/open.c,
 * after it stopped the HTTP server and the transport). */
void kvf_engine_destroy(kvf_engine *eng)
{
	uint64_t live = eng->nslots - eng->nfree;

	if (live)
		kvf_warn("engine", "closing with %" PRIu64 " live rooms (%" PRIu64
			 " inflight); they are dropped", live, eng->st.inflight);
	free_tables(eng);
	free(eng);
}

void kvf_engine_set_transport(kvf_engine *eng, const struct kvf_transport_ops *ops, void *tctx)
{
	eng->ops = ops;
	eng->t = tctx;
}

struct kvf_ring *kvf_engine_ring(kvf_engine *eng)
{
	return eng->ring;
}

struct kvf_ring *kvf_engine_rail_ring(const kvf_engine *eng, uint32_t k)
{
	return !k ? eng->ring : k <= eng->nxrings ? eng->xrings[k - 1] : NULL;
}

int kvf_engine_set_clock(kvf_engine *eng, uint64_t (*fn)(void *arg), void *arg)
{
	if (!eng)
		return -EINVAL;
	eng->now_fn = fn ? fn : monotonic_ns;
	eng->now_arg = fn ? arg : NULL;
	eng->next_summary_ns = kvf_now(eng) + (uint64_t)eng->cfg.summary_interval_s * 1000000000ull;
	return 0;
}

/* The configured length of deadline d, for a layer above that keeps one of
 * its own (kvferry.h): the configuration's figure, not a room's (room.c). */
int kvf_engine_deadline_s(kvf_engine *eng, enum kvf_deadline d, uint32_t *s)
{
	const struct kvf_config *c;

	if (!eng || !s)
		return -EINVAL;
	c = &eng->cfg;
	switch (d) {
	case KVF_DL_BOOTSTRAP: *s = c->bootstrap_s; return 0;
	case KVF_DL_WAITING_FOR_INPUT: *s = c->waiting_for_input_s; return 0;
	case KVF_DL_INFLIGHT: *s = c->inflight_s; return 0;
	case KVF_DL_RECEIVER_WAITING: *s = c->receiver_waiting_s; return 0;
	case KVF_DL_QUIESCE: *s = c->quiesce_s; return 0;
	case KVF_DL_BETWEEN_CHUNKS: *s = c->between_chunks_s; return 0;
	default: return -EINVAL;
	}
}

/* ----------------------------------------------------------------- progress */

static int drain_ring(struct kvf_engine *eng)
{
	int n = 0;
	uint32_t k;

	/* Test builds: a ring_full fault leaves it undrained a while. */
	if (KVF_FAULT_RING_HELD(kvf_monotonic_ns()))
		return 0;
	/* Bounded by the ring size: a poller that keeps producing cannot hold
	 * the scheduler here forever. */
	for (uint32_t r = 0; r <= eng->nxrings; r++) {
		struct kvf_ring *ring = kvf_engine_rail_ring(eng, r);

		for (uint32_t budget = eng->cfg.ring_size; budget;
		     budget -= k < budget ? k : budget) {
			k = kvf_ring_pop_batch(ring, eng->batch, eng->batch_cap);
			for (uint32_t i = 0; i < k; i++)
				kvf_room_apply(eng, &eng->batch[i]);
			n += (int)k;
			if (k < eng->batch_cap)
				break;
		}
	}
	KVF_FAULT_RING_DRAINED(n, kvf_monotonic_ns());
	return n;
}

static void log_summary(struct kvf_engine *eng, uint64_t now)
{
	struct kvf_stats st = KVF_STATS_INIT;
	uint64_t fails = 0, ign = 0;

	kvf_stats(eng, &st);
	for (int i = 0; i < KVF_FAIL_NUM; i++)
		fails += st.failures[i];
	for (int i = 0; i < KVF_IGN_NUM; i++)
		ign += st.ignored[i];
	kvf_info("engine", "rooms: bootstrapping %" PRIu64 ", waiting %" PRIu64 ", transferring %"
		 PRIu64 ", success %" PRIu64 ", failed %" PRIu64 "; inflight %" PRIu64
		 ", oldest inflight %.3f s, unquiescent %" PRIu64 ", failures %" PRIu64
		 ", ignored events %" PRIu64 ", tombstones %" PRIu64 ", parked infos %" PRIu64,
		 st.rooms[KVF_BOOTSTRAPPING], st.rooms[KVF_WAITING_FOR_INPUT],
		 st.rooms[KVF_TRANSFERRING], st.rooms[KVF_SUCCESS], st.rooms[KVF_FAILED],
		 st.inflight, (double)st.oldest_inflight_ns / 1e9, st.unquiescent, fails, ign,
		 st.tombstones_live, st.early_infos_live);
	eng->next_summary_ns = now + (uint64_t)eng->cfg.summary_interval_s * 1000000000ull;
}

/* kvf_progress's work, once the guard let the call in. */
static int progress(kvf_engine *eng)
{
	struct kvf_early_ent e;
	uint64_t now;
	uint32_t slot;
	int n;

	if (eng->wait_armed)
		kvf_engine_wait_end(eng);
	n = drain_ring(eng);
	now = kvf_now(eng);
	while (kvf_timers_pop_due(&eng->timers, now, &slot)) {
		kvf_room_expire(eng, slot);
		n++;
	}
	while (kvf_early_pop_expired(&eng->early, now, &e)) {
		kvf_room_early_expired(eng, &e);
		n++;
	}
	if (eng->ops && eng->ops->progress)
		eng->ops->progress(eng->t, now);
	if (eng->cfg.summary_interval_s && now >= eng->next_summary_ns)
		log_summary(eng, now);
	if (eng->metrics_hooks)
		eng->metrics_hooks->tick(eng, now);
	return n;
}

int kvf_progress(kvf_engine *eng)
{
	int n;

	if (!eng)
		return -EINVAL;
	n = kvf_guard_enter(eng, "kvf_progress");
	if (n)
		return n;
	bool held = kvf_clock_hold(eng);

	n = progress(eng);
	kvf_clock_drop(eng, held);
	kvf_guard_leave(eng);
	return n;
}

/* -------------------------------------------------------------- inspection */

/* The transport's counters (staging: src/rdma/stage.h; posting and polling). */
static void transport_counts(const kvf_engine *eng, struct kvf_stats *st)
{
	struct kvf_transport_stats ts;

	memset(&ts, 0, sizeof(ts));
	if (!eng->ops || !eng->ops->stats || eng->ops->stats(eng->t, &ts))
		return;
	kvf_transport_stats_copy(st, &ts);
}

int kvf_stats(const kvf_engine *eng, struct kvf_stats *out)
{
	struct kvf_stats st;

	if (!eng || !out)
		return -EINVAL;
	st = eng->st;
	st.size = sizeof(st);
	st.ring_stalls = 0;
	for (uint32_t r = 0; r <= eng->nxrings; r++)
		st.ring_stalls += kvf_ring_stalls(kvf_engine_rail_ring(eng, r));
	st.tombstones_live = eng->early.ntomb;
	st.early_infos_live = eng->early.ninfo;
	st.calls_concurrent = atomic_load_explicit(&eng->calls_concurrent, memory_order_relaxed);
	st.oldest_inflight_ns = 0;
	if (eng->inflight_head)
		st.oldest_inflight_ns = kvf_now(eng) - eng->slots[eng->inflight_head - 1].state_ns;
	transport_counts(eng, &st);
	return kvf_sized_copy(out, &st, sizeof(st), offsetof(struct kvf_stats, rooms));
}

static void dump_room(const struct kvf_engine *eng, const struct kvf_slot *r, uint64_t now,
		      FILE *fp)
{
	double due = 0;

	if (r->deadline != KVF_DL_NONE) {
		uint64_t len;

		kvf_room_deadline(eng, r, &len);
		due = ((double)r->state_ns + (double)len - (double)now) / 1e9;
	}
	fprintf(fp, "room %#" PRIx64 " handle %#" PRIx64 " %-8s %-17s age %.3f s in-state %.3f s"
		" deadline %s%s%.3f s last %s conn %u outstanding %u%s%s%s\n",
		r->id, kvf_room_handle(eng, r).v, r->role == KVF_SENDER ? "sender" : "receiver",
		kvf_poll_str(r->state), (double)(now - r->created_ns) / 1e9,
		(double)(now - r->state_ns) / 1e9, kvf_deadline_str((enum kvf_deadline)r->deadline),
		r->deadline ? " in " : " ", r->deadline ? due : 0.0,
		kvf_last_str((enum kvf_last)r->last), r->conn, r->outstanding,
		kvf_terminal(r) && !(r->flags & KVF_RF_QUIESCENT) ? " NOT-QUIESCENT" : "",
		r->fail_reason ? " failure: " : "",
		r->fail_reason ? (r->fail ? r->fail->text : kvf_fail_reason_str(r->fail_reason)) : "");
}

int kvf_dump(const kvf_engine *eng, FILE *fp)
{
	uint64_t now;
	int n = 0;

	if (!eng || !fp)
		return -EINVAL;
	now = kvf_now(eng);
	for (uint32_t i = 0; i < eng->nslots; i++) {
		if (!kvf_live(&eng->slots[i]))
			continue;
		dump_room(eng, &eng->slots[i], now, fp);
		n++;
	}
	return n;
}
