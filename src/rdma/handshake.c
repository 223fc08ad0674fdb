/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/handshake.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "transfer/auth.h"
#include "base/clock.h"
#include "rdma/conn.h"
#include "base/log.h"
#include "engine/names.h"

#define MS 1000000ull

/* Our role and the peer's: the decode connects. */
static uint8_t our_role(const struct kvf_conn *c)
{
	return c->active ? KVF_RECEIVER : KVF_SENDER;
}

static uint8_t peer_role(const struct kvf_conn *c)
{
	return c->active ? KVF_SENDER : KVF_RECEIVER;
}

static const char *dir(const struct kvf_conn *c)
{
	return c->active ? "to" : "from";
}

void kvf_handshake_bind(struct kvf_conn *c, uint32_t peer_qpn)
{
	struct kvf_auth_id *id = &c->hs.id;
	const struct rdma_ib_addr *ib = &c->cm_id->route.addr.addr.ibaddr;
	char a[96], b[96];

	/* sgid is our end of the route, dgid the peer's, on either side. */
	memcpy(c->active ? id->decode_gid : id->prefill_gid, ib->sgid.raw, KVF_PROTO_GID_LEN);
	memcpy(c->active ? id->prefill_gid : id->decode_gid, ib->dgid.raw, KVF_PROTO_GID_LEN);
	id->decode_qpn = c->active ? c->qp_num : peer_qpn;
	id->prefill_qpn = c->active ? peer_qpn : c->qp_num;
	kvf_auth_side_str(id, KVF_RECEIVER, a, sizeof(a));
	kvf_auth_side_str(id, KVF_SENDER, b, sizeof(b));
	kvf_dbg("conn", "connection %u: identity decode %s, prefill %s", c->id, a, b);
}

/* One AUTH frame into its own buffer (the connection's page), posted by
 * the poller on its own SQ entry. 0 or -errno. */
static int post_auth(struct kvf_conn *c, uint32_t slot, const uint8_t *frame, int len)
{
	uint32_t k = slot == KVF_AUTH_PROOF_SLOT ? 0 : 1;
	uint8_t *buf = c->auth_buf + k * KVF_AUTH_BUF;
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)buf, .length = (uint32_t)len,
			      .lkey = c->auth_mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = kvf_wr_id(KVF_WR_CTRL, c->id, slot),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	memcpy(buf, frame, (size_t)len);
	atomic_fetch_add_explicit(&c->t->st_auth_tx, 1, memory_order_relaxed);
	return -ibv_post_send(c->qp, &wr, &bad);
}

static int post_proof(struct kvf_conn *c)
{
	uint8_t f[KVF_PROTO_AUTH_LEN];
	int len = kvf_auth_prove(f, sizeof(f), our_role(c), &c->hs.id, c->t->cfg.auth_token);

	return len < 0 ? len : post_auth(c, KVF_AUTH_PROOF_SLOT, f, len);
}

static void count_refusal(struct kvf_conn *c, unsigned code)
{
	atomic_fetch_add_explicit(&c->t->st_auth_refused[code], 1, memory_order_relaxed);
}

/* We refuse the peer: counted, logged with why, our refusal posted (a
 * code and our view, no MAC), the connection down once it is sent. */
static void refuse(struct kvf_conn *c, unsigned code, const char *why)
{
	uint8_t f[KVF_PROTO_AUTH_LEN];
	int len = kvf_auth_refuse(f, sizeof(f), our_role(c), code, &c->hs.id);

	count_refusal(c, code);
	snprintf(c->hs.why, sizeof(c->hs.why), "refused the peer: %s: %s",
		 kvf_auth_refusal_str((enum kvf_auth_refusal)code), why);
	kvf_warn("conn", "refused connection %u %s %s: %s: %s", c->id, dir(c), c->peer,
		 kvf_auth_refusal_str((enum kvf_auth_refusal)code), why);
	c->hs.refused_ns = kvf_monotonic_ns();
	if (len < 0 || post_auth(c, KVF_AUTH_REFUSAL_SLOT, f, len))
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
}

/* The peer refused our proof: nothing to answer, the connection goes. */
static void refused_by_peer(struct kvf_conn *c, const struct kvf_frame *f, const char *why)
{
	char theirs[96], ours[96];

	kvf_auth_side_str(&f->auth.id, our_role(c), theirs, sizeof(theirs));
	kvf_auth_side_str(&c->hs.id, our_role(c), ours, sizeof(ours));
	count_refusal(c, KVF_AUTH_PEER_REFUSED);
	snprintf(c->hs.why, sizeof(c->hs.why), "rejected by %s: %s", c->peer,
		 kvf_auth_refusal_str((enum kvf_auth_refusal)f->auth.status));
	kvf_warn("conn", "connection %u %s %s rejected by %s: %s (%s; it saw us as %s, we are %s)",
		 c->id, dir(c), c->peer, c->peer,
		 kvf_auth_refusal_str((enum kvf_auth_refusal)f->auth.status), why, theirs, ours);
	c->hs.refused_ns = kvf_monotonic_ns();
	kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
}

void kvf_handshake_peer_left(struct kvf_conn *c)
{
	if (c->active) {
		/* We proved first; a peer that closes without its proof or a
		 * refusal frame refused ours, as far as anyone can tell. */
		count_refusal(c, KVF_AUTH_PEER_REFUSED);
		snprintf(c->hs.why, sizeof(c->hs.why), "rejected by %.64s: it closed the connection "
			 "during the token exchange without its proof (it refused ours: "
			 "rdma.auth_token differs, the usual cause)", c->peer);
	} else {
		snprintf(c->hs.why, sizeof(c->hs.why), "the peer closed the connection during the "
			 "token exchange before proving itself");
	}
	kvf_warn("conn", "connection %u %s %s: %s", c->id, dir(c), c->peer, c->hs.why);
	c->hs.refused_ns = kvf_monotonic_ns();
	kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
}

void kvf_handshake_connect(struct kvf_conn *c)
{
	int rc;

	c->hs.start_ns = kvf_monotonic_ns();
	kvf_conn_set_state(c, KVF_CONN_AUTH, "the peer accepted: we prove first");
	/* The connecting side proves first (auth.h: why). */
	rc = post_proof(c);
	if (rc) {
		snprintf(c->hs.why, sizeof(c->hs.why), "our proof could not be posted: %s",
			 strerror(-rc));
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
	}
}

void kvf_handshake_accept(struct kvf_conn *c)
{
	c->hs.start_ns = kvf_monotonic_ns();
	kvf_conn_set_state(c, KVF_CONN_AUTH, "we accepted: the peer's proof is due");
}

/* The peer's proof held: the prefill answers with its own (before
 * ESTABLISHED, so it precedes our HELLO on the send queue), then either
 * side takes the connection into use. */
static void proved(struct kvf_conn *c)
{
	int rc = c->active ? 0 : post_proof(c);

	if (rc) {
		snprintf(c->hs.why, sizeof(c->hs.why), "our proof could not be posted: %s",
			 strerror(-rc));
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
		return;
	}
	c->hs.verified = true;
	atomic_fetch_add_explicit(&c->t->st_auth_ok, 1, memory_order_relaxed);
	kvf_conn_set_established(c, "the peer proved the token");
}

/* The header alone, to tell a frame of another type from a broken AUTH
 * frame: byte 6 is the type (proto.h). */
static bool is_auth(const uint8_t *buf, uint32_t len)
{
	return len > 6 && buf[6] == KVF_FR_AUTH;
}

void kvf_handshake_on_recv(struct kvf_conn *c, const uint8_t *buf, uint32_t len)
{
	const struct kvf_proto_limits lim = {0};
	struct kvf_frame f;
	char why[320];
	int rc;

	if (c->hs.refused_ns || atomic_load(&c->state) != KVF_CONN_AUTH) {
		/* Refused, or down: read no further. */
		atomic_fetch_add_explicit(&c->t->st_auth_dropped, 1, memory_order_relaxed);
		return;
	}
	if (!buf || !is_auth(buf, len)) {
		snprintf(why, sizeof(why), "%s before its proof", !buf ? "a write with immediate" :
			 len > 6 ? kvf_frame_type_str(buf[6]) : "a short frame");
		refuse(c, KVF_AUTH_EARLY, why);
		return;
	}
	if (kvf_proto_decode(buf, len, &lim, &f, NULL, why, sizeof(why))) {
		refuse(c, KVF_AUTH_MALFORMED, why);
		return;
	}
	atomic_fetch_add_explicit(&c->t->st_frames_rx[KVF_FR_AUTH], 1, memory_order_relaxed);
	rc = kvf_auth_check(&f, peer_role(c), &c->hs.id, c->t->cfg.auth_token, why, sizeof(why));
	if (rc == -ECONNREFUSED)
		refused_by_peer(c, &f, "its check of our proof");
	else if (rc > 0)
		refuse(c, (unsigned)rc, why);
	else if (rc < 0)
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, "the proof could not be checked (libcrypto)");
	else
		proved(c);
}

void kvf_handshake_late(struct kvf_conn *c, const struct kvf_frame *f)
{
	if (f->auth.status != KVF_AUTH_PROOF) {
		/* The decode refusing the prefill's proof, which the prefill
		 * took its own connection into use after. */
		refused_by_peer(c, f, "after our proof");
		return;
	}
	atomic_fetch_add_explicit(&c->t->st_auth_dropped, 1, memory_order_relaxed);
	kvf_warn("conn", "connection %u %s %s: a second proof, ignored", c->id, dir(c), c->peer);
}

bool kvf_handshake_on_wc(struct kvf_conn *c, const struct ibv_wc *wc)
{
	uint32_t slot = kvf_wr_slot(wc->wr_id);
	char why[200];

	if (kvf_wr_kind(wc->wr_id) != KVF_WR_CTRL ||
	    (slot != KVF_AUTH_PROOF_SLOT && slot != KVF_AUTH_REFUSAL_SLOT))
		return false;
	if (slot == KVF_AUTH_REFUSAL_SLOT) {
		/* The peer has our reason: now the connection may go. */
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
	} else if (wc->status != IBV_WC_SUCCESS) {
		snprintf(why, sizeof(why), "our proof completed with %s (vendor_err 0x%x)",
			 ibv_wc_status_str(wc->status), wc->vendor_err);
		kvf_conn_teardown(c, KVF_FAIL_CONNECT, why);
	}
	return true;
}

void kvf_handshake_tick(struct kvf_conn *c, uint64_t now)
{
	uint32_t limit = c->t->cfg.auth_timeout_ms;
	char why[160];

	if (c->hs.refused_ns) {
		/* A refusal the peer does not take (a dead QP, RNR) must not
		 * hold the connection. */
		if (now - c->hs.refused_ns > KVF_DISCONNECT_GRACE_MS * MS)
			kvf_conn_teardown(c, KVF_FAIL_CONNECT, c->hs.why);
		return;
	}
	if (now > c->hs.start_ns && now - c->hs.start_ns > limit * MS) {
		snprintf(why, sizeof(why), "no proof within %u ms (rdma.auth_timeout_ms)", limit);
		refuse(c, KVF_AUTH_TIMEOUT, why);
	}
}
