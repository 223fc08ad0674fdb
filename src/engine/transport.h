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
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/event.h"

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

/* wr_id of every work request: kind:8 | gen:32 | slot:24. What gen and
 * slot hold depends on the kind: a room's handle for a write, but for a
 * control SEND gen is the connection id (the completion finds its
 * connection, and the send frame its owner, by it: src/rdma/ops.c). */
enum kvf_wr_kind {
	KVF_WR_DATA = 1,  /* a room's RDMA WRITE (slot/gen = sender room) */
	KVF_WR_CTRL = 2,  /* a control SEND (gen = connection id; slot = the send
	                     frame's index, or the drain marker's KVF_DRAIN_SLOT) */
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
 * type the transport does not have. The counters kvf_stats shows are
 * declared once, in KVF_STATS_FIELDS (<kvferry/stats.h>, from transport or
 * staging): the same name here, copied by kvf_transport_stats_copy. */
#define KVF_FRAME_TYPES 16
#define KVF_TS_FIELD_N_(name, from, doc) KVF_TS_FIELD_##from(uint64_t name;)
#define KVF_TS_FIELD_A_(name, len, num, names, from, doc) KVF_TS_FIELD_##from(uint64_t name[num];)
#define KVF_TS_FIELD_engine(decl)
#define KVF_TS_FIELD_transport(decl) decl
#define KVF_TS_FIELD_staging(decl)
#define KVF_TS_STAGING_N_(name, from, doc) KVF_TS_STAGING_##from(uint64_t name;)
#define KVF_TS_STAGING_A_(name, len, num, names, from, doc) KVF_TS_STAGING_##from(uint64_t name[num];)
#define KVF_TS_STAGING_engine(decl)
#define KVF_TS_STAGING_transport(decl)
#define KVF_TS_STAGING_staging(decl) decl
struct kvf_transport_stats {
	const char *frame_names[KVF_FRAME_TYPES];
	uint64_t frames_tx[KVF_FRAME_TYPES];
	uint64_t frames_rx[KVF_FRAME_TYPES];
	/* From here on every field is a uint64_t count or gauge, wrs_posted
	 * first (src/rdma/rails.c sums the rails' so; asserted below). */
	KVF_STATS_FIELDS(KVF_TS_FIELD_N_, KVF_TS_FIELD_A_)
	/* Staging through host memory (src/rdma/stage.h): */
	KVF_STATS_FIELDS(KVF_TS_STAGING_N_, KVF_TS_STAGING_A_)
	uint64_t stage_copy_errors; /* copies that failed (the connection went) */
	/* Only for /metrics: */
	uint64_t bytes_posted;      /* bytes of the RDMA WRITEs posted */
};
_Static_assert(offsetof(struct kvf_transport_stats, wrs_posted) ==
	       offsetof(struct kvf_transport_stats, frames_rx) + sizeof(uint64_t[KVF_FRAME_TYPES]) &&
	       (sizeof(struct kvf_transport_stats) - offsetof(struct kvf_transport_stats, wrs_posted)) %
	       sizeof(uint64_t) == 0, "the counts start at wrs_posted and are all uint64_t");

/* The transport's counters that kvf_stats shows, into *st. */
#define KVF_TS_COPY_N_(name, from, doc) KVF_TS_COPY_##from(st->name = ts->name;)
#define KVF_TS_COPY_A_(name, len, num, names, from, doc) \
	KVF_TS_COPY_##from(memcpy(st->name, ts->name, sizeof(ts->name));)
#define KVF_TS_COPY_engine(stmt)
#define KVF_TS_COPY_transport(stmt) stmt
#define KVF_TS_COPY_staging(stmt) stmt
static inline void kvf_transport_stats_copy(struct kvf_stats *st,
					    const struct kvf_transport_stats *ts)
{
	KVF_STATS_FIELDS(KVF_TS_COPY_N_, KVF_TS_COPY_A_)
}

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
