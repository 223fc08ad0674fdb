/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include "rdma/stage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/conn.h"
#include "cuda/copier.h"
#include "base/log.h"
#include "rdma/pool.h"
#include "rdma/rdma_internal.h"
#include "rdma/sched.h"
#include "transfer/stage_pool.h"
#include "rdma/verbs.h"

struct kvf_staging {
	struct kvf_stage_pool pool;
	uint8_t *area;            /* nslots x KVF_STAGE_SLOT_BYTES, registered */
	size_t len;
	struct ibv_mr *mr;
	struct kvf_copier *cuda;  /* for KVF_POOL_STAGE_CUDA regions */
	struct kvf_copier *host;  /* for KVF_POOL_STAGE_HOST regions (test hook) */
	uint16_t next_tag;
	uint64_t copy_errors;
};

/* One item run to copy: src (buffer address) to the chunk's slot ord, at off. */
struct stage_copy {
	uint64_t src;
	uint32_t ord;
	uint32_t off;
	uint32_t len;
};

/* A claim's priv: its copier, the event of its copies, the copy list. */
struct stage_chunk {
	struct kvf_copier *cp;
	void *ev;
	uint16_t tag;
	uint32_t n;
	struct stage_copy copies[];
};

bool kvf_stage_test_forced(const char *region)
{
	const char *list = getenv("KVF_TEST_STAGE_REGIONS");
	size_t len = strlen(region);

	while (list && *list) {
		const char *end = strchr(list, ',');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n == len && !strncmp(list, region, n))
			return true;
		list = end ? end + 1 : NULL;
	}
	return false;
}

/* ------------------------------------------------------------ set up */

static int staging_create(struct kvf_rdma *t)
{
	struct kvf_staging *s = calloc(1, sizeof(*s));
	uint32_t nslots = (uint32_t)(((uint64_t)t->cfg.staging_pool_mb << 20) / KVF_STAGE_SLOT_BYTES);
	int rc;

	if (!s)
		return -ENOMEM;
	s->len = (size_t)nslots * KVF_STAGE_SLOT_BYTES;
	s->area = aligned_alloc(4096, s->len);
	rc = s->area ? kvf_stage_pool_init(&s->pool, KVF_STAGE_SLOT_BYTES, nslots) : -ENOMEM;
	if (!rc)
		rc = kvf_verbs_reg_mr(t->pd, s->area, s->len, IBV_ACCESS_LOCAL_WRITE,
				      "staging slots", &s->mr);
	if (rc) {
		kvf_stage_pool_fini(&s->pool);
		free(s->area);
		free(s);
		return rc;
	}
	kvf_info("stage", "staging pool: %" PRIu32 " slots of %u KiB (rdma.staging_pool_mb = %"
		 PRIu32 ")", nslots, KVF_STAGE_SLOT_BYTES / 1024, t->cfg.staging_pool_mb);
	t->staging = s;
	return 0;
}

static int region_copier(struct kvf_staging *s, const struct kvf_pool *p)
{
	if (p->stage == KVF_POOL_STAGE_HOST) {
		if (!s->host)
			s->host = kvf_copier_host_create();
		return s->host ? 0 : -ENOMEM;
	}
	if (s->cuda)
		return 0;
	for (uint32_t b = 0; b < p->nbufs; b++)
		if (p->bufs[b].staged)
			return kvf_copier_cuda_create(p->bufs[b].addr, s->area, s->len, &s->cuda);
	return -EINVAL;
}

static int staging_region(struct kvf_rdma *t, const struct kvf_pool *p)
{
	int rc;

	for (uint32_t b = 0; b < p->nbufs; b++) {
		if (p->bufs[b].staged && p->bufs[b].block_size > KVF_STAGE_SLOT_BYTES) {
			kvf_err("stage", "region '%s' buffer %" PRIu32 ": item size %" PRIu64 " is over "
				"a staging slot (%u bytes): it cannot be staged", p->name, b,
				p->bufs[b].block_size, KVF_STAGE_SLOT_BYTES);
			return -EINVAL;
		}
	}
	if (!t->staging) {
		rc = staging_create(t);
		if (rc)
			return rc;
	}
	rc = region_copier(t->staging, p);
	if (rc)
		kvf_err("stage", "region '%s': no %s copier for staging: %s", p->name,
			p->stage == KVF_POOL_STAGE_HOST ? "host" : "CUDA", strerror(-rc));
	return rc;
}

int kvf_staging_pool_create(struct kvf_rdma *t, const struct kvf_region_layout *layout,
			    struct kvf_pool **out)
{
	int rc = kvf_pool_create(t->pd, layout, !t->cfg.cuda_staging ? KVF_STAGE_REFUSE :
				 kvf_stage_test_forced(layout->name) ? KVF_STAGE_FORCE :
				 KVF_STAGE_ALLOW, out);

	if (!rc && (*out)->stage)
		rc = staging_region(t, *out);
	if (rc && *out) {
		kvf_pool_destroy(*out);
		*out = NULL;
	}
	return rc;
}

/* A receiver's region must be registered memory: a staged one would need
 * a copy after the final write-with-immediate, and SUCCESS would no longer
 * mean that every byte is in place (docs/design.md, "GPU memory and
 * staging"). */
bool kvf_staging_receiver_ok(const struct kvf_rdma *t, const struct kvf_info_out *info)
{
	for (uint32_t k = 0; k < info->nlists; k++) {
		const struct kvf_pool *p = info->lists[k].region < KVF_MAX_REGIONS ?
					   t->regions[info->lists[k].region] : NULL;

		if (p && p->stage) {
			kvf_err("rdma", "room %#" PRIx64 ": region '%s' is staged through host memory "
				"and cannot receive: a decode needs GPUDirect (dmabuf or peer memory) "
				"or host memory", info->room_id, p->name);
			return false;
		}
	}
	return true;
}

void kvf_staging_destroy(struct kvf_rdma *t)
{
	struct kvf_staging *s = t->staging;

	if (!s)
		return;
	for (struct kvf_stage_claim *c = s->pool.head; c; c = c->next) {
		struct stage_chunk *ch = c->priv;

		if (c->state == KVF_CLAIM_COPYING && ch->ev)
			ch->cp->ops->drop(ch->cp, ch->ev); /* the slots must be quiet */
	}
	kvf_stage_pool_fini(&s->pool);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cuda)
		s->cuda->ops->destroy(s->cuda);
	if (s->host)
		s->host->ops->destroy(s->host);
	free(s->area);
	free(s);
	t->staging = NULL;
}

/* ------------------------------------------------------------ building */

/* What a chunk's parts become: registered buffers' parts as they were,
 * staged buffers' items packed into the chunk's slots, one part per run
 * of items in one slot (local: slot-relative address, the staging lkey). */
struct chunk_build {
	struct kvf_sq_part *parts;
	uint32_t nout;
	struct kvf_sq_buf *runs;
	uint32_t nruns;
	uint32_t *iota;       /* 0, 1, 2...: a run's items are contiguous in its slot */
	struct stage_chunk *ch;
	uint32_t ord, off;    /* where the next item goes: slot, offset */
	bool any;             /* an item is staged */
	uint64_t bytes;
};

static void add_copy(struct chunk_build *cb, uint64_t src, uint32_t len)
{
	struct stage_chunk *ch = cb->ch;
	struct stage_copy *l = ch->n ? &ch->copies[ch->n - 1] : NULL;

	if (l && l->ord == cb->ord && l->off + l->len == cb->off && l->src + l->len == src) {
		l->len += len;
	} else {
		ch->copies[ch->n++] = (struct stage_copy){.src = src, .ord = cb->ord,
							  .off = cb->off, .len = len};
	}
	cb->off += len;
	cb->bytes += len;
}

static void pack_buffer(const struct kvf_staging *s, struct chunk_build *cb,
			const struct kvf_sq_part *sp, uint32_t b, const struct kvf_pool_buf *pb)
{
	uint32_t bs = (uint32_t)pb->block_size; /* <= KVF_STAGE_SLOT_BYTES (kvf_staging_region) */

	for (uint32_t i = 0; i < sp->n;) {
		uint32_t i0 = i;
		struct kvf_sq_buf *lb;

		if (cb->any && cb->off + bs > KVF_STAGE_SLOT_BYTES) {
			cb->ord++;
			cb->off = 0;
		}
		cb->any = true;
		lb = &cb->runs[cb->nruns++];
		*lb = (struct kvf_sq_buf){.addr = (uint64_t)cb->ord * KVF_STAGE_SLOT_BYTES + cb->off,
					  .block_size = bs, .key = s->mr->lkey};
		for (; i < sp->n && cb->off + bs <= KVF_STAGE_SLOT_BYTES; i++)
			add_copy(cb, pb->addr + (uint64_t)sp->src[i] * bs, bs);
		cb->parts[cb->nout++] = (struct kvf_sq_part){.local = lb, .remote = &sp->remote[b],
			.nbufs = 1, .n = i - i0, .src = cb->iota, .dst = sp->dst + i0};
	}
}

static void build_free(struct chunk_build *cb)
{
	free(cb->parts);
	free(cb->runs);
	free(cb->iota);
	free(cb->ch);
}

/* The copier every staged part of the chunk uses; two kinds: -ENOTSUP. */
static int pick_copier(const struct kvf_staging *s, const struct kvf_pool *const *pools,
		       uint32_t nparts, struct kvf_copier **cp)
{
	*cp = NULL;
	for (uint32_t i = 0; i < nparts; i++) {
		struct kvf_copier *k = pools[i]->stage == KVF_POOL_STAGE_HOST ? s->host :
				       pools[i]->stage == KVF_POOL_STAGE_CUDA ? s->cuda : NULL;

		if (k && *cp && k != *cp) {
			kvf_err("stage", "a chunk with parts staged from CUDA and from host memory: "
				"not supported");
			return -ENOTSUP;
		}
		*cp = k ? k : *cp;
	}
	return 0;
}

static int build(const struct kvf_staging *s, const struct kvf_sq_part *sp,
		 const struct kvf_pool *const *pools, uint32_t nparts, struct chunk_build *cb)
{
	size_t items = 0, bufs = 0, maxn = 1;
	struct kvf_copier *cp;
	int rc = pick_copier(s, pools, nparts, &cp);

	memset(cb, 0, sizeof(*cb));
	if (rc || !cp)
		return rc;
	for (uint32_t i = 0; i < nparts; i++) {
		items += (size_t)sp[i].n * sp[i].nbufs;
		bufs += sp[i].nbufs;
		maxn = sp[i].n > maxn ? sp[i].n : maxn;
	}
	cb->parts = calloc(items + bufs, sizeof(*cb->parts));
	cb->runs = calloc(items + 1, sizeof(*cb->runs));
	cb->iota = calloc(maxn, sizeof(*cb->iota));
	cb->ch = calloc(1, sizeof(*cb->ch) + (items + 1) * sizeof(cb->ch->copies[0]));
	if (!cb->parts || !cb->runs || !cb->iota || !cb->ch) {
		build_free(cb);
		return -ENOMEM;
	}
	cb->ch->cp = cp;
	for (uint32_t k = 0; k < maxn; k++)
		cb->iota[k] = k;
	for (uint32_t i = 0; i < nparts; i++) {
		for (uint32_t b = 0; b < sp[i].nbufs && sp[i].n; b++) {
			if (pools[i]->bufs[b].staged) {
				pack_buffer(s, cb, &sp[i], b, &pools[i]->bufs[b]);
				continue;
			}
			cb->parts[cb->nout] = sp[i];
			cb->parts[cb->nout].local = &sp[i].local[b];
			cb->parts[cb->nout].remote = &sp[i].remote[b];
			cb->parts[cb->nout++].nbufs = 1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------- claims */

static struct kvf_conn *conn_of(struct kvf_rdma *t, const struct kvf_stage_room *r)
{
	struct kvf_conn *g = kvf_sched_get(t, r->conn);

	return g ? kvf_conn_pick(g, r->wr_id) : NULL;
}

struct rebase_ctx {
	const struct kvf_staging *s;
	const struct kvf_stage_claim *cl;
};

/* Slot-relative SGEs (the staging lkey) to the granted slots' addresses. */
static void rebase(void *ctx, struct kvf_wdesc *d)
{
	const struct rebase_ctx *x = ctx;

	for (uint8_t k = 0; k < d->nsge; k++) {
		struct ibv_sge *g = &d->sge[k];

		if (g->lkey != x->s->mr->lkey)
			continue;
		g->addr = (uint64_t)(uintptr_t)x->s->area +
			  (uint64_t)x->cl->slots[g->addr / KVF_STAGE_SLOT_BYTES] * KVF_STAGE_SLOT_BYTES +
			  g->addr % KVF_STAGE_SLOT_BYTES;
	}
}

static void unhold(void *ctx, struct kvf_wdesc *d)
{
	(void)ctx;
	d->flags &= (uint8_t)~KVF_WD_HELD;
	d->tag = 0;
}

/* Slots granted: rebase the held writes, queue the copies and their mark.
 * A failure leaves no mark: progress fails the connection. */
static void granted(void *ctx, struct kvf_stage_claim *cl)
{
	struct kvf_rdma *t = ctx;
	struct kvf_staging *s = t->staging;
	struct stage_chunk *ch = cl->priv;
	struct kvf_conn *c = conn_of(t, cl->room);
	struct rebase_ctx x = {s, cl};
	int rc = 0;

	if (c)
		kvf_sendq_each_tagged(&c->sq, cl->tag, rebase, &x);
	for (uint32_t i = 0; i < ch->n && !rc; i++) {
		const struct stage_copy *k = &ch->copies[i];

		rc = ch->cp->ops->copy(ch->cp, s->area + (size_t)cl->slots[k->ord] *
				       KVF_STAGE_SLOT_BYTES + k->off, k->src, k->len);
	}
	if (!rc)
		rc = ch->cp->ops->mark(ch->cp, &ch->ev);
	if (rc)
		ch->ev = NULL;
}

static uint16_t next_tag(struct kvf_staging *s)
{
	if (!++s->next_tag) /* 0 is "no tag" */
		s->next_tag = 1;
	return s->next_tag;
}

/* Queue cb's writes held under a new tag, for claim cl. */
static int queue_held(struct kvf_staging *s, struct kvf_conn *c, struct kvf_stage_claim *cl,
		      const struct chunk_build *cb, uint64_t wr_id, const uint32_t *imm,
		      const struct kvf_sq_buf *imm_to)
{
	size_t before = kvf_sendq_waiting(&c->sq);
	int rc = kvf_sendq_add_parts(&c->sq, cb->parts, cb->nout, wr_id, imm, imm_to);

	if (rc < 0)
		return rc;
	cl->tag = cb->ch->tag = next_tag(s);
	kvf_sendq_hold_tail(&c->sq, kvf_sendq_waiting(&c->sq) - before, cl->tag);
	return rc;
}

int kvf_staging_add(struct kvf_rdma *t, struct kvf_conn *c, uint32_t conn, uint64_t wr_id,
		    const struct kvf_sq_part *sp, const struct kvf_xfer_part *parts,
		    uint32_t nparts, const uint32_t *imm, const struct kvf_sq_buf *imm_to)
{
	const struct kvf_pool *pools[KVF_MAX_REGIONS];
	struct kvf_staging *s = t->staging;
	struct kvf_stage_claim *cl;
	struct chunk_build cb;
	int rc;

	if (!s)
		return kvf_sendq_add_parts(&c->sq, sp, nparts, wr_id, imm, imm_to);
	for (uint32_t i = 0; i < nparts; i++)
		pools[i] = t->regions[parts[i].region]; /* checked by the caller */
	rc = build(s, sp, pools, nparts, &cb);
	if (rc)
		return rc;
	if (!cb.any) { /* nothing staged: as without staging, but counted */
		build_free(&cb);
		rc = kvf_sendq_add_parts(&c->sq, sp, nparts, wr_id, imm, imm_to);
		if (rc > 0)
			kvf_stage_queued(&s->pool, conn, wr_id, (uint32_t)rc);
		return rc;
	}
	rc = kvf_stage_claim_new(&s->pool, conn, wr_id, cb.ord + 1, cb.bytes, &cl);
	if (rc == -E2BIG)
		kvf_err("stage", "a chunk of %" PRIu64 " staged bytes needs %u slots of %u KiB, the "
			"pool has %u (raise rdma.staging_pool_mb)", cb.bytes, cb.ord + 1,
			KVF_STAGE_SLOT_BYTES / 1024, s->pool.nslots);
	if (rc) {
		build_free(&cb);
		return rc;
	}
	cl->priv = cb.ch;
	rc = queue_held(s, c, cl, &cb, wr_id, imm, imm_to);
	cb.ch = NULL;
	build_free(&cb);
	if (rc < 0) {
		cl->cancelled = true;
		kvf_stage_reap(&s->pool);
		return rc;
	}
	kvf_stage_queued(&s->pool, conn, wr_id, (uint32_t)rc);
	cl->sig_end = cl->room->queued;
	kvf_stage_grant(&s->pool, granted, t);
	return rc;
}

/* ------------------------------------------------------------ progress */

void kvf_staging_on_wc(struct kvf_rdma *t, uint32_t conn, uint64_t wr_id)
{
	if (t->staging)
		kvf_stage_completed(&t->staging->pool, conn, wr_id);
}

int kvf_staging_cancel(struct kvf_rdma *t, uint32_t conn, uint64_t wr_id, int ndropped)
{
	if (!t->staging)
		return ndropped;
	kvf_stage_cancel(&t->staging->pool, conn, wr_id, ndropped > 0 ? (uint32_t)ndropped : 0);
	kvf_stage_reap(&t->staging->pool);
	return ndropped;
}

static void copy_check(struct kvf_rdma *t, struct kvf_stage_claim *cl, kvf_staging_kick_fn kick,
		       kvf_staging_fail_fn fail)
{
	struct stage_chunk *ch = cl->priv;
	int rc = ch->ev ? ch->cp->ops->done(ch->cp, ch->ev) : -EIO;
	struct kvf_conn *c;

	if (!rc)
		return;
	ch->ev = NULL;
	cl->state = KVF_CLAIM_COPIED;
	c = cl->cancelled ? NULL : conn_of(t, cl->room);
	if (rc < 0)
		t->staging->copy_errors++;
	if (!c)
		return;
	if (rc < 0) {
		kvf_err("stage", "connection %u (%s): a staged chunk's copy to host memory failed; "
			"tearing it down", c->id, c->peer);
		fail(c, KVF_FAIL_PEER_LOST, "a staged chunk's copy to host memory failed");
		return;
	}
	kvf_sendq_each_tagged(&c->sq, cl->tag, unhold, NULL);
	kick(c);
}

void kvf_staging_progress(struct kvf_rdma *t, kvf_staging_kick_fn kick, kvf_staging_fail_fn fail)
{
	struct kvf_staging *s = t->staging;

	if (!s)
		return;
	for (struct kvf_stage_claim *cl = s->pool.head; cl; cl = cl->next)
		if (cl->state == KVF_CLAIM_COPYING)
			copy_check(t, cl, kick, fail);
	for (struct kvf_stage_room *r = s->pool.rooms; r; r = r->next)
		if (!kvf_sched_get(t, r->conn) && r->done < r->queued)
			kvf_stage_conn_gone(&s->pool, r->conn);
	kvf_stage_reap(&s->pool);
	kvf_stage_grant(&s->pool, granted, t);
}

bool kvf_staging_busy(const struct kvf_rdma *t)
{
	const struct kvf_staging *s = t->staging;

	return s && (s->pool.head || s->pool.rooms);
}

void kvf_staging_stats(const struct kvf_rdma *t, struct kvf_transport_stats *out)
{
	const struct kvf_staging *s = t->staging;

	if (!s)
		return;
	out->staged_bytes = s->pool.bytes;
	out->staged_chunks = s->pool.granted;
	out->stage_waits = s->pool.waits;
	out->stage_slots_busy = kvf_stage_busy_slots(&s->pool);
	out->stage_copy_errors = s->copy_errors;
}
