/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/sendq.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static void check_credits(const struct kvf_sendq *sq)
{
	/* The invariant of sendq.h: every entry is free, held by a signaled
	 * WR in flight, or stranded by a failed post. */
	assert(sq->credits + sq->held + sq->stranded == sq->depth);
	(void)sq;
}

int kvf_sendq_init(struct kvf_sendq *sq, uint32_t id, uint32_t depth, uint32_t max_sge,
		   uint32_t signal_every, kvf_sq_post_fn post, void *post_ctx)
{
	memset(sq, 0, sizeof(*sq));
	if (!depth || !max_sge || !signal_every || !post)
		return -EINVAL;
	sq->id = id;
	sq->depth = depth;
	sq->max_sge = max_sge < KVF_SQ_MAX_SGE ? max_sge : KVF_SQ_MAX_SGE;
	sq->signal_every = signal_every < depth ? signal_every : depth;
	sq->post = post;
	sq->post_ctx = post_ctx;
	sq->credits = depth;
	sq->pend_max = KVF_SQ_PEND_MAX;
	sq->sig_max = depth;
	/* Each signaled WR in flight holds one entry at least: depth of them
	 * at most, and one slot more tells a full ring from an empty one. */
	sq->sig_cap = depth + 1;
	sq->sig = calloc(sq->sig_cap, sizeof(*sq->sig));
	sq->wrs = calloc(depth, sizeof(*sq->wrs));
	if (!sq->sig || !sq->wrs) {
		kvf_sendq_fini(sq);
		return -ENOMEM;
	}
	return 0;
}

void kvf_sendq_fini(struct kvf_sendq *sq)
{
	free(sq->sig);
	free(sq->pend);
	free(sq->wrs);
	sq->sig = NULL;
	sq->pend = NULL;
	sq->wrs = NULL;
}

/* ------------------------------------------------------------ credits */

/* A signaled WR went in: it frees `entries` when it completes (itself and
 * the unsignaled ones before it). */
static void sig_push(struct kvf_sendq *sq, uint32_t entries)
{
	sq->sig[sq->sig_tail] = entries;
	sq->sig_tail = (sq->sig_tail + 1) % sq->sig_cap;
	sq->credits -= entries;
	sq->held += entries;
}

void kvf_sendq_completed(struct kvf_sendq *sq)
{
	if (sq->sig_head == sq->sig_tail)
		return;
	sq->credits += sq->sig[sq->sig_head];
	sq->held -= sq->sig[sq->sig_head];
	sq->sig_head = (sq->sig_head + 1) % sq->sig_cap;
	check_credits(sq);
}

/* Post n chained WRs; *posted gets how many went in. */
static int post_chain(struct kvf_sendq *sq, struct ibv_send_wr *first, uint32_t n,
		      uint32_t *posted)
{
	struct ibv_send_wr *bad = first;
	int rc = sq->post(sq->post_ctx, first, &bad);

	*posted = 0;
	if (!rc) {
		*posted = n;
		return 0;
	}
	for (struct ibv_send_wr *w = first; w && w != bad; w = w->next)
		(*posted)++;
	if (rc != -ENOTCONN)
		kvf_err("sendq", "connection %u: posting to the send queue: %s (%u of %u posted)",
			sq->id, strerror(-rc), *posted, n);
	return rc;
}

int kvf_sendq_post_one(struct kvf_sendq *sq, struct ibv_send_wr *wr)
{
	uint32_t posted;
	int rc;

	if (!kvf_sendq_credits(sq))
		return -ENOSPC;
	wr->next = NULL;
	wr->send_flags |= IBV_SEND_SIGNALED;
	rc = post_chain(sq, wr, 1, &posted);
	if (!rc)
		sig_push(sq, 1);
	check_credits(sq);
	return rc;
}

/* ------------------------------------------------------------ posting */

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

/* Chain the waiting writes that fit the credits, and the signaled slots
 * (sig_max), into sq->wrs. Returns how many to post: up to the last
 * signaled one, 0 when none is signaled. */
static uint32_t chain_segments(struct kvf_sendq *sq)
{
	uint32_t n = 0, cut = 0, sigs = sq->sig_max - kvf_sendq_sig_inflight(sq);

	for (size_t i = sq->pend_head; i < sq->pend_tail && n < sq->credits && sigs; i++) {
		if (sq->pend[i].flags & KVF_WD_HELD)
			break; /* a staged chunk's copy is not done: it and all after wait */
		desc_to_wr(&sq->pend[i], &sq->wrs[n]);
		if (n)
			sq->wrs[n - 1].next = &sq->wrs[n];
		if (sq->pend[i].flags & KVF_WD_SIGNALED) {
			cut = n + 1;
			sigs--;
		}
		n++;
	}
	if (cut)
		sq->wrs[cut - 1].next = NULL;
	return cut;
}

int kvf_sendq_post_writes(struct kvf_sendq *sq)
{
	int rc = 0;

	while (!rc && sq->pend_head < sq->pend_tail && kvf_sendq_credits(sq)) {
		uint32_t cut = chain_segments(sq), posted, since = 0;

		if (!cut)
			break; /* the next segment needs more room than is free */
		rc = post_chain(sq, sq->wrs, cut, &posted);
		sq->wrs_posted += posted;
		for (uint32_t k = 0; k < posted; k++) {
			since++;
			if (sq->wrs[k].send_flags & IBV_SEND_SIGNALED) {
				sig_push(sq, since);
				since = 0;
			}
		}
		/* A failed post can stop mid-segment: those WRs are in, and
		 * flush when the QP errors, but no completion covers them. */
		sq->credits -= since;
		sq->stranded += since;
		sq->pend_head += posted;
		check_credits(sq);
	}
	if (sq->pend_head == sq->pend_tail)
		sq->pend_head = sq->pend_tail = 0;
	return rc;
}

int kvf_sendq_cancel(struct kvf_sendq *sq, uint64_t wr_id)
{
	size_t w = sq->pend_head;
	int dropped = 0;

	for (size_t r = sq->pend_head; r < sq->pend_tail; r++) {
		if (sq->pend[r].wr_id == wr_id) {
			dropped += !!(sq->pend[r].flags & KVF_WD_SIGNALED);
			continue;
		}
		sq->pend[w++] = sq->pend[r];
	}
	sq->pend_tail = w;
	return dropped;
}

void kvf_sendq_hold_tail(struct kvf_sendq *sq, size_t n, uint16_t tag)
{
	for (size_t k = sq->pend_tail - n; k < sq->pend_tail; k++) {
		sq->pend[k].flags |= KVF_WD_HELD;
		sq->pend[k].tag = tag;
	}
}

size_t kvf_sendq_each_tagged(struct kvf_sendq *sq, uint16_t tag,
			     void (*fn)(void *ctx, struct kvf_wdesc *d), void *ctx)
{
	size_t n = 0;

	for (size_t k = sq->pend_head; k < sq->pend_tail; k++) {
		if (sq->pend[k].tag == tag) {
			fn(ctx, &sq->pend[k]);
			n++;
		}
	}
	return n;
}

/* ----------------------------------------------------------- building */

static int pend_reserve(struct kvf_sendq *sq, size_t more)
{
	struct kvf_wdesc *p;
	size_t cap;

	if (more > sq->pend_max - kvf_sendq_waiting(sq)) {
		kvf_err("sendq", "connection %u: a room of up to %zu writes on top of %zu waiting "
			"passes the bound of %zu waiting writes: refused", sq->id, more,
			kvf_sendq_waiting(sq), sq->pend_max);
		return -ENOBUFS;
	}
	if (sq->pend_head && sq->pend_tail + more > sq->pend_cap) {
		memmove(sq->pend, sq->pend + sq->pend_head,
			(sq->pend_tail - sq->pend_head) * sizeof(*sq->pend));
		sq->pend_tail -= sq->pend_head;
		sq->pend_head = 0;
	}
	if (sq->pend_tail + more <= sq->pend_cap)
		return 0;
	cap = sq->pend_cap ? sq->pend_cap : 256;
	while (cap < sq->pend_tail + more)
		cap *= 2;
	if (cap > sq->pend_max)
		cap = sq->pend_max; /* enough: pend_head is 0 here, see above */
	p = realloc(sq->pend, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	sq->pend = p;
	sq->pend_cap = cap;
	return 0;
}

/* One buffer's WRs: runs contiguous on the remote side become one WRITE;
 * within a run, local pieces that are not contiguous become extra SGEs
 * (up to max_sge), contiguous ones grow the current SGE. A block is at most
 * KVF_SQ_MAX_WR_BYTES (pool registration), so every SGE length fits. */
static void build_buffer(struct kvf_sendq *sq, const struct kvf_sq_buf *lb,
			 const struct kvf_sq_buf *rb, uint64_t wr_id,
			 const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	uint64_t bs = lb->block_size;

	for (uint32_t i = 0; i < n;) {
		struct kvf_wdesc *d = &sq->pend[sq->pend_tail++];
		uint64_t bytes = bs;
		uint32_t j;

		memset(d, 0, sizeof(*d));
		d->wr_id = wr_id;
		d->raddr = rb->addr + dst[i] * bs;
		d->rkey = rb->key;
		d->sge[0] = (struct ibv_sge){.addr = lb->addr + src[i] * bs,
					     .length = (uint32_t)bs, .lkey = lb->key};
		d->nsge = 1;
		for (j = i + 1; j < n && dst[j] == dst[j - 1] + 1 &&
				bytes + bs <= KVF_SQ_MAX_WR_BYTES; j++) {
			if (src[j] == src[j - 1] + 1) {
				d->sge[d->nsge - 1].length += (uint32_t)bs;
			} else if (d->nsge < sq->max_sge) {
				d->sge[d->nsge++] = (struct ibv_sge){
					.addr = lb->addr + src[j] * bs,
					.length = (uint32_t)bs, .lkey = lb->key};
			} else {
				break;
			}
			bytes += bs;
		}
		i = j;
	}
}

/* One sliced buffer's WRs: per page, tokens whose destination pieces are
 * contiguous share one WRITE, each token's source piece an SGE (merged
 * into the previous one when contiguous too), up to max_sge. */
static void build_sliced(struct kvf_sendq *sq, const struct kvf_sq_buf *lb,
			 const struct kvf_sq_buf *rb, const struct kvf_slice *s, uint64_t wr_id,
			 const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t sbase = lb->addr + src[i] * lb->block_size;
		uint64_t dbase = rb->addr + dst[i] * rb->block_size;
		struct kvf_wdesc *d = NULL;
		uint64_t dnext = 0;

		for (uint32_t t = 0; t < s->tokens; t++) {
			uint64_t so = sbase + kvf_slice_src(s, t), dof = dbase + kvf_slice_dst(s, t);
			struct ibv_sge *last = d ? &d->sge[d->nsge - 1] : NULL;

			if (d && dof == dnext && last->addr + last->length == so) {
				last->length += (uint32_t)s->len;
			} else if (d && dof == dnext && d->nsge < sq->max_sge) {
				d->sge[d->nsge++] = (struct ibv_sge){.addr = so,
					.length = (uint32_t)s->len, .lkey = lb->key};
			} else {
				d = &sq->pend[sq->pend_tail++];
				*d = (struct kvf_wdesc){.wr_id = wr_id, .raddr = dof, .rkey = rb->key,
							.nsge = 1};
				d->sge[0] = (struct ibv_sge){.addr = so, .length = (uint32_t)s->len,
							     .lkey = lb->key};
			}
			dnext = dof + s->len;
		}
	}
}

/* Buffer b of part p: sliced, or whole items. */
static void build_one(struct kvf_sendq *sq, const struct kvf_sq_part *p, uint32_t b,
		      uint64_t wr_id)
{
	if (p->slices && p->slices[b].tokens)
		build_sliced(sq, &p->local[b], &p->remote[b], &p->slices[b], wr_id, p->src, p->dst,
			     p->n);
	else
		build_buffer(sq, &p->local[b], &p->remote[b], wr_id, p->src, p->dst, p->n);
}

/* Every signal_every-th WR from first on is signaled, and the last one,
 * which also carries the immediate when there is one. Returns how many are
 * signaled. */
static int mark_signals(struct kvf_sendq *sq, size_t first, const uint32_t *imm)
{
	int sig = 0;

	for (size_t k = first; k < sq->pend_tail; k++) {
		bool last = k + 1 == sq->pend_tail;

		if (last || (k - first + 1) % sq->signal_every == 0) {
			sq->pend[k].flags |= KVF_WD_SIGNALED;
			sig++;
		}
		if (last && imm) {
			sq->pend[k].flags |= KVF_WD_IMM;
			sq->pend[k].imm = *imm;
		}
	}
	return sig;
}

int kvf_sendq_add_parts(struct kvf_sendq *sq, const struct kvf_sq_part *parts, uint32_t nparts,
			uint64_t wr_id, const uint32_t *imm, const struct kvf_sq_buf *imm_to)
{
	/* At most one WR per item per buffer (per token when sliced), and one
	 * for the immediate. */
	size_t first, most = 1;
	int rc;

	for (uint32_t i = 0; i < nparts; i++)
		for (uint32_t b = 0; b < parts[i].nbufs; b++)
			most += (size_t)parts[i].n * kvf_slice_wrs_per_page(
				parts[i].slices ? &parts[i].slices[b] : &(struct kvf_slice){0},
				sq->max_sge);
	rc = pend_reserve(sq, most);
	if (rc)
		return rc;
	first = sq->pend_tail;
	for (uint32_t i = 0; i < nparts; i++)
		for (uint32_t b = 0; b < parts[i].nbufs && parts[i].n; b++)
			build_one(sq, &parts[i], b, wr_id);
	if (imm && sq->pend_tail == first) { /* nothing to copy: the immediate alone says "done" */
		struct kvf_wdesc *d = &sq->pend[sq->pend_tail++];

		memset(d, 0, sizeof(*d));
		d->wr_id = wr_id;
		d->rkey = imm_to->key;
		d->raddr = imm_to->addr;
	}
	return mark_signals(sq, first, imm);
}
