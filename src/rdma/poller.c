/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/poller.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvferry/kvferry.h>

#include "base/clock.h"
#include "rdma/conn.h"
#include "rdma/fault.h"
#include "rdma/frames.h"
#include "transfer/frame_events.h"
#include "rdma/handshake.h"
#include "rdma/keepalive.h"
#include "transfer/liveness.h"
#include "base/log.h"
#include "engine/names.h"
#include "rdma/verbs.h"

#define CQ_ACK_BATCH 64u
#define CM_BATCH 16
#define HOUSEKEEP_NS 1000000ull       /* liveness and sweep, every 1 ms */
#define FD_CHECK_NS 200000ull         /* cm/async/wake fds while busy */
#define DRAIN_GIVE_UP_NS 2000000000ull /* destroy a DEAD conn anyway after 2 s */
#define SLEEP_MAX_MS 100

struct poller {
	struct kvf_rdma *t;
	struct ibv_wc *wcs;
	uint32_t batch;
	uint32_t hello_max_bufs;
};

/* ------------------------------------------------------------ frames */

static void on_hello(struct kvf_conn *c, const struct kvf_frame *f)
{
	struct kvf_peer_pool *pp;
	uint32_t at = 0;

	if (atomic_load_explicit(&c->peer_pool, memory_order_relaxed)) {
		kvf_warn("poller", "connection %u: second HELLO from %s ignored", c->id, c->peer);
		return;
	}
	pp = calloc(1, sizeof(*pp) + f->hello.nbufs * (sizeof(pp->bufs[0]) + sizeof(pp->geom[0])));
	if (!pp) {
		kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, "no memory for the peer's region layout");
		return;
	}
	pp->geom = (struct kvf_buf_geometry *)(pp->bufs + f->hello.nbufs);
	pp->nregions = f->hello.nregions;
	pp->nbufs = f->hello.nbufs;
	for (uint32_t i = 0; i < pp->nregions; i++) {
		kvf_proto_hello_region(f, i, &pp->regions[i]);
		pp->first_buf[i] = at;
		for (uint32_t b = 0; b < pp->regions[i].nbufs; b++, at++) {
			struct kvf_hello_buf hb;

			kvf_proto_hello_buf(f, i, b, &hb);
			pp->bufs[at] = (struct kvf_sq_buf){.addr = hb.addr, .block_size = hb.item_size,
							   .key = hb.rkey};
			pp->geom[at] = hb.geom;
		}
	}
	/* Release pairs with the load-acquire of peer_pool in ops.c (shape
	 * checks, post_chunk); the ring push of the ROOM_INFO that follows
	 * orders it as well. */
	atomic_store_explicit(&c->peer_pool, pp, memory_order_release);
	kvf_info("poller", "connection %u: peer %s (%s): %" PRIu32 " regions, %" PRIu32
		 " buffers", c->id, kvf_esc(f->hello.engine_id), c->peer, pp->nregions, pp->nbufs);
}

static void push_event(void *t, const struct kvf_event *ev)
{
	kvf_rdma_push(t, ev);
}

/* Decoding and the events a frame makes are device-free (frame_events.c);
 * what needs the connection stays here. */
static void on_frame(struct poller *p, struct kvf_conn *c, const uint8_t *buf, uint32_t len)
{
	struct kvf_peer_pool *pp = atomic_load_explicit(&c->peer_pool, memory_order_relaxed);
	struct kvf_proto_limits lim = {
		.max_blocks = p->t->cfg.max_blocks_per_room,
		.max_bufs = p->hello_max_bufs,
		.regions = pp ? pp->regions : NULL,
		.nregions = pp ? pp->nregions : 0,
	};
	struct kvf_frame_src src = {
		.reasm = &c->reasm, .lim = &lim, .conn_id = c->id, .peer = c->group,
		.role = c->active ? KVF_RECEIVER : KVF_SENDER, .peer_name = c->peer,
		.push = push_event, .push_arg = c->t, .rx_by_type = c->t->st_frames_rx,
	};
	struct kvf_frame f;

	switch (kvf_frame_events(&src, buf, len, kvf_monotonic_ns(), &f)) {
	case KVF_FRAME_HELLO:
		on_hello(c, &f);
		break;
	case KVF_FRAME_AUTH:
		kvf_handshake_late(c, &f);
		break;
	case KVF_FRAME_FATAL:
		kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, "malformed frame naming no room");
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------- completions */

/* The connection a shared-queue completion is for: by its QP number. */
static struct kvf_conn *by_qp_num(struct kvf_rdma *t, uint32_t qp_num)
{
	struct kvf_idtab_node *n = kvf_idtab_find(&t->qps, qp_num);

	return n ? kvf_idtab_entry(n, struct kvf_conn, q_node) : NULL;
}

static void on_recv(struct poller *p, struct kvf_conn *c, const struct ibv_wc *wc,
		    uint8_t *buf)
{
	char why[160];

	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(why, sizeof(why), "receive completed with %s (vendor_err 0x%x)",
			 ibv_wc_status_str(wc->status), wc->vendor_err);
		kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, why);
		return;
	}
	/* Heard: a SEND of the peer's (a frame, a write's immediate) reached
	 * us. Its process posted it; an ACK of ours would prove only its NIC. */
	kvf_live_heard(&c->live, &p->t->watch, kvf_monotonic_ns());
	if (!c->hs.verified) {
		/* Nothing of a peer that has not proved the token is taken:
		 * only its proof (handshake.h). */
		kvf_handshake_on_recv(c, wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? NULL : buf,
				      wc->byte_len);
	} else if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		uint32_t imm = ntohl(wc->imm_data);
		struct kvf_event ev = {
			.kind = KVF_EV_DATA_DONE,
			.role = KVF_RECEIVER,
			.peer = c->group,
			.key = (imm & ((1u << KVF_IMM_SLOT_BITS) - 1)) |
			       (uint64_t)(imm >> KVF_IMM_SLOT_BITS) << 32,
			.aux = kvf_monotonic_ns(), /* the ring's wait (on_data_done) */
		};

		kvf_rdma_push(p->t, &ev);
	} else {
		uint8_t type = wc->byte_len > KVF_PROTO_TYPE_OFF ? kvf_proto_frame_type(buf) : 0;

		if (type == KVF_FR_ROOM_INFO || type == KVF_FR_ROOM_INFO_CONT)
			atomic_fetch_add_explicit(&p->t->st_info_bytes_rx, wc->byte_len,
						  memory_order_relaxed);
		/* Test builds: a fault may drop, hold, corrupt or repeat it. */
		for (int n = KVF_FAULT_RX(p->t, c->id, buf, wc->byte_len); n > 0; n--)
			on_frame(p, c, buf, wc->byte_len);
		KVF_FAULT_PASSED(p->t, c->id);
	}
}

/* One completion of the rail's shared receive queue: handed to its
 * connection, and the frame straight back into the queue, whoever it was
 * for. A QP no longer known (destroyed after its last completions were
 * polled, or never ours) is counted and its frame reused. */
static void on_shared_recv(struct poller *p, const struct ibv_wc *wc)
{
	uint32_t slot = kvf_wr_slot(wc->wr_id);
	struct kvf_conn *c = by_qp_num(p->t, wc->qp_num);

	if (c)
		on_recv(p, c, wc, kvf_frames_rx(p->t, slot));
	else
		atomic_fetch_add_explicit(&p->t->st_rx_stray, 1, memory_order_relaxed);
	kvf_frames_repost(p->t, slot); /* logged when it fails: the queue is a frame short */
}

static void on_send(struct poller *p, struct kvf_conn *c, const struct ibv_wc *wc)
{
	struct kvf_event ev = {
		.kind = KVF_EV_WC,
		.status = (uint16_t)wc->status,
		.peer = c->group,
		.key = wc->wr_id,
		.aux = (uint64_t)wc->vendor_err << 32 | wc->qp_num,
	};
	char why[200];

	if (kvf_wr_kind(wc->wr_id) == KVF_WR_CTRL && kvf_wr_slot(wc->wr_id) == KVF_DRAIN_SLOT) {
		c->sq_drained = true;
		c->marker_polled = true;
		return;
	}
	/* Ours, not the scheduler's: its credits and buffers never see it. */
	if (kvf_keepalive_on_wc(c, wc, kvf_monotonic_ns()) || kvf_handshake_on_wc(c, wc))
		return;
	kvf_rdma_push(p->t, &ev);
	if (KVF_FAULT_SEND_WC(c))
		return; /* test builds: its QP was moved to error; the flush tears it down */
	if (wc->status != IBV_WC_SUCCESS) {
		/* The WC itself fails its room (pushed first, so that reason
		 * wins); the QP is in error, so the connection is gone too. A
		 * flush on a connection not yet torn down means the QP went to
		 * error without an error completion here (an async event not
		 * read yet, the peer's QP failing): the same, or the rooms that
		 * wait on this connection would only learn it from a deadline. */
		snprintf(why, sizeof(why), "%s (vendor_err 0x%x, qp 0x%x): %s",
			 ibv_wc_status_str(wc->status), wc->vendor_err, wc->qp_num,
			 kvf_wc_status_hint(wc->status));
		kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, why);
	}
}

/* One completion of a shared send CQ, to its connection by QP number.
 * None: its QP was destroyed after its drain marker, which comes last, so
 * nothing should be left; counted (tx_stray) and ignored. */
static void on_shared_send(struct poller *p, const struct ibv_wc *wc)
{
	struct kvf_conn *c = by_qp_num(p->t, wc->qp_num);

	if (c)
		on_send(p, c, wc);
	else
		atomic_fetch_add_explicit(&p->t->st_tx_stray, 1, memory_order_relaxed);
}

/* One of the rail's send CQs: the sends of up to per_cq connections. */
static int poll_tx(struct poller *p, struct ibv_cq *cq)
{
	int n;

	if (KVF_FAULT_CQ_STALLED(kvf_monotonic_ns()))
		return 0;
	n = ibv_poll_cq(cq, (int)p->batch, p->wcs);
	if (n < 0) {
		kvf_conn_fail_all(p->t, cq, "ibv_poll_cq failed on a send CQ");
		return 0;
	}
	atomic_fetch_add_explicit(&p->t->st_completions, (uint64_t)n, memory_order_relaxed);
	for (int i = 0; i < n; i++)
		on_shared_send(p, &p->wcs[i]);
	KVF_FAULT_CQ_POLLED(n, kvf_monotonic_ns());
	return n;
}

/* The rail's receive CQ: every QP's receives. */
static int poll_rx(struct poller *p)
{
	int n;

	if (KVF_FAULT_CQ_STALLED(kvf_monotonic_ns()))
		return 0;
	n = ibv_poll_cq(p->t->rx.cq, (int)p->batch, p->wcs);
	if (n < 0) {
		kvf_conn_fail_all(p->t, NULL, "ibv_poll_cq failed on the shared receive CQ");
		return 0;
	}
	atomic_fetch_add_explicit(&p->t->st_completions, (uint64_t)n, memory_order_relaxed);
	for (int i = 0; i < n; i++)
		on_shared_recv(p, &p->wcs[i]);
	KVF_FAULT_CQ_POLLED(n, kvf_monotonic_ns());
	return n;
}

static int poll_all(struct poller *p)
{
	struct kvf_send_cqs *s = &p->t->scqs;
	uint32_t n = atomic_load_explicit(&s->n, memory_order_acquire);
	int busy = poll_rx(p);

	for (uint32_t i = 0; i < n; i++)
		busy += poll_tx(p, s->cqs[i]->cq);
	return busy;
}

/* ------------------------------------------------------- fd handlers */

/* At most CM_BATCH rdma_cm events, then back to the loop: in a connection
 * storm (a thousand decodes connecting at once) the accepts must not keep
 * the poller from the completions that carry the peers' proofs, which are
 * due within rdma.auth_timeout_ms of each accept. The channel's fd stays
 * readable while events wait, so the next round takes the rest. */
static void on_cm_events(struct kvf_rdma *t)
{
	struct rdma_cm_event *ev;

	for (int n = 0; n < CM_BATCH && !rdma_get_cm_event(t->ech, &ev); n++) {
		struct rdma_cm_id *doomed = kvf_conn_cm_event(t, ev);

		rdma_ack_cm_event(ev);
		/* After the ack: rdma_destroy_id waits for its events' acks. */
		if (doomed)
			rdma_destroy_id(doomed);
	}
}

/* Data arrived on a QP whose connection rdma_cm has not seen established
 * (the RTU is late or lost). The QP is ours, not rdma_cm's, so rdma_cm
 * learns it only from us. What it means for us is the peer's proof
 * (handshake.h), which that data is. */
static void on_comm_est(struct kvf_rdma *t, const struct ibv_async_event *ae)
{
	struct kvf_conn *c = by_qp_num(t, ae->element.qp->qp_num);

	if (c && c->cm_id)
		rdma_notify(c->cm_id, IBV_EVENT_COMM_EST);
}

/* One event, taking down only what it names: a QP's or a CQ's connection,
 * every connection for our port or the device; an event for another port
 * is counted and ignored. */
static void on_async_event(struct kvf_rdma *t, const struct ibv_async_event *ae)
{
	struct kvf_conn *c = NULL;
	char why[128];

	snprintf(why, sizeof(why), "async event %s on %s", ibv_event_type_str(ae->event_type),
		 ibv_get_device_name(t->ctx->device));
	switch (kvf_async_classify(ae, t->port)) {
	case KVF_ASYNC_QP_FATAL:
		c = by_qp_num(t, ae->element.qp->qp_num);
		break;
	case KVF_ASYNC_CQ_FATAL:
		if (ae->element.cq == t->rx.cq)
			kvf_conn_fail_all(t, NULL, why); /* every connection's receives */
		else
			kvf_conn_fail_all(t, ae->element.cq, why);
		break;
	case KVF_ASYNC_SRQ_FATAL:
	case KVF_ASYNC_SRQ_LIMIT:
		/* Ours, or another engine's of this process (one context is
		 * shared): that one's poller acts on it. */
		kvf_frames_srq_event(t, ae->element.srq, ae->event_type == IBV_EVENT_SRQ_ERR);
		break;
	case KVF_ASYNC_PORT_FATAL:
		atomic_store(&t->port_down, true); /* new rooms: another rail (rails.h) */
		kvf_conn_fail_all(t, NULL, why);
		break;
	case KVF_ASYNC_DEV_FATAL:
		atomic_store(&t->dev_dead, true);
		kvf_conn_fail_all(t, NULL, why);
		break;
	case KVF_ASYNC_OTHER_PORT:
		t->async_other_port++;
		kvf_info("poller", "%s port %d, not ours (%u): ignored (%" PRIu64 " so far)", why,
			 ae->element.port_num, t->port, t->async_other_port);
		break;
	default:
		if (ae->event_type == IBV_EVENT_COMM_EST)
			on_comm_est(t, ae);
		else if (ae->event_type == IBV_EVENT_PORT_ACTIVE && atomic_exchange(&t->port_down, false)) {
			atomic_store(&t->recovering, true);
			kvf_info("poller", "%s: the port is back, new rooms may use it", why);
		}
		else
			kvf_info("poller", "%s", why);
		break;
	}
	if (c)
		kvf_conn_teardown(c, KVF_FAIL_DEVICE, why);
}

static void on_async_events(struct kvf_rdma *t)
{
	struct ibv_async_event ae;

	while (!ibv_get_async_event(t->ctx, &ae)) {
		on_async_event(t, &ae);
		ibv_ack_async_event(&ae);
	}
}

static void on_cq_events(struct kvf_rdma *t)
{
	struct ibv_cq *cq;
	void *ctx;

	while (!ibv_get_cq_event(t->cch, &cq, &ctx)) {
		uint32_t *unacked = ctx; /* every CQ's context (frames.c, sendcq.c) */

		/* Acked in batches: each ack takes a lock in the library. */
		if (++*unacked >= CQ_ACK_BATCH) {
			ibv_ack_cq_events(cq, *unacked);
			*unacked = 0;
		}
	}
}

/* Connections the scheduler created: adopt and start them here, so every
 * rdma_cm call stays on this thread. */
static void start_new_conns(struct kvf_rdma *t)
{
	struct kvf_conn *fresh[64];
	uint32_t n;

	if (!atomic_exchange(&t->new_conns, false))
		return;
	n = kvf_conn_table_take_ready(t, fresh, 64);
	if (n == 64)
		atomic_store(&t->new_conns, true); /* more next round */
	for (uint32_t i = 0; i < n; i++) {
		if (kvf_conn_adopt(t, fresh[i])) {
			/* Not in the poll list, so housekeeping would never
			 * unlink it: do it here. */
			kvf_conn_teardown(fresh[i], KVF_FAIL_CONNECT, "out of memory");
			kvf_conn_unlink(fresh[i]);
		} else if (atomic_load(&fresh[i]->state) != KVF_CONN_NEW) {
			/* Down with its group before it started: housekeeping
			 * destroys it. */
		} else if (atomic_load(&fresh[i]->teardown_req)) {
			kvf_conn_teardown(fresh[i], (uint16_t)atomic_load(&fresh[i]->teardown_req),
					  "the peer connection could not be set up whole");
		} else if (atomic_load(&t->dev_dead))
			kvf_conn_teardown(fresh[i], KVF_FAIL_DEVICE, "the device failed");
		else
			kvf_conn_start(fresh[i]);
		kvf_conn_put(fresh[i]);
	}
}

static void on_wake(struct kvf_rdma *t)
{
	uint64_t v;

	if (read(t->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		kvf_dbg("poller", "wake read: %s", strerror(errno));
	start_new_conns(t);
}

static void handle_fds(struct poller *p, int timeout_ms)
{
	struct kvf_rdma *t = p->t;
	struct pollfd fds[4] = {
		{.fd = t->cch->fd, .events = POLLIN},
		{.fd = t->ech->fd, .events = POLLIN},
		{.fd = t->ctx->async_fd, .events = POLLIN},
		{.fd = t->wake_fd, .events = POLLIN},
	};

	if (poll(fds, 4, timeout_ms) <= 0)
		return;
	if (fds[0].revents)
		on_cq_events(t);
	/* A disconnect or a fatal event pushes PEER_LOST: push first what the
	 * CQs already hold, so a write that completed before the peer went
	 * away counts as completed, not lost. */
	for (int i = 0; i < 64 && (fds[1].revents || fds[2].revents) && poll_all(p); i++)
		;
	if (fds[1].revents)
		on_cm_events(t);
	if (fds[2].revents)
		on_async_events(t);
	if (fds[3].revents)
		on_wake(t);
}

/* ------------------------------------------------------ housekeeping */

/* now - then, 0 when then is later: a timestamp taken on another thread, or
 * after the caller's now, must not wrap into an age of 584 years. */
static uint64_t age_ns(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

static void lost(struct kvf_rdma *t, struct kvf_conn *c, uint64_t now)
{
	const struct kvf_config *cfg = &t->cfg;
	char why[320];

	kvf_live_why(why, sizeof(why), &c->live, kvf_live_silence(&c->live, &t->watch, now),
		     cfg->heartbeat_misses, cfg->heartbeat_interval_ms);
	kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, why);
}

static void check_conn(struct kvf_rdma *t, struct kvf_conn *c, uint64_t now)
{
	const struct kvf_config *cfg = &t->cfg;
	int st = atomic_load(&c->state);
	int req = atomic_load(&c->teardown_req);
	uint64_t limit = (uint64_t)cfg->heartbeat_misses * cfg->heartbeat_interval_ms * 1000000ull;
	char why[160];

	if (req && st < KVF_CONN_DEAD) {
		/* The seq_cst load of teardown_req above orders the why after
		 * the scheduler's write of it (kvf_ctrl_teardown, ctrl.c). */
		kvf_conn_teardown(c, (uint16_t)req,
				  c->teardown_why[0] ? c->teardown_why : "torn down by the engine");
	} else if (c->peer_left_ns && st < KVF_CONN_DEAD) {
		if (age_ns(now, c->peer_left_ns) < KVF_DISCONNECT_GRACE_MS * 1000000ull)
			return;
		if (st == KVF_CONN_AUTH) /* no refusal came in the grace either */
			kvf_handshake_peer_left(c);
		else
			kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, "peer disconnected");
	} else if (st == KVF_CONN_ESTABLISHED && kvf_live_lost(&c->live, &t->watch, limit, now)) {
		lost(t, c, now);
	} else if (st == KVF_CONN_AUTH) {
		kvf_handshake_tick(c, now);
	} else if (st < KVF_CONN_AUTH && cfg->connect_timeout_ms &&
		   age_ns(now, c->created_ns) > cfg->connect_timeout_ms * 1000000ull) {
		snprintf(why, sizeof(why), "not connected after %u ms (rdma.connect_timeout_ms)",
			 cfg->connect_timeout_ms);
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, why);
	}
}

/* Whether a DEAD connection can be destroyed. Never before the scheduler
 * let go of it (sched_done: it may still be posting to the QP); then the
 * send queue's drain marker goes, and both markers are waited for. */
static bool drained(struct kvf_conn *c, uint64_t now)
{
	if (atomic_load(&c->state) != KVF_CONN_DEAD)
		return false;
	/* Acquire pairs with the store-release of sched_done in retire
	 * (sched.c). */
	if (!atomic_load_explicit(&c->sched_done, memory_order_acquire))
		return false;
	if (c->destroy_owed)
		kvf_conn_destroy_owed(c);
	if (!c->sq_marker && !c->sq_drained) {
		kvf_conn_post_sq_drain_marker(c);
		c->dead_ns = now; /* the give-up below counts from here */
	}
	if (c->sq_drained)
		return true;
	if (age_ns(now, c->dead_ns) > DRAIN_GIVE_UP_NS) {
		kvf_warn("poller", "connection %u: send queue flush not drained after 2 s; "
			 "destroying it anyway", c->id);
		return true;
	}
	return false;
}

/* Its QP gone, no completion of c's can come: the send frames of the
 * rail's pool it still holds (a flush not drained) go back. The scheduler
 * owns the pool: it hears it as a completion of the drain marker, after
 * every completion of c's pushed before (txpool.h). */
static void reclaim_frames(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_event ev = {
		.kind = KVF_EV_WC,
		.status = IBV_WC_WR_FLUSH_ERR,
		.peer = c->group,
		.key = kvf_wr_id(KVF_WR_CTRL, c->id, KVF_DRAIN_SLOT),
	};

	kvf_rdma_push(t, &ev);
}

/* Each connection: its liveness (the peer's silence, our keepalive), its
 * teardown and destruction. The watch first: a late round is the poller's
 * absence, not the peers' silence (liveness.h). */
static void housekeeping(struct kvf_rdma *t, uint64_t now)
{
	kvf_presence_round(&t->watch, now);
	if (atomic_exchange(&t->rx.dead, false))
		kvf_conn_fail_all(t, NULL, "the shared receive queue failed (IBV_EVENT_SRQ_ERR)");
	if (atomic_exchange(&t->rx.low, false))
		kvf_frames_on_limit(t);
	for (uint32_t i = 0; i < t->np;) {
		struct kvf_conn *c = t->plist[i];

		check_conn(t, c, now);
		kvf_keepalive_tick(c, now);
		if (!drained(c, now)) {
			i++;
			continue;
		}
		kvf_conn_destroy(c);
		reclaim_frames(t, c);
		t->plist[i] = t->plist[--t->np];
		kvf_conn_unlink(c);
		kvf_conn_put(c);
	}
}

/* ----------------------------------------------------------- the loop */

#ifdef KVF_FAULT_INJECT
/* Test builds: frames a delay or reorder fault held whose time came go to
 * their connection if it still takes frames. Frames still held count as
 * work, so the poller does not sleep past them. */
static int release_held(struct poller *p)
{
	uint32_t conn, held, len;
	uint8_t *buf;

	while ((buf = kvf_fault_next_held(p->t, kvf_monotonic_ns(), &conn, &len, &held))) {
		for (uint32_t i = 0; i < p->t->np; i++) {
			struct kvf_conn *c = p->t->plist[i];

			if (c->id == conn && atomic_load(&c->state) < KVF_CONN_DEAD)
				on_frame(p, c, buf, len);
		}
		free(buf);
	}
	return (int)held;
}
#else
#define release_held(p) 0
#endif

/* Arm every CQ, look once more (a completion may have slipped in before
 * the arm), then sleep on the fds. */
static void sleep_until_work(struct poller *p, int timeout_ms)
{
	struct kvf_rdma *t = p->t;

	uint32_t n = atomic_load_explicit(&t->scqs.n, memory_order_acquire);

	ibv_req_notify_cq(t->rx.cq, 0);
	for (uint32_t i = 0; i < n; i++)
		ibv_req_notify_cq(t->scqs.cqs[i]->cq, 0);
	if (poll_all(p))
		return;
	atomic_fetch_add_explicit(&t->st_poller_sleeps, 1, memory_order_relaxed);
	handle_fds(p, timeout_ms);
}

/* The longest nap: a quarter of the heartbeat interval (so a keepalive is
 * late by that much at most), capped. */
static int sleep_ms(const struct kvf_config *cfg)
{
	int ms = cfg->heartbeat_interval_ms ? (int)cfg->heartbeat_interval_ms / 4 : SLEEP_MAX_MS;

	return ms < 1 ? 1 : ms > SLEEP_MAX_MS ? SLEEP_MAX_MS : ms;
}

/* The longest gap between housekeeping rounds of a poller that is there:
 * twice its longest nap, or half a heartbeat interval if more. A gap past
 * it is the poller's absence (liveness.h), so jitter of a loaded host does
 * not lengthen the time a lost peer takes to be found, while a loop held
 * up for seconds (a full ring) does not make a live one look lost. */
static uint64_t expect_ns(const struct kvf_config *cfg)
{
	uint64_t nap = 2ull * (uint64_t)sleep_ms(cfg) * 1000000ull;
	uint64_t half = (uint64_t)cfg->heartbeat_interval_ms * 500000ull;

	return nap > half ? nap : half;
}

void *kvf_poller_main(void *arg)
{
	struct poller p = {.t = arg};
	struct kvf_rdma *t = p.t;
	uint64_t idle_ns = (uint64_t)t->cfg.poll_idle_us * 1000;
	uint64_t idle_since, last_fd = 0, last_house = 0;

	p.batch = t->cfg.poll_batch ? t->cfg.poll_batch : 32;
	/* A HELLO of every region always fits frame_max (device.c): what is
	 * left of it after the region headers bounds the buffers. */
	p.hello_max_bufs = (uint32_t)((t->frame_max - kvf_proto_hello_len(KVF_PROTO_MAX_REGIONS, 0)) /
				      KVF_PROTO_HELLO_BUF_LEN);
	p.wcs = t->wcs;
	idle_since = kvf_monotonic_ns();
	kvf_presence_init(&t->watch, expect_ns(&t->cfg), idle_since);
	/* Acquire pairs with the store-release of stop in kvf_rdma_close. */
	while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
		int busy = poll_all(&p) + release_held(&p);
		uint64_t now = kvf_monotonic_ns();

		if (busy)
			idle_since = now;
		if (!busy || now - last_fd >= FD_CHECK_NS) {
			handle_fds(&p, 0);
			last_fd = now;
		}
		if (now - last_house >= HOUSEKEEP_NS) {
			/* A fresh clock: handle_fds() above may have just created
			 * or established a connection, stamped after now. */
			housekeeping(t, kvf_monotonic_ns());
			last_house = now;
		}
		if (!busy && now - idle_since >= idle_ns)
			sleep_until_work(&p, sleep_ms(&t->cfg));
	}
	/* Release pairs with the load-acquire of poller_done in kvf_rdma_close. */
	atomic_store_explicit(&t->poller_done, true, memory_order_release);
	return NULL;
}
