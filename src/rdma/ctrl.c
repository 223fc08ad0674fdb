/* SPDX-License-Identifier: Apache-2.0 */
/* A connection's control frames, on the scheduler thread: the queue of
 * frames waiting for a send buffer (HELLO first, then ROOM_INFO parts,
 * ABORT, ABORT_ACK), flushed as buffers come back; the region-shape check
 * once the peer's HELLO is in; the teardown request the poller carries out.
 * ops.c's transport ops queue frames here. */
#include "rdma/rdma_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "rdma/conn.h"
#include "rdma/frames.h"
#include "rdma/ctrl.h"
#include "rdma/geom_map.h"
#include "base/log.h"
#include "rdma/pool.h"
#include "transfer/proto.h"
#include "rdma/sched.h"
#include "transfer/sendq.h"

/* The first request stands. The scheduler is the only writer of
 * teardown_req, so why is written before the store that publishes it. */
void kvf_ctrl_teardown(struct kvf_conn *c, uint16_t reason, const char *why)
{
	if (!atomic_load(&c->teardown_req)) {
		snprintf(c->teardown_why, sizeof(c->teardown_why), "%s", why);
		atomic_store(&c->teardown_req, reason);
	}
	kvf_rdma_wake(c->t);
}

/* Whether c may take a send frame of the rail's pool now: one is free,
 * c holds fewer than its share (txpool.h), and its send queue has room. */
static bool can_send(struct kvf_conn *c)
{
	if (c->tx_held >= KVF_TXPOOL_PER_CONN || !kvf_sendq_credits(&c->sq))
		return false;
	if (c->t->tx.pool.nfree)
		return true;
	c->t->tx.pool.waits++;
	return false;
}

/* A frame of the pool for c (can_send said there is one), and its bytes. */
static uint32_t take_frame(struct kvf_conn *c, uint8_t **buf)
{
	uint32_t i = kvf_txpool_take(&c->t->tx.pool, c->id);

	c->tx_held++;
	*buf = kvf_frames_tx(c->t, i);
	return i;
}

static void put_frame(struct kvf_conn *c, uint32_t i)
{
	kvf_txpool_give(&c->t->tx.pool, i);
	c->tx_held--;
}

/* Post frame i (taken by c) holding len bytes; given back if the post
 * fails. */
static int post_frame(struct kvf_conn *c, uint32_t i, uint32_t len)
{
	uint8_t *buf = kvf_frames_tx(c->t, i);
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)buf, .length = len,
			      .lkey = kvf_frames_tx_lkey(c->t)};
	struct ibv_send_wr wr = {
		.wr_id = kvf_wr_id(KVF_WR_CTRL, c->id, i),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	int rc = kvf_sendq_post_one(&c->sq, &wr);

	if (rc)
		put_frame(c, i);
	else
		c->t->st_frames_tx[kvf_proto_frame_type(buf) % KVF_FRAME_TYPES]++;
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
	uint32_t nr = 0, nb = 0, i;
	uint8_t *buf;
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
	i = take_frame(c, &buf);
	len = kvf_proto_encode_hello(buf, c->peer_frame_max < t->frame_max ?
					  c->peer_frame_max : t->frame_max,
				     t->cfg.engine_id, hr, nr, hb);
	if (len < 0) {
		kvf_err("rdma", "connection %u: HELLO for %u regions, %u buffers does not fit the "
			"peer's %u-byte frames", c->id, nr, nb, c->peer_frame_max);
		kvf_ctrl_teardown(c, KVF_FAIL_CONNECT, "HELLO does not fit the peer's frames");
		put_frame(c, i);
		return len;
	}
	rc = post_frame(c, i, (uint32_t)len);
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
	uint32_t cap = c->peer_frame_max < t->frame_max ? c->peer_frame_max : t->frame_max;
	uint32_t n = 0;
	uint8_t *buf;
	uint32_t i = take_frame(c, &buf);
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
		kvf_ctrl_teardown(c, KVF_FAIL_CONNECT, "ROOM_INFO does not fit the peer's frames");
		put_frame(c, i);
		f->sent = f->total;
		return 0;
	}
	rc = post_frame(c, i, (uint32_t)len);
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
			kvf_frame_type_str(kvf_proto_frame_type(f->data)),
			kvf_proto_frame_room(f->data), c->peer_frame_max);
	} else {
		uint8_t *buf;
		uint32_t i = take_frame(c, &buf);

		memcpy(buf, f->data, f->len);
		rc = post_frame(c, i, f->len);
		*done = !rc;
	}
	return rc;
}

static int send_frames(struct kvf_conn *c)
{
	int rc = 0;

	if (!c->hello_sent) {
		if (!c->t->nregions || !can_send(c))
			return 0;
		rc = send_hello(c);
		if (rc)
			return rc;
	}
	for (;;) {
		struct kvf_pframe *f = kvf_frameq_head(&c->fq);
		bool done;

		if (!f || !can_send(c))
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
void kvf_ctrl_check_shapes(struct kvf_conn *c)
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
	if (!c->hello_sent && c->t->nregions && can_send(c) && send_hello(c))
		return;
	if ((c->hello_sent && !c->tx_held) ||
	    kvf_monotonic_ns() - c->shapes_bad_ns > grace)
		kvf_ctrl_teardown(c, KVF_FAIL_CONNECT, c->shapes_why);
}

static void conn_flush(struct kvf_conn *c)
{
	uint64_t wrs = c->sq.wrs_posted;
	int rc;

	/* Acquire pairs with the store-release of ESTABLISHED in
	 * kvf_conn_set_established (conn.c). */
	if (atomic_load_explicit(&c->state, memory_order_acquire) != KVF_CONN_ESTABLISHED)
		return;
	kvf_ctrl_check_shapes(c);
	if (c->shapes_bad_ns) {
		shapes_teardown(c);
		return;
	}
	rc = send_frames(c);
	if (!rc && c->hello_sent)
		rc = kvf_sendq_post_writes(&c->sq);
	c->t->st_wrs += c->sq.wrs_posted - wrs; /* kept here: a connection's count goes with it */
	if (rc && rc != -ENOTCONN)
		kvf_ctrl_teardown(c, KVF_FAIL_PEER_LOST, "posting to the send queue failed");
}

/* Post what can go; a connection left with work waiting (for credits, a
 * send buffer, ESTABLISHED or the pool) goes on the pending list that
 * op_progress walks, one without leaves it. */
void kvf_ctrl_kick(struct kvf_conn *c)
{
	conn_flush(c);
	kvf_sched_pending(c->t, c, !c->hello_sent || kvf_frameq_head(&c->fq) ||
				   kvf_sendq_waiting(&c->sq) ||
				   (c->shapes_bad_ns && !atomic_load(&c->teardown_req)));
}

/* Queue f (taken: freed when refused) and post what can go. A peer that
 * let the cap of waiting frames fill (frameq.h) loses the connection. */
int kvf_ctrl_enqueue(struct kvf_conn *c, struct kvf_pframe *f)
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
		kvf_ctrl_teardown(c, KVF_FAIL_PEER_LOST, why);
		return -ENOBUFS;
	}
	kvf_ctrl_kick(c);
	return 0;
}

/* See ctrl.h. */
struct kvf_pframe *kvf_ctrl_frame_alloc(size_t len)
{
	struct kvf_pframe *f = calloc(1, sizeof(*f) + len);

	if (f)
		f->len = (uint32_t)len;
	return f;
}

