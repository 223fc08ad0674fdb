/* SPDX-License-Identifier: Apache-2.0 */
/* rdma_cm, both sides of a connection: its queue pair taken through
 * INIT/RTR/RTS (rdma_cm's attributes with the config on top), the active
 * side's resolve and connect, the passive side's accept or reject, and
 * every rdma_cm event. Poller thread only. */
#include "rdma/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "transfer/auth.h"
#include "base/clock.h"
#include "base/log.h"
#include "rdma/verbs.h"

/* --------------------------------------------------- queue pair setup */

/* rdma_cm's attributes for the next state, with ours on top. The QP is
 * ours (ibv_create_qp), not rdma_cm's, so that the config applies: rdma_cm
 * would set path MTU, SL, GID index and the retry fields from the path and
 * the peer's request. */
static int move_qp(struct kvf_conn *c, enum ibv_qp_state st)
{
	const struct kvf_config *cfg = &c->t->cfg;
	struct ibv_qp_attr a;
	int mask = 0, rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	if (rdma_init_qp_attr(c->cm_id, &a, &mask)) {
		rc = -errno;
		kvf_err("conn", "connection %u: rdma_init_qp_attr for qp state %d: %s", c->id, st,
			strerror(-rc));
		return rc;
	}
	if (st == IBV_QPS_INIT) {
		/* rdma_cm has 0 here on the active side before the connect
		 * (librdmacm redoes INIT at RTR for its own QPs): the peer's
		 * writes land in our pool, and nothing else remote is used. */
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	} else if (st == IBV_QPS_RTR) {
		a.path_mtu = (enum ibv_mtu)c->mtu;
		if (cfg->service_level)
			a.ah_attr.sl = (uint8_t)cfg->service_level;
		if (cfg->gid_index >= 0)
			a.ah_attr.grh.sgid_index = (uint8_t)cfg->gid_index;
		if (cfg->traffic_class)
			a.ah_attr.grh.traffic_class = (uint8_t)cfg->traffic_class;
		/* rdma_cm asks for 0, which is the longest RNR NAK delay
		 * (655 ms): a burst that finds our receive queue empty for a
		 * moment would stall that long per retry. */
		a.min_rnr_timer = KVF_MIN_RNR_TIMER;
		mask |= IBV_QP_PATH_MTU | IBV_QP_AV | IBV_QP_MIN_RNR_TIMER;
	} else if (st == IBV_QPS_RTS) {
		a.timeout = (uint8_t)cfg->qp_timeout;
		a.retry_cnt = (uint8_t)cfg->retry_cnt;
		a.rnr_retry = (uint8_t)cfg->rnr_retry;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
	}
	rc = kvf_verbs_modify_qp(c->qp, &a, mask);
	if (!rc && st == IBV_QPS_RTR) {
		c->qp_rtr = true;
		kvf_info("conn", "connection %u: qp 0x%x RTR, path MTU %u, sl %u, sgid index %u, "
			"traffic class %u", c->id, c->qp_num, kvf_verbs_mtu_bytes(a.path_mtu),
			a.ah_attr.sl, a.ah_attr.grh.sgid_index, a.ah_attr.grh.traffic_class);
	}
	return rc;
}

/* The path MTU both sides use. rdma_cm's path value (path_mtu at RTR), never
 * above our port's active MTU, and lowered to what either side asks for
 * (rdma.mtu): peer_want is the peer's request (passive side) or the value the
 * passive side set (active side, from the accept), 0 when it sent none. */
static uint8_t pick_mtu(struct kvf_conn *c, uint8_t path, uint8_t peer_want)
{
	struct kvf_rdma *t = c->t;
	uint8_t m = path && path < t->active_mtu ? path : t->active_mtu;

	if (t->want_mtu && t->want_mtu < m)
		m = t->want_mtu;
	if (peer_want && peer_want < m)
		m = peer_want;
	if (peer_want && peer_want > m && c->active)
		kvf_warn("conn", "connection %u: the peer set path MTU %u, above ours (%u): using %u",
			 c->id, kvf_verbs_mtu_bytes(peer_want), kvf_verbs_mtu_bytes(m),
			 kvf_verbs_mtu_bytes(m));
	return m;
}

/* rdma_cm's path MTU for c (what RTR would get), or 0. */
static uint8_t cm_path_mtu(struct kvf_conn *c)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int mask;

	return rdma_init_qp_attr(c->cm_id, &a, &mask) ? 0 : (uint8_t)a.path_mtu;
}

/* Create the QP in INIT, its receives from the rail's shared receive queue
 * (frames.h), and name it in the poller's qp_num table: the shared receive
 * CQ's completions say only which QP they are for. */
static int create_qp(struct kvf_conn *c)
{
	const struct kvf_config *cfg = &c->t->cfg;
	struct ibv_qp_init_attr attr = {
		.qp_context = c,
		.send_cq = c->scq->cq,
		.recv_cq = c->t->rx.cq,
		.srq = c->t->rx.srq,
		.cap = {
			/* One entry more: the drain marker of teardown; and
			 * three more, the poller's, outside the scheduler's
			 * credits: its keepalive (keepalive.h) and the AUTH proof
			 * and refusal (handshake.h). */
			.max_send_wr = cfg->sq_depth + 4,
			.max_send_sge = c->t->max_sge,
		},
		.qp_type = IBV_QPT_RC,
	};
	int rc;

	c->qp = ibv_create_qp(c->t->pd, &attr);
	if (!c->qp) {
		rc = -(errno ? errno : ENOMEM);
		kvf_err("conn", "connection %u: ibv_create_qp(sq %u, sge %u, shared receive "
			"queue): %s", c->id, cfg->sq_depth + 4, c->t->max_sge, strerror(-rc));
		return rc;
	}
	c->qp_num = c->qp->qp_num;
	c->q_node.id = c->qp_num;
	kvf_idtab_insert(&c->t->qps, &c->q_node);
	return move_qp(c, IBV_QPS_INIT);
}

static void conn_param(struct kvf_conn *c, const uint8_t *priv, struct rdma_conn_param *p)
{
	const struct kvf_rdma *t = c->t;

	memset(p, 0, sizeof(*p));
	p->private_data = priv;
	p->private_data_len = KVF_PROTO_CM_LEN;
	/* Only RDMA WRITE and SEND are used: no read resources needed. */
	p->responder_resources = 1;
	p->initiator_depth = 1;
	/* Ours are set at RTS from the config; these are what the CM tells
	 * the peer (a peer that lets rdma_cm set up its QP uses them). */
	p->retry_count = (uint8_t)t->cfg.retry_cnt /* [0, 7] by config */;
	p->rnr_retry_count = (uint8_t)t->cfg.rnr_retry;
	p->qp_num = c->qp_num; /* the QP is not rdma_cm's: name it */
	p->srq = 1;            /* ... and it receives from a shared queue */
}

/* rdma.traffic_class for the path rdma_cm resolves (and the GRH it fills). */
static void set_id_options(struct kvf_conn *c)
{
	uint8_t tos = (uint8_t)c->t->cfg.traffic_class;

	if (tos && rdma_set_option(c->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)))
		kvf_warn("conn", "connection %u: traffic class %u not set: %s", c->id, tos,
			 strerror(errno));
}

/* ------------------------------------------------- active side (decode) */

static void fail_connect(struct kvf_conn *c, const char *step, int err)
{
	char why[160];

	snprintf(why, sizeof(why), "%s: %s", step, strerror(err));
	kvf_conn_teardown(c, KVF_FAIL_CONNECT, why);
}

static int resolve_peer(struct kvf_conn *c, struct addrinfo **ai)
{
	char host[KVF_CFG_STR + 64], *colon;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	int rc;

	snprintf(host, sizeof(host), "%s", c->peer);
	colon = strrchr(host, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	/* "[v6]:port" */
	if (host[0] == '[' && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	rc = getaddrinfo(host, colon + 1, &hints, ai);
	if (rc) {
		kvf_err("conn", "peer %s: %s", c->peer, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

/* rdma.source_addr: the local address to connect from, or NULL. */
static int resolve_source(struct kvf_conn *c, struct addrinfo **src)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE};
	int rc;

	*src = NULL;
	if (!c->t->cfg.source_addr[0])
		return 0;
	rc = getaddrinfo(c->t->cfg.source_addr, NULL, &hints, src);
	if (rc) {
		kvf_err("conn", "rdma.source_addr %s: %s", c->t->cfg.source_addr, gai_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

void kvf_conn_start(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	struct addrinfo *ai = NULL, *src = NULL;
	int rc;

	kvf_conn_set_state(c, KVF_CONN_RESOLVING, "started");
	if (rdma_create_id(t->ech, &c->cm_id, (void *)(uintptr_t)c->id, RDMA_PS_TCP)) {
		fail_connect(c, "rdma_create_id", errno);
		return;
	}
	rc = resolve_peer(c, &ai);
	if (rc) {
		fail_connect(c, "resolving the peer address", -rc);
		return;
	}
	rc = resolve_source(c, &src);
	if (rc) {
		freeaddrinfo(ai);
		fail_connect(c, "resolving rdma.source_addr", -rc);
		return;
	}
	set_id_options(c);
	if (rdma_resolve_addr(c->cm_id, src ? src->ai_addr : NULL, ai->ai_addr,
			      (int)t->cfg.connect_timeout_ms))
		fail_connect(c, "rdma_resolve_addr", errno);
	if (src)
		freeaddrinfo(src);
	freeaddrinfo(ai);
}

static void on_addr_resolved(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	char why[200];

	if (c->cm_id->verbs != t->ctx) {
		snprintf(why, sizeof(why), "the route to the peer uses device %s, the pool is on %s",
			 c->cm_id->verbs ? ibv_get_device_name(c->cm_id->verbs->device) : "?",
			 ibv_get_device_name(t->ctx->device));
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, why);
		return;
	}
	if (rdma_resolve_route(c->cm_id, (int)t->cfg.connect_timeout_ms))
		fail_connect(c, "rdma_resolve_route", errno);
}

/* Our connect or accept private data: the template with nonce, and mtu
 * (the accept's: the path MTU we set). */
static void cm_priv(const struct kvf_rdma *t, const uint8_t *nonce, uint8_t mtu,
		    uint8_t out[KVF_PROTO_CM_LEN])
{
	struct kvf_cm_hello h;
	char why[160];

	kvf_proto_decode_cm(t->cm_priv, sizeof(t->cm_priv), &h, why, sizeof(why));
	memcpy(h.nonce, nonce, sizeof(h.nonce));
	if (mtu)
		h.mtu = mtu;
	kvf_proto_encode_cm(out, &h);
}

static void on_route_resolved(struct kvf_conn *c)
{
	struct rdma_conn_param p;
	uint8_t priv[KVF_PROTO_CM_LEN];
	int rc = create_qp(c);

	if (!rc)
		rc = kvf_auth_nonce(c->hs.id.decode_nonce);
	if (rc) {
		fail_connect(c, "creating the queue pair", -rc);
		return;
	}
	kvf_conn_set_state(c, KVF_CONN_CONNECTING, "route resolved, queue pair created");
	/* rdma_connect copies the private data: it may live on the stack. */
	cm_priv(c->t, c->hs.id.decode_nonce, 0, priv);
	conn_param(c, priv, &p);
	if (rdma_connect(c->cm_id, &p))
		fail_connect(c, "rdma_connect", errno);
}

/* The peer's connect (or accept) private data: its version, its frame
 * size, the path MTU it asks for (or set), and its nonce, which our proof
 * of the token covers (handshake.h). Nothing of the token is in it. */
static int check_peer_hello(struct kvf_conn *c, const void *pd, size_t len,
			    enum kvf_rej_code *code, char *why, size_t wlen)
{
	struct kvf_cm_hello h;

	if (kvf_proto_decode_cm(pd, len, &h, why, wlen)) {
		*code = KVF_REJ_MALFORMED;
		return -EPROTO;
	}
	if (h.version != KVF_PROTO_VERSION) {
		*code = KVF_REJ_VERSION;
		snprintf(why, wlen, "peer %s speaks protocol %u, we speak %u", kvf_esc(h.engine_id),
			 h.version, KVF_PROTO_VERSION);
		return -EPROTO;
	}
	if (h.frame_max < KVF_PROTO_MIN_FRAME_MAX) {
		*code = KVF_REJ_MALFORMED;
		snprintf(why, wlen, "peer %s takes frames of %u bytes, too small for an AUTH "
			 "frame (%u)", kvf_esc(h.engine_id), h.frame_max, KVF_PROTO_MIN_FRAME_MAX);
		return -EPROTO;
	}
	c->peer_frame_max = h.frame_max;
	c->peer_mtu = h.mtu;
	memcpy(c->active ? c->hs.id.prefill_nonce : c->hs.id.decode_nonce, h.nonce,
	       sizeof(h.nonce));
	return 0;
}

/* Active side: reject the peer's accept of a connection we are setting
 * up. The peer hears the code and text (its REJECTED event), the rooms on
 * it fail now. The cm_id stays the connection's: kvf_conn_destroy destroys
 * it with the QP once the teardown has drained. */
static void reject_conn_keeps_id(struct kvf_conn *c, enum kvf_rej_code code, const char *why)
{
	uint8_t rej[KVF_PROTO_REJ_LEN];

	kvf_proto_encode_rej(rej, code, why);
	if (c->cm_id)
		rdma_reject(c->cm_id, rej, sizeof(rej));
	kvf_conn_teardown(c, KVF_FAIL_CONNECT, why);
}

/* Active side: the accept arrived. The QP is ours, not rdma_cm's, so we
 * take it to RTR and RTS and send the RTU ourselves (rdma_establish). */
static void on_connect_response(struct kvf_conn *c, const struct rdma_cm_event *ev)
{
	enum kvf_rej_code code;
	char why[200];

	if (check_peer_hello(c, ev->param.conn.private_data, ev->param.conn.private_data_len,
			     &code, why, sizeof(why))) {
		kvf_err("conn", "connection %u to %s: %s", c->id, c->peer, why);
		reject_conn_keeps_id(c, code, why);
		return;
	}
	c->mtu = pick_mtu(c, cm_path_mtu(c), c->peer_mtu);
	if (move_qp(c, IBV_QPS_RTR) || move_qp(c, IBV_QPS_RTS)) {
		snprintf(why, sizeof(why), "queue pair to RTR/RTS failed (path MTU %u)",
			 kvf_verbs_mtu_bytes((enum ibv_mtu)c->mtu));
		reject_conn_keeps_id(c, KVF_REJ_RESOURCES, why);
		return;
	}
	if (rdma_establish(c->cm_id)) {
		fail_connect(c, "rdma_establish", errno);
		return;
	}
	/* Usable once the token is proved both ways. */
	kvf_handshake_bind(c, ev->param.conn.qp_num);
	kvf_handshake_connect(c);
}

static void on_established(struct kvf_conn *c)
{
	/* Passive side (the peer's RTU): nothing to do, the connection waits
	 * for the peer's proof (handshake.h), which may have come first. The
	 * active side has no such event: rdma_cm reports none for a QP it
	 * does not own. */
	if (atomic_load(&c->state) == KVF_CONN_ESTABLISHED)
		kvf_conn_set_established(c, NULL); /* a late sign of life */
}

/* --------------------------------------------- passive side (prefill) */

static void peer_addr_str(struct rdma_cm_id *id, char *out, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[INET6_ADDRSTRLEN] = "?";
	uint16_t port = 0;

	if (sa && sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (sa && sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, len, "%s:%u", host, port);
}

/* Passive side: reject a connect request that never became a connection.
 * The id is no connection's: it is returned for the caller (the poller's
 * on_cm_events) to destroy once the event is acked. */
static struct rdma_cm_id *reject_caller_destroys_id(struct rdma_cm_id *id, const char *from,
						    enum kvf_rej_code code, const char *why)
{
	uint8_t rej[KVF_PROTO_REJ_LEN];

	kvf_proto_encode_rej(rej, code, why);
	kvf_warn("conn", "rejected connection from %s: %s (%s)", from, kvf_rej_code_str(code), why);
	rdma_reject(id, rej, sizeof(rej));
	return id; /* destroyed by the caller once the event is acked */
}

/* The accepting side's QP all the way to RTS before the accept (the peer may
 * send the moment it has our accept), and our nonce for the handshake. */
static int accept_qp_up(struct kvf_conn *c)
{
	int rc;

	c->mtu = pick_mtu(c, cm_path_mtu(c), c->peer_mtu);
	rc = create_qp(c);
	if (!rc)
		rc = move_qp(c, IBV_QPS_RTR);
	if (!rc)
		rc = move_qp(c, IBV_QPS_RTS);
	if (!rc)
		rc = kvf_auth_nonce(c->hs.id.prefill_nonce);
	return rc;
}

static struct rdma_cm_id *on_connect_request(struct kvf_rdma *t, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct kvf_conn tmp = {.t = t}, *c;
	struct rdma_conn_param p;
	uint8_t priv[KVF_PROTO_CM_LEN];
	enum kvf_rej_code code;
	char from[INET6_ADDRSTRLEN + 8], why[160];
	bool adopted;
	int rc;

	peer_addr_str(id, from, sizeof(from));
	if (atomic_load(&t->dev_dead))
		return reject_caller_destroys_id(id, from, KVF_REJ_RESOURCES, "device failed");
	if (id->verbs != t->ctx)
		return reject_caller_destroys_id(id, from, KVF_REJ_RESOURCES, "arrived on another device");
	if (check_peer_hello(&tmp, ev->param.conn.private_data, ev->param.conn.private_data_len,
			     &code, why, sizeof(why)))
		return reject_caller_destroys_id(id, from, code, why);
	rc = kvf_conn_new(t, false, from, 0, &c);
	if (rc)
		return reject_caller_destroys_id(id, from, KVF_REJ_RESOURCES, strerror(-rc));
	c->cm_id = id;
	id->context = (void *)(uintptr_t)c->id;
	c->peer_frame_max = tmp.peer_frame_max;
	c->peer_mtu = tmp.peer_mtu;
	c->hs.id = tmp.hs.id; /* the decode's nonce */
	kvf_conn_set_state(c, KVF_CONN_CONNECTING, "connect request taken");
	set_id_options(c);
	adopted = !kvf_conn_adopt(t, c);
	rc = adopted ? accept_qp_up(c) : 0;
	if (!adopted || rc) {
		kvf_conn_destroy_qp(c);
		c->qp = NULL;
		c->cm_id = NULL; /* the caller destroys the id */
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, "could not set up the queue pair");
		if (!adopted) /* housekeeping never sees it: unlink here */
			kvf_conn_unlink(c);
		kvf_conn_put(c);
		return reject_caller_destroys_id(id, from, KVF_REJ_RESOURCES, "queue pair setup");
	}
	/* Our nonce, and the path MTU we set: the active side uses the same
	 * one. From the accept on, the decode's proof is due. */
	cm_priv(t, c->hs.id.prefill_nonce, c->mtu, priv);
	kvf_handshake_bind(c, ev->param.conn.qp_num);
	kvf_handshake_accept(c);
	conn_param(c, priv, &p);
	if (rdma_accept(id, &p))
		fail_connect(c, "rdma_accept", errno);
	kvf_conn_put(c);
	return NULL;
}

/* ------------------------------------------------------- cm events */

static uint16_t cm_fail_reason(enum rdma_cm_event_type e)
{
	switch (e) {
	case RDMA_CM_EVENT_DISCONNECTED:
		return KVF_FAIL_PEER_LOST;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return KVF_FAIL_DEVICE;
	default:
		return KVF_FAIL_CONNECT;
	}
}

static void on_failure_event(struct kvf_conn *c, struct rdma_cm_event *ev)
{
	char why[448], rej[KVF_PROTO_REJ_TEXT + 32];

	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		kvf_proto_decode_rej(ev->param.conn.private_data, ev->param.conn.private_data_len,
				     rej, sizeof(rej));
		/* Not ours: the CM's own reject (status is the IB CM reason on
		 * IB and RoCE; 8 = no listener on that port). */
		snprintf(why, sizeof(why), "rejected by %s: %s (status %d)", c->peer, kvf_esc(rej),
			 ev->status);
		kvf_err("conn", "connection %u to %s %s", c->id, c->peer, why);
	} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
		snprintf(why, sizeof(why), "peer disconnected");
	} else {
		snprintf(why, sizeof(why), "%s (status %d%s%s)", rdma_event_str(ev->event),
			 ev->status, ev->status < 0 ? ": " : "",
			 ev->status < 0 ? strerror(-ev->status) : "");
	}
	if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
		atomic_store(&c->t->dev_dead, true);
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED && (atomic_load(&c->state) == KVF_CONN_ESTABLISHED ||
							 atomic_load(&c->state) == KVF_CONN_AUTH)) {
		/* The peer's DREQ can overtake what it sent before it, which
		 * travels on another queue pair and completes on our CQ a moment
		 * later: the ACK of its last write (a room whose data landed
		 * would fail as peer lost), or during the token exchange its
		 * refusal of our proof (the operator would be told "peer lost"
		 * for a mistyped token). Post nothing more, let what is on its
		 * way come in, then tear down (check_conn, poller.c). */
		c->peer_left_ns = kvf_monotonic_ns();
		atomic_store(&c->peer_left, true);
		kvf_info("conn", "connection %u: %s disconnected%s; torn down in %u ms, once what is "
			 "on its way is in", c->id, c->peer, atomic_load(&c->state) == KVF_CONN_AUTH ?
			 " during the token exchange" : "", KVF_DISCONNECT_GRACE_MS);
		return;
	}
	kvf_conn_teardown(c, cm_fail_reason(ev->event), why);
}

/* The events that take a connection's setup a step further. */
static bool setup_event(enum rdma_cm_event_type e)
{
	return e == RDMA_CM_EVENT_ADDR_RESOLVED || e == RDMA_CM_EVENT_ROUTE_RESOLVED ||
	       e == RDMA_CM_EVENT_CONNECT_RESPONSE || e == RDMA_CM_EVENT_ESTABLISHED;
}

struct rdma_cm_id *kvf_conn_cm_event(struct kvf_rdma *t, struct rdma_cm_event *ev)
{
	struct kvf_conn *c;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return on_connect_request(t, ev);
	c = kvf_conn_get(t, (uint32_t)(uintptr_t)ev->id->context);
	if (!c) {
		kvf_dbg("conn", "%s for a connection already gone", rdma_event_str(ev->event));
		return NULL;
	}
	/* A connection torn down while its setup was under way (another QP of
	 * its group went down) must not be taken further by an event of that
	 * setup: a QP created and a state written back to CONNECTING would
	 * make it DEAD twice, and the scheduler retire it twice. The state
	 * door (kvf_conn_set_state) would refuse the write, not the QP, the
	 * connect or the handshake that go with it: they are refused here. */
	if (atomic_load(&c->state) >= KVF_CONN_DEAD && setup_event(ev->event)) {
		kvf_dbg("conn", "connection %u: %s after its teardown: ignored", c->id,
			rdma_event_str(ev->event));
		kvf_conn_put(c);
		return NULL;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		on_addr_resolved(c);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		on_route_resolved(c);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		on_connect_response(c, ev);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		on_established(c);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		on_failure_event(c, ev);
		break;
	default:
		kvf_dbg("conn", "connection %u: %s", c->id, rdma_event_str(ev->event));
		break;
	}
	kvf_conn_put(c);
	return NULL;
}
