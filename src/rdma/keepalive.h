/* SPDX-License-Identifier: Apache-2.0 */
/* The poller's keepalives: a HEARTBEAT frame posted by the poller thread
 * itself on every established QP each heartbeat.interval_ms (liveness.h
 * decides when), so that a scheduler which does not call kvf_progress()
 * for a while (CUDA graph capture, a long batch, a GC pause) is not taken
 * for a dead process by its peers. docs/design.md, "Liveness".
 *
 * The send queue stays the scheduler's alone (sendq.h): the keepalive owns
 * its own of everything the scheduler accounts for, so no credit, send
 * buffer or completion of the scheduler's is ever touched:
 *  - an SQ entry: the QP is made with rdma.sq_depth + 4 (cm.c), sq_depth for
 *    the scheduler's credits, one for teardown's drain marker, one for this
 *    and two for the AUTH frames (handshake.h), the poller's too. One keepalive per QP is in flight at most (the next one waits for
 *    its completion: kvf_live_keepalive), so it never needs a credit;
 *  - a send buffer: one HEARTBEAT per transport, encoded at setup and never
 *    written again (the NIC only reads it), registered with local access;
 *  - its completion: wr_id KVF_WR_CTRL with slot KVF_KEEPALIVE_SLOT, taken
 *    by the poller (kvf_keepalive_on_wc) and never pushed to the ring, so
 *    the scheduler's credits (kvf_sendq_completed) and buffers never see
 *    it; its CQ has an entry more for it (conn.c);
 *  - the peer's receive: nothing to reserve, the wire has no credits
 *    (docs/wire.md 5.1): it takes a posted receive like any frame, and the
 *    peer's poller reposts it at once.
 * Two threads then post to one QP. ibv_post_send is thread-safe in
 * rdma-core's providers: each takes the QP's send-queue lock for a whole
 * chain (rxe_post_send, mlx5_post_send), so a keepalive goes between two of
 * the scheduler's chains, never inside one; and since each of its chains
 * ends with a signaled WR (sendq.c posts whole segments), none of its
 * unsignaled WRs waits on the keepalive's completion. The exception, a
 * provider told that one thread uses it (MLX5_SINGLE_THREADED=1: no lock,
 * and an abort when it sees two), is refused at create (verbs.h).
 *
 * Poller thread only (setup and fini: create and close). */
#ifndef KVF_KEEPALIVE_H
#define KVF_KEEPALIVE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

struct kvf_conn;
struct kvf_rdma;

/* wr_id slot of a keepalive (kind KVF_WR_CTRL, generation the connection
 * id): past every send buffer index (conn.c: 64 at most), below the drain
 * marker's. */
#define KVF_KEEPALIVE_SLOT (KVF_DRAIN_SLOT - 1)

/* The frame and its MR. 0, -ENOMEM or -errno from verbs (logged). */
int kvf_keepalive_setup(struct kvf_rdma *t);
/* After every QP is destroyed (nothing can still read the frame). */
void kvf_keepalive_fini(struct kvf_rdma *t);
/* Housekeeping: post c's keepalive if one is due and c takes frames. A post
 * that fails tears c down (its QP is broken; the reason says so). */
void kvf_keepalive_tick(struct kvf_conn *c, uint64_t now);
/* A send completion on c: true when it was a keepalive's (taken here: the
 * caller must not push it). One that failed tears c down, as any failed
 * send does. */
bool kvf_keepalive_on_wc(struct kvf_conn *c, const struct ibv_wc *wc, uint64_t now);

#endif
