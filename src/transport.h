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

struct kvf_pool_layout {
	uint32_t nbufs;
	uint32_t nblocks;
	void *const *bufs;          /* nbufs base addresses */
	const uint64_t *block_size; /* nbufs block sizes */
};

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
	uint64_t conns_live;    /* gauge: connections not dead */
};

struct kvf_transport_ops {
	/* The local pool: register it and keep its layout for HELLO. */
	int (*pool_register)(void *t, const struct kvf_pool_layout *pool);

	/* Receiver: send ROOM_INFO to peer ("host:port", connecting on first
	 * use). *conn gets the connection id (> 0) the room now depends on. */
	int (*send_room_info)(void *t, const char *peer, uint64_t room_id,
			      uint64_t recv_handle, const uint32_t *blocks,
			      uint32_t n, uint32_t *conn);

	/* Sender: post the room's writes, src[i] -> dst[i] in every buffer,
	 * merging contiguous runs; the last is a WRITE_WITH_IMM carrying imm.
	 * Every WR has wr_id kvf_wr_id(KVF_WR_DATA, gen, slot). Work that does
	 * not fit the send queue waits in a queue; it does not fail. Returns
	 * the number of signaled WRs that will complete (> 0), or -errno. */
	int (*post_writes)(void *t, uint32_t conn, uint64_t wr_id, uint32_t imm,
			   const uint32_t *src, const uint32_t *dst, uint32_t n);

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

	/* Every KVF_EV_WC passes here first (send-queue credits, control
	 * buffers). Returns true when the engine must apply it to a room. */
	bool (*on_wc)(void *t, const struct kvf_event *ev);

	/* Scheduler-thread work: queued writes, heartbeats, misses. */
	int (*progress)(void *t, uint64_t now_ns);

	/* Copy the transport's counters (scheduler thread). Optional.
	 * Returns 0 or -errno. */
	int (*stats)(void *t, struct kvf_transport_stats *out);

	/* Stop the poller thread and free everything. */
	void (*close)(void *t);
};

#endif
