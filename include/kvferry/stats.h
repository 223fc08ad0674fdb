/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry: the counters and gauges (kvf_stats), the dump, and each room as seen from
 * outside (kvf_room_stats, kvf_room_list), as /metrics and /rooms serve them. Included by
 * <kvferry/kvferry.h> (inside its extern "C"); include that one
 * (this one includes nothing: kvferry.h has what it needs before it). */
#ifndef KVFERRY_STATS_H
#define KVFERRY_STATS_H

/* Room in kvf_stats' per-enum arrays: the enums may grow up to these. */
#define KVF_STATS_REASONS 16   /* failures[], by enum kvf_fail_reason */
#define KVF_STATS_DEADLINES 8  /* deadlines[], by enum kvf_deadline */
#define KVF_STATS_IGNORED 16   /* ignored[], by enum kvf_ignore_reason */
#define KVF_STATS_AUTH 8       /* auth_refused[], by enum kvf_auth_refusal */

/*
 * KVF_STATS_FIELDS(N, A): every field of struct kvf_stats after size and
 * reserved, in layout order, once: the struct below, the library's copy of
 * the transport's counters (src/engine/transport.h), the Python table
 * (python/kvferry/stats.c) and the stub's check (tests/python/test_stubs.py)
 * all come from it. Fields are only ever appended (the ABI).
 *
 *   N(name, from, doc)                  a uint64_t count or gauge
 *   A(name, len, num, names, from, doc) uint64_t name[len], indexed by an
 *                                       enum of num values that
 *                                       kvf_<names>_str names
 *
 * from says who counts it: engine (the room engine), transport (the
 * transport's counter of the same name, copied), staging (the same, from
 * the transport's staging through host memory). These tokens are only
 * ever pasted, never expanded. doc is one line for bindings.
 */
#define KVF_STATS_FIELDS(N, A) \
	A(rooms, KVF_POLL_NUM, KVF_POLL_NUM, poll, engine, "live (unreleased) rooms per state") \
	N(inflight, engine, "sender rooms in TRANSFERRING") \
	N(unquiescent, engine, "terminal rooms whose memory is still held") \
	N(created, engine, "rooms ever created") \
	N(released, engine, "rooms ever released") \
	A(failures, KVF_STATS_REASONS, KVF_FAIL_NUM, fail_reason, engine, "failed rooms per reason") \
	A(deadlines, KVF_STATS_DEADLINES, KVF_DL_NUM, deadline, engine, \
	  "rooms failed per deadline kind") \
	A(ignored, KVF_STATS_IGNORED, KVF_IGN_NUM, ignore_reason, engine, \
	  "events not applied to a room, per reason") \
	/* What arrives before its room (docs/design.md). Each kept entry ends  \
	 * in exactly one outcome: created == applied + expired + evicted + live \
	 * for tombstones, parked == applied + expired + evicted + replaced +   \
	 * live for ROOM_INFOs. */ \
	N(tombstones_created, engine, "early ABORTs kept") \
	N(tombstones_applied, engine, "tombstones whose room was created: FAILED at once") \
	N(tombstones_expired, engine, "tombstones dropped: engine.tombstone_ttl_s passed") \
	N(tombstones_evicted, engine, "tombstones dropped: the table was full (engine.max_tombstones)") \
	N(tombstones_live, engine, "gauge: tombstones kept now") \
	N(early_infos_parked, engine, "ROOM_INFOs that came before their sender room") \
	N(early_infos_applied, engine, "parked ROOM_INFOs whose sender room came") \
	N(early_infos_expired, engine, "parked ROOM_INFOs with no sender room in time: ABORT sent back") \
	N(early_infos_evicted, engine, "parked ROOM_INFOs dropped, the table full: ABORT sent back") \
	N(early_infos_replaced, engine, "parked ROOM_INFOs the same peer's ABORT replaced (a tombstone)") \
	N(early_infos_live, engine, "gauge: ROOM_INFOs parked now") \
	N(bad_frames, engine, "malformed frames from peers") \
	N(ring_stalls, engine, "times the poller found the event ring full") \
	N(events, engine, "events applied from the ring") \
	N(oldest_inflight_ns, engine, "age of the oldest TRANSFERRING room, 0 if none") \
	/* Staging through host memory (sender regions of CUDA memory the NIC \
	 * cannot register; docs/design.md "GPU memory and staging"). */ \
	N(staged_bytes, staging, "bytes copied into staging slots") \
	N(staged_chunks, staging, "chunks that were given staging slots") \
	N(stage_waits, staging, "chunks that waited for free staging slots") \
	N(stage_slots_busy, staging, "gauge: staging slots not free (0 when all are back)") \
	/* What the rooms cost the transport (0 without one), per room when \
	 * divided by released; a poller sleep is a wakeup to come. */ \
	N(wrs_posted, transport, "RDMA WRITEs posted") \
	N(doorbells, transport, "ibv_post_send calls (writes and control frames)") \
	N(completions, transport, "work completions polled") \
	N(poller_sleeps, transport, "times the completion poller went to sleep on its fds") \
	/* Early ROOM_INFOs not parked: the parked ones held \
	 * engine.max_parked_info_bytes already. Not in early_infos_parked. */ \
	N(early_infos_refused, engine, "early ROOM_INFOs not parked, the parked bytes at their bound: ABORT sent back") \
	/* Connections (0 without a transport). A room whose peer is in connect \
	 * backoff (rdma.reconnect_backoff_ms) FAILED connect_failed at once. */ \
	N(connects, transport, "peer connections started") \
	N(connect_backoffs, transport, "ROOM_INFOs refused: their peer was in connect backoff") \
	N(conns_live, transport, "gauge: connections up") \
	N(conns_held, transport, "gauge: connections holding their buffers (up, or down and not yet freed)") \
	/* Liveness (docs/design.md "Liveness"): the poller thread's HEARTBEATs, \
	 * one per connection per heartbeat.interval_ms whether or not \
	 * kvf_progress() is called, not in doorbells. Acknowledged proves the \
	 * peer's host and the link, not its process. */ \
	N(keepalives_sent, transport, "HEARTBEATs the poller thread posted") \
	N(keepalives_acked, transport, "HEARTBEATs that completed: the peer's NIC acknowledged them") \
	N(keepalives_late, transport, "HEARTBEATs due while the last was in flight: not sent") \
	/* Misuse refused (docs/chaos.md, "What a user may do wrong"): an \
	 * engine is one scheduler thread's. */ \
	N(calls_concurrent, engine, "kvf_progress/kvf_engine_wait(_prepare) calls refused -EBUSY: another thread was in one") \
	/* The token's proof (docs/wire.md 4.4), per connection. */ \
	N(auth_ok, transport, "peers whose proof of rdma.auth_token held") \
	A(auth_refused, KVF_STATS_AUTH, KVF_AUTH_NUM, auth_refusal, transport, \
	  "connections refused before they carried anything, per reason") \
	N(auth_dropped, transport, "frames dropped unread from peers that had not proved themselves") \
	/* -ENOSPC before anything was registered: on a decode its room failed \
	 * connect_failed, on a prefill the peer's connect request was rejected. */ \
	N(conns_over_max, transport, "connections refused: rdma.max_conns were held") \
	/* docs/wire.md 7.2: the room id was bound to another connection, failed \
	 * or finished, or another connection's ABORT was kept for it. Each is \
	 * also counted in ignored[]. */ \
	N(room_infos_refused, engine, "ROOM_INFOs answered at once with ABORT (room refused, taken or finished)") \
	/* Frames, per rail and not per peer (docs/design.md, "Frames: per \
	 * rail, not per peer"). */ \
	N(frame_bytes, transport, "gauge: bytes registered for frames (shared receive queue, send frames, AUTH pages)") \
	N(srq_low, transport, "shared receive queue limit events (it ran low: grown, or at rdma.srq_depth)") \
	N(rx_stray, transport, "shared receive completions for a queue pair no longer known (frame reused)") \
	N(tx_frame_waits, transport, "control frames that waited for a free send frame (rdma.send_frames)") \
	/* What the decodes' requests cost on the wire (docs/wire.md 5.4). */ \
	N(info_bytes_rx, transport, "bytes of ROOM_INFO and ROOM_INFO_CONT frames received") \
	N(conns_idle_closed, transport, "peer connections closed: no room used them for rdma.idle_close_s") \
	/* The rail's shared send CQs (docs/design.md): a completion after its \
	 * QP's drain marker should not exist; ignored, and counted. */ \
	N(tx_stray, transport, "shared send completions for a queue pair no longer known (ignored)")

#define KVF_STATS_FIELD_N_(name, from, doc) uint64_t name;
#define KVF_STATS_FIELD_A_(name, len, num, names, from, doc) uint64_t name[len];
struct kvf_stats {
	uint32_t size;     /* in: sizeof(struct kvf_stats); out: bytes filled */
	uint32_t reserved; /* 0 */
	KVF_STATS_FIELDS(KVF_STATS_FIELD_N_, KVF_STATS_FIELD_A_)
};
#undef KVF_STATS_FIELD_N_
#undef KVF_STATS_FIELD_A_
#define KVF_STATS_INIT { .size = sizeof(struct kvf_stats) }

/* Copy the counters and gauges; set out->size first (see struct kvf_stats).
 * Returns 0 or -EINVAL (NULL argument, out->size too small). */
KVF_API int kvf_stats(const kvf_engine *eng, struct kvf_stats *out);

/* Write one line per live room: handle, id, role, state, age, the deadline
 * that applies and when, last event, failure. Returns rooms written or -EINVAL. */
KVF_API int kvf_dump(const kvf_engine *eng, FILE *fp);

/*
 * One room as the engine sees it now: the same record /rooms serves (see
 * docs/troubleshooting.md). Times are on the engine's clock (ns, as
 * kvf_engine_set_clock's; 0 = not happened yet). Set .size first (see
 * struct kvf_stats). A "chunk" is a signaled RDMA WRITE on the sender (it
 * completes as a unit); a receiver sees only its room's final write, so its
 * chunks land all at once, when the completion poller took that write
 * (success_ns is when the scheduler thread applied it, in kvf_progress;
 * /metrics kvferry_landing_wait_seconds is the time between).
 */
struct kvf_room_stats {
	uint32_t size;               /* in: sizeof(struct kvf_room_stats); out: bytes filled */
	uint8_t role;                /* enum kvf_role */
	uint8_t state;               /* enum kvf_poll */
	uint8_t deadline;            /* enum kvf_deadline armed now, KVF_DL_NONE if none */
	uint8_t quiescent;           /* 1 when kvf_quiescent() would say so */
	uint64_t room_id;
	kvf_room handle;
	uint64_t now_ns;             /* when this record was taken */
	uint64_t created_ns;         /* kvf_*_create */
	uint64_t info_ns;            /* ROOM_INFO: received (sender), sent (receiver) */
	uint64_t send_ns;            /* sender: kvf_sender_send */
	uint64_t first_chunk_ns;     /* first chunk completed (sender) or landed (receiver) */
	uint64_t last_chunk_ns;      /* last one */
	uint64_t success_ns;         /* SUCCESS */
	uint64_t state_ns;           /* entered its state */
	uint64_t deadline_ns;        /* when the armed deadline fires, 0 if none */
	uint64_t last_event_ns;      /* when last_event happened */
	uint64_t bytes;              /* the room's bytes: posted (sender) or landed (receiver) */
	uint32_t chunks_done;        /* chunks completed (sender) or landed (receiver) */
	uint32_t chunks_total;       /* chunks the room has (0 until send/init) */
	uint32_t outstanding;        /* sender: signaled writes not completed */
	uint32_t conn;               /* connection the room is bound to, 0 = none */
	uint8_t fail_reason;         /* enum kvf_fail_reason */
	uint8_t fail_deadline;       /* enum kvf_deadline when the reason is DEADLINE */
	uint8_t reserved[6];         /* 0 */
	char last_event[24];         /* what last happened to it, e.g. "peer-info" */
	char peer[64];               /* receiver: "host:port"; sender: "conn N" or "" */
};
#define KVF_ROOM_STATS_INIT { .size = sizeof(struct kvf_room_stats) }

/* The record of one live room (set out->size first). For engines that
 * export their own metrics. Returns 0 or -EINVAL (stale handle, NULL out,
 * out->size too small). */
KVF_API int kvf_room_stats(const kvf_engine *eng, kvf_room room, struct kvf_room_stats *out);

/* The handles of the live rooms, in slot order: writes at most max of them
 * and returns how many rooms are live (> max: call again with more room),
 * or -EINVAL. */
KVF_API int kvf_room_list(const kvf_engine *eng, kvf_room *out, uint32_t max);

#endif
