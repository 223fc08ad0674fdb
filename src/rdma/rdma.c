/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <kvferry/kvferry.h>

#include "conn.h"
#include "log.h"
#include "poller.h"
#include "pool.h"
#include "proto.h"
#include "verbs.h"

#define HELLO_MAX_BUFS 1024u            /* frames are sized to carry this */
#define MAX_WR_BYTES (1ull << 30)       /* one WRITE; sge lengths are 32 bit */
#define PROGRESS_EVERY_NS 50000ull
#define FRAME_CAP (64u * 1024u)

uint64_t kvf_rdma_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kvf_rdma_wake(struct kvf_rdma *t)
{
	uint64_t one = 1;

	if (write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		kvf_warn("rdma", "waking the poller: %s", strerror(errno));
}

void kvf_rdma_push(struct kvf_rdma *t, const struct kvf_event *ev)
{
	kvf_ring_push(t->ring, ev);
}

/* ================================================= send queue (scheduler) */

/* Post a chain under the connection lock, only while ESTABLISHED: once the
 * poller marks it DEAD and posts the drain markers nothing may follow them.
 * *posted gets how many of the n WRs went in. */
static int post_chain(struct kvf_conn *c, struct ibv_send_wr *first, uint32_t n,
		      uint32_t *posted)
{
	struct ibv_send_wr *bad = NULL;
	int rc;

	*posted = 0;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED) {
		pthread_mutex_unlock(&c->lock);
		return -ENOTCONN;
	}
	rc = ibv_post_send(c->qp, first, &bad);
	pthread_mutex_unlock(&c->lock);
	if (!rc) {
		*posted = n;
		return 0;
	}
	for (struct ibv_send_wr *w = first; w && w != bad; w = w->next)
		(*posted)++;
	kvf_err("rdma", "connection %u: ibv_post_send: %s (%u of %u posted)", c->id,
		strerror(rc), *posted, n);
	return -rc;
}

/* Each signaled WR in flight frees `entries` send-queue entries when it
 * completes: itself and the unsignaled ones before it. */
static void sig_push(struct kvf_conn *c, uint32_t entries)
{
	c->sig[c->sig_tail] = entries;
	c->sig_tail = (c->sig_tail + 1) % c->sig_cap;
	c->credits -= entries;
}

static void sig_pop(struct kvf_conn *c)
{
	if (c->sig_head == c->sig_tail)
		return;
	c->credits += c->sig[c->sig_head];
	c->sig_head = (c->sig_head + 1) % c->sig_cap;
}

static void request_teardown(struct kvf_conn *c, uint16_t reason)
{
	int none = 0;

	atomic_compare_exchange_strong(&c->teardown_req, &none, reason);
	kvf_rdma_wake(c->t);
}

static int post_frame(struct kvf_conn *c, const void *data, uint32_t len)
{
	uint32_t i = c->tx_free[--c->tx_nfree], posted;
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
	rc = post_chain(c, &wr, 1, &posted);
	if (rc) {
		c->tx_free[c->tx_nfree++] = i;
		return rc;
	}
	sig_push(c, 1);
	return 0;
}

/* HELLO goes first on every connection: the peer checks our ROOM_INFO
 * against it. Nothing is sent before it, so nothing goes before our pool
 * is registered. */
static int send_hello(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	struct kvf_pool *pool = t->pool;
	struct kvf_hello_buf hb[HELLO_MAX_BUFS];
	uint32_t i = c->tx_free[c->tx_nfree - 1];
	uint8_t *buf = c->tx_buf + (size_t)i * t->frame_max;
	int len, rc;

	for (uint32_t b = 0; b < pool->nbufs; b++)
		hb[b] = (struct kvf_hello_buf){.addr = pool->bufs[b].addr,
					       .block_size = pool->bufs[b].block_size,
					       .rkey = pool->bufs[b].mr->rkey};
	len = kvf_proto_encode_hello(buf, c->peer_frame_max < t->frame_max ?
					  c->peer_frame_max : t->frame_max,
				     t->cfg.engine_id, pool->nblocks, hb, pool->nbufs);
	if (len < 0) {
		kvf_err("rdma", "connection %u: HELLO for %u buffers does not fit the peer's "
			"%u-byte frames", c->id, pool->nbufs, c->peer_frame_max);
		request_teardown(c, KVF_FAIL_CONNECT);
		return len;
	}
	rc = post_frame(c, buf, (uint32_t)len);
	if (!rc)
		c->hello_sent = true;
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
	int len = kvf_proto_encode_room_info_part(buf, cap, f->room_id, f->recv_handle, f->blocks,
						  f->total, f->sent, &n);
	int rc;

	if (len < 0) {
		/* Not reached: connect refuses a peer whose frames cannot carry
		 * one id. The room would wait for its deadline: fail it now. */
		kvf_err("rdma", "connection %u: room %#" PRIx64 ": ROOM_INFO does not fit the "
			"peer's %u-byte frames; tearing the connection down", c->id, f->room_id,
			c->peer_frame_max);
		request_teardown(c, KVF_FAIL_CONNECT);
		f->sent = f->total;
		return 0;
	}
	rc = post_frame(c, buf, (uint32_t)len);
	if (!rc)
		f->sent += n;
	return rc;
}

static int send_frames(struct kvf_conn *c)
{
	int rc = 0;

	if (!c->hello_sent) {
		if (!c->t->pool || !c->tx_nfree || !c->credits)
			return 0;
		rc = send_hello(c);
		if (rc)
			return rc;
	}
	while (c->fq_head && c->tx_nfree && c->credits) {
		struct kvf_pframe *f = c->fq_head;

		if (!f->len) {
			/* A ROOM_INFO sequence stays at the head until its last
			 * frame is posted: nothing gets between its frames. */
			rc = send_room_info_part(c, f);
			if (rc)
				return rc;
			if (f->sent < f->total)
				continue;
		} else if (f->len > c->peer_frame_max) {
			/* Not reached: the fixed frames are far smaller than the
			 * smallest frame size connect accepts. */
			kvf_err("rdma", "connection %u: %u-byte %s for room %#" PRIx64 " is over the "
				"peer's %u-byte frames; dropped", c->id, f->len,
				kvf_frame_type_str(f->data[6]), kvf_proto_frame_room(f->data),
				c->peer_frame_max);
		} else if ((rc = post_frame(c, f->data, f->len))) {
			return rc;
		}
		c->fq_head = f->next;
		if (!c->fq_head)
			c->fq_tail = &c->fq_head;
		free(f->blocks);
		free(f);
	}
	return 0;
}

static void desc_to_wr(const struct kvf_wdesc *d, struct ibv_send_wr *wr)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = d->wr_id;
	wr->sg_list = (struct ibv_sge *)d->sge;
	wr->num_sge = d->nsge;
	wr->opcode = d->flags & KVF_WD_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr->imm_data = htonl(d->imm);
	wr->send_flags = d->flags & KVF_WD_SIGNALED ? IBV_SEND_SIGNALED : 0;
	wr->wr.rdma.remote_addr = d->raddr;
	wr->wr.rdma.rkey = d->rkey;
}

/* Post queued writes while credits last, in whole segments (a segment ends
 * with a signaled WR), so every posted WR is covered by a completion. */
static int send_writes(struct kvf_conn *c)
{
	while (c->pend_head < c->pend_tail && c->credits) {
		uint32_t n = 0, cut = 0, posted, since = 0;
		int rc;

		for (size_t i = c->pend_head; i < c->pend_tail && n < c->credits; i++) {
			desc_to_wr(&c->pend[i], &c->wrs[n]);
			if (n)
				c->wrs[n - 1].next = &c->wrs[n];
			if (c->pend[i].flags & KVF_WD_SIGNALED)
				cut = n + 1;
			n++;
		}
		if (!cut)
			return 0; /* the next segment needs more room than is free */
		c->wrs[cut - 1].next = NULL;
		rc = post_chain(c, c->wrs, cut, &posted);
		for (uint32_t k = 0; k < posted; k++) {
			since++;
			if (c->wrs[k].send_flags & IBV_SEND_SIGNALED) {
				sig_push(c, since);
				since = 0;
			}
		}
		/* A failed post can stop mid-segment: those WRs are in, their
		 * completions will come as flushes when the QP errors. */
		c->credits -= since;
		c->pend_head += posted;
		if (rc)
			return rc;
	}
	if (c->pend_head == c->pend_tail)
		c->pend_head = c->pend_tail = 0;
	return 0;
}

/* Everything that waits on this connection, in order: HELLO, frames, writes. */
static void conn_flush(struct kvf_conn *c)
{
	int rc;

	if (atomic_load_explicit(&c->state, memory_order_acquire) != KVF_CONN_ESTABLISHED)
		return;
	rc = send_frames(c);
	if (!rc && c->hello_sent)
		rc = send_writes(c);
	if (rc && rc != -ENOTCONN)
		request_teardown(c, KVF_FAIL_PEER_LOST);
}

static int enqueue_frame(struct kvf_conn *c, struct kvf_pframe *f)
{
	f->next = NULL;
	*c->fq_tail = f;
	c->fq_tail = &f->next;
	conn_flush(c);
	return 0;
}

static struct kvf_pframe *frame_alloc(size_t len)
{
	struct kvf_pframe *f = calloc(1, sizeof(*f) + len);

	if (f)
		f->len = (uint32_t)len;
	return f;
}

/* ====================================================== write building */

static int pend_reserve(struct kvf_conn *c, size_t more)
{
	struct kvf_wdesc *p;
	size_t cap;

	if (c->pend_head && c->pend_tail + more > c->pend_cap) {
		memmove(c->pend, c->pend + c->pend_head,
			(c->pend_tail - c->pend_head) * sizeof(*c->pend));
		c->pend_tail -= c->pend_head;
		c->pend_head = 0;
	}
	if (c->pend_tail + more <= c->pend_cap)
		return 0;
	cap = c->pend_cap ? c->pend_cap : 256;
	while (cap < c->pend_tail + more)
		cap *= 2;
	p = realloc(c->pend, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	c->pend = p;
	c->pend_cap = cap;
	return 0;
}

/* Check the room against both pools before anything is queued. */
static int check_room(struct kvf_rdma *t, struct kvf_conn *c, const struct kvf_peer_pool *pp,
		      const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	const struct kvf_pool *pool = t->pool;

	if (!pool || !pp) {
		kvf_err("rdma", "connection %u: writes before %s pool is known", c->id,
			pool ? "the peer's" : "the local");
		return -EPROTO;
	}
	if (pool->nbufs != pp->nbufs) {
		kvf_err("rdma", "connection %u: local pool has %u buffers, peer's has %u",
			c->id, pool->nbufs, pp->nbufs);
		return -EPROTO;
	}
	for (uint32_t b = 0; b < pool->nbufs; b++) {
		if (pool->bufs[b].block_size != pp->bufs[b].block_size) {
			kvf_err("rdma", "connection %u: buffer %u block size %" PRIu64
				" here, %" PRIu64 " at the peer", c->id, b,
				pool->bufs[b].block_size, pp->bufs[b].block_size);
			return -EPROTO;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (src[i] >= pool->nblocks || dst[i] >= pp->nblocks)
			return -ERANGE;
	return 0;
}

/* One buffer's WRs: runs contiguous on the remote side become one WRITE;
 * within a run, local pieces that are not contiguous become extra SGEs
 * (up to max_sge), contiguous ones grow the current SGE. */
static void build_buffer(struct kvf_rdma *t, struct kvf_conn *c, uint32_t b,
			 const struct kvf_peer_pool *pp, uint64_t wr_id,
			 const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	const struct kvf_pool_buf *lb = &t->pool->bufs[b];
	uint64_t bs = lb->block_size;

	for (uint32_t i = 0; i < n;) {
		struct kvf_wdesc *d = &c->pend[c->pend_tail++];
		uint64_t bytes = bs;
		uint32_t j;

		memset(d, 0, sizeof(*d));
		d->wr_id = wr_id;
		d->raddr = pp->bufs[b].addr + dst[i] * bs;
		d->rkey = pp->bufs[b].rkey;
		d->sge[0] = (struct ibv_sge){.addr = lb->addr + src[i] * bs,
					     .length = (uint32_t)bs, .lkey = lb->mr->lkey};
		d->nsge = 1;
		for (j = i + 1; j < n && dst[j] == dst[j - 1] + 1 && bytes + bs <= MAX_WR_BYTES; j++) {
			if (src[j] == src[j - 1] + 1) {
				d->sge[d->nsge - 1].length += (uint32_t)bs;
			} else if (d->nsge < t->max_sge) {
				d->sge[d->nsge++] = (struct ibv_sge){
					.addr = lb->addr + src[j] * bs,
					.length = (uint32_t)bs, .lkey = lb->mr->lkey};
			} else {
				break;
			}
			bytes += bs;
		}
		i = j;
	}
}

/* Upper bound of WRs for a room: one per block per buffer. */
static int build_room(struct kvf_rdma *t, struct kvf_conn *c, const struct kvf_peer_pool *pp,
		      uint64_t wr_id, uint32_t imm, const uint32_t *src,
		      const uint32_t *dst, uint32_t n)
{
	size_t first, most = (size_t)t->pool->nbufs * (n ? n : 1);
	int sig = 0;

	if (pend_reserve(c, most))
		return -ENOMEM;
	first = c->pend_tail;
	for (uint32_t b = 0; b < t->pool->nbufs && n; b++)
		build_buffer(t, c, b, pp, wr_id, src, dst, n);
	if (!n) { /* nothing to copy: the immediate alone says "done" */
		struct kvf_wdesc *d = &c->pend[c->pend_tail++];

		memset(d, 0, sizeof(*d));
		d->wr_id = wr_id;
		d->rkey = pp->bufs[0].rkey;
		d->raddr = pp->bufs[0].addr;
	}
	for (size_t k = first; k < c->pend_tail; k++) {
		bool last = k + 1 == c->pend_tail;

		if (last || (k - first + 1) % t->signal_every == 0) {
			c->pend[k].flags |= KVF_WD_SIGNALED;
			sig++;
		}
		if (last) {
			c->pend[k].flags |= KVF_WD_IMM;
			c->pend[k].imm = imm;
		}
	}
	return sig;
}

/* ================================================================ ops */

static int op_pool_register(void *tp, const struct kvf_pool_layout *layout)
{
	struct kvf_rdma *t = tp;

	if (t->pool)
		return -EEXIST;
	if (layout && layout->nbufs > HELLO_MAX_BUFS) {
		kvf_err("rdma", "pool of %u buffers: at most %u", layout->nbufs, HELLO_MAX_BUFS);
		return -EINVAL;
	}
	return kvf_pool_create(t->pd, layout, &t->pool);
}

/* The peer connection to peer: the live one, or a new group of
 * rdma.qps_per_peer connections (conn.h), each connecting on its own. *out
 * is the lead, referenced. */
static int get_or_connect(struct kvf_rdma *t, const char *peer, struct kvf_conn **out)
{
	uint32_t nqp = t->cfg.qps_per_peer ? t->cfg.qps_per_peer : 1;
	struct kvf_conn *g, *m;
	int rc = 0;

	*out = kvf_conn_find_peer(t, peer);
	if (*out)
		return 0;
	if (atomic_load(&t->dev_dead))
		return -ENODEV;
	rc = kvf_conn_new(t, true, peer, 0, &g);
	if (rc)
		return rc;
	if (nqp > 1) {
		g->qps = calloc(nqp, sizeof(*g->qps));
		if (!g->qps)
			rc = -ENOMEM;
		else
			g->qps[0] = g;
	}
	while (!rc && g->nqp < nqp) {
		rc = kvf_conn_new(t, true, peer, g->id, &m);
		if (!rc)
			g->qps[g->nqp++] = m; /* the group keeps our reference */
	}
	if (rc) {
		/* The poller takes the part that exists down whole. */
		kvf_err("rdma", "peer connection %u to %s: %u of %u queue pairs: %s", g->id, peer,
			g->nqp, nqp, strerror(-rc));
		atomic_store(&g->teardown_req, KVF_FAIL_CONNECT);
	}
	/* Release: the poller starts them only once the group is whole. */
	for (uint32_t i = 0; i < g->nqp; i++)
		atomic_store_explicit(&(g->qps ? g->qps[i] : g)->ready, true, memory_order_release);
	if (nqp > 1 && !rc)
		kvf_info("rdma", "connecting to %s (peer connection %u: %u queue pairs, "
			 "connections %u..%u)", peer, g->id, nqp, g->id, g->qps[nqp - 1]->id);
	else if (!rc)
		kvf_info("rdma", "connecting to %s (connection %u)", peer, g->id);
	atomic_store(&t->new_conns, true);
	kvf_rdma_wake(t);
	if (rc) {
		kvf_conn_put(g);
		return rc;
	}
	*out = g;
	return 0;
}

/* The list goes as one ROOM_INFO sequence (proto.h), split at post time
 * to the peer's frame size: a list of any length up to
 * engine.max_blocks_per_room. */
static int op_send_room_info(void *tp, const char *peer, uint64_t room_id, uint64_t recv_handle,
			     const uint32_t *blocks, uint32_t n, uint32_t *conn)
{
	struct kvf_rdma *t = tp;
	struct kvf_pframe *f;
	struct kvf_conn *c;
	int rc;

	if (!peer || !*peer)
		peer = t->cfg.peer;
	if (!*peer || !strrchr(peer, ':') || !conn || !n || !blocks)
		return -EINVAL;
	if (n > t->cfg.max_blocks_per_room) {
		kvf_err("rdma", "room %#" PRIx64 ": %u blocks, engine.max_blocks_per_room is %u",
			room_id, n, t->cfg.max_blocks_per_room);
		return -EINVAL;
	}
	f = frame_alloc(0);
	if (f)
		f->blocks = malloc((size_t)n * sizeof(*blocks));
	if (!f || !f->blocks) {
		free(f);
		return -ENOMEM;
	}
	memcpy(f->blocks, blocks, (size_t)n * sizeof(*blocks));
	f->total = n;
	f->room_id = room_id;
	f->recv_handle = recv_handle;
	rc = get_or_connect(t, peer, &c);
	if (rc) {
		free(f->blocks);
		free(f);
		return rc;
	}
	/* One QP for everything of this room: its whole sequence here, and
	 * any later frame for it goes the same way (kvf_conn_pick). */
	enqueue_frame(kvf_conn_pick(c, room_id), f);
	*conn = c->id;
	kvf_conn_put(c);
	return 0;
}

/* A room's writes all go on one QP of the peer connection, picked by its
 * wr_id (the same in post, cancel and every completion), so its final
 * WRITE_WITH_IMM follows all of them. On the prefill side, where writes are
 * posted, every connection is one QP: the one the room's ROOM_INFO came on. */
static int op_post_writes(void *tp, uint32_t conn, uint64_t wr_id, uint32_t imm,
			  const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	struct kvf_rdma *t = tp;
	struct kvf_conn *g = kvf_conn_get(t, conn), *c;
	const struct kvf_peer_pool *pp;
	int rc;

	if (!g)
		return -ENOTCONN;
	c = kvf_conn_pick(g, wr_id);
	if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED) {
		rc = -ENOTCONN;
		goto out;
	}
	/* Acquire: pairs with the poller's release store in on_hello. */
	pp = atomic_load_explicit(&c->peer_pool, memory_order_acquire);
	rc = check_room(t, c, pp, src, dst, n);
	if (rc)
		goto out;
	rc = build_room(t, c, pp, wr_id, imm, src, dst, n);
	if (rc > 0)
		conn_flush(c);
out:
	kvf_conn_put(g);
	return rc;
}

static int op_cancel_writes(void *tp, uint32_t conn, uint64_t wr_id)
{
	struct kvf_conn *g = kvf_conn_get(tp, conn), *c;
	size_t w;
	int dropped = 0;

	if (!g)
		return 0;
	c = kvf_conn_pick(g, wr_id);
	w = c->pend_head;
	for (size_t r = c->pend_head; r < c->pend_tail; r++) {
		if (c->pend[r].wr_id == wr_id) {
			dropped += !!(c->pend[r].flags & KVF_WD_SIGNALED);
			continue;
		}
		c->pend[w++] = c->pend[r];
	}
	c->pend_tail = w;
	kvf_conn_put(g);
	return dropped;
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
	struct kvf_conn *g = kvf_conn_get(t, conn), *c = g ? kvf_conn_pick(g, room_id) : NULL;

	if (!c || atomic_load(&c->state) >= KVF_CONN_DEAD) {
		free(f);
		kvf_conn_put(g);
		return -ENOTCONN;
	}
	enqueue_frame(c, f);
	kvf_conn_put(g);
	return 0;
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
	struct kvf_conn *c = kvf_conn_get(tp, conn);

	if (!c)
		return;
	kvf_info("rdma", "engine tears down connection %u (%s): %s", conn, c->peer,
		 why ? why : "no reason given");
	request_teardown(c, KVF_FAIL_PEER_LOST);
	kvf_conn_put(c);
}

static bool op_on_wc(void *tp, const struct kvf_event *ev)
{
	enum kvf_wr_kind kind = kvf_wr_kind(ev->key);
	struct kvf_conn *c;

	if (kind != KVF_WR_DATA && kind != KVF_WR_CTRL)
		return false;
	/* The QP it completed on: a control SEND names its connection in the
	 * wr_id; a write was posted on the QP its wr_id picks. */
	if (kind == KVF_WR_CTRL) {
		c = kvf_conn_get(tp, kvf_wr_gen(ev->key));
	} else {
		struct kvf_conn *g = kvf_conn_get(tp, ev->peer);

		c = g ? kvf_conn_pick(g, ev->key) : NULL;
		if (c != g) {
			if (c)
				kvf_conn_ref(c);
			kvf_conn_put(g);
		}
	}
	if (c) {
		uint32_t slot = kvf_wr_slot(ev->key);

		if (kind == KVF_WR_CTRL && slot < c->tx_n)
			c->tx_free[c->tx_nfree++] = slot;
		if (ev->status == IBV_WC_SUCCESS)
			sig_pop(c);
		conn_flush(c);
		kvf_conn_put(c);
	}
	return kind == KVF_WR_DATA;
}

/* Heartbeats, and whatever waits for a connection that just came up. */
static int op_progress(void *tp, uint64_t now_ns)
{
	struct kvf_rdma *t = tp;
	struct kvf_conn *live[64];
	uint64_t now = kvf_rdma_now_ns(); /* the poller's clock, not the engine's */
	uint64_t hb = (uint64_t)t->cfg.heartbeat_interval_ms * 1000000ull;
	uint32_t n = 0, start = 0;

	if (now - t->last_scan_ns < PROGRESS_EVERY_NS)
		return 0;
	t->last_scan_ns = now;
	do {
		n = 0;
		pthread_mutex_lock(&t->lock);
		for (; start < KVF_MAX_CONNS && n < 64; start++) {
			struct kvf_conn *c = t->conns[start];

			if (c && atomic_load(&c->state) == KVF_CONN_ESTABLISHED) {
				kvf_conn_ref(c);
				live[n++] = c;
			}
		}
		pthread_mutex_unlock(&t->lock);
		for (uint32_t i = 0; i < n; i++) {
			struct kvf_conn *c = live[i];
			struct kvf_pframe *f;

			if (hb && now - c->last_hb_ns >= hb && (f = frame_alloc(KVF_PROTO_HDR_LEN))) {
				kvf_proto_encode_heartbeat(f->data, f->len);
				c->last_hb_ns = now;
				enqueue_frame(c, f);
			} else {
				conn_flush(c);
			}
			kvf_conn_put(c);
		}
	} while (start < KVF_MAX_CONNS);
	return 0;
}

/* ============================================================ lifetime */

static void op_close(void *tp)
{
	struct kvf_rdma *t = tp;

	if (!t)
		return;
	if (t->poller_started) {
		struct kvf_event ev[32];
		uint32_t k;

		atomic_store_explicit(&t->stop, true, memory_order_release);
		kvf_rdma_wake(t);
		/* The poller may be waiting for room in a full ring (its push never
		 * drops), and we are the ring's consumer: keep discarding until it
		 * is out, or the join would wait forever. Nobody applies events
		 * after close. Acquire pairs with the poller's release store. */
		while (!atomic_load_explicit(&t->poller_done, memory_order_acquire)) {
			while ((k = kvf_ring_pop_batch(t->ring, ev, 32)))
				for (uint32_t i = 0; i < k; i++)
					free(ev[i].data);
			sched_yield();
		}
		pthread_join(t->poller, NULL);
	}
	for (uint32_t i = 0; i < t->np; i++)
		kvf_conn_put(t->plist[i]);
	free(t->plist);
	free(t->wcs);
	for (uint32_t i = 0; i < KVF_MAX_CONNS; i++)
		if (t->conns[i])
			kvf_conn_put(t->conns[i]);
	if (t->listen_id)
		rdma_destroy_id(t->listen_id);
	kvf_pool_destroy(t->pool);
	if (t->cch)
		ibv_destroy_comp_channel(t->cch);
	if (t->pd)
		ibv_dealloc_pd(t->pd);
	if (t->devs)
		rdma_free_devices(t->devs);
	if (t->ech)
		rdma_destroy_event_channel(t->ech);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static const struct kvf_transport_ops rdma_ops = {
	.pool_register = op_pool_register,
	.send_room_info = op_send_room_info,
	.post_writes = op_post_writes,
	.cancel_writes = op_cancel_writes,
	.send_abort = op_send_abort,
	.send_abort_ack = op_send_abort_ack,
	.teardown = op_teardown,
	.on_wc = op_on_wc,
	.progress = op_progress,
	.close = op_close,
};

static int check_cfg(struct kvf_rdma *t)
{
	struct kvf_config *cfg = &t->cfg;
	size_t fm;

	if (cfg->sq_depth < 2 || cfg->rq_depth < 2 || !cfg->max_blocks_per_room ||
	    !cfg->signal_every) {
		kvf_err("rdma", "rdma.sq_depth and rdma.rq_depth must be >= 2, "
			"rdma.signal_every and engine.max_blocks_per_room >= 1");
		return -EINVAL;
	}
	/* Every receive buffer is frame_max bytes, rq_depth of them per
	 * connection: cap it. A ROOM_INFO over the cap goes as a sequence of
	 * frames (proto.h). */
	fm = kvf_proto_room_info_len(cfg->max_blocks_per_room);
	if (fm > FRAME_CAP)
		fm = FRAME_CAP;
	if (fm < kvf_proto_hello_len(HELLO_MAX_BUFS))
		fm = kvf_proto_hello_len(HELLO_MAX_BUFS);
	fm = (fm + 4095) & ~(size_t)4095;
	t->frame_max = (uint32_t)fm;
	t->signal_every = cfg->signal_every < cfg->sq_depth ? cfg->signal_every : cfg->sq_depth;
	t->max_sge = cfg->max_sge && cfg->max_sge < KVF_MAX_SGE ? cfg->max_sge : KVF_MAX_SGE;
	return 0;
}

static void make_cm_priv(struct kvf_rdma *t)
{
	struct kvf_cm_hello h = {.version = KVF_PROTO_VERSION, .frame_max = t->frame_max,
				 .mtu = t->want_mtu};

	kvf_proto_token_hash(t->cfg.auth_token, t->token_hash);
	memcpy(h.token_hash, t->token_hash, sizeof(h.token_hash));
	snprintf(h.engine_id, sizeof(h.engine_id), "%.28s", t->cfg.engine_id);
	kvf_proto_encode_cm(t->cm_priv, &h);
}

static int bind_listener(struct kvf_rdma *t)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM}, *ai;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%u", t->cfg.listen_port);
	rc = getaddrinfo(t->cfg.listen_addr, port, &hints, &ai);
	if (rc) {
		kvf_err("rdma", "rdma.listen_addr %s: %s", t->cfg.listen_addr, gai_strerror(rc));
		return -EINVAL;
	}
	if (rdma_create_id(t->ech, &t->listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(t->listen_id, ai->ai_addr)) {
		rc = -errno;
		kvf_err("rdma", "binding %s:%s: %s", t->cfg.listen_addr, port, strerror(-rc));
	}
	freeaddrinfo(ai);
	return rc;
}

/* The device rdma.source_addr is on (bound to it once, like the listener),
 * or NULL where it is not set or not on an RDMA device (logged). */
static struct ibv_context *source_device(struct kvf_rdma *t, uint8_t *port)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *ai;
	struct rdma_cm_id *id = NULL;
	struct ibv_context *ctx = NULL;

	if (!t->cfg.source_addr[0] || getaddrinfo(t->cfg.source_addr, NULL, &hints, &ai))
		return NULL;
	if (!rdma_create_id(t->ech, &id, NULL, RDMA_PS_TCP) && !rdma_bind_addr(id, ai->ai_addr)) {
		ctx = id->verbs;
		*port = id->port_num;
	}
	if (!ctx)
		kvf_warn("rdma", "rdma.source_addr %s is not on an RDMA device: %s",
			 t->cfg.source_addr, strerror(errno));
	if (id)
		rdma_destroy_id(id);
	freeaddrinfo(ai);
	return ctx;
}

/* The device: rdma.device if set, else the one the listen address (or
 * rdma.source_addr) is on, else the first with an ACTIVE port. Every
 * connection must route through it: the pool is registered there. */
static int open_device(struct kvf_rdma *t)
{
	uint8_t sport = 0;
	struct ibv_context *lctx;
	struct ibv_device_attr da;
	int n = 0, rc;

	/* First: the list holds the device contexts open, so the one a
	 * short-lived id reports stays valid after that id is gone. */
	t->devs = rdma_get_devices(&n);
	if (!t->devs || !n) {
		kvf_err("rdma", "no RDMA devices");
		return -ENODEV;
	}
	lctx = t->listen_id ? t->listen_id->verbs : source_device(t, &sport);
	if (lctx && !t->cfg.device[0]) {
		t->ctx = lctx;
		t->port = t->cfg.port_num ? (uint8_t)t->cfg.port_num
			  : t->listen_id ? t->listen_id->port_num : sport;
		rc = kvf_verbs_check_port(t->ctx, t->port);
	} else {
		rc = kvf_verbs_pick_device(t->devs, n, t->cfg.device, t->cfg.port_num, &t->ctx,
					   &t->port);
	}
	if (rc)
		return rc;
	if (lctx && lctx != t->ctx) {
		kvf_err("rdma", "%s %s is on %s, rdma.device is %s",
			t->listen_id ? "rdma.listen_addr" : "rdma.source_addr",
			t->listen_id ? t->cfg.listen_addr : t->cfg.source_addr,
			ibv_get_device_name(lctx->device), t->cfg.device);
		return -EINVAL;
	}
	if (!ibv_query_device(t->ctx, &da) && (uint32_t)da.max_sge < t->max_sge)
		t->max_sge = (uint32_t)da.max_sge;
	kvf_info("rdma", "device %s port %u", ibv_get_device_name(t->ctx->device), t->port);
	return 0;
}

/* What the queue pairs will be set up with, checked against the port once
 * here, so a wrong rdma.mtu or rdma.gid_index fails create with its reason
 * instead of every connection at RTR. */
static int check_port_attrs(struct kvf_rdma *t)
{
	const struct kvf_config *cfg = &t->cfg;
	const char *dev = ibv_get_device_name(t->ctx->device);
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int rc = ibv_query_port(t->ctx, t->port, &pa);

	if (rc) {
		kvf_err("rdma", "%s port %u: ibv_query_port: %s", dev, t->port, strerror(rc));
		return -rc;
	}
	t->active_mtu = (uint8_t)pa.active_mtu;
	if (cfg->mtu) {
		t->want_mtu = (uint8_t)kvf_verbs_mtu_enum(cfg->mtu);
		if (!t->want_mtu || t->want_mtu > pa.active_mtu) {
			kvf_err("rdma", "rdma.mtu %u: %s port %u has an active MTU of %u (max %u); "
				"set rdma.mtu to at most %u, or 0 for the path's", cfg->mtu, dev,
				t->port, kvf_verbs_mtu_bytes(pa.active_mtu),
				kvf_verbs_mtu_bytes(pa.max_mtu), kvf_verbs_mtu_bytes(pa.active_mtu));
			return -EINVAL;
		}
	}
	if (cfg->gid_index >= 0) {
		static const uint8_t zero[16];

		if (cfg->gid_index >= pa.gid_tbl_len ||
		    ibv_query_gid(t->ctx, t->port, cfg->gid_index, &gid) ||
		    !memcmp(gid.raw, zero, sizeof(zero))) {
			kvf_err("rdma", "rdma.gid_index %d: %s port %u has no GID there (table of %d)",
				cfg->gid_index, dev, t->port, pa.gid_tbl_len);
			return -EINVAL;
		}
	}
	kvf_info("rdma", "%s port %u: active MTU %u%s%s, gid index %s", dev, t->port,
		 kvf_verbs_mtu_bytes(pa.active_mtu), cfg->mtu ? ", rdma.mtu " : "",
		 cfg->mtu ? "set" : "", cfg->gid_index >= 0 ? "from rdma.gid_index" : "rdma_cm's");
	return 0;
}

static int open_verbs(struct kvf_rdma *t)
{
	t->pd = ibv_alloc_pd(t->ctx);
	if (!t->pd)
		return -(errno ? errno : ENOMEM);
	t->cch = ibv_create_comp_channel(t->ctx);
	if (!t->cch)
		return -(errno ? errno : ENOMEM);
	if (kvf_verbs_nonblock(t->cch->fd) || kvf_verbs_nonblock(t->ctx->async_fd))
		return -errno;
	return 0;
}

static int start(struct kvf_rdma *t)
{
	int rc;

	if (t->listen_id) {
		if (rdma_listen(t->listen_id, 128)) {
			rc = -errno;
			kvf_err("rdma", "rdma_listen on %s:%u: %s", t->cfg.listen_addr,
				t->cfg.listen_port, strerror(-rc));
			return rc;
		}
		kvf_info("rdma", "listening on %s:%u", t->cfg.listen_addr,
			 ntohs(rdma_get_src_port(t->listen_id)));
	}
	/* Allocated here, not in the thread: a poller that cannot start must
	 * fail create, not leave every transfer unpolled. */
	t->wcs = calloc(t->cfg.poll_batch ? t->cfg.poll_batch : 32, sizeof(*t->wcs));
	if (!t->wcs)
		return -ENOMEM;
	rc = pthread_create(&t->poller, NULL, kvf_poller_main, t);
	if (rc)
		return -rc;
	t->poller_started = true;
	return 0;
}

int kvf_rdma_create(const struct kvf_config *cfg, struct kvf_ring *ring,
		    const struct kvf_transport_ops **ops, void **out)
{
	struct kvf_rdma *t;
	int rc;

	if (!cfg || !ring || !ops || !out)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cfg = *cfg;
	t->ring = ring;
	t->wake_fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	rc = check_cfg(t);
	if (rc)
		goto fail;
	t->ech = rdma_create_event_channel();
	if (!t->ech) {
		rc = -(errno ? errno : ENODEV);
		kvf_err("rdma", "rdma_create_event_channel: %s", strerror(-rc));
		goto fail;
	}
	rc = kvf_verbs_nonblock(t->ech->fd);
	if (!rc && cfg->listen_addr[0])
		rc = bind_listener(t);
	if (!rc)
		rc = open_device(t);
	if (!rc)
		rc = check_port_attrs(t);
	if (!rc)
		rc = open_verbs(t);
	if (rc)
		goto fail;
	make_cm_priv(t);
	t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = start(t);
	if (rc)
		goto fail;
	*ops = &rdma_ops;
	*out = t;
	return 0;
fail:
	/* op_close releases whatever was set up, in reverse. */
	op_close(t);
	return rc;
}
