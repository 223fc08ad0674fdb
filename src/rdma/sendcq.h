/* SPDX-License-Identifier: Apache-2.0 */
/* The rail's send completion queues, shared by its connections: a CQ per
 * connection cost sq_depth + 4 entries of device memory each (64 KiB a QP
 * on a ConnectX at the defaults) and one ibv_poll_cq a poller round each,
 * which at a thousand connections was most of the poller's time.
 *
 * A shared CQ must never overrun: every completion that can be outstanding
 * needs an entry. A connection may have KVF_SENDCQ_PER_CONN signaled send
 * work requests outstanding at most (the scheduler's sendq is capped at
 * that less the poller's four: drain marker, keepalive, two AUTH frames,
 * conn.c), so a CQ of E entries serves E / KVF_SENDCQ_PER_CONN
 * connections. A new CQ is made when every one is full; a CQ stays until
 * the rail closes (its slots are reused). Completions are mapped to their
 * connection by qp_num, as the shared receive CQ's are (poller.c).
 *
 * Take and give: any thread (a decode's scheduler creates connections, a
 * prefill's poller accepts them), under the set's lock. The list of CQs
 * only grows and is read by the poller without the lock. */
#ifndef KVF_SENDCQ_H
#define KVF_SENDCQ_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct kvf_rdma;

/* Signaled send WRs one connection may have outstanding, the poller's
 * four included. */
#define KVF_SENDCQ_PER_CONN 64u

struct kvf_send_cq {
	struct ibv_cq *cq;
	uint32_t users;       /* connections on it (lock) */
	uint32_t cq_unacked;  /* completion-channel events not acked (poller);
	                         first: the CQ's context points here */
};

struct kvf_send_cqs {
	pthread_mutex_t lock;
	uint32_t per_cq;               /* connections a CQ serves */
	uint32_t cap;                  /* slots in cqs */
	_Atomic uint32_t n;            /* CQs made: store-release after cqs[n] */
	struct kvf_send_cq **cqs;
};

/* Sized from the device's max_cqe. 0 or -ENOMEM. */
int kvf_sendcq_open(struct kvf_rdma *t);
/* After every QP of the rail is destroyed. */
void kvf_sendcq_close(struct kvf_rdma *t);
/* A CQ with room for one more connection, made if none has. NULL with
 * errno set (logged) when the device gives no CQ. */
struct kvf_send_cq *kvf_sendcq_take(struct kvf_rdma *t);
/* The connection's slot back (its QP is destroyed). */
void kvf_sendcq_give(struct kvf_rdma *t, struct kvf_send_cq *scq);

#endif
