/* SPDX-License-Identifier: Apache-2.0 */
/* The rail's frame memory, shared by every connection on it: nothing here
 * is per peer, so a prefill serving a thousand decode ranks pins what it
 * pins for one (docs/design.md, "Frames: per rail, not per peer").
 *
 * Receive: one shared receive queue (SRQ) per rail, and one receive CQ
 * for it. Every QP of the rail takes its receives (control frames, and on
 * the decode each write-with-immediate) from it, so their completions land
 * in that CQ, named by qp_num. The SRQ starts with rdma.rq_depth frames
 * posted; when the frames not yet consumed fall under a quarter of those
 * posted the device raises the SRQ limit event, and the poller posts
 * rdma.rq_depth more, up to rdma.srq_depth (a burst the poller has not
 * caught up with yet). The CQ holds rdma.srq_depth entries: every frame
 * completing before one is polled still fits, and a QP moved to error
 * flushes none of the SRQ's frames, so nothing else can land there.
 * Poller thread only.
 *
 * Send: rdma.send_frames frames in one registration, handed out by the
 * scheduler's pool (txpool.h). */
#ifndef KVF_FRAMES_H
#define KVF_FRAMES_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transfer/txpool.h"

struct kvf_rdma;

struct kvf_rx_chunk {
	uint8_t *buf;
	struct ibv_mr *mr;
};

struct kvf_rx_frames {
	struct ibv_srq *srq;
	struct ibv_cq *cq;            /* every QP's recv_cq on this rail */
	uint32_t cq_unacked;          /* completion-channel events not acked */
	uint32_t step;                /* frames a chunk: rdma.rq_depth */
	uint32_t max;                 /* frames at most: rdma.srq_depth, or what
	                                 the device allows */
	uint32_t nchunks;
	struct kvf_rx_chunk *chunks;  /* max / step of them, nchunks made */
	uint32_t limit_at;            /* the SRQ limit armed now, 0 none */
	atomic_bool low, dead;        /* its limit event / SRQ_ERR was read
	                                 (perhaps by another engine's poller) */
};

struct kvf_tx_frames {
	struct kvf_txpool pool;       /* scheduler only */
	uint8_t *buf;
	struct ibv_mr *mr;
};

/* Both, on an open device (t->pd, t->ctx, t->cch): the SRQ with its first
 * rdma.rq_depth frames posted and its limit armed, the receive CQ, the
 * send frames. 0 or -errno, logged. */
int kvf_frames_open(struct kvf_rdma *t);
/* After every QP of the rail is destroyed. */
void kvf_frames_close(struct kvf_rdma *t);

/* Receive frame slot's bytes. */
uint8_t *kvf_frames_rx(struct kvf_rdma *t, uint32_t slot);
/* Slot back into the SRQ. 0 or -errno (logged). */
int kvf_frames_repost(struct kvf_rdma *t, uint32_t slot);
/* Poller, on IBV_EVENT_SRQ_LIMIT_REACHED: one more chunk posted when
 * under rdma.srq_depth (else logged once per event), the limit re-armed. */
void kvf_frames_on_limit(struct kvf_rdma *t);
/* Poller, an SRQ event read from the device context: flagged on the rail
 * whose SRQ it is (this one, or another engine's of the process: every
 * engine on a device shares its context and async events), and that
 * rail's poller woken; it grows the queue, or fails every connection on
 * an SRQ error, in its housekeeping. An SRQ no engine has: logged. */
void kvf_frames_srq_event(struct kvf_rdma *t, struct ibv_srq *srq, bool fatal);
/* Frames the rail holds now (receive: posted, or being handled). */
uint32_t kvf_frames_rx_count(const struct kvf_rdma *t);

/* Pages of frame memory (mmap'd: see frames.c), and back. */
void *kvf_frames_map(size_t len);
void kvf_frames_unmap(void *p, size_t len);

/* Send frame i's bytes, and the key to send it with. */
uint8_t *kvf_frames_tx(struct kvf_rdma *t, uint32_t i);
uint32_t kvf_frames_tx_lkey(const struct kvf_rdma *t);

#endif
