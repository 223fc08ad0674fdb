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

struct kvf_stats {
	uint32_t size;                /* in: sizeof(struct kvf_stats); out: bytes filled */
	uint32_t reserved;            /* 0 */
	uint64_t rooms[KVF_POLL_NUM]; /* live (unreleased) rooms per state */
	uint64_t inflight;            /* sender rooms in TRANSFERRING */
	uint64_t unquiescent;         /* terminal rooms whose memory is still held */
	uint64_t created;             /* rooms ever created */
	uint64_t released;            /* rooms ever released */
	uint64_t failures[KVF_STATS_REASONS];
	uint64_t deadlines[KVF_STATS_DEADLINES]; /* rooms failed per deadline kind */
	uint64_t ignored[KVF_STATS_IGNORED];
	/* What arrives before its room (docs/design.md). Each kept entry ends
	 * in exactly one outcome: created == applied + expired + evicted + live
	 * for tombstones, parked == applied + expired + evicted + replaced +
	 * live for ROOM_INFOs. */
	uint64_t tombstones_created;  /* early ABORTs kept */
	uint64_t tombstones_applied;  /* their room was created: FAILED at once */
	uint64_t tombstones_expired;  /* engine.tombstone_ttl_s passed */
	uint64_t tombstones_evicted;  /* the table was full (engine.max_tombstones) */
	uint64_t tombstones_live;     /* gauge: kept now */
	uint64_t early_infos_parked;  /* ROOM_INFOs that came before their sender room */
	uint64_t early_infos_applied;
	uint64_t early_infos_expired; /* no sender room in time: ABORT sent back */
	uint64_t early_infos_evicted; /* the table was full: ABORT sent back */
	uint64_t early_infos_replaced; /* the same peer's ABORT came next: a tombstone */
	uint64_t early_infos_live;    /* gauge: parked now */
	uint64_t bad_frames;         /* malformed frames from peers */
	uint64_t ring_stalls;        /* times the poller found the ring full */
	uint64_t events;             /* events applied from the ring */
	uint64_t oldest_inflight_ns; /* age of the oldest TRANSFERRING room, 0 if none */
	/* Staging through host memory (sender regions of CUDA memory the NIC
	 * cannot register; docs/design.md "GPU memory and staging"): */
	uint64_t staged_bytes;       /* bytes copied into staging slots */
	uint64_t staged_chunks;      /* chunks that were given slots */
	uint64_t stage_waits;        /* chunks that waited for free slots */
	uint64_t stage_slots_busy;   /* gauge: slots not free (0 when all are back) */
	/* What the rooms cost the transport (0 without one), per room when
	 * divided by released: RDMA WRITEs posted, ibv_post_send calls
	 * (doorbells: writes and control frames), work completions polled, and
	 * times the completion poller went to sleep on its fds (each one a
	 * wakeup to come). */
	uint64_t wrs_posted;
	uint64_t doorbells;
	uint64_t completions;
	uint64_t poller_sleeps;
	/* Early ROOM_INFOs not parked: the parked ones held
	 * engine.max_parked_info_bytes already (ABORT sent back). Not in
	 * early_infos_parked. */
	uint64_t early_infos_refused;
	/* Connections (0 without a transport): peer connections started;
	 * ROOM_INFOs refused because their peer was in connect backoff
	 * (rdma.reconnect_backoff_ms: each such room FAILED connect_failed at
	 * once); and, gauges, connections up, and connections still holding
	 * their buffers (up, or down and not yet drained and freed). */
	uint64_t connects;
	uint64_t connect_backoffs;
	uint64_t conns_live;
	uint64_t conns_held;
	/* Liveness (docs/design.md "Liveness"): HEARTBEATs the transport's
	 * poller thread posted (one per connection per heartbeat.interval_ms,
	 * whether or not kvf_progress() is called; not in doorbells), those
	 * that completed (the peer's NIC acknowledged them: that proves its
	 * host and the link, not its process), and those due while the last
	 * one was still in flight (not sent: the peer or the path is not
	 * taking them). */
	uint64_t keepalives_sent;
	uint64_t keepalives_acked;
	uint64_t keepalives_late;
	/* Misuse refused (docs/chaos.md, "What a user may do wrong"): calls of
	 * kvf_progress / kvf_engine_wait / kvf_engine_wait_prepare made while
	 * another thread was in one of them (-EBUSY; an engine is one
	 * scheduler thread's). */
	uint64_t calls_concurrent;
	/* The token's proof (docs/wire.md 4.4), per connection: peers whose
	 * proof verified, connections refused before they carried anything
	 * (by reason), and frames received from a peer that had not proved
	 * itself and dropped unread (after its refusal). */
	uint64_t auth_ok;
	uint64_t auth_refused[KVF_STATS_AUTH];
	uint64_t auth_dropped;
	/* Connections refused because the transport held rdma.max_conns
	 * already (-ENOSPC, before anything was registered for them): on a
	 * decode its room failed connect_failed, on a prefill the peer's
	 * connect request was rejected. */
	uint64_t conns_over_max;
	/* ROOM_INFOs the prefill answered at once with an ABORT instead of
	 * serving them (docs/wire.md 7.2): their room id was bound to another
	 * connection, failed or finished, or another connection's ABORT was
	 * kept for it. Each is also counted in ignored[]. */
	uint64_t room_infos_refused;
	/* Frames, per rail and not per peer (docs/design.md, "Frames: per
	 * rail, not per peer"): the bytes registered for them (gauge: the
	 * shared receive queue's frames, the send frames, each connection's
	 * AUTH page), the shared receive queue's limit events (it ran low:
	 * grown, or at rdma.srq_depth), its completions for a queue pair no
	 * longer known (the frame reused), and control frames that waited
	 * for a free send frame (rdma.send_frames). */
	uint64_t frame_bytes;
	uint64_t srq_low;
	uint64_t rx_stray;
	uint64_t tx_frame_waits;
	/* Bytes of ROOM_INFO and ROOM_INFO_CONT frames received (the prefill):
	 * what the decodes' requests cost on the wire (docs/wire.md 5.4). */
	uint64_t info_bytes_rx;
	/* Peer connections this engine closed because no room had used them
	 * for rdma.idle_close_s (the next room opens a new one). */
	uint64_t conns_idle_closed;
};
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
