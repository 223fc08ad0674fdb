/* SPDX-License-Identifier: Apache-2.0 */
/* The seam between the room engine (scheduler thread) and a transport.
 * The real one is the ibverbs + rdma_cm transport (src/rdma/); unit tests of the
 * room engine use a fake one (tests/unit/fake_transport.h).
 *
 * Every op is called on the scheduler thread. The transport's own thread
 * (the completion poller) talks back only through the engine's event ring.
 * Ops return -errno on failure; the engine turns a failure into the room's
 * failure field, never ignores it. */
#ifndef KVF_TRANSPORT_H
#define KVF_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "event.h"

#include <kvferry/kvferry.h>

/* A region as the engine hands it to the transport (kvf_region_register,
 * checked): its id, name and layout. */
struct kvf_region_layout {
	uint32_t id;
	const char *name;
	uint32_t nbufs;
	uint32_t nitems;
	void *const *bufs;          /* nbufs base addresses */
	const uint64_t *item_size;  /* nbufs item sizes */
	const struct kvf_buf_geometry *geom; /* nbufs, or NULL: none (checked, kvf_regions_check) */
};

/* A receiver's ROOM_INFO as the engine hands it over: its lists name our
 * own region ids (what our HELLO told the peer). */
struct kvf_info_out {
	uint64_t room_id;
	uint64_t recv_handle;
	const struct kvf_index_list *lists;
	uint32_t nlists;
	const void *user;
	uint32_t user_len;
	char *why;             /* out, when not NULL: why it failed, if the */
	size_t whylen;         /* transport has more to say than the errno */
};

/* One region's writes of a sender chunk: src[i] of our region to dst[i]
 * of the receiver's region of the same name. */
struct kvf_xfer_part {
	uint32_t region;      /* our region id */
	uint32_t peer_region; /* the receiver's region id (its HELLO's) */
	uint32_t n;
	const uint32_t *src;
	const uint32_t *dst;
};

/* Rails: an engine drives up to KVF_MAX_RAILS RDMA devices (rdma.devices),
 * each with its own transport, poller thread and ring (src/rdma/rails.c).
 * A connection id carries its rail in its top bits, so the engine and the
 * rails transport route every op and event by the id alone; rail 0's ids
 * are the plain ones of a one-device engine. */
#define KVF_MAX_RAILS 8u
#define KVF_CONN_RAIL_SHIFT 28u
static inline uint32_t kvf_conn_rail(uint32_t conn) { return conn >> KVF_CONN_RAIL_SHIFT; }

/* wr_id of every work request: kind:8 | gen:32 | slot:24. */
enum kvf_wr_kind {
	KVF_WR_DATA = 1,  /* a room's RDMA WRITE (slot/gen = sender room) */
	KVF_WR_CTRL = 2,  /* a control SEND (slot = the transport's buffer index) */
	KVF_WR_RECV = 3,  /* a posted receive (slot = buffer index) */
};
#define KVF_SLOT_BITS 24u
#define KVF_SLOT_MASK ((1u << KVF_SLOT_BITS) - 1)
static inline uint64_t kvf_wr_id(enum kvf_wr_kind kind, uint32_t gen, uint32_t slot)
{
	return (uint64_t)kind << 56 | (uint64_t)gen << KVF_SLOT_BITS | (slot & KVF_SLOT_MASK);
}
static inline enum kvf_wr_kind kvf_wr_kind(uint64_t wr_id) { return (enum kvf_wr_kind)(wr_id >> 56); }
static inline uint32_t kvf_wr_gen(uint64_t wr_id) { return (uint32_t)(wr_id >> KVF_SLOT_BITS); }
static inline uint32_t kvf_wr_slot(uint64_t wr_id) { return (uint32_t)wr_id & KVF_SLOT_MASK; }

/* The immediate of a room's last write names the receiver's room in 32 bits:
 * slot:20 | gen:12 (low bits). max_rooms is capped at 1 << 20 for this. */
#define KVF_IMM_SLOT_BITS 20u
#define KVF_IMM_GEN_MASK 0xfffu
static inline uint32_t kvf_imm(uint32_t slot, uint32_t gen)
{
	return (gen & KVF_IMM_GEN_MASK) << KVF_IMM_SLOT_BITS | (slot & ((1u << KVF_IMM_SLOT_BITS) - 1));
}

/* What a transport counts, for /metrics (kvf_transport_ops.stats). Frames
 * are counted by their type byte; frame_names[type] names it, NULL for a
 * type the transport does not have. */
#define KVF_FRAME_TYPES 16
struct kvf_transport_stats {
	const char *frame_names[KVF_FRAME_TYPES];
	uint64_t frames_tx[KVF_FRAME_TYPES];
	uint64_t frames_rx[KVF_FRAME_TYPES];
	uint64_t wrs_posted;    /* RDMA WRITEs posted to the device */
	uint64_t bytes_posted;  /* their bytes */
	uint64_t completions;   /* work completions polled */
	uint64_t doorbells;     /* ibv_post_send calls (writes and control frames) */
	uint64_t poller_sleeps; /* times the completion poller slept on its fds */
	uint64_t conns_live;    /* gauge: connections not dead */
	uint64_t conns_held;    /* gauge: connections not yet freed (dead ones
	                           hold their buffers until drained) */
	uint64_t connects;      /* peer connections started */
	uint64_t connect_backoffs; /* ROOM_INFOs refused: the peer was in backoff */
	/* The poller's keepalives (src/rdma/keepalive.h), also in frames_tx: */
	uint64_t keepalives_sent;   /* HEARTBEATs posted */
	uint64_t keepalives_acked;  /* ... completed: the peer's NIC acknowledged */
	uint64_t keepalives_late;   /* due while the last was in flight: not sent */
	/* The token's exchange (src/rdma/handshake.h): peers proved,
	 * connections refused by enum kvf_auth_refusal, frames dropped unread
	 * from peers that had not proved themselves. */
	uint64_t auth_ok;
	uint64_t auth_refused[KVF_AUTH_NUM];
	uint64_t auth_dropped;
	/* Staging through host memory (src/rdma/stage.h): */
	uint64_t staged_bytes;      /* bytes copied into staging slots */
	uint64_t staged_chunks;     /* chunks that got slots */
	uint64_t stage_waits;       /* chunks that waited for slots */
	uint64_t stage_slots_busy;  /* gauge: slots not free */
	uint64_t stage_copy_errors; /* copies that failed (the connection went) */
	uint64_t conns_over_max;    /* connections refused: rdma.max_conns held */
	uint64_t frame_bytes;       /* gauge: registered for frames (frames.h) */
	uint64_t srq_low;           /* shared receive queue limit events */
	uint64_t rx_stray;          /* its completions for an unknown QP */
	uint64_t tx_frame_waits;    /* frames that waited for a send frame */
	uint64_t info_bytes_rx;     /* ROOM_INFO(_CONT) bytes received */
	uint64_t conns_idle_closed; /* peer connections closed: rdma.idle_close_s */
};

/* The counters of struct kvf_transport_stats that struct kvf_stats carries
 * under the same name (engine.c copies them with this list). */
#define KVF_TRANSPORT_STATS_COPIED(X) \
	X(staged_bytes) X(staged_chunks) X(stage_waits) X(stage_slots_busy) X(wrs_posted) \
	X(doorbells) X(completions) X(poller_sleeps) X(connects) X(connect_backoffs) \
	X(conns_live) X(conns_held) X(keepalives_sent) X(keepalives_acked) \
	X(keepalives_late) X(auth_ok) X(auth_dropped) X(conns_over_max) \
	X(frame_bytes) X(srq_low) X(rx_stray) X(tx_frame_waits) X(info_bytes_rx) \
	X(conns_idle_closed)

struct kvf_transport_ops {
	/* Register a region (id unused) and announce it in every HELLO from
	 * now on; unregister one that no room uses. */
	int (*region_register)(void *t, const struct kvf_region_layout *reg);
	void (*region_unregister)(void *t, uint32_t id);

	/* Receiver: send ROOM_INFO to peer ("host:port", connecting on first
	 * use). *conn gets the connection id (> 0) the room now depends on.
	 * -ESTALE: a list names a region registered after that connection's
	 * HELLO (the peer does not know it). */
	int (*send_room_info)(void *t, const char *peer, const struct kvf_info_out *info,
			      uint32_t *conn);

	/* Sender: post one chunk's writes, merging contiguous runs; with imm
	 * the chunk ends in a WRITE_WITH_IMM carrying *imm after every other
	 * write of the room (zero bytes when the chunk has none). Every WR has
	 * wr_id kvf_wr_id(KVF_WR_DATA, gen, slot) and goes on the one QP that
	 * wr_id picks. Work that does not fit the send queue waits in a
	 * queue; it does not fail. Returns the number of signaled WRs that
	 * will complete (>= 0), or -errno: -EPROTO the peer's region of that
	 * name has another shape or none, -ERANGE an item outside a region. */
	int (*post_chunk)(void *t, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
			  uint32_t nparts, const uint32_t *imm);

	/* Drop the room's writes still waiting in the queue (never posted).
	 * Returns how many signaled completions will now never come. */
	int (*cancel_writes)(void *t, uint32_t conn, uint64_t wr_id);

	/* ABORT for room_id to the peer's room of role to_role. */
	int (*send_abort)(void *t, uint32_t conn, uint64_t room_id,
			  uint8_t to_role, uint16_t reason);
	/* ABORT_ACK: the sender side has no posted write of room_id left. */
	int (*send_abort_ack)(void *t, uint32_t conn, uint64_t room_id);

	/* Tear the connection down (QPs to error and destroyed): nothing more
	 * can land. The transport then pushes KVF_EV_PEER_LOST for conn. */
	void (*teardown)(void *t, uint32_t conn, const char *why);

	/* Connection conn has rooms bound to it now (busy), or its last one
	 * left (not busy): what lets the transport close a connection no
	 * room uses (rdma.idle_close_s). Optional. */
	void (*conn_busy)(void *t, uint32_t conn, bool busy);

	/* Every KVF_EV_WC passes here first (send-queue credits, control
	 * buffers). Returns true when the engine must apply it to a room. */
	bool (*on_wc)(void *t, const struct kvf_event *ev);

	/* Scheduler-thread work: queued writes, heartbeats, misses. */
	int (*progress)(void *t, uint64_t now_ns);

	/* How long the scheduler may sleep (kvf_engine_wait) before progress
	 * owes work nothing pushes an event for (heartbeats, queued frames,
	 * staging copies): ns, at most max_ns. Optional (NULL: no bound). */
	uint64_t (*wait_ns)(void *t, uint64_t max_ns);

	/* Copy the transport's counters (scheduler thread). Optional.
	 * Returns 0 or -errno. */
	int (*stats)(void *t, struct kvf_transport_stats *out);

	/* Rail i's device, address and counters (struct kvf_rail_stats,
	 * scheduler thread). Returns the number of rails (>= 1), or -errno;
	 * -ERANGE when i is not a rail. Optional. */
	int (*rail_stats)(void *t, uint32_t i, struct kvf_rail_stats *out);

	/* Stop the poller thread and free everything. */
	void (*close)(void *t);
};

#endif
