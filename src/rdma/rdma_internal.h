/* SPDX-License-Identifier: Apache-2.0 */
/* The ibverbs + rdma_cm transport's private header: what its files
 * (src/rdma/) share. The rest of the library sees rdma.h (the constructor)
 * and the seam (src/engine/transport.h) only.
 *
 * Threads. Ops run on the scheduler thread; the poller thread (poller.c)
 * owns the rdma_cm channel, the completion queues, the receive queues and
 * every connection's setup and teardown. The scheduler reaches connections
 * through its own structures (sched.h), fed by two lock-free stacks; the
 * one lock left, t->lock, guards the connection table, which only setup
 * and teardown touch (the scheduler only when it connects to a new peer).
 * Only the poller pushes to the ring. */
#ifndef KVF_RDMA_INTERNAL_H
#define KVF_RDMA_INTERNAL_H

#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/backoff.h"
#include "config/config.h"
#include "rdma/frames.h"
#include "base/idtab.h"
#include "transfer/liveness.h"
#include "rdma/rdma.h"
#include "rdma/sendcq.h"
#include "base/ring.h"
#include "engine/transport.h"

struct kvf_conn;
struct kvf_pool;
struct kvf_staging;

#define KVF_SCHED_PEER_BUCKETS 64u /* peer address -> group lead (sched.c) */
#define KVF_HELLO_MAX_BUFS 1024u /* region buffers at most, over every region: frames
                                    are sized to carry them (= KVF_REGION_MAX_BUFS) */

struct kvf_rdma {
	struct kvf_config cfg;
	struct kvf_ring *ring;
	uint32_t rail;                /* its index among the engine's rails (rails.h):
	                                 the top bits of every connection id */
	char rail_name[KVF_CFG_STR + 16]; /* "rail 1 (mlx5_2)", "" with one device */

	/* Device, fixed at create. */
	struct ibv_context **devs; /* rdma_get_devices: its contexts are the
	                              ones rdma_cm ids carry */
	struct ibv_context *ctx;
	uint8_t port;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch; /* shared by every connection's CQ */
	struct rdma_event_channel *ech;
	struct rdma_cm_id *listen_id;
	int wake_fd;                  /* eventfd: the scheduler wakes the poller */

	uint32_t frame_max;           /* our receive (and send) buffer size */
	struct kvf_rx_frames rx;      /* poller: the shared receive queue (frames.h) */
	struct kvf_tx_frames tx;      /* scheduler: the send frames (frames.h) */
	struct kvf_send_cqs scqs;     /* the connections' send CQs (sendcq.h) */
	uint32_t max_sge;
	uint32_t signal_every;
	uint8_t cm_priv[56];          /* our connect private data, without its
	                                 nonce: the template of each connect and
	                                 accept (which adds the MTU set) */
	uint8_t want_mtu;             /* enum ibv_mtu of rdma.mtu, 0 = not set */
	uint8_t active_mtu;           /* the port's active MTU (enum ibv_mtu) */
	uint8_t *ka_frame;            /* the keepalives' HEARTBEAT (keepalive.h):
	                                 written once at create, read by the NIC */
	struct ibv_mr *ka_mr;

	pthread_t poller;
	bool poller_started;
	/* stop: close's store-release --> the poller loop's load-acquire.
	 * poller_done: the poller's store-release as it leaves its loop -->
	 * close's load-acquire (it stops draining the ring and joins). The
	 * other flags publish nothing but themselves. */
	atomic_bool stop;
	atomic_bool poller_done;      /* the poller thread left its loop */
	atomic_bool dev_dead;         /* a device-fatal event: no new connections */
	atomic_bool port_down;        /* poller: PORT_ERR seen, no PORT_ACTIVE since:
	                                 new rooms go to another rail */
	atomic_bool recovering;       /* poller: the port came back and no connection
	                                 was established since: its next connect is
	                                 a probe (rails.c), not where rooms pile up */
	atomic_bool new_conns;        /* the scheduler added a connection to start */

	/* Connection table (conn_table.c): every connection not yet freed,
	 * by id (ids never reused while held), growing, at most
	 * rdma.max_conns. Setup and teardown only: the poller's lookups (cm
	 * events, a group's teardown), inserts from either thread, unlinks by
	 * the poller, the stats op's count. Everything in it, the lists too,
	 * only under lock: a growth never races a reader (idtab.h). */
	pthread_mutex_t lock;
	struct kvf_idtab conns;       /* of kvf_conn.t_node */
	struct kvf_conn *live;        /* every one held (t_prev, t_next) */
	struct kvf_conn *unstarted, *unstarted_tail; /* active ones the poller has
	                                 not taken yet (u_prev, u_next), oldest first */
	uint32_t next_id;
	uint32_t nconns;              /* in the table */
	uint32_t nreserved;           /* being built: counted against the cap */

	/* Poller --> scheduler, lock-free stacks (sched.h). */
	_Atomic(struct kvf_conn *) handoff;
	_Atomic(struct kvf_conn *) dead;

	/* Scheduler-thread only. */
	struct kvf_pool *regions[KVF_MAX_REGIONS]; /* by region id, NULL = free */
	struct kvf_staging *staging;  /* stage.c: set up with the first staged region */
	uint32_t nregions;
	uint64_t region_seq;          /* registrations so far: a region's seq */
	uint64_t last_scan_ns;
	uint64_t last_walk_ns;        /* the walk of every connection (ops.c) */
	struct kvf_backoff backoff;   /* connect backoff per peer (backoff.h) */
	struct kvf_sched_conns {
		struct kvf_idtab by_id;        /* of kvf_conn.s_node, growing */
		struct kvf_conn *by_peer[KVF_SCHED_PEER_BUCKETS]; /* group leads */
		struct kvf_conn *all;          /* every connection held */
		struct kvf_conn *pending;      /* those with frames or writes waiting */
		uint32_t n;
	} s;

	/* Counters of the stats op (ops.c). Scheduler thread: frames sent,
	 * bytes handed to send queues. Poller: frames received, completions
	 * (relaxed atomics: counters that publish nothing). */
	uint64_t st_frames_tx[KVF_FRAME_TYPES];
	uint64_t st_bytes;
	uint64_t st_wrs;
	uint64_t st_doorbells; /* ibv_post_send calls of the send queues */
	uint64_t st_connects;  /* peer connections started (QP groups) */
	uint64_t st_backoffs;  /* ROOM_INFOs refused: their peer was in backoff */
	uint64_t st_wr_errors; /* completions in error, flushes not counted */
	uint64_t st_idle_closed; /* peer connections closed for rdma.idle_close_s */
	_Atomic uint64_t st_frames_rx[KVF_FRAME_TYPES];
	_Atomic uint64_t st_completions;
	_Atomic uint64_t st_conns_lost; /* connections torn down (kvf_conn_teardown) */
	_Atomic uint64_t st_conns_over_max; /* refused: the table held rdma.max_conns */
	_Atomic uint64_t st_poller_sleeps; /* the poller slept on its fds */
	_Atomic uint64_t st_ka_sent;  /* keepalives posted (keepalive.c) */
	_Atomic uint64_t st_ka_acked; /* ... and completed: the peer's NIC ACKed */
	_Atomic uint64_t st_ka_late;  /* due while the last was in flight: not sent */
	/* The token's exchange (handshake.c): AUTH frames posted, peers
	 * proved, refusals by enum kvf_auth_refusal, frames dropped unread. */
	_Atomic uint64_t st_auth_tx;
	_Atomic uint64_t st_auth_ok;
	_Atomic uint64_t st_auth_refused[KVF_AUTH_NUM];
	_Atomic uint64_t st_auth_dropped;
	/* The shared receive queue (frames.c, poller.c): frames it holds,
	 * limit events, and completions for a QP no longer known (counted,
	 * the frame reposted). */
	_Atomic uint64_t st_rx_frames;
	_Atomic uint64_t st_srq_low;
	_Atomic uint64_t st_rx_stray;
	_Atomic uint64_t st_tx_stray;  /* send completions of no known QP (poller.c) */
	_Atomic uint64_t st_info_bytes_rx; /* ROOM_INFO(_CONT) frames' bytes (poller.c) */

	/* Poller-thread only: connections it polls (have a CQ), and its own
	 * presence (liveness.h: its absences are not the peers' silence). */
	struct kvf_presence watch;
	struct kvf_conn **plist;
	uint32_t np;
	struct kvf_idtab qps;         /* of kvf_conn.q_node, by qp_num: whose
	                                 receive a shared-queue completion is */
	struct ibv_wc *wcs;           /* rdma.poll_batch of them, allocated at create */
	uint64_t async_other_port;    /* async events for a port not ours, ignored */
};

/* The ops (ops.c), and the close op (device.c: the unwinding of create). */
extern const struct kvf_transport_ops kvf_rdma_ops;
void kvf_rdma_close(void *t);

void kvf_rdma_wake(struct kvf_rdma *t);
void kvf_rdma_push(struct kvf_rdma *t, const struct kvf_event *ev);

#endif
