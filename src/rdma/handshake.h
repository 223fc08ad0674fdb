/* SPDX-License-Identifier: Apache-2.0 */
/* The token's exchange on one connection (auth.h has the proof itself):
 * who proves when, the AUTH frames the poller posts, the deadline. Poller
 * thread only, like all of a connection's setup.
 *
 *   decode (connects)                               prefill (listens)
 *     REQ  [cm.nonce = decode nonce] ------------->
 *          <-------------------- [cm.nonce = prefill nonce]  REP
 *     RTU, AUTH proof (role decode) -------------->  checked
 *          <---------------------- AUTH proof (role prefill), HELLO ...
 *     checked; HELLO, ROOM_INFO ... -------------->
 *   a proof that does not hold: an AUTH refusal (a code, no MAC) back, and
 *   the connection down once it is sent (or KVF_DISCONNECT_GRACE_MS later).
 *
 * A connection is KVF_CONN_AUTH from then until the peer's proof holds:
 * not ESTABLISHED, so the scheduler posts nothing on it (HELLO carries the
 * rkeys of our regions) and no keepalive goes; and nothing the peer sends
 * is taken (no frame reaches frame_events.c, no write's immediate the
 * ring) until its proof did, so no room frame of a peer that has not
 * proved itself is ever seen. A peer whose proof does not come within
 * rdma.auth_timeout_ms of the accept is refused and dropped.
 *
 * The AUTH frames are the poller's, outside the scheduler's send queue, as
 * the keepalive is (keepalive.h): two SQ entries of their own (cm.c makes
 * the QP with rdma.sq_depth + 4), two buffers after the scheduler's send
 * buffers in its registered memory (conn.c), wr_id slots of their own,
 * taken by the poller (kvf_handshake_on_wc) and never pushed. */
#ifndef KVF_HANDSHAKE_H
#define KVF_HANDSHAKE_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/proto.h"

struct kvf_conn;

/* One connection's exchange. */
struct kvf_handshake {
	struct kvf_auth_id id;  /* the connection as we see it: both nonces,
	                           QP numbers and GIDs */
	uint64_t start_ns;      /* accept sent (prefill) or received (decode):
	                           the peer's proof is due within
	                           rdma.auth_timeout_ms */
	uint64_t refused_ns;    /* our refusal was posted (or the peer's came):
	                           down once it is sent or after the grace */
	bool verified;          /* the peer's proof held: its frames are taken */
	char why[256];          /* the refusal, for the teardown */
};

/* Bytes of send buffer per AUTH frame, and their wr_id slots (kind
 * KVF_WR_CTRL): below the keepalive's (keepalive.h). */
#define KVF_AUTH_BUF 256u
#define KVF_AUTH_FRAMES 2u
#define KVF_AUTH_PROOF_SLOT (KVF_DRAIN_SLOT - 2)
#define KVF_AUTH_REFUSAL_SLOT (KVF_DRAIN_SLOT - 3)

/* What the CM gave for the identity: our QP's number is c's, the peer's
 * came in the REQ (prefill) or REP (decode); the GIDs are the route's. */
void kvf_handshake_bind(struct kvf_conn *c, uint32_t peer_qpn);
/* Decode side, the accept in and our QP in RTS: KVF_CONN_AUTH, our proof
 * posted (the peer's nonce was taken from the accept). */
void kvf_handshake_connect(struct kvf_conn *c);
/* Prefill side, about to accept: KVF_CONN_AUTH, the deadline starts. */
void kvf_handshake_accept(struct kvf_conn *c);
/* A successful receive on c while its peer has not proved itself: the
 * frame at buf (len bytes), or NULL for a write-with-immediate. Only the
 * peer's proof is taken; anything else refuses the connection. */
void kvf_handshake_on_recv(struct kvf_conn *c, const uint8_t *buf, uint32_t len);
/* An AUTH frame after the peer's proof held: its refusal of ours (the
 * connection goes), or a second proof (dropped, counted). */
void kvf_handshake_late(struct kvf_conn *c, const struct kvf_frame *f);
/* A send completion: true when it was an AUTH frame's (taken here). */
bool kvf_handshake_on_wc(struct kvf_conn *c, const struct ibv_wc *wc);
/* Housekeeping of a KVF_CONN_AUTH connection: its deadline, the grace of
 * a refusal. */
/* Poller: the peer disconnected during the exchange and no refusal frame
 * came within the grace after it (cm.c): on the side that proved first
 * (decode) counted as the peer's refusal (peer_refused) and failed
 * connect_failed naming it; on the prefill, a peer that left unproved. */
void kvf_handshake_peer_left(struct kvf_conn *c);
void kvf_handshake_tick(struct kvf_conn *c, uint64_t now);

#endif
