/* SPDX-License-Identifier: Apache-2.0 */
/* Connections: the table, their buffers and send queue, QP groups,
 * teardown and destruction, the state names. rdma_cm's side of a
 * connection is cm.c. */
#include "rdma/conn.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "base/clock.h"
#include "rdma/fault.h"
#include "rdma/frames.h"
#include "rdma/geom_map.h"
#include "base/hash.h"
#include "base/log.h"
#include "rdma/sched.h"
#include "rdma/verbs.h"

const char *kvf_conn_state_str(int s)
{
	static const char *const names[KVF_CONN_NUM_STATES] = {
		[KVF_CONN_NEW] = "NEW",
		[KVF_CONN_RESOLVING] = "RESOLVING",
		[KVF_CONN_CONNECTING] = "CONNECTING",
		[KVF_CONN_AUTH] = "AUTH",
		[KVF_CONN_ESTABLISHED] = "ESTABLISHED",
		[KVF_CONN_DEAD] = "DEAD",
		[KVF_CONN_DESTROYED] = "DESTROYED",
	};

	return s >= 0 && s < KVF_CONN_NUM_STATES ? names[s] : "?";
}

/* ------------------------------------------------------------ the door */

#define TO(s) (1u << (s))

/* The transitions a connection takes (conn.h, "Lifecycle"), each made by
 * one path today:
 *   NEW -> RESOLVING         kvf_conn_start (active side)
 *   NEW -> CONNECTING        on_connect_request (passive side, cm.c)
 *   RESOLVING -> CONNECTING  on_route_resolved: its QP created (cm.c)
 *   CONNECTING -> AUTH       kvf_handshake_connect (on the accept, active)
 *                            or kvf_handshake_accept (passive)
 *   AUTH -> ESTABLISHED      kvf_conn_set_established: the peer's proof held
 *   any of those -> DEAD     kvf_conn_teardown (kill_one), once; NEW too: a
 *                            member of a group that went down unstarted
 *   DEAD -> DESTROYED        kvf_conn_destroy, once drained (poller.c)
 * Nothing else: no step back, no state written again, nothing out of DEAD
 * but its destruction (a setup event after the teardown wrote CONNECTING
 * over DEAD once, 48bfd10), nothing out of DESTROYED. */
static const uint8_t conn_allowed[KVF_CONN_NUM_STATES] = {
	[KVF_CONN_NEW] = TO(KVF_CONN_RESOLVING) | TO(KVF_CONN_CONNECTING) | TO(KVF_CONN_DEAD),
	[KVF_CONN_RESOLVING] = TO(KVF_CONN_CONNECTING) | TO(KVF_CONN_DEAD),
	[KVF_CONN_CONNECTING] = TO(KVF_CONN_AUTH) | TO(KVF_CONN_DEAD),
	[KVF_CONN_AUTH] = TO(KVF_CONN_ESTABLISHED) | TO(KVF_CONN_DEAD),
	[KVF_CONN_ESTABLISHED] = TO(KVF_CONN_DEAD),
	[KVF_CONN_DEAD] = TO(KVF_CONN_DESTROYED),
	[KVF_CONN_DESTROYED] = 0,
};

bool kvf_conn_transition_allowed(int from, int to)
{
	return from >= 0 && from < KVF_CONN_NUM_STATES && to >= 0 && to < KVF_CONN_NUM_STATES &&
	       (conn_allowed[from] & TO(to));
}

bool kvf_conn_set_state(struct kvf_conn *c, enum kvf_conn_state to, const char *why)
{
	/* The poller is the only writer of state (no lock): what it reads is
	 * its own last store, or NEW as kvf_conn_new made it before the
	 * handoff. */
	int from = atomic_load_explicit(&c->state, memory_order_relaxed);

	assert(pthread_equal(pthread_self(), c->t->poller));
	if (!kvf_conn_transition_allowed(from, (int)to)) {
		kvf_err("conn", "connection %u (%s): state %s -> %s refused (%s): a bug; "
			"it stays %s", c->id, c->peer, kvf_conn_state_str(from),
			kvf_conn_state_str((int)to), why ? why : "", kvf_conn_state_str(from));
		assert(!"connection state transition refused");
		return false;
	}
	if (to == KVF_CONN_ESTABLISHED)
		/* Release pairs with the load-acquire of state in conn_flush
		 * (ctrl.c): peer_frame_max and the QP in RTS are seen with it. */
		atomic_store_explicit(&c->state, KVF_CONN_ESTABLISHED, memory_order_release);
	else
		atomic_store(&c->state, (int)to);
	return true;
}

/* ------------------------------------------------------------ table */

/* The poller's AUTH frames (handshake.h): one page of its own. */
static size_t auth_bytes(void)
{
	return 4096;
}

_Static_assert(KVF_AUTH_FRAMES * KVF_AUTH_BUF <= 4096, "AUTH frames fit their page");

static void conn_free(struct kvf_conn *c)
{
	/* Normally kvf_conn_destroy ran on the poller; at close it may not. */
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cm_id)
		rdma_destroy_id(c->cm_id);
	if (c->scq)
		kvf_sendcq_give(c->t, c->scq);
	if (c->auth_mr)
		ibv_dereg_mr(c->auth_mr);
	kvf_frameq_fini(&c->fq);
	kvf_proto_reasm_clear(&c->reasm);
	for (uint32_t i = 1; c->members && i < c->members->n; i++)
		kvf_conn_put(c->members->qp[i]);
	free(c->members);
	kvf_geom_map_free_all(c);
	free(atomic_load(&c->peer_pool));
	kvf_frames_unmap(c->auth_buf, auth_bytes());
	free(c->lost_why);
	kvf_sendq_fini(&c->sq);
	free(c);
}

void kvf_conn_ref(struct kvf_conn *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void kvf_conn_put(struct kvf_conn *c)
{
	/* acq_rel: the last holder sees every write of the others. */
	if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		conn_free(c);
}

struct kvf_conn *kvf_conn_pick(struct kvf_conn *g, uint64_t key)
{
	if (!g->members || g->members->n <= 1)
		return g;
	return g->members->qp[kvf_mix64(key) % g->members->n];
}

/* The send queue's post function (sendq.h): no lock. Only while
 * ESTABLISHED; a post racing the poller's move to DEAD lands on a QP in
 * error and flushes. The QP outlives every post: the poller destroys it,
 * and posts the send drain marker, only after the scheduler let go of the
 * connection (sched_done, sched.h). */
static int post_send(void *ctx, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct kvf_conn *c = ctx;

	if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED ||
	    atomic_load_explicit(&c->peer_left, memory_order_relaxed)) {
		*bad = wr;
		return -ENOTCONN;
	}
	c->t->st_doorbells++;
	KVF_FAULT_POST(wr); /* test builds: maybe a wrong rkey */
	return -ibv_post_send(c->qp, wr, bad);
}

/* Control frames one connection may have waiting (frameq.h): each is owed
 * for a room or an early entry of ours (a ROOM_INFO, an ABORT, an
 * ABORT_ACK), twice over to be generous; more means a peer that stopped
 * draining its receive queue while making us reply. */
static uint32_t frames_max(const struct kvf_config *cfg)
{
	uint64_t n = 2ull * ((uint64_t)cfg->max_rooms + cfg->max_tombstones) + 64;

	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static int alloc_buffers(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	const struct kvf_config *cfg = &t->cfg;
	int rc;

	c->auth_buf = kvf_frames_map(auth_bytes());
	if (!c->auth_buf)
		return -ENOMEM;
	rc = kvf_sendq_init(&c->sq, 0, cfg->sq_depth, t->max_sge, t->signal_every, post_send, c);
	if (rc)
		return rc;
	/* The biggest room there can be always fits alone: at most one WR
	 * per block per buffer, and the immediate. */
	if (c->sq.pend_max < (size_t)KVF_HELLO_MAX_BUFS * cfg->max_blocks_per_room + 1)
		c->sq.pend_max = (size_t)KVF_HELLO_MAX_BUFS * cfg->max_blocks_per_room + 1;
	/* Its completions share a CQ with other connections' (sendcq.h): the
	 * poller's four sends (cm.c) come on top of the scheduler's. */
	c->sq.sig_max = KVF_SENDCQ_PER_CONN - 4;
	kvf_frameq_init(&c->fq, frames_max(cfg));
	return kvf_verbs_reg_mr(t->pd, c->auth_buf, auth_bytes(), 0, "AUTH frames", &c->auth_mr);
}

int kvf_conn_new(struct kvf_rdma *t, bool active, const char *peer, uint32_t group,
		 struct kvf_conn **out)
{
	struct kvf_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	/* The cap first: a refused connection costs no registration. */
	rc = kvf_conn_table_reserve(t, peer);
	if (rc) {
		free(c);
		return rc;
	}
	c->t = t;
	c->active = active;
	atomic_init(&c->ready, !active);
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	atomic_init(&c->refs, 3); /* the caller's, the table's, the scheduler's */
	atomic_init(&c->state, KVF_CONN_NEW);
	c->created_ns = kvf_monotonic_ns();
	rc = alloc_buffers(c);
	if (rc)
		goto fail;
	/* Its sends complete in one of the rail's send CQs, its receives in
	 * the rail's receive CQ (frames.h). */
	c->scq = kvf_sendcq_take(t);
	if (!c->scq) {
		rc = -(errno ? errno : ENOMEM);
		goto fail;
	}
	kvf_conn_table_insert(t, c);
	/* Nobody reads them before the group is ready (active) or before the
	 * poller publishes the connection (passive). */
	c->group = group ? group : c->id;
	c->sq.id = c->id;
	kvf_sched_handoff(t, c);
	*out = c;
	return 0;
fail:
	kvf_conn_table_unreserve(t);
	conn_free(c);
	return rc;
}

/* ------------------------------------------------------- QP groups */

static int group_add_members(struct kvf_rdma *t, const char *peer, struct kvf_conn *g,
			     uint32_t want)
{
	struct kvf_conn *m;
	int rc;

	g->members = calloc(1, sizeof(*g->members) + want * sizeof(g->members->qp[0]));
	if (!g->members)
		return -ENOMEM;
	g->members->want = want;
	g->members->qp[g->members->n++] = g;
	while (g->members->n < want) {
		rc = kvf_conn_new(t, true, peer, g->id, &m);
		if (rc)
			return rc;
		g->members->qp[g->members->n++] = m; /* the group keeps our reference */
	}
	return 0;
}

int kvf_qp_group_connect(struct kvf_rdma *t, const char *peer, struct kvf_conn **lead)
{
	uint32_t want = t->cfg.qps_per_peer ? t->cfg.qps_per_peer : 1;
	struct kvf_conn *g;
	int rc = kvf_conn_new(t, true, peer, 0, &g);

	if (rc)
		return rc;
	if (want > 1)
		rc = group_add_members(t, peer, g, want);
	if (rc) {
		/* The poller takes the part that exists down whole. */
		kvf_err("conn", "peer connection %u to %s: %u of %u queue pairs: %s", g->id, peer,
			kvf_qp_group_size(g), want, strerror(-rc));
		atomic_store(&g->teardown_req, KVF_FAIL_CONNECT);
	}
	/* Release: pairs with the poller's load-acquire of ready in
	 * start_new_conns; it starts them only once the group is whole. */
	for (uint32_t i = 0; i < kvf_qp_group_size(g); i++)
		atomic_store_explicit(&kvf_qp_group_at(g, i)->ready, true, memory_order_release);
	if (want > 1 && !rc)
		kvf_info("conn", "connecting to %s (peer connection %u: %u queue pairs, "
			 "connections %u..%u)", peer, g->id, want, g->id, g->members->qp[want - 1]->id);
	else if (!rc)
		kvf_info("conn", "connecting to %s (connection %u)", peer, g->id);
	atomic_store(&t->new_conns, true);
	kvf_rdma_wake(t);
	if (rc) {
		kvf_conn_put(g);
		return rc;
	}
	*lead = g;
	return 0;
}

/* --------------------------------------------------- queue pair setup */

/* --------------------------------------------------------- teardown */

/* In the error state a drain marker completes (flushed) after everything
 * posted before it: when it is seen, the send queue is empty. The send
 * queue is the scheduler's until it lets go (sched_done): its marker goes
 * then. The receives are the shared queue's (frames.h): a QP in error
 * flushes none of them, so there is no receive marker to wait for. */
void kvf_conn_post_sq_drain_marker(struct kvf_conn *c)
{
	struct ibv_send_wr swr = {
		.wr_id = kvf_wr_id(KVF_WR_CTRL, c->id, KVF_DRAIN_SLOT),
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *sbad;

	c->sq_marker = true;
	if (!c->qp || ibv_post_send(c->qp, &swr, &sbad))
		c->sq_drained = true;
}

/* To error (synchronous: once it returns no inbound write can land) and
 * the receive drain marker. A QP that cannot be moved to error may still
 * take the peer's writes; it must be destroyed instead, which stops them
 * as surely, but the scheduler may still be posting to it: that waits for
 * sched_done (destroy_owed, poller.c). Returns false when the QP is not
 * stopped yet: the rooms on it must not be declared quiescent now. */
static bool stop_qp(struct kvf_conn *c)
{
	if (!c->qp) {
		c->sq_drained = true;
		return true;
	}
	if (!kvf_verbs_qp_to_error(c->qp)) {
		/* Never past INIT (a connect that failed): nothing was sent,
		 * so there is nothing to wait for. */
		if (!c->qp_rtr)
			c->sq_drained = true;
		return true;
	}
	kvf_warn("conn", "connection %u: qp 0x%x could not be moved to error: it is destroyed "
		 "once the scheduler lets go of it, and PEER_LOST waits for that", c->id,
		 c->qp_num);
	c->destroy_owed = true;
	return false;
}

/* One QP: stopped (stop_qp), disconnected. Returns false when it was down
 * already; *unsafe set when its QP could not be stopped. */
static bool kill_one(struct kvf_conn *c, uint16_t reason, const char *why, bool *unsafe)
{
	int st;

	/* The poller is the only writer of state: no lock. */
	st = atomic_load(&c->state);
	if (st >= KVF_CONN_DEAD)
		return false;
	kvf_conn_set_state(c, KVF_CONN_DEAD, why);
	kvf_proto_reasm_clear(&c->reasm); /* a ROOM_INFO cut short by the loss */
	if (!stop_qp(c))
		*unsafe = true;
	/* Before the push: the scheduler reads them once it took c (backoff). */
	c->dead_ns = kvf_monotonic_ns();
	c->lost_reason = reason;
	snprintf(c->down_why, sizeof(c->down_why), "%s", why ? why : "");
	kvf_sched_dead(c->t, c);
	if (c->cm_id && st >= KVF_CONN_CONNECTING)
		rdma_disconnect(c->cm_id); /* tell the peer now, not at its timeout */
	if (c->group != c->id)
		kvf_warn("conn", "connection %u (queue pair of peer connection %u, %s, qp 0x%x) "
			 "down in %s: %s", c->id, c->group, c->peer, c->qp_num,
			 kvf_conn_state_str(st), why);
	else
		kvf_warn("conn", "connection %u (%s, qp 0x%x) down in %s: %s", c->id, c->peer,
			 c->qp_num, kvf_conn_state_str(st), why);
	return true;
}

/* Poller: into its poll list (the connections that have a CQ). */
int kvf_conn_adopt(struct kvf_rdma *t, struct kvf_conn *c)
{
	struct kvf_conn **p = realloc(t->plist, (t->np + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	t->plist = p;
	kvf_conn_ref(c);
	t->plist[t->np++] = c;
	c->polled = true;
	return 0;
}

/* PEER_LOST's text, naming the rail where there are several: the room
 * that fails by it says which device to look at. */
static char *lost_text(const struct kvf_rdma *t, const char *why)
{
	size_t n;
	char *s;

	if (!why || !t->rail_name[0])
		return why ? strdup(why) : NULL;
	n = strlen(t->rail_name) + strlen(why) + 3;
	s = malloc(n);
	if (s)
		snprintf(s, n, "%s: %s", t->rail_name, why);
	return s;
}

void kvf_conn_teardown(struct kvf_conn *c, uint16_t reason, const char *why)
{
	struct kvf_event ev = {.kind = KVF_EV_PEER_LOST, .peer = c->group, .status = reason};
	struct kvf_conn *lead = c->group == c->id ? c : kvf_conn_get(c->t, c->group);
	bool unsafe = false;
	char also[200];

	if (!kill_one(c, reason, why, &unsafe))
		goto out;
	if (!lead) /* not reached: the group went down whole, with its lead */
		goto out;
	/* Every other QP of the peer connection, before the event: when the
	 * engine hears PEER_LOST nothing more can land on any of them. */
	snprintf(also, sizeof(also), "another queue pair of peer connection %u went down",
		 c->group);
	for (uint32_t i = 0; i < kvf_qp_group_size(lead); i++)
		if (kvf_qp_group_at(lead, i) != c)
			kill_one(kvf_qp_group_at(lead, i), reason, also, &unsafe);
	if (unsafe) {
		/* PEER_LOST would hand the rooms' memory back while a write may
		 * still land in it: it waits until that queue pair is destroyed
		 * (kvf_conn_destroy_owed); until then the rooms stay FAILED and
		 * unquiescent (kvf_dump shows them), which is the truth. */
		kvf_err("conn", "peer connection %u: PEER_LOST withheld: a queue pair of it "
			"could not be moved to error", c->group);
		for (uint32_t i = 0; i < kvf_qp_group_size(lead); i++) {
			struct kvf_conn *m = kvf_qp_group_at(lead, i);

			if (m->destroy_owed && !m->lost_why) {
				m->lost_reason = reason;
				m->lost_why = strdup(why ? why : "queue pair could not be stopped");
			}
		}
		goto out;
	}
	/* The why goes with the event: it becomes each room's failure text
	 * (a reject reason, the first error completion, the heartbeat miss). */
	ev.data = lost_text(c->t, why);
	atomic_fetch_add_explicit(&c->t->st_conns_lost, 1, memory_order_relaxed);
	kvf_rdma_push(c->t, &ev);
out:
	if (lead && lead != c)
		kvf_conn_put(lead);
}

void kvf_conn_fail_all(struct kvf_rdma *t, const struct ibv_cq *send_cq, const char *why)
{
	kvf_err("poller", "%s: failing %s", why,
		send_cq ? "the connections whose sends complete there" : "every connection");
	for (uint32_t i = 0; i < t->np; i++)
		if (!send_cq || (t->plist[i]->scq && t->plist[i]->scq->cq == send_cq))
			kvf_conn_teardown(t->plist[i], KVF_FAIL_DEVICE, why);
}

int kvf_conn_destroy_qp(struct kvf_conn *c)
{
	int rc;

	if (!c->qp)
		return 0;
	kvf_idtab_remove(&c->t->qps, &c->q_node);
	rc = ibv_destroy_qp(c->qp);
	if (rc) /* still the QP's: its completions still name it */
		kvf_idtab_insert(&c->t->qps, &c->q_node);
	else
		c->qp = NULL;
	return rc;
}

void kvf_conn_destroy_owed(struct kvf_conn *c)
{
	struct kvf_event ev = {.kind = KVF_EV_PEER_LOST, .peer = c->group, .status = c->lost_reason};
	int rc = kvf_conn_destroy_qp(c);

	c->destroy_owed = false;
	if (rc) {
		kvf_err("conn", "connection %u: qp 0x%x could be neither moved to error nor "
			"destroyed (%s): the peer may still write into the rooms on it, so they "
			"are not declared quiescent", c->id, c->qp_num, strerror(rc));
		return;
	}
	kvf_warn("conn", "connection %u: qp 0x%x destroyed instead of moved to error: nothing "
		 "more lands; its posted work will not flush", c->id, c->qp_num);
	c->sq_drained = true;
	if (!c->lost_why)
		return;
	/* One of its group's QPs: the others were stopped already. */
	ev.data = c->lost_why;
	c->lost_why = NULL;
	kvf_rdma_push(c->t, &ev);
}

void kvf_conn_destroy(struct kvf_conn *c)
{
	kvf_conn_set_state(c, KVF_CONN_DESTROYED, "drained");
	if (kvf_conn_destroy_qp(c)) {
		/* Forgotten as before: its completions, if any, count as strays. */
		kvf_warn("conn", "connection %u: ibv_destroy_qp(0x%x) failed", c->id, c->qp_num);
		kvf_idtab_remove(&c->t->qps, &c->q_node);
	}
	c->qp = NULL;
	if (c->cm_id)
		rdma_destroy_id(c->cm_id);
	c->cm_id = NULL;
	/* Its completions are all polled (the drain marker came last), or it
	 * never posted: the slot may serve another connection. Destroyed
	 * without that (the 2 s give-up, a QP that would not go to error),
	 * completions of its may still wait in the CQ, which a new
	 * connection's must not overrun: the slot stays taken. */
	if (c->scq && (c->marker_polled || !c->qp_rtr))
		kvf_sendcq_give(c->t, c->scq);
	else if (c->scq)
		kvf_warn("conn", "connection %u: destroyed before its send queue drained: its "
			 "slot of a shared send CQ stays taken", c->id);
	c->scq = NULL;
	kvf_dbg("conn", "connection %u destroyed", c->id);
}

void kvf_conn_set_established(struct kvf_conn *c, const char *how)
{
	uint64_t now = kvf_monotonic_ns();

	/* The poller is the only writer of state: no lock. */
	if (atomic_load(&c->state) >= KVF_CONN_ESTABLISHED) {
		kvf_live_heard(&c->live, &c->t->watch, now); /* a later sign of it */
		return;
	}
	atomic_store(&c->t->recovering, false); /* the rail carries rooms again */
	/* Once: a keepalive may be in flight after this, and the one SQ entry
	 * it has must not be given twice. */
	kvf_live_start(&c->live, &c->t->watch,
		       (uint64_t)c->t->cfg.heartbeat_interval_ms * 1000000ull, now);
	/* Stored with release (the door): peer_frame_max and the QP in RTS are
	 * seen with it by conn_flush (ctrl.c). */
	if (!kvf_conn_set_state(c, KVF_CONN_ESTABLISHED, how ? how : "established"))
		return;
	c->was_established = true;
	kvf_info("conn", "connection %u %s %s established (qp 0x%x%s%s)", c->id,
		 c->active ? "to" : "from", c->peer, c->qp_num, how ? ", " : "", how ? how : "");
	kvf_rdma_wake(c->t); /* nothing waits on it, but keeps the loop prompt */
}
