/* SPDX-License-Identifier: Apache-2.0 */
/* /rooms: every live room of a snapshot as JSON, oldest first, filtered by
 * state, role and minimum age. Ages and the time left are counted to the
 * moment of rendering (the snapshot's age is added), so a room that is
 * stuck keeps ageing between snapshots. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "obs/metrics.h"
#include "engine/names.h"

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static int by_age(const void *a, const void *b)
{
	const struct kvf_snap_room *x = *(const struct kvf_snap_room *const *)a;
	const struct kvf_snap_room *y = *(const struct kvf_snap_room *const *)b;

	if (x->rs.created_ns != y->rs.created_ns)
		return x->rs.created_ns < y->rs.created_ns ? -1 : 1;
	return x->rs.room_id < y->rs.room_id ? -1 : x->rs.room_id > y->rs.room_id;
}

/* A moment of the room's life as seconds after its creation, or null. */
static void moment(struct kvf_buf *b, const char *name, const struct kvf_room_stats *rs,
		   uint64_t ns, bool last)
{
	if (ns)
		kvf_buf_printf(b, "\"%s\":%.6f%s", name, secs(ns - rs->created_ns), last ? "" : ",");
	else
		kvf_buf_printf(b, "\"%s\":null%s", name, last ? "" : ",");
}

static void str_field(struct kvf_buf *b, const char *name, const char *v)
{
	kvf_buf_printf(b, "\"%s\":\"", name);
	kvf_buf_escaped(b, v, true);
	kvf_buf_printf(b, "\",");
}

static void deadline_json(struct kvf_buf *b, const struct kvf_room_stats *rs, uint64_t stale)
{
	enum kvf_deadline d = (enum kvf_deadline)rs->deadline;
	double left;

	if (d == KVF_DL_NONE) {
		kvf_buf_printf(b, "\"deadline\":null,");
		return;
	}
	left = (double)rs->deadline_ns - (double)rs->now_ns - (double)stale;
	kvf_buf_printf(b, "\"deadline\":{\"name\":\"%s\",\"key\":\"%s\",\"left_s\":%.6f},",
		       kvf_deadline_str(d), kvf_deadline_key(d), left / 1e9);
}

static void failure_json(struct kvf_buf *b, const struct kvf_snap_room *sr)
{
	const struct kvf_room_stats *rs = &sr->rs;
	enum kvf_deadline d = (enum kvf_deadline)rs->fail_deadline;

	if (!rs->fail_reason) {
		kvf_buf_printf(b, "\"failure\":null");
		return;
	}
	kvf_buf_printf(b, "\"failure\":{\"reason\":\"%s\",", kvf_fail_reason_token(rs->fail_reason));
	if (rs->fail_reason == KVF_FAIL_DEADLINE)
		kvf_buf_printf(b, "\"deadline\":\"%s\",\"key\":\"%s\",", kvf_deadline_str(d),
			       kvf_deadline_key(d));
	kvf_buf_printf(b, "\"detail\":\"");
	kvf_buf_escaped(b, sr->detail, true);
	kvf_buf_printf(b, "\"}");
}

static void room_json(struct kvf_buf *b, const struct kvf_snap_room *sr, uint64_t stale)
{
	const struct kvf_room_stats *rs = &sr->rs;
	uint64_t now = rs->now_ns + stale;

	kvf_buf_printf(b, "{\"id\":\"%#" PRIx64 "\",\"handle\":\"%#" PRIx64 "\",\"role\":\"%s\","
		       "\"state\":\"%s\",\"age_s\":%.6f,\"in_state_s\":%.6f,", rs->room_id,
		       rs->handle.v, kvf_role_name(rs->role), kvf_poll_str(rs->state),
		       secs(now - rs->created_ns), secs(now - rs->state_ns));
	deadline_json(b, rs, stale);
	kvf_buf_printf(b, "\"chunks_done\":%u,\"chunks_total\":%u,\"bytes\":%" PRIu64 ","
		       "\"outstanding\":%u,\"quiescent\":%s,", rs->chunks_done, rs->chunks_total,
		       rs->bytes, rs->outstanding, rs->quiescent ? "true" : "false");
	str_field(b, "last_event", rs->last_event);
	kvf_buf_printf(b, "\"last_event_ago_s\":%.6f,",
		       rs->last_event_ns ? secs(now - rs->last_event_ns) : 0.0);
	str_field(b, "peer", rs->peer);
	kvf_buf_printf(b, "\"conn\":%u,\"timings_s\":{", rs->conn);
	moment(b, "room_info", rs, rs->info_ns, false);
	moment(b, "send", rs, rs->send_ns, false);
	moment(b, "first_chunk", rs, rs->first_chunk_ns, false);
	moment(b, "last_chunk", rs, rs->last_chunk_ns, false);
	moment(b, "success", rs, rs->success_ns, true);
	kvf_buf_printf(b, "},");
	failure_json(b, sr);
	kvf_buf_printf(b, "}");
}

static bool wanted(const struct kvf_snap_room *sr, const struct kvf_rooms_filter *f, uint64_t stale)
{
	const struct kvf_room_stats *rs = &sr->rs;

	if (f->state >= 0 && rs->state != f->state)
		return false;
	if (f->role >= 0 && rs->role != f->role)
		return false;
	return secs(rs->now_ns + stale - rs->created_ns) >= f->min_age_s;
}

void kvf_render_rooms(const struct kvf_snap *s, const struct kvf_rooms_filter *f, uint64_t now_mono,
		      struct kvf_buf *b)
{
	uint64_t stale = now_mono > s->taken_mono_ns ? now_mono - s->taken_mono_ns : 0;
	const struct kvf_snap_room **v = malloc((s->nrooms + 1) * sizeof(*v));
	uint32_t n = 0;

	if (!v) {
		b->failed = true;
		return;
	}
	for (uint32_t i = 0; i < s->nrooms; i++)
		if (wanted(&s->rooms[i], f, stale))
			v[n++] = &s->rooms[i];
	qsort(v, n, sizeof(*v), by_age);
	kvf_buf_printf(b, "{\"engine\":\"");
	kvf_buf_escaped(b, s->engine_id, true);
	kvf_buf_printf(b, "\",\"snapshot_seq\":%" PRIu64 ",\"snapshot_age_s\":%.6f,"
		       "\"live\":%u,\"count\":%u,\"rooms\":[", s->seq, secs(stale), s->nrooms, n);
	for (uint32_t i = 0; i < n; i++) {
		room_json(b, v[i], stale);
		kvf_buf_printf(b, i + 1 < n ? ",\n" : "");
	}
	kvf_buf_printf(b, "]}\n");
	free(v);
}
