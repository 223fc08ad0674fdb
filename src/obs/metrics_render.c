/* SPDX-License-Identifier: Apache-2.0 */
/* /metrics (Prometheus text exposition format 0.0.4) and /rooms (JSON),
 * rendered from a published snapshot on the HTTP thread. Nothing here
 * reads the engine: only the snapshot it is given. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/metrics.h"
#include "engine/names.h"

/* ------------------------------------------------------------------ buffer */

void kvf_buf_printf(struct kvf_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->failed)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void kvf_buf_free(struct kvf_buf *b)
{
	free(b->p);
	*b = (struct kvf_buf){ 0 };
}

void kvf_buf_escaped(struct kvf_buf *b, const char *s, bool json)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\' || c == '"')
			kvf_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			kvf_buf_printf(b, "\\n");
		else if (c < 0x20 && json)
			kvf_buf_printf(b, "\\u%04x", c);
		else if (c >= 0x20)
			kvf_buf_printf(b, "%c", c);
	}
}

const char *kvf_role_name(unsigned role)
{
	return role == KVF_SENDER ? "sender" : "receiver";
}

/* ----------------------------------------------------------------- /metrics */

static void family(struct kvf_buf *b, const char *name, const char *type, const char *help)
{
	kvf_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void rooms_gauge(const struct kvf_snap *s, struct kvf_buf *b)
{
	uint64_t n[2][KVF_POLL_NUM] = { { 0 } };

	for (uint32_t i = 0; i < s->nrooms; i++)
		n[s->rooms[i].rs.role & 1][s->rooms[i].rs.state % KVF_POLL_NUM]++;
	family(b, "kvferry_rooms", "gauge", "Live (unreleased) rooms per role and state.");
	for (int role = 0; role < 2; role++)
		for (int st = 0; st < KVF_POLL_NUM; st++)
			kvf_buf_printf(b, "kvferry_rooms{role=\"%s\",state=\"%s\"} %" PRIu64 "\n",
				       kvf_role_name((unsigned)role), kvf_poll_str(st), n[role][st]);
	family(b, "kvferry_rooms_inflight", "gauge",
	       "Sender rooms in TRANSFERRING (bounded by deadlines.inflight_s).");
	kvf_buf_printf(b, "kvferry_rooms_inflight %" PRIu64 "\n", s->st.inflight);
	family(b, "kvferry_rooms_unquiescent", "gauge",
	       "Terminal rooms whose memory is still held (bounded by deadlines.quiesce_s).");
	kvf_buf_printf(b, "kvferry_rooms_unquiescent %" PRIu64 "\n", s->st.unquiescent);
	family(b, "kvferry_oldest_inflight_seconds", "gauge",
	       "Age of the oldest TRANSFERRING room in its state, 0 if none.");
	kvf_buf_printf(b, "kvferry_oldest_inflight_seconds %.6f\n",
		       (double)s->st.oldest_inflight_ns / 1e9);
}

/* Live rooms per peer: receivers name the prefill peer they asked
 * ("host:port"), senders the connection their ROOM_INFO came on. */
#define PEERS_MAX 64
static void peers_gauge(const struct kvf_snap *s, struct kvf_buf *b)
{
	const char *name[PEERS_MAX];
	uint64_t cnt[PEERS_MAX], other = 0;
	uint32_t np = 0;

	for (uint32_t i = 0; i < s->nrooms; i++) {
		const char *p = s->rooms[i].rs.peer;
		uint32_t k = 0;

		if (!*p)
			continue;
		while (k < np && strcmp(name[k], p) != 0)
			k++;
		if (k == np && np == PEERS_MAX) {
			other++;
			continue;
		}
		if (k == np) {
			name[np] = p;
			cnt[np++] = 0;
		}
		cnt[k]++;
	}
	family(b, "kvferry_peer_rooms", "gauge",
	       "Live rooms per peer (the first 64 peers; the rest under peer=\"other\").");
	for (uint32_t k = 0; k < np; k++) {
		kvf_buf_printf(b, "kvferry_peer_rooms{peer=\"");
		kvf_buf_escaped(b, name[k], false);
		kvf_buf_printf(b, "\"} %" PRIu64 "\n", cnt[k]);
	}
	if (other)
		kvf_buf_printf(b, "kvferry_peer_rooms{peer=\"other\"} %" PRIu64 "\n", other);
}

static void counter(struct kvf_buf *b, const char *name, const char *help, uint64_t v)
{
	family(b, name, "counter", help);
	kvf_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void room_counters(const struct kvf_snap *s, struct kvf_buf *b)
{
	counter(b, "kvferry_rooms_created_total", "Rooms ever created.", s->st.created);
	counter(b, "kvferry_rooms_released_total", "Rooms ever released.", s->st.released);
	family(b, "kvferry_room_failures_total", "counter", "Rooms failed, per role and reason.");
	for (int role = 0; role < 2; role++)
		for (unsigned r = 1; r < KVF_FAIL_NUM; r++)
			kvf_buf_printf(b, "kvferry_room_failures_total{role=\"%s\",reason=\"%s\"} %"
				       PRIu64 "\n", kvf_role_name((unsigned)role),
				       kvf_fail_reason_token(r), s->oc.fail_by_role[role][r]);
	family(b, "kvferry_ignored_events_total", "counter",
	       "Events not applied to a room, per reason (each also logged at debug level).");
	for (unsigned r = 0; r < KVF_IGN_NUM; r++)
		kvf_buf_printf(b, "kvferry_ignored_events_total{reason=\"%s\"} %" PRIu64 "\n",
			       kvf_ignore_reason_token(r), s->st.ignored[r]);
	family(b, "kvferry_deadline_expiries_total", "counter",
	       "Deadlines that passed, per deadline (quiesce: connection torn down; others: "
	       "room FAILED).");
	for (unsigned d = 1; d < KVF_DL_NUM; d++)
		kvf_buf_printf(b, "kvferry_deadline_expiries_total{deadline=\"%s\",key=\"%s\"} %"
			       PRIu64 "\n", kvf_deadline_str((enum kvf_deadline)d),
			       kvf_deadline_key((enum kvf_deadline)d),
			       d == KVF_DL_QUIESCE ? s->oc.quiesce_expiries : s->st.deadlines[d]);
}

static void early_counters(const struct kvf_snap *s, struct kvf_buf *b)
{
	const struct kvf_stats *st = &s->st;

	family(b, "kvferry_early_entries", "gauge",
	       "Kept now: tombstones (ABORTs before their room) and parked ROOM_INFOs.");
	kvf_buf_printf(b, "kvferry_early_entries{kind=\"tombstone\"} %" PRIu64 "\n"
		       "kvferry_early_entries{kind=\"room_info\"} %" PRIu64 "\n",
		       st->tombstones_live, st->early_infos_live);
	family(b, "kvferry_early_entries_kept_total", "counter",
	       "Tombstones created and ROOM_INFOs parked.");
	kvf_buf_printf(b, "kvferry_early_entries_kept_total{kind=\"tombstone\"} %" PRIu64 "\n"
		       "kvferry_early_entries_kept_total{kind=\"room_info\"} %" PRIu64 "\n",
		       st->tombstones_created, st->early_infos_parked);
	family(b, "kvferry_early_entries_ended_total", "counter",
	       "How kept entries ended, per kind and outcome.");
	kvf_buf_printf(b,
		       "kvferry_early_entries_ended_total{kind=\"tombstone\",outcome=\"applied\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"tombstone\",outcome=\"expired\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"tombstone\",outcome=\"evicted\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"room_info\",outcome=\"applied\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"room_info\",outcome=\"expired\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"room_info\",outcome=\"evicted\"} %" PRIu64 "\n"
		       "kvferry_early_entries_ended_total{kind=\"room_info\",outcome=\"replaced\"} %" PRIu64 "\n",
		       st->tombstones_applied, st->tombstones_expired, st->tombstones_evicted,
		       st->early_infos_applied, st->early_infos_expired, st->early_infos_evicted,
		       st->early_infos_replaced);
	counter(b, "kvferry_early_infos_refused_total",
		"Early ROOM_INFOs not parked: engine.max_parked_info_bytes was reached.",
		st->early_infos_refused);
	counter(b, "kvferry_room_infos_refused_total",
		"ROOM_INFOs answered at once with ABORT (reason refused): their room id was bound "
		"to another connection, failed or finished, or another connection's ABORT was kept "
		"for it.", st->room_infos_refused);
}

static void engine_counters(const struct kvf_snap *s, struct kvf_buf *b)
{
	counter(b, "kvferry_bad_frames_total", "Malformed frames from peers.", s->st.bad_frames);
	counter(b, "kvferry_ring_stalls_total",
		"Times the completion poller found the event ring full and waited.",
		s->st.ring_stalls);
	counter(b, "kvferry_events_total", "Events applied from the ring.", s->st.events);
	counter(b, "kvferry_room_sent_bytes_total",
		"Bytes of the sender rooms handed to the transport by send().", s->oc.bytes_sent);
	counter(b, "kvferry_room_landed_bytes_total",
		"Bytes of the receiver rooms whose data landed.", s->oc.bytes_landed);
	counter(b, "kvferry_reconnects_total",
		"Receiver side: ROOM_INFOs to a peer that went on a new connection (the last "
		"one was lost).", s->oc.reconnects);
	counter(b, "kvferry_chunks_completed_total",
		"Sender chunks (signaled RDMA WRITEs) completed successfully.",
		s->oc.chunks_completed);
}

static void frames(const struct kvf_snap *s, struct kvf_buf *b, const char *name,
		   const char *help, const uint64_t *v)
{
	family(b, name, "counter", help);
	for (unsigned t = 0; t < KVF_FRAME_TYPES; t++)
		if (s->tst.frame_names[t])
			kvf_buf_printf(b, "%s{type=\"%s\"} %" PRIu64 "\n", name,
				       s->tst.frame_names[t], v[t]);
}

/* The token's exchange: a connection refused says why in its label. */
static void auth_counters(const struct kvf_snap *s, struct kvf_buf *b)
{
	counter(b, "kvferry_auth_ok_total", "Peers whose proof of rdma.auth_token held "
		"(connections authenticated).", s->tst.auth_ok);
	family(b, "kvferry_auth_refused_total", "counter", "Connections refused before they "
	       "carried anything: the peer's proof of rdma.auth_token did not hold or never "
	       "came, or the peer refused ours, per reason.");
	for (unsigned r = 0; r < KVF_AUTH_NUM; r++)
		kvf_buf_printf(b, "kvferry_auth_refused_total{reason=\"%s\"} %" PRIu64 "\n",
			       kvf_auth_refusal_token(r), s->tst.auth_refused[r]);
	counter(b, "kvferry_auth_dropped_frames_total", "Frames from a peer that had not "
		"proved itself, dropped unread (after its connection was refused).",
		s->tst.auth_dropped);
}

/* The transport's plain counters and gauges, by field (a field renamed
 * fails the build here). Their /metrics names and help are a contract of
 * their own, older than kvf_stats' field names, so they are not derived. */
struct plain_metric {
	const char *name, *type, *help;
	size_t off; /* in struct kvf_transport_stats */
};
#define TM(f, type, name, help) { name, type, help, offsetof(struct kvf_transport_stats, f) }
static const struct plain_metric transport_metrics[] = {
	TM(wrs_posted, "counter", "kvferry_work_requests_posted_total",
	   "RDMA WRITE work requests posted."),
	TM(bytes_posted, "counter", "kvferry_posted_bytes_total", "Bytes of the RDMA WRITEs posted."),
	TM(completions, "counter", "kvferry_completions_total", "Work completions polled."),
	TM(conns_live, "gauge", "kvferry_connections", "Connections (queue pairs) not dead: "
	   "rdma.qps_per_peer of them per peer."),
	TM(conns_held, "gauge", "kvferry_connections_held", "Connections (queue pairs) not yet "
	   "freed: up, or down and still draining (each holds its QP)."),
	TM(connects, "counter", "kvferry_connects_total", "Peer connections started."),
	TM(connect_backoffs, "counter", "kvferry_connect_backoffs_total", "Rooms failed at once "
	   "because their peer was in connect backoff (rdma.reconnect_backoff_ms)."),
	TM(conns_over_max, "counter", "kvferry_connections_over_max_total", "Connections refused "
	   "because rdma.max_conns were held already (-ENOSPC)."),
	TM(frame_bytes, "gauge", "kvferry_frame_bytes", "Bytes registered for control frames: the "
	   "rails' shared receive queues and send frames, and each connection's AUTH page."),
	TM(srq_low, "counter", "kvferry_srq_low_total", "Limit events of the shared receive "
	   "queues: they ran low (grown by rdma.rq_depth, or at rdma.srq_depth)."),
	TM(rx_stray, "counter", "kvferry_rx_stray_total", "Shared receive completions for a queue "
	   "pair no longer known (the frame was reused)."),
	TM(tx_frame_waits, "counter", "kvferry_tx_frame_waits_total", "Control frames that waited "
	   "for a free send frame (rdma.send_frames)."),
	TM(info_bytes_rx, "counter", "kvferry_room_info_bytes_received_total", "Bytes of ROOM_INFO "
	   "and ROOM_INFO_CONT frames received: the decodes' requests on the wire."),
	TM(conns_idle_closed, "counter", "kvferry_connections_idle_closed_total", "Peer connections "
	   "closed because no room had used them for rdma.idle_close_s."),
	TM(tx_stray, "counter", "kvferry_tx_stray_total", "Shared send completions for a queue "
	   "pair no longer known (ignored)."),
	TM(keepalives_acked, "counter", "kvferry_keepalives_acked_total", "HEARTBEATs of the poller "
	   "thread that completed: the peer's NIC acknowledged them (its host and the link, not "
	   "its process)."),
	TM(keepalives_late, "counter", "kvferry_keepalives_late_total", "HEARTBEATs due while the "
	   "last one was still in flight: not sent (the peer or the path is not taking them)."),
	TM(staged_bytes, "counter", "kvferry_staged_bytes_total", "Bytes copied into host staging "
	   "slots (regions the NIC could not register)."),
	TM(staged_chunks, "counter", "kvferry_staged_chunks_total",
	   "Chunks sent through staging slots."),
	TM(stage_waits, "counter", "kvferry_stage_waits_total",
	   "Staged chunks that waited for free slots."),
	TM(stage_copy_errors, "counter", "kvferry_stage_copy_errors_total",
	   "Staging copies that failed."),
	TM(stage_slots_busy, "gauge", "kvferry_stage_slots_busy", "Staging slots not free."),
};
#undef TM

static void transport_counters(const struct kvf_snap *s, struct kvf_buf *b)
{
	if (!s->have_tst)
		return;
	frames(s, b, "kvferry_frames_sent_total", "Control frames posted, per type.",
	       s->tst.frames_tx);
	frames(s, b, "kvferry_frames_received_total", "Control frames received, per type.",
	       s->tst.frames_rx);
	for (size_t i = 0; i < sizeof(transport_metrics) / sizeof(transport_metrics[0]); i++) {
		const struct plain_metric *m = &transport_metrics[i];
		uint64_t v;

		memcpy(&v, (const char *)&s->tst + m->off, sizeof(v));
		family(b, m->name, m->type, m->help);
		kvf_buf_printf(b, "%s %" PRIu64 "\n", m->name, v);
	}
	auth_counters(s, b);
}

/* Per rail (device): what it carried and whether it is up; labels rail
 * and device, state as a label of a 1-valued gauge. */
static void rail_family(const struct kvf_snap *s, struct kvf_buf *b, const char *name,
			const char *type, const char *help, size_t off)
{
	family(b, name, type, help);
	for (uint32_t i = 0; i < s->nrails; i++) {
		const struct kvf_rail_stats *r = &s->rails[i];
		uint64_t v;

		memcpy(&v, (const char *)r + off, sizeof(v));
		kvf_buf_printf(b, "%s{rail=\"%u\",device=\"", name, r->rail);
		kvf_buf_escaped(b, r->device, false);
		kvf_buf_printf(b, "\"} %" PRIu64 "\n", v);
	}
}

static void rail_metrics(const struct kvf_snap *s, struct kvf_buf *b)
{
	if (!s->nrails)
		return;
	rail_family(s, b, "kvferry_rail_posted_bytes_total", "counter", "Bytes of the RDMA "
		    "WRITEs posted, per rail.", offsetof(struct kvf_rail_stats, bytes));
	rail_family(s, b, "kvferry_rail_writes_total", "counter", "RDMA WRITEs posted, per rail.",
		    offsetof(struct kvf_rail_stats, writes));
	rail_family(s, b, "kvferry_rail_wr_errors_total", "counter", "Work completions in error "
		    "(flushes not counted), per rail.", offsetof(struct kvf_rail_stats, wr_errors));
	rail_family(s, b, "kvferry_rail_connections", "gauge", "Connections not dead, per rail.",
		    offsetof(struct kvf_rail_stats, conns_live));
	rail_family(s, b, "kvferry_rail_connections_lost_total", "counter", "Connections torn "
		    "down, per rail: its rooms failed naming it.",
		    offsetof(struct kvf_rail_stats, conns_lost));
	family(b, "kvferry_rail_state", "gauge", "1 for the state each rail is in (up, "
	       "port_down: no new rooms go on it, device_dead).");
	for (uint32_t i = 0; i < s->nrails; i++) {
		kvf_buf_printf(b, "kvferry_rail_state{rail=\"%u\",device=\"", s->rails[i].rail);
		kvf_buf_escaped(b, s->rails[i].device, false);
		kvf_buf_printf(b, "\",state=\"%s\"} 1\n", kvf_rail_state_str((int)s->rails[i].state));
	}
}

/* One series of a histogram, for one role. Bounds with 15 significant
 * digits: le="0.005", where %.17g wrote 0.0050000000000000001. */
static void hist_role(struct kvf_buf *b, const char *name, enum kvf_hist_kind kind,
		      const struct kvf_hist *h, unsigned role)
{
	const double *bounds = kvf_hist_bounds(kind);
	const char *rn = kvf_role_name(role);
	uint64_t cum = 0;

	for (int i = 0; i < KVF_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		if (i < KVF_HIST_BUCKETS - 1)
			kvf_buf_printf(b, "%s_bucket{role=\"%s\",le=\"%.15g\"} %" PRIu64 "\n", name,
				       rn, bounds[i], cum);
		else
			kvf_buf_printf(b, "%s_bucket{role=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, rn,
				       cum);
	}
	kvf_buf_printf(b, "%s_sum{role=\"%s\"} %.9g\n%s_count{role=\"%s\"} %" PRIu64 "\n", name,
		       rn, h->sum, name, rn, h->count);
}

static void hist(struct kvf_buf *b, const char *name, enum kvf_hist_kind kind,
		 const struct kvf_hist *h)
{
	for (unsigned role = 0; role < 2; role++)
		hist_role(b, name, kind, &h[role], role);
}

void kvf_render_metrics(const struct kvf_snap *s, struct kvf_buf *b)
{
	rooms_gauge(s, b);
	peers_gauge(s, b);
	room_counters(s, b);
	early_counters(s, b);
	engine_counters(s, b);
	transport_counters(s, b);
	rail_metrics(s, b);
	family(b, "kvferry_room_transfer_seconds", "histogram",
	       "Successful rooms: sender from send() to SUCCESS, receiver from its ROOM_INFO to "
	       "the last write.");
	hist(b, "kvferry_room_transfer_seconds", KVF_HIST_SECONDS, s->oc.xfer_s);
	family(b, "kvferry_room_size_bytes", "histogram", "Bytes of each successful room.");
	hist(b, "kvferry_room_size_bytes", KVF_HIST_BYTES, s->oc.room_bytes);
	family(b, "kvferry_landing_wait_seconds", "histogram",
	       "Receiver rooms: from the poller taking the last write's completion to the scheduler "
	       "applying it (kvf_progress not called meanwhile).");
	hist_role(b, "kvferry_landing_wait_seconds", KVF_HIST_WAIT, &s->oc.land_wait, KVF_RECEIVER);
	counter(b, "kvferry_snapshots_total",
		"Snapshots the scheduler published (every metrics.interval_ms); this is the last.",
		s->seq);
}
