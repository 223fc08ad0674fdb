/* SPDX-License-Identifier: Apache-2.0 */
/* One connection's send queue, as the scheduler thread keeps it: the RDMA
 * WRITE work requests a room's copy list becomes, the writes waiting for
 * room, and the credits (free send-queue entries) they wait for.
 *
 * It builds struct ibv_send_wr chains and hands them to a post function:
 * ibv_post_send behind the connection's lock in the transport
 * (conn.c), a recorder in tests/unit/transfer/test_sendq.c. So everything here is
 * checked without a device: the exact WRs and SGEs, the signalling, the
 * credits.
 *
 * Selective signalling: a signaled WR's completion frees its own entry and
 * those of the unsignaled WRs posted before it since the last signaled one.
 * Writes are posted in whole segments (a segment ends with a signaled WR),
 * so every posted WR is covered by a completion that will come.
 *
 * Scheduler thread only; no locks here (the post function takes the
 * connection's). */
#ifndef KVF_SENDQ_H
#define KVF_SENDQ_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/slice.h"

/* SGEs per WR at most (rdma.max_sge and the device may lower it). */
#define KVF_SQ_MAX_SGE 4u
/* Bytes in one RDMA WRITE at most. A block must fit one WR (and an SGE's
 * 32-bit length), so pool registration refuses a bigger block size. */
#define KVF_SQ_MAX_WR_BYTES (1ull << 30)

/* One buffer of a pool as the WR builder sees it: base address, block size
 * and the key (lkey of the local buffer, rkey of the peer's). */
struct kvf_sq_buf {
	uint64_t addr;
	uint64_t block_size;
	uint32_t key;
};

/* Post a chain of WRs (wr->next linked, NULL-terminated). Returns 0, or
 * -errno with *bad at the first WR not posted (the ones before it are in,
 * as ibv_post_send leaves them). */
typedef int (*kvf_sq_post_fn)(void *ctx, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

/* Writes waiting on one queue at most, by default: ~100 MB of them. The
 * waiting queue grows with the rooms handed to a connection faster than
 * its peer takes them (rooms x WRs per room); this makes the bound
 * explicit, so a runaway backlog fails rooms instead of the process. */
#define KVF_SQ_PEND_MAX (1u << 20)

/* A write waiting for send-queue room: one RDMA WRITE work request. */
#define KVF_WD_SIGNALED 1u
#define KVF_WD_IMM 2u
#define KVF_WD_HELD 4u /* staged: its copy to host memory is not done yet */
struct kvf_wdesc {
	uint64_t wr_id;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t imm;
	uint8_t flags;
	uint8_t nsge;
	uint16_t tag;  /* staged chunk it belongs to (src/rdma/stage.c), 0 = none */
	struct ibv_sge sge[KVF_SQ_MAX_SGE];
};

struct kvf_sendq {
	/* Fixed at init. */
	uint32_t id;             /* the connection's, for logs */
	uint32_t depth;          /* rdma.sq_depth: entries we may fill */
	uint32_t max_sge;
	uint32_t signal_every;   /* a signaled WR at least every this many */
	kvf_sq_post_fn post;
	void *post_ctx;

	/* The invariant, checked by every call that changes them:
	 *     credits + held + stranded == depth
	 * credits: free entries. held: entries the signaled WRs in flight
	 * will free (sig[] holds each one's share, oldest first; completions
	 * come in posting order on an RC send queue). stranded: unsignaled
	 * WRs a failed post left after the last signaled one: no completion
	 * will free them, the connection is being torn down anyway. A failed
	 * completion does not give its entries back either, for the same
	 * reason: they stay held. */
	uint32_t credits;
	uint32_t held;
	uint32_t stranded;
	uint64_t wrs_posted;    /* RDMA WRITEs handed to the QP, ever (stats) */
	uint32_t *sig;
	uint32_t sig_head, sig_tail, sig_cap;
	/* Signaled WRs in flight at most: each is a completion the send CQ
	 * must have room for, and that CQ is shared (src/rdma/sendcq.h).
	 * depth unless the owner lowers it after init. */
	uint32_t sig_max;

	/* Writes waiting for credits, FIFO: pend[pend_head..pend_tail). At
	 * most pend_max of them (KVF_SQ_PEND_MAX unless the owner sets it
	 * after init): a room that would pass it is refused whole. */
	struct kvf_wdesc *pend;
	size_t pend_head, pend_tail, pend_cap, pend_max;
	struct ibv_send_wr *wrs; /* scratch for one post, depth entries */
};

/* Set up an empty queue with depth credits. max_sge is capped at
 * KVF_SQ_MAX_SGE, signal_every at depth. Returns 0, -EINVAL (depth,
 * max_sge or signal_every 0, or no post function) or -ENOMEM. */
int kvf_sendq_init(struct kvf_sendq *sq, uint32_t id, uint32_t depth, uint32_t max_sge,
		   uint32_t signal_every, kvf_sq_post_fn post, void *post_ctx);
void kvf_sendq_fini(struct kvf_sendq *sq);

/* One region's writes: src[i] -> dst[i] in every one of its nbufs buffers
 * (local[b] to remote[b]: the same item size, checked by the caller, unless
 * slices[b] slices the item: src/transfer/slice.h). */
struct kvf_sq_part {
	const struct kvf_sq_buf *local;
	const struct kvf_sq_buf *remote;
	const struct kvf_slice *slices; /* nbufs, or NULL; .tokens 0: whole items */
	uint32_t nbufs;
	uint32_t n;
	const uint32_t *src;
	const uint32_t *dst;
};

/* Queue one chunk of a room: its parts' writes, in order. Items contiguous
 * on the remote side become one WRITE (up to KVF_SQ_MAX_WR_BYTES); within
 * it, local items that are not contiguous become further SGEs (up to
 * max_sge). A sliced buffer's item becomes, per run of tokens whose
 * destination bytes are contiguous, one WRITE gathering the tokens' source
 * pieces (up to max_sge, kvf_slice_wrs_per_page says how many WRs). Every signal_every-th WR of the chunk is signaled, and its last
 * one always; with imm that last one is a WRITE_WITH_IMM carrying *imm (a
 * chunk with nothing to copy: that one write alone, zero bytes, no SGE, at
 * imm_to). Every WR has wr_id. Nothing is posted here. Returns the number
 * of signaled WRs queued (>= 0; > 0 with imm), -ENOBUFS (its WRs would pass
 * pend_max: nothing of it is queued, the room fails, the queue goes on) or
 * -ENOMEM. */
int kvf_sendq_add_parts(struct kvf_sendq *sq, const struct kvf_sq_part *parts, uint32_t nparts,
			uint64_t wr_id, const uint32_t *imm, const struct kvf_sq_buf *imm_to);

/* A whole room in one part, ending with imm (what tests/unit/transfer/test_sendq.c
 * builds its cases from). */
static inline int kvf_sendq_add_room(struct kvf_sendq *sq, const struct kvf_sq_buf *local,
				     const struct kvf_sq_buf *remote, uint32_t nbufs,
				     uint64_t wr_id, uint32_t imm, const uint32_t *src,
				     const uint32_t *dst, uint32_t n)
{
	struct kvf_sq_part p = { local, remote, NULL, nbufs, n, src, dst };

	return kvf_sendq_add_parts(sq, &p, n ? 1 : 0, wr_id, &imm, remote);
}

/* Post the waiting writes while credits last, in whole segments. Returns 0
 * (also when the next segment does not fit yet), or the post function's
 * -errno (logged unless -ENOTCONN); WRs it took stay accounted. */
int kvf_sendq_post_writes(struct kvf_sendq *sq);

/* Post one signaled WR of its own (a control SEND), ahead of the waiting
 * writes. Returns 0, -ENOSPC without a credit (kvf_sendq_credits), or the
 * post function's -errno. */
int kvf_sendq_post_one(struct kvf_sendq *sq, struct ibv_send_wr *wr);

/* A signaled WR completed successfully: its entries are free again. */
void kvf_sendq_completed(struct kvf_sendq *sq);

/* Drop the waiting (never posted) writes of wr_id. Returns how many of
 * them were signaled: completions that will now never come. */
int kvf_sendq_cancel(struct kvf_sendq *sq, uint64_t wr_id);

/* Staging (src/rdma/stage.c): the last n waiting writes get tag and
 * KVF_WD_HELD. Posting stops at the first held write, so nothing queued
 * after it goes before it either (a room's immediate stays last). */
void kvf_sendq_hold_tail(struct kvf_sendq *sq, size_t n, uint16_t tag);

/* fn on every waiting write of tag (to rebase its staged SGEs, or clear
 * KVF_WD_HELD when the copy is done). Returns how many there were. */
size_t kvf_sendq_each_tagged(struct kvf_sendq *sq, uint16_t tag,
			     void (*fn)(void *ctx, struct kvf_wdesc *d), void *ctx);

static inline uint32_t kvf_sendq_sig_inflight(const struct kvf_sendq *sq)
{
	return (sq->sig_tail + sq->sig_cap - sq->sig_head) % sq->sig_cap;
}
/* Free entries for a signaled WR: none while sig_max of them are in
 * flight. */
static inline uint32_t kvf_sendq_credits(const struct kvf_sendq *sq)
{
	return kvf_sendq_sig_inflight(sq) < sq->sig_max ? sq->credits : 0;
}
static inline size_t kvf_sendq_waiting(const struct kvf_sendq *sq)
{
	return sq->pend_tail - sq->pend_head;
}

#endif
