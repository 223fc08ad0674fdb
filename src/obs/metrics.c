/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots: the scheduler thread copies the numbers and the live rooms
 * into a buffer no reader holds and publishes it; the HTTP thread takes the
 * latest (kvf_snap_get) and renders from it. The per-room record it copies
 * is the engine's (src/engine/room_stats.c). */
#include "obs/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/engine_impl.h"

int kvf_room_list(const kvf_engine *eng, kvf_room *out, uint32_t max)
{
	uint32_t n = 0;

	if (!eng || (!out && max))
		return -EINVAL;
	for (uint32_t i = 0; i < eng->nslots; i++) {
		if (!kvf_live(&eng->slots[i]))
			continue;
		if (n < max)
			out[n] = kvf_room_handle(eng, &eng->slots[i]);
		n++;
	}
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* --------------------------------------------------------------- snapshots */

static const struct kvf_metrics_hooks hooks = {
	.tick = kvf_metrics_tick,
	.next = kvf_metrics_next,
};

int kvf_metrics_init(struct kvf_engine *eng)
{
	eng->metrics_hooks = &hooks;
	eng->metrics = calloc(1, sizeof(*eng->metrics));
	return eng->metrics ? 0 : -ENOMEM;
}

void kvf_metrics_fini(struct kvf_engine *eng)
{
	struct kvf_metrics *m = eng->metrics;

	if (!m)
		return;
	kvf_http_stop(m); /* no reader after this */
	for (int i = 0; i < KVF_SNAP_BUFS; i++)
		free(m->bufs[i].rooms);
	free(m);
	eng->metrics = NULL;
}

/* A buffer that is neither published nor held by a reader. The reader
 * count is read after the reader could have seen the buffer published
 * (seq_cst, with kvf_snap_get's increment and re-check): a reader that
 * raced us sees another pointer on its re-check and lets go. */
static struct kvf_snap *free_buf(struct kvf_metrics *m)
{
	struct kvf_snap *cur = atomic_load(&m->cur);

	for (int i = 0; i < KVF_SNAP_BUFS; i++) {
		struct kvf_snap *s = &m->bufs[i];

		if (s != cur && atomic_load(&s->readers) == 0)
			return s;
	}
	return NULL;
}

static int fill_rooms(const struct kvf_engine *eng, struct kvf_snap *s, uint64_t now)
{
	uint32_t live = eng->nslots - eng->nfree;

	if (live > s->cap) {
		struct kvf_snap_room *p = realloc(s->rooms, (size_t)live * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->rooms = p;
		s->cap = live;
	}
	s->nrooms = 0;
	for (uint32_t i = 0; i < eng->nslots && s->nrooms < live; i++) {
		const struct kvf_slot *r = &eng->slots[i];
		struct kvf_snap_room *sr;

		if (!kvf_live(r))
			continue;
		sr = &s->rooms[s->nrooms++];
		kvf_room_record(eng, r, now, &sr->rs);
		sr->detail[0] = '\0';
		if (r->fail_reason && r->fail)
			memcpy(sr->detail, r->fail->text, sizeof(sr->detail));
	}
	return 0;
}

int kvf_metrics_publish(struct kvf_engine *eng)
{
	struct kvf_metrics *m = eng->metrics;
	struct kvf_snap *s = m ? free_buf(m) : NULL;
	int rc;

	if (!s) {
		if (m)
			m->skipped++;
		return -EBUSY;
	}
	rc = fill_rooms(eng, s, kvf_now(eng));
	if (rc)
		return rc;
	s->st.size = sizeof(s->st);
	kvf_stats(eng, &s->st);
	s->oc = eng->oc;
	s->have_tst = false;
	if (eng->ops && eng->ops->stats) {
		memset(&s->tst, 0, sizeof(s->tst));
		s->have_tst = eng->ops->stats(eng->t, &s->tst) == 0;
	}
	s->nrails = 0;
	for (uint32_t i = 0; eng->ops && eng->ops->rail_stats && i < KVF_MAX_RAILS; i++) {
		int n = eng->ops->rail_stats(eng->t, i, &s->rails[i]);

		if (n < 0)
			break;
		s->nrails = i + 1;
		if ((uint32_t)n <= i + 1)
			break;
	}
	s->seq = ++m->seq;
	s->taken_mono_ns = kvf_monotonic_ns();
	s->interval_ns = (uint64_t)eng->cfg.metrics_interval_ms * 1000000ull;
	snprintf(s->engine_id, sizeof(s->engine_id), "%s", eng->cfg.engine_id);
	/* Publishes every write above to the reader's load in kvf_snap_get. */
	atomic_store(&m->cur, s);
	return 0;
}

void kvf_metrics_tick(struct kvf_engine *eng, uint64_t now)
{
	struct kvf_metrics *m = eng->metrics;

	if (!m || now < m->next_ns)
		return;
	m->next_ns = now + (uint64_t)eng->cfg.metrics_interval_ms * 1000000ull;
	kvf_metrics_publish(eng);
}

bool kvf_metrics_next(const struct kvf_engine *eng, uint64_t *when)
{
	if (!eng->metrics)
		return false;
	*when = eng->metrics->next_ns;
	return true;
}

/* Announce the reader in the buffer's count, then check the buffer is
 * still the published one: if it is, the scheduler (whose free_buf reads
 * the count after unpublishing) will not write it until kvf_snap_put. */
struct kvf_snap *kvf_snap_get(struct kvf_metrics *m)
{
	for (;;) {
		struct kvf_snap *s = atomic_load(&m->cur);

		if (!s)
			return NULL;
		atomic_fetch_add(&s->readers, 1);
		if (atomic_load(&m->cur) == s)
			return s;
		atomic_fetch_sub(&s->readers, 1);
	}
}

void kvf_snap_put(struct kvf_snap *s)
{
	if (s)
		atomic_fetch_sub(&s->readers, 1);
}
