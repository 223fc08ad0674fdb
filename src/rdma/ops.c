/* SPDX-License-Identifier: Apache-2.0 */
/* The transport ops (transport.h), on the scheduler thread: control frames
 * waiting for a send buffer (HELLO first, ROOM_INFO sequences, ABORT,
 * ABORT_ACK), a room's writes handed to the connection's send queue
 * (sendq.h), completions giving credits and buffers back, and connecting to
 * a peer on first use. Heartbeats are not the scheduler's: the poller sends
 * them (keepalive.h), so a scheduler away from kvf_progress() is not a
 * peer lost. */
#include "rdma_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "clock.h"
#include "conn.h"
#include "geom_map.h"
#include "log.h"
#include "pool.h"
#include "proto.h"
#include "sched.h"
#include "sendq.h"
#include "stage.h"

#define PROGRESS_EVERY_NS 50000ull

/* ============================================ control frames (scheduler) */

/* The first request stands. The scheduler is the only writer of
 * teardown_req, so why is written before the store that publishes it. */
static void request_teardown(struct kvf_conn *c, uint16_t reason, const char *why)
{
	if (!atomic_load(&c->teardown_req)) {
		snprintf(c->teardown_why, sizeof(c->teardown_why), "%s", why);
		atomic_store(&c->teardown_req, reason);
	}
	kvf_rdma_wake(c->t);
}

static int post_frame(struct kvf_conn *c, const void *data, uint32_t len)
{
	uint32_t i = c->tx_free[--c->tx_nfree];
	uint8_t *buf = c->tx_buf + (size_t)i * c->t->frame_max;
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)buf, .length = len,
			      .lkey = c->tx_mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = kvf_wr_id(KVF_WR_CTRL, c->id, i),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	int rc;

	if (buf != data)
		memcpy(buf, data, len);
	rc = kvf_sendq_post_one(&c->sq, &wr);
	if (rc)
		c->tx_free[c->tx_nfree++] = i;
	else
		c->t->st_frames_tx[buf[6] % KVF_FRAME_TYPES]++; /* byte 6: the type (proto.h) */
	return rc;
}

/* HELLO goes first on every connection: the peer checks our ROOM_INFO
 * against it. Nothing is sent before it, so nothing goes before our first
 * region is registered. It carries every region registered now; hello_seq
 * remembers which those were (op_send_room_info). */
static int send_hello(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	struct kvf_hello_region hr[KVF_MAX_REGIONS];
	struct kvf_hello_buf hb[KVF_HELLO_MAX_BUFS];
	uint32_t i = c->tx_free[c->tx_nfree - 1], nr = 0, nb = 0;
	uint8_t *buf = c->tx_buf + (size_t)i * t->frame_max;
	int len, rc;

	for (uint32_t id = 0; id < KVF_MAX_REGIONS; id++) {
		const struct kvf_pool *p = t->regions[id];

		if (!p)
			continue;
		hr[nr] = (struct kvf_hello_region){.id = id, .nitems = p->nblocks, .nbufs = p->nbufs};
		snprintf(hr[nr++].name, sizeof(hr[0].name), "%s", p->name);
		for (uint32_t b = 0; b < p->nbufs; b++)
			hb[nb++] = (struct kvf_hello_buf){.addr = p->bufs[b].addr,
							  .item_size = p->bufs[b].block_size,
							  .rkey = p->bufs[b].mr ?
								  p->bufs[b].mr->rkey : 0,
							  .geom = p->geom ? p->geom[b] :
								  (struct kvf_buf_geometry){0}};
	}
	len = kvf_proto_encode_hello(buf, c->peer_frame_max < t->frame_max ?
					  c->peer_frame_max : t->frame_max,
				     t->cfg.engine_id, hr, nr, hb);
	if (len < 0) {
		kvf_err("rdma", "connection %u: HELLO for %u regions, %u buffers does not fit the "
			"peer's %u-byte frames", c->id, nr, nb, c->peer_frame_max);
		request_teardown(c, KVF_FAIL_CONNECT, "HELLO does not fit the peer's frames");
		return len;
	}
	rc = post_frame(c, buf, (uint32_t)len);
	if (!rc) {
		c->hello_sent = true;
		c->hello_seq = t->region_seq;
	}
	return rc;
}

/* The next frame of a ROOM_INFO sequence, encoded into the send buffer it
 * goes from, as big as both sides' frames allow. */
static int send_room_info_part(struct kvf_conn *c, struct kvf_pframe *f)
{
	struct kvf_rdma *t = c->t;
	uint32_t i = c->tx_free[c->tx_nfree - 1], n = 0;
	uint8_t *buf = c->tx_buf + (size_t)i * t->frame_max;
	uint32_t cap = c->peer_frame_max < t->frame_max ? c->peer_frame_max : t->frame_max;
	int len = kvf_proto_encode_room_info_part(buf, cap, f->room_id, f->recv_handle, f->info,
						  f->total, f->sent, &n);
	int rc;

	if (len < 0) {
		/* Not reached: connect refuses a peer whose frames cannot carry
		 * 4 bytes of an info. The room would wait for its deadline: fail
		 * it now. */
		kvf_err("rdma", "connection %u: room %#" PRIx64 ": ROOM_INFO does not fit the "
			"peer's %u-byte frames; tearing the connection down", c->id, f->room_id,
			c->peer_frame_max);
		request_teardown(c, KVF_FAIL_CONNECT, "ROOM_INFO does not fit the peer's frames");
		f->sent = f->total;
		return 0;
	}
	rc = post_frame(c, buf, (uint32_t)len);
	if (!rc)
		f->sent += n;
	return rc;
}

/* The head frame: a ROOM_INFO sequence's next part, or a fixed frame.
 * *done when it left the queue's head for good. */
static int send_head(struct kvf_conn *c, struct kvf_pframe *f, bool *done)
{
	int rc = 0;

	*done = true;
	if (!f->len) {
		/* A ROOM_INFO sequence stays at the head until its last frame
		 * is posted: nothing gets between its frames. */
		rc = send_room_info_part(c, f);
		*done = !rc && f->sent >= f->total;
	} else if (f->len > c->peer_frame_max) {
		/* Not reached: the fixed frames are far smaller than the
		 * smallest frame size connect accepts. */
		kvf_err("rdma", "connection %u: %u-byte %s for room %#" PRIx64 " is over the "
			"peer's %u-byte frames; dropped", c->id, f->len,
			kvf_frame_type_str(f->data[6]), kvf_proto_frame_room(f->data),
			c->peer_frame_max);
	} else {
		rc = post_frame(c, f->data, f->len);
		*done = !rc;
	}
	return rc;
}

static int send_frames(struct kvf_conn *c)
{
	int rc = 0;

	if (!c->hello_sent) {
		if (!c->t->nregions || !c->tx_nfree || !kvf_sendq_credits(&c->sq))
			return 0;
		rc = send_hello(c);
		if (rc)
			return rc;
	}
	while (c->tx_nfree && kvf_sendq_credits(&c->sq)) {
		struct kvf_pframe *f = kvf_frameq_head(&c->fq);
		bool done;

		if (!f)
			break;
		rc = send_head(c, f, &done);
		if (done)
			kvf_frameq_pop(&c->fq);
		if (rc)
			return rc;
	}
	return 0;
}

/* Once the peer's HELLO is in: every region both sides have by one name
 * must have one shape, or pair by geometry (geom_map.c), or the connection
 * goes (both sides check, so both say which region, buffer and field). The
 * passive side (prefill) is the sender. */
static void check_shapes(struct kvf_conn *c)
{
	const struct kvf_peer_pool *pp;

	if (c->shapes_checked)
		return;
	/* Acquire pairs with the store-release of peer_pool in on_hello
	 * (poller.c). */
	pp = atomic_load_explicit(&c->peer_pool, memory_order_acquire);
	if (!pp)
		return;
	c->shapes_checked = true;
	if (kvf_geom_map_check_conn(c, pp, c->shapes_why, sizeof(c->shapes_why)))
		return;
	kvf_err("rdma", "connection %u (%s): region layouts differ: %s; tearing it down", c->id,
		c->peer, c->shapes_why);
	c->shapes_bad_ns = kvf_monotonic_ns();
}

/* A connection whose regions differ posts nothing but our HELLO, and goes
 * once that is out (every control SEND completed), or after the grace: the
 * peer compares on our HELLO, and a teardown that flushed it would leave
 * the peer unable to say which region differs. The passive side can find
 * the difference before its own HELLO went (the peer's came first). */
static void shapes_teardown(struct kvf_conn *c)
{
	uint64_t grace = KVF_DISCONNECT_GRACE_MS * 1000000ull;

	if (atomic_load(&c->teardown_req))
		return;
	if (!c->hello_sent && c->t->nregions && c->tx_nfree && kvf_sendq_credits(&c->sq) &&
	    send_hello(c))
		return;
	if ((c->hello_sent && c->tx_nfree == c->tx_n) ||
	    kvf_monotonic_ns() - c->shapes_bad_ns > grace)
		request_teardown(c, KVF_FAIL_CONNECT, c->shapes_why);
}

static void conn_flush(struct kvf_conn *c)
{
	uint64_t wrs = c->sq.wrs_posted;
	int rc;

	/* Acquire pairs with the store-release of ESTABLISHED in
	 * kvf_conn_set_established (conn.c). */
	if (atomic_load_explicit(&c->state, memory_order_acquire) != KVF_CONN_ESTABLISHED)
		return;
	check_shapes(c);
	if (c->shapes_bad_ns) {
		shapes_teardown(c);
		return;
	}
	rc = send_frames(c);
	if (!rc && c->hello_sent)
		rc = kvf_sendq_post_writes(&c->sq);
	c->t->st_wrs += c->sq.wrs_posted - wrs; /* kept here: a connection's count goes with it */
	if (rc && rc != -ENOTCONN)
		request_teardown(c, KVF_FAIL_PEER_LOST, "posting to the send queue failed");
}

/* Post what can go; a connection left with work waiting (for credits, a
 * send buffer, ESTABLISHED or the pool) goes on the pending list that
 * op_progress walks, one without leaves it. */
static void conn_kick(struct kvf_conn *c)
{
	conn_flush(c);
	kvf_sched_pending(c->t, c, !c->hello_sent || kvf_frameq_head(&c->fq) ||
				   kvf_sendq_waiting(&c->sq) ||
				   (c->shapes_bad_ns && !atomic_load(&c->teardown_req)));
}

/* Queue f (taken: freed when refused) and post what can go. A peer that
 * let the cap of waiting frames fill (frameq.h) loses the connection. */
static int enqueue_frame(struct kvf_conn *c, struct kvf_pframe *f)
{
	char why[160];

	if (kvf_frameq_push(&c->fq, f)) {
		free(f->info);
		free(f);
		snprintf(why, sizeof(why), "the peer does not drain its receive queue: %u control "
			 "frames wait for it (the cap)", c->fq.max);
		if (!atomic_load(&c->teardown_req)) /* once, not per refused frame */
			kvf_err("rdma", "connection %u (%s): %s; tearing it down", c->id, c->peer,
				why);
		request_teardown(c, KVF_FAIL_PEER_LOST, why);
		return -ENOBUFS;
	}
	conn_kick(c);
	return 0;
}

static struct kvf_pframe *frame_alloc(size_t len)
{
	struct kvf_pframe *f = calloc(1, sizeof(*f) + len);

	if (f)
		f->len = (uint32_t)len;
	return f;
}

/* ====================================================== region shapes */

/* The peer's region of id, or NULL. */
static const struct kvf_hello_region *peer_region(const struct kvf_peer_pool *pp, uint32_t id,
						   uint32_t *idx)
{
	for (uint32_t i = 0; i < pp->nregions; i++) {
		if (pp->regions[i].id == id) {
			*idx = i;
			return &pp->regions[i];
		}
	}
	return NULL;
}

/* ============================================================= writes */

/* One part of a chunk against both sides' regions: the peer's of the same
 * name, its buffers paired with ours (geom_map.c), every item inside.
 * Fills *sp. */
static int check_part(struct kvf_rdma *t, struct kvf_conn *c, const struct kvf_peer_pool *pp,
		      const struct kvf_xfer_part *x, struct kvf_sq_part *sp)
{
	const struct kvf_pool *p = x->region < KVF_MAX_REGIONS ? t->regions[x->region] : NULL;
	const struct kvf_hello_region *r;
	const struct kvf_geom_map *m;
	char why[200];
	uint32_t idx;

	r = pp ? peer_region(pp, x->peer_region, &idx) : NULL;
	if (!p || !r || strcmp(p->name, r->name) != 0) {
		kvf_err("rdma", "connection %u: writes for region %u to the peer's %u: %s", c->id,
			x->region, x->peer_region, !pp ? "no HELLO from the peer yet" :
			!p ? "no such region here" : !r ? "no such region at the peer" :
			"their names differ");
		return -EPROTO;
	}
	if (kvf_geom_map_get(c, p, pp, idx, &m, why, sizeof(why))) {
		kvf_err("rdma", "connection %u: %s", c->id, why);
		return -EPROTO;
	}
	for (uint32_t i = 0; i < x->n; i++)
		if (x->src[i] >= p->nblocks || x->dst[i] >= r->nitems)
			return -ERANGE;
	*sp = (struct kvf_sq_part){.local = p->wr_bufs, .remote = m->remote, .slices = m->slices,
				   .nbufs = p->nbufs, .n = x->n, .src = x->src, .dst = x->dst};
	return 0;
}

/* ================================================================ ops */

/* -ECONNREFUSED, and why in the room's words, when peer is in connect
 * backoff (backoff.h); 0 when a connection may start. */
static int check_backoff(struct kvf_rdma *t, const char *peer, const struct kvf_info_out *info)
{
	uint64_t now = kvf_monotonic_ns();
	const struct kvf_backoff_peer *b = kvf_backoff_check(&t->backoff, peer, now);

	if (!b)
		return 0;
	t->st_backoffs++;
	if (info->why)
		snprintf(info->why, info->whylen, "not connecting to %s for %" PRIu64 " ms more "
			 "(rdma.reconnect_backoff_ms): %u attempt%s in a row failed, the last: %s",
			 peer, (b->retry_ns - now + 999999) / 1000000, b->fails,
			 b->fails == 1 ? "" : "s", b->why);
	return -ECONNREFUSED;
}

/* The peer connection to peer: the live one, or a new QP group. *out is
 * the lead (the scheduler's own reference keeps it). */
static int get_or_connect(struct kvf_rdma *t, const char *peer, const struct kvf_info_out *info,
			  struct kvf_conn **out)
{
	int rc;

	*out = kvf_sched_find_peer(t, peer);
	if (*out)
		return 0;
	if (atomic_load(&t->dev_dead))
		return -ENODEV;
	/* A connection the poller found dead since the last progress counts
	 * for the backoff before another starts (retire, sched.c). */
	kvf_sched_collect(t);
	rc = check_backoff(t, peer, info);
	if (rc)
		return rc;
	t->st_connects++;
	rc = kvf_qp_group_connect(t, peer, out);
	if (rc)
		return rc;
	kvf_sched_add_peer(t, *out);
	kvf_conn_put(*out); /* the caller's: the scheduler holds its own */
	return 0;
}

/* Whether the peer on c knows every region of the info: each was
 * registered before c's HELLO went (a HELLO not sent yet will carry them). */
static bool regions_known(const struct kvf_rdma *t, const struct kvf_conn *c,
			  const struct kvf_info_out *info)
{
	for (uint32_t k = 0; k < info->nlists && c->hello_sent; k++) {
		const struct kvf_pool *p = t->regions[info->lists[k].region];

		if (!p || p->seq > c->hello_seq) {
			kvf_err("rdma", "room %#" PRIx64 ": region %u was registered after the HELLO of "
				"connection %u (%s): that peer does not know it", info->room_id,
				info->lists[k].region, c->id, c->peer);
			return false;
		}
	}
	return true;
}

/* The info, encoded now (proto.h), goes as one ROOM_INFO sequence split at
 * post time to the peer's frame size. */
static int op_send_room_info(void *tp, const char *peer, const struct kvf_info_out *info,
			     uint32_t *conn)
{
	struct kvf_proto_list pl[KVF_MAX_REGIONS];
	struct kvf_rdma *t = tp;
	struct kvf_pframe *f;
	struct kvf_conn *c, *q;
	size_t len;
	int rc;

	if (!peer || !*peer)
		peer = t->cfg.peer;
	if (!*peer || !strrchr(peer, ':') || !conn || !info ||
	    info->nlists > KVF_MAX_REGIONS)
		return -EINVAL;
	for (uint32_t k = 0; k < info->nlists; k++)
		pl[k] = (struct kvf_proto_list){info->lists[k].region, info->lists[k].n,
						info->lists[k].items};
	len = kvf_proto_info_len(pl, info->nlists, info->user_len);
	if (len > kvf_proto_info_max(t->cfg.max_blocks_per_room))
		return -EINVAL;
	if (!kvf_staging_receiver_ok(t, info))
		return -ENOTSUP;
	f = frame_alloc(0);
	if (f)
		f->info = malloc(len);
	if (!f || !f->info) {
		free(f);
		return -ENOMEM;
	}
	kvf_proto_encode_info(f->info, len, pl, info->nlists, info->user, info->user_len);
	f->total = (uint32_t)len;
	f->room_id = info->room_id;
	f->recv_handle = info->recv_handle;
	rc = get_or_connect(t, peer, info, &c);
	if (rc) {
		free(f->info);
		free(f);
		return rc;
	}
	/* One QP for everything of this room: its whole sequence here, and
	 * any later frame for it goes the same way (kvf_conn_pick). */
	q = kvf_conn_pick(c, info->room_id);
	if (!regions_known(t, q, info)) {
		free(f->info);
		free(f);
		return -ESTALE;
	}
	rc = enqueue_frame(q, f);
	*conn = c->id;
	return rc;
}

/* A room's writes all go on one QP of the peer connection, picked by its
 * wr_id (the same in post, cancel and every completion), so its final
 * WRITE_WITH_IMM follows all of them, every chunk's. On the prefill side,
 * where writes are posted, every connection is one QP: the one the room's
 * ROOM_INFO came on. */
static int op_post_chunk(void *tp, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
			 uint32_t nparts, const uint32_t *imm)
{
	struct kvf_sq_part sp[KVF_MAX_REGIONS];
	struct kvf_rdma *t = tp;
	struct kvf_conn *g = kvf_sched_get(t, conn), *c;
	const struct kvf_peer_pool *pp;
	int rc;

	if (!g)
		return -ENOTCONN;
	c = kvf_conn_pick(g, wr_id);
	if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED)
		return -ENOTCONN;
	if (nparts > KVF_MAX_REGIONS)
		return -EINVAL;
	/* Acquire pairs with the store-release of peer_pool in on_hello
	 * (poller.c). */
	pp = atomic_load_explicit(&c->peer_pool, memory_order_acquire);
	if (!pp)
		return -EPROTO;
	for (uint32_t i = 0; i < nparts; i++) {
		rc = check_part(t, c, pp, &parts[i], &sp[i]);
		if (rc)
			return rc;
	}
	/* The zero-length immediate of a chunk with nothing to copy goes to
	 * any buffer of the peer's: it writes no byte. */
	rc = kvf_staging_add(t, c, conn, wr_id, sp, parts, nparts, imm, &pp->bufs[0]);
	if (rc >= 0) {
		for (uint32_t i = 0; i < nparts; i++)
			for (uint32_t b = 0; b < sp[i].nbufs; b++)
				t->st_bytes += (uint64_t)sp[i].n * (sp[i].slices && sp[i].slices[b].tokens ?
					sp[i].slices[b].tokens * sp[i].slices[b].len :
					sp[i].local[b].block_size);
		conn_kick(c);
	}
	return rc;
}

static int op_cancel_writes(void *tp, uint32_t conn, uint64_t wr_id)
{
	struct kvf_conn *g = kvf_sched_get(tp, conn);

	return kvf_staging_cancel(tp, conn, wr_id,
				  g ? kvf_sendq_cancel(&kvf_conn_pick(g, wr_id)->sq, wr_id) : 0);
}

/* ABORT and ABORT_ACK go on the QP of the room's ROOM_INFO (picked by room
 * id, as send_room_info did): an ABORT from the decode side then follows
 * the room's whole ROOM_INFO sequence. Ordering after the room's writes is
 * not what the QP choice gives: the engine sends ABORT_ACK, and a sender's
 * ABORT, only once the room has no posted write left (room.c, send_owed),
 * so any QP would be safe for those; on the prefill side, which sends them,
 * every connection is one QP anyway. */
static int send_small(struct kvf_rdma *t, uint32_t conn, uint64_t room_id, struct kvf_pframe *f)
{
	struct kvf_conn *g = kvf_sched_get(t, conn), *c = g ? kvf_conn_pick(g, room_id) : NULL;

	if (!c || atomic_load(&c->state) >= KVF_CONN_DEAD) {
		free(f);
		return -ENOTCONN;
	}
	return enqueue_frame(c, f);
}

static int op_send_abort(void *tp, uint32_t conn, uint64_t room_id, uint8_t to_role,
			 uint16_t reason)
{
	struct kvf_pframe *f = frame_alloc(KVF_PROTO_ABORT_LEN);

	if (!f)
		return -ENOMEM;
	kvf_proto_encode_abort(f->data, f->len, room_id, to_role, reason);
	return send_small(tp, conn, room_id, f);
}

static int op_send_abort_ack(void *tp, uint32_t conn, uint64_t room_id)
{
	struct kvf_pframe *f = frame_alloc(KVF_PROTO_HDR_LEN);

	if (!f)
		return -ENOMEM;
	kvf_proto_encode_abort_ack(f->data, f->len, room_id);
	return send_small(tp, conn, room_id, f);
}

static void op_teardown(void *tp, uint32_t conn, const char *why)
{
	struct kvf_conn *c = kvf_sched_get(tp, conn);

	if (!c)
		return;
	kvf_info("rdma", "engine tears down connection %u (%s): %s", conn, c->peer,
		 why ? why : "no reason given");
	request_teardown(c, KVF_FAIL_PEER_LOST, why ? why : "torn down by the engine");
}

/* Per completion: no lock, no reference count. */
static bool op_on_wc(void *tp, const struct kvf_event *ev)
{
	enum kvf_wr_kind kind = kvf_wr_kind(ev->key);
	struct kvf_conn *c;

	if (kind != KVF_WR_DATA && kind != KVF_WR_CTRL)
		return false;
	/* The QP it completed on: a control SEND names its connection in the
	 * wr_id; a write was posted on the QP its wr_id picks. */
	if (kind == KVF_WR_CTRL) {
		c = kvf_sched_get(tp, kvf_wr_gen(ev->key));
	} else {
		struct kvf_conn *g = kvf_sched_get(tp, ev->peer);

		c = g ? kvf_conn_pick(g, ev->key) : NULL;
		kvf_staging_on_wc(tp, ev->peer, ev->key);
	}
	if (c) {
		uint32_t slot = kvf_wr_slot(ev->key);

		if (kind == KVF_WR_CTRL && slot < c->tx_n)
			c->tx_free[c->tx_nfree++] = slot;
		if (ev->status == IBV_WC_SUCCESS)
			kvf_sendq_completed(&c->sq);
		if (c->s_pending)
			conn_kick(c);
	}
	return kind == KVF_WR_DATA;
}

/* Every connection established, every eighth of the heartbeat interval: a
 * peer HELLO that came with nothing else to post is checked against our
 * regions (check_shapes) within that, and a mismatch's teardown waits on
 * the pending list. No heartbeat is sent from here (keepalive.h). */
static void walk_conns(struct kvf_rdma *t, uint64_t now)
{
	uint64_t hb = (uint64_t)t->cfg.heartbeat_interval_ms * 1000000ull;

	if (!hb || now - t->last_walk_ns < hb / 8)
		return;
	t->last_walk_ns = now;
	for (struct kvf_conn *c = t->s.all; c; c = c->s_next) {
		if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED)
			continue;
		check_shapes(c);
		if (c->shapes_bad_ns)
			conn_kick(c);
	}
}

/* Connections gone and new ones, the walk of the established ones, and
 * the connections with work waiting (pending list): no lock, no scan of
 * the table. */
static int op_progress(void *tp, uint64_t now_ns)
{
	struct kvf_rdma *t = tp;
	uint64_t now = kvf_monotonic_ns(); /* the poller's clock, not the engine's */
	struct kvf_conn *next;

	if (now - t->last_scan_ns < PROGRESS_EVERY_NS)
		return 0;
	t->last_scan_ns = now;
	kvf_sched_collect(t);
	kvf_staging_progress(t, conn_kick, request_teardown);
	walk_conns(t, now);
	for (struct kvf_conn *c = t->s.pending; c; c = next) {
		next = c->s_pnext; /* conn_kick may take c off the list */
		conn_kick(c);
	}
	return 0;
}

/* How long the scheduler may sleep (kvf_engine_wait): until the next scan
 * while anything waits on one (frames or writes queued, staging under way,
 * connections the poller handed over), else until the next walk.
 * The poller publishes those stacks before kvf_ring_wake (sched.c), and the
 * engine calls this after arming its sleep, so a handoff is never missed. */
static uint64_t op_wait_ns(void *tp, uint64_t max_ns)
{
	struct kvf_rdma *t = tp;
	uint64_t now = kvf_monotonic_ns(), next;
	uint64_t hb = (uint64_t)t->cfg.heartbeat_interval_ms * 1000000ull;

	if (t->s.pending || kvf_staging_busy(t) ||
	    atomic_load_explicit(&t->handoff, memory_order_relaxed) ||
	    atomic_load_explicit(&t->dead, memory_order_relaxed))
		next = t->last_scan_ns + PROGRESS_EVERY_NS;
	else if (hb)
		next = t->last_walk_ns + hb / 8;
	else
		return max_ns;
	now = next > now ? next - now : 0;
	return now < max_ns ? now : max_ns;
}

/* The counters for /metrics (scheduler thread). Send queues are the
 * scheduler's; the table is walked under its lock like op_progress does. */
static int op_stats(void *tp, struct kvf_transport_stats *out)
{
	struct kvf_rdma *t = tp;

	for (unsigned i = 1; i < KVF_FR_NUM && i < KVF_FRAME_TYPES; i++)
		out->frame_names[i] = kvf_frame_type_str(i);
	for (unsigned i = 0; i < KVF_FRAME_TYPES; i++) {
		out->frames_tx[i] = t->st_frames_tx[i];
		out->frames_rx[i] = atomic_load_explicit(&t->st_frames_rx[i], memory_order_relaxed);
	}
	/* The poller's keepalives are the HEARTBEATs sent. */
	out->keepalives_sent = atomic_load_explicit(&t->st_ka_sent, memory_order_relaxed);
	out->keepalives_acked = atomic_load_explicit(&t->st_ka_acked, memory_order_relaxed);
	out->keepalives_late = atomic_load_explicit(&t->st_ka_late, memory_order_relaxed);
	out->frames_tx[KVF_FR_HEARTBEAT] += out->keepalives_sent;
	/* The poller's AUTH frames are the AUTH frames sent. */
	out->frames_tx[KVF_FR_AUTH] += atomic_load_explicit(&t->st_auth_tx, memory_order_relaxed);
	out->auth_ok = atomic_load_explicit(&t->st_auth_ok, memory_order_relaxed);
	for (unsigned r = 0; r < KVF_AUTH_NUM; r++)
		out->auth_refused[r] = atomic_load_explicit(&t->st_auth_refused[r],
							    memory_order_relaxed);
	out->auth_dropped = atomic_load_explicit(&t->st_auth_dropped, memory_order_relaxed);
	out->bytes_posted = t->st_bytes;
	out->wrs_posted = t->st_wrs;
	out->completions = atomic_load_explicit(&t->st_completions, memory_order_relaxed);
	kvf_staging_stats(t, out);
	out->doorbells = t->st_doorbells;
	out->poller_sleeps = atomic_load_explicit(&t->st_poller_sleeps, memory_order_relaxed);
	out->connects = t->st_connects;
	out->connect_backoffs = t->st_backoffs;
	pthread_mutex_lock(&t->lock);
	out->conns_held = t->nconns;
	for (uint32_t i = 0; i < KVF_MAX_CONNS; i++) {
		struct kvf_conn *c = t->conns[i];

		if (!c)
			continue;
		out->conns_live += atomic_load(&c->state) < KVF_CONN_DEAD;
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

const struct kvf_transport_ops kvf_rdma_ops = {
	.stats = op_stats,
	.region_register = kvf_rdma_region_register,
	.region_unregister = kvf_rdma_region_unregister,
	.send_room_info = op_send_room_info,
	.post_chunk = op_post_chunk,
	.cancel_writes = op_cancel_writes,
	.send_abort = op_send_abort,
	.send_abort_ack = op_send_abort_ack,
	.teardown = op_teardown,
	.on_wc = op_on_wc,
	.progress = op_progress,
	.wait_ns = op_wait_ns,
	.close = kvf_rdma_close,
};

