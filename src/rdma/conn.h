/* SPDX-License-Identifier: Apache-2.0 */
/* One connection to a peer engine: an rdma_cm id, one RC queue pair (ours:
 * ibv_create_qp, moved through INIT/RTR/RTS here with rdma_init_qp_attr and
 * the config on top), its own send completion queue.
 *
 * Several queue pairs per peer (rdma.qps_per_peer > 1, decode side). Under
 * rdma_cm every RC QP is a connection of its own, so a peer connection is a
 * group of N struct kvf_conn, each with its own cm_id, QP and send CQ
 * (struct kvf_qp_group, held by the lead). The engine sees one id, the
 * group's: the id of its first QP (the lead).
 * - A room's frames all go on one QP, picked by its room id (kvf_conn_pick):
 *   its ROOM_INFO sequence, and any ABORT after it. The prefill side takes
 *   every accepted QP as a connection of its own: a room's writes (and the
 *   final WRITE_WITH_IMM after them, RC-ordered), its ABORT and ABORT_ACK go
 *   back on the QP its ROOM_INFO came on.
 * - HELLO and keepalives on every QP: each is checked for liveness.
 * - Losing any QP loses the peer connection: kvf_conn_teardown moves every
 *   QP of the group to error, then pushes KVF_EV_PEER_LOST for the group id,
 *   once. The prefill hears every QP disconnect and loses each.
 * A lone QP (passive side, qps_per_peer 1) is a group of one.
 *
 * Frames are the rail's, not the connection's (frames.h): its receives come
 * from the rail's shared receive queue, its sends from the rail's pool.
 *
 * Lifecycle (every transition on the poller thread, through one door,
 * kvf_conn_set_state, and its table, kvf_conn_transition_allowed):
 *   NEW -> RESOLVING -> CONNECTING -> AUTH -> ESTABLISHED -> DEAD -> DESTROYED
 * DEAD from any state before it; nothing out of DEAD but DESTROYED, nothing
 * out of DESTROYED.
 * The passive side starts at CONNECTING (a connect request being taken)
 * and is AUTH from its accept. AUTH: the QP is in RTS, the token's proofs
 * are exchanged by the poller (handshake.h); nothing else is posted or
 * taken until the peer's proof held. DEAD
 * is entered once, by kvf_conn_teardown, which moves the QP to error (nothing
 * more lands, everything posted flushes) and pushes KVF_EV_PEER_LOST; the QP,
 * id and CQ are destroyed once the scheduler has let go of the connection
 * (sched_done, sched.h) and the flush has drained. The struct is freed
 * when the last reference goes (table, poller list, the scheduler's).
 *
 * Memory order. Fields say which thread owns them; there is no lock per
 * connection. What one thread publishes to the other goes in these pairs
 * (writer's store-release --> reader's load-acquire; each site names its
 * pair, as in src/base/ring.c), and the two stacks of sched.h:
 *   ready      scheduler, kvf_qp_group_connect: the group (members, their
 *              ids) is whole --> poller, start_new_conns: starts them
 *   state      poller, kvf_conn_set_established: peer_frame_max and the QP
 *              in RTS were set before --> scheduler, conn_flush (ctrl.c):
 *              sends the frames and writes that waited
 *   peer_pool  poller, on_hello (poller.c): the layout filled in -->
 *              scheduler, op_post_writes (ops.c): builds WRs from it
 *   sched_done scheduler, retiring it (sched.c): its last touch --> poller,
 *              drained (poller.c): posts the send drain marker, then
 *              destroys the QP; the scheduler may post until sched_done,
 *              so the QP is never destroyed under a post
 *   refs       each put is acq_rel: the holder that frees sees every other
 *              holder's writes
 * Plain (seq_cst) atomics that publish nothing else: teardown_req (a
 * reason code; its store publishes teardown_why), state's other reads (a
 * snapshot: a post racing the move to DEAD lands on a QP in error and
 * flushes).
 * Liveness (live, liveness.h) is the poller's alone: it stamps what it
 * hears, judges the silence, and posts the keepalives (keepalive.h) on the
 * QP the scheduler posts to, through the provider's send-queue lock. */
#ifndef KVF_CONN_H
#define KVF_CONN_H

#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/frameq.h"
#include "rdma/handshake.h"
#include "transfer/proto.h"
#include "rdma/rdma_internal.h"
#include "transfer/sendq.h"

enum kvf_conn_state {
	KVF_CONN_NEW = 0,     /* active side: created by the scheduler, not started */
	KVF_CONN_RESOLVING,   /* active side: address and route resolution */
	KVF_CONN_CONNECTING,  /* QP exists; connect sent or request being accepted */
	KVF_CONN_AUTH,        /* QP in RTS; the token's proofs under way */
	KVF_CONN_ESTABLISHED, /* the peer proved the token: frames and writes
	                         may be posted */
	KVF_CONN_DEAD,        /* torn down; PEER_LOST pushed; draining */
	KVF_CONN_DESTROYED,   /* QP, id and CQ gone; waiting for the last ref */
	KVF_CONN_NUM_STATES
};
const char *kvf_conn_state_str(int s);
/* The table of the transitions a connection may take (conn.c; no device). */
bool kvf_conn_transition_allowed(int from, int to);

/* What the peer's HELLO told us: its regions; written once by the poller
 * before any ROOM_INFO of that peer is pushed, so the ring orders it for
 * the reader, and never changed. */
struct kvf_geom_map;

struct kvf_peer_pool {
	struct kvf_buf_geometry *geom; /* per buffer, like bufs (all zero: none);
	                                  in the same allocation, after bufs */
	uint32_t nregions;
	struct kvf_hello_region regions[KVF_PROTO_MAX_REGIONS]; /* in HELLO order */
	uint32_t first_buf[KVF_PROTO_MAX_REGIONS]; /* region i's buffers: bufs[first_buf[i]..] */
	uint32_t nbufs;
	struct kvf_sq_buf bufs[];  /* key: the buffer's rkey */
};

/* The QPs of one peer connection (rdma.qps_per_peer > 1), held by the
 * lead; a lone QP has none and is a group of one. Built by the scheduler
 * (kvf_qp_group_connect) and fixed before the members are `ready`; read by
 * both threads after that. */
struct kvf_qp_group {
	uint32_t n;                  /* members so far: all of them once ready */
	uint32_t want;               /* rdma.qps_per_peer */
	struct kvf_conn *qp[];       /* qp[0] is the lead; each other one holds a
	                                reference, dropped when the lead is freed */
};

#define KVF_DRAIN_SLOT KVF_SLOT_MASK /* wr_id slot of the drain markers */
#define KVF_DISCONNECT_GRACE_MS 200 /* a peer's disconnect to our teardown (cm.c) */
#define KVF_MIN_RNR_TIMER 12         /* RTR min_rnr_timer: 0.64 ms (IB spec table) */

struct kvf_conn {
	uint32_t id;
	uint32_t group;                /* the id the engine sees: the lead's (== id
	                                  for the lead and for a lone QP) */
	atomic_int refs;
	struct kvf_rdma *t;
	bool active;                   /* we connected (decode side) */
	struct kvf_qp_group *members;  /* lead of a group of more than one, else NULL */
	atomic_bool ready;             /* active: its group is whole, the poller
	                                  may start it (release/acquire pair) */
	bool polled;                   /* poller: in the poll list */
	char peer[KVF_CFG_STR + 64];   /* "host:port" asked for, or the remote address */

	atomic_int state;              /* enum kvf_conn_state; written by the poller
	                                  only, by kvf_conn_set_state (kvf_conn_new
	                                  inits it NEW); ESTABLISHED is a release */
	struct rdma_cm_id *cm_id;
	struct kvf_send_cq *scq;       /* the rail's CQ its sends complete in (sendcq.h):
	                                  a slot there until the QP is destroyed */
	struct ibv_qp *qp;
	uint32_t qp_num;

	/* Receive side: poller only. The frames are the rail's (frames.h):
	 * this QP takes them from the shared receive queue, and their
	 * completions name it by qp_num (q_node). */
	struct kvf_idtab_node q_node;  /* in t->qps while the QP exists */
	struct kvf_room_reasm reasm;   /* the peer's ROOM_INFO sequence in progress */
	bool sq_drained;
	bool marker_polled;            /* the drain marker's completion polled: no
	                                  other of this QP's is left in its send CQ */
	bool sq_marker;                /* the send drain marker is posted */
	bool destroy_owed;             /* to error failed: destroy the QP once the
	                                  scheduler let go, then PEER_LOST */
	char *lost_why;                /* that PEER_LOST's text, until then */
	uint64_t created_ns, dead_ns;
	uint16_t lost_reason;          /* enum kvf_fail_reason pushed with PEER_LOST */
	_Atomic(struct kvf_peer_pool *) peer_pool; /* set once (release/acquire pair) */
	struct kvf_liveness live;      /* poller: heard, and our keepalive (liveness.h) */
	struct kvf_handshake hs;       /* poller: the token's exchange (handshake.h) */
	uint32_t peer_frame_max;       /* set before ESTABLISHED is published */
	uint8_t peer_mtu;              /* enum ibv_mtu the peer asked for / set, 0 none */
	uint8_t mtu;                   /* enum ibv_mtu our QP uses (RTR) */
	bool qp_rtr;                   /* poller: our QP reached RTR (before it
	                                  nothing of the peer's can land in it) */
	atomic_bool peer_left;         /* poller: the peer disconnected; nothing new
	                                  is posted (post_send) while the completions
	                                  already on their way come in */
	uint64_t peer_left_ns;         /* poller: when; torn down after the grace */
	bool was_established;          /* poller, before the DEAD push: it was
	                                  ESTABLISHED once (connect backoff) */
	char down_why[KVF_BACKOFF_WHY]; /* poller, before the DEAD push: why it went */
	atomic_int teardown_req;       /* a fail reason the scheduler asked for, 0 none */
	char teardown_why[160];        /* the scheduler's why, written before
	                                  teardown_req is set (its seq_cst store
	                                  publishes it; the poller reads it after) */

	/* Send side: scheduler only. Its frames come from the rail's pool
	 * (txpool.h), at most KVF_TXPOOL_PER_CONN at once. The poller's AUTH
	 * frames are its own: KVF_AUTH_FRAMES x KVF_AUTH_BUF bytes, one page. */
	uint32_t tx_held;              /* frames of the pool it holds */
	uint8_t *auth_buf;
	struct ibv_mr *auth_mr;
	struct kvf_sendq sq;           /* writes, credits; posts through post_send */
	struct kvf_frameq fq;          /* control frames waiting */
	bool hello_sent;
	bool shapes_checked;           /* the peer's regions matched against ours */
	uint64_t shapes_bad_ns;        /* when they were found to differ: torn down
	                                  once our HELLO is out (ctrl.c), 0 none */
	char shapes_why[160];          /* which region, buffer and field */
	struct kvf_geom_map *gmap[KVF_MAX_REGIONS]; /* by our region id: where its
	                                  writes go (geom_map.c), made on first use */
	uint64_t hello_seq;            /* kvf_rdma.region_seq when our HELLO went:
	                                  the regions the peer knows */
	uint64_t idle_since_ns;        /* a lead: since when no room of the engine
	                                  is bound to it, 0 while some are
	                                  (op_conn_busy, ops.c) */

	/* The table's (conn_table.c), under t->lock. */
	struct kvf_idtab_node t_node;  /* by id */
	struct kvf_conn *t_prev, *t_next; /* t->live */
	struct kvf_conn *u_prev, *u_next; /* t->unstarted */
	bool t_unstarted;              /* on t->unstarted */

	/* The scheduler's own structures (sched.c), scheduler only. */
	struct kvf_idtab_node s_node;  /* by id */
	struct kvf_conn *s_peer_next;  /* by peer (group leads) */
	struct kvf_conn *s_prev, *s_next;   /* all */
	struct kvf_conn *s_pprev, *s_pnext; /* pending */
	bool s_pending, s_in_peer;
	/* The stacks of sched.h: written by the poller before the push. */
	struct kvf_conn *handoff_next, *dead_next;
	atomic_bool sched_done;        /* the scheduler let go (release/acquire) */
};

/* ------------------------------------------------ table (either thread) */

/* Allocate a connection with its buffers and CQ and put it in the table.
 * group: the lead's id for a further QP of a group, 0 for a lead or a lone
 * QP. An active one is not started before `ready` is set (scheduler: once
 * its group is whole). Returns 0 and *out holding one reference for the
 * caller (the table and the scheduler hold one each), or -ENOMEM, -ENOSPC (rdma.max_conns held), -errno
 * from verbs. */
int kvf_conn_new(struct kvf_rdma *t, bool active, const char *peer, uint32_t group,
		 struct kvf_conn **out);
/* ----------------------------------------- the table (conn_table.c) */

/* Poller: a reference to connection id, or NULL (under t->lock: setup and
 * teardown only; the scheduler has kvf_sched_get). */
struct kvf_conn *kvf_conn_get(struct kvf_rdma *t, uint32_t id);
/* Either thread, before building a connection to peer: a place in the
 * table, or -ENOSPC when rdma.max_conns are held or being built (logged
 * with the key, counted in st_conns_over_max). */
int kvf_conn_table_reserve(struct kvf_rdma *t, const char *peer);
/* The place reserved, given back (the connection could not be built). */
void kvf_conn_table_unreserve(struct kvf_rdma *t);
/* The reserved place taken: c gets its id, joins the table and the live
 * list (and the unstarted one when active). The table holds a reference
 * of c's own count (set by the caller). */
void kvf_conn_table_insert(struct kvf_rdma *t, struct kvf_conn *c);
/* Poller: up to max active connections whose group is ready, each with
 * a reference and off the unstarted list, oldest first. Only the
 * unstarted ones are looked at, never the whole table. */
uint32_t kvf_conn_table_take_ready(struct kvf_rdma *t, struct kvf_conn **out, uint32_t max);
/* Connections held, and of them those not DEAD (the stats op). */
void kvf_conn_table_count(struct kvf_rdma *t, uint64_t *held, uint64_t *live);
/* Close (the poller has stopped): the table's references put, its buckets
 * freed. */
void kvf_conn_table_close(struct kvf_rdma *t);
/* Drop the table's reference (and c from its lists). */
void kvf_conn_unlink(struct kvf_conn *c);

/* The QP of group lead g that the work keyed by key goes on (a room id for
 * frames, a wr_id for writes): always the same one for the same key. No
 * reference taken: valid while g is held. */
struct kvf_conn *kvf_conn_pick(struct kvf_conn *g, uint64_t key);
/* QPs in lead's group (1 for a lone QP), and the i-th of them. */
static inline uint32_t kvf_qp_group_size(const struct kvf_conn *lead)
{
	return lead->members ? lead->members->n : 1;
}
static inline struct kvf_conn *kvf_qp_group_at(struct kvf_conn *lead, uint32_t i)
{
	return lead->members ? lead->members->qp[i] : lead;
}
/* Scheduler: a new peer connection to peer, rdma.qps_per_peer QPs each
 * connecting on its own once the poller starts them. Returns 0 and *lead
 * (referenced), or -errno from kvf_conn_new (logged; what exists of the
 * group is torn down whole by the poller). */
int kvf_qp_group_connect(struct kvf_rdma *t, const char *peer, struct kvf_conn **lead);
void kvf_conn_ref(struct kvf_conn *c);
void kvf_conn_put(struct kvf_conn *c);

/* ------------------------------------------------------ poller thread */

/* Start an active connection: create the id, resolve the address. */
/* Poller: the one writer of c->state. A move the table refuses is a bug:
 * asserted, and in a build without asserts logged (both states, the
 * connection, why) and not made: the state stays. Returns whether it moved.
 * ESTABLISHED is stored with release (its pair: conn_flush, ctrl.c), every
 * other state seq_cst. */
bool kvf_conn_set_state(struct kvf_conn *c, enum kvf_conn_state to, const char *why);
void kvf_conn_start(struct kvf_conn *c);
/* Handle one rdma_cm event (not yet acked). Returns an id the caller must
 * destroy after acking the event (a rejected request), or NULL. */
struct rdma_cm_id *kvf_conn_cm_event(struct kvf_rdma *t, struct rdma_cm_event *ev);
/* Tear down once: QP to error (destroyed instead if that fails), drain
 * markers, disconnect, and the same for every other QP of its group; then
 * PEER_LOST for the group id with reason (enum kvf_fail_reason), unless a
 * QP could be neither moved to error nor destroyed (logged: its rooms stay
 * unquiescent). Later calls (for any QP of it) do nothing. */
void kvf_conn_teardown(struct kvf_conn *c, uint16_t reason, const char *why);
/* Poller: every connection of the rail torn down (device reason), or with
 * send_cq, those whose sends complete in it (a failed shared CQ). */
void kvf_conn_fail_all(struct kvf_rdma *t, const struct ibv_cq *send_cq, const char *why);
/* CONNECTING -> ESTABLISHED (once; later calls do nothing). The passive
 * side also calls it on the first frame received: the active side may send
 * as soon as it has our REP, before our ESTABLISHED event is read, and the
 * frames it sends (ROOM_INFO) lead straight to writes on this connection. */
void kvf_conn_set_established(struct kvf_conn *c, const char *how);
/* Poller: destroy the QP (if any) and take it out of the poller's
 * qp_num table. 0 or the positive errno of ibv_destroy_qp (the QP kept). */
int kvf_conn_destroy_qp(struct kvf_conn *c);
/* Destroy QP, id and CQ of a DEAD connection (drained or given up). */
void kvf_conn_destroy(struct kvf_conn *c);
/* Once the scheduler let go: the send queue's drain marker. */
void kvf_conn_post_sq_drain_marker(struct kvf_conn *c);
/* Once the scheduler let go: destroy the QP that could not be moved to
 * error (destroy_owed), and push the PEER_LOST that waited for it. */
void kvf_conn_destroy_owed(struct kvf_conn *c);
/* Poller: c joins the poll list (a reference for it); 0 or -ENOMEM. */
int kvf_conn_adopt(struct kvf_rdma *t, struct kvf_conn *c);

#endif
