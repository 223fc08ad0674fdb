/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/frames.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <kvferry/kvferry.h>

#include "base/log.h"
#include "rdma/rdma_internal.h"
#include "rdma/verbs.h"

/* Frame memory is pages of its own, mapped and unmapped whole: given back
 * to the kernel when it goes (malloc would keep freed megabytes resident,
 * docs/chaos.md's teardown soak), and no other object shares a registered
 * page (what the NIC pins, and what fork-safe rdma-core marks
 * MADV_DONTFORK, is whole pages). */
void *kvf_frames_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void kvf_frames_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static size_t chunk_bytes(const struct kvf_rdma *t)
{
	return (size_t)t->rx.step * t->frame_max;
}

uint8_t *kvf_frames_rx(struct kvf_rdma *t, uint32_t slot)
{
	return t->rx.chunks[slot / t->rx.step].buf + (size_t)(slot % t->rx.step) * t->frame_max;
}

int kvf_frames_repost(struct kvf_rdma *t, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)kvf_frames_rx(t, slot),
		.length = t->frame_max,
		.lkey = t->rx.chunks[slot / t->rx.step].mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = kvf_wr_id(KVF_WR_RECV, 0, slot),
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;
	int rc = ibv_post_srq_recv(t->rx.srq, &wr, &bad);

	if (rc)
		kvf_err("rdma", "%s: ibv_post_srq_recv(frame %u): %s", t->rail_name[0] ?
			t->rail_name : "shared receive queue", slot, strerror(rc));
	return -rc;
}

uint32_t kvf_frames_rx_count(const struct kvf_rdma *t)
{
	return t->rx.nchunks * t->rx.step;
}

/* The limit event fires once the frames not consumed fall under it, and
 * is then disarmed by the device: set it again each time. */
static void arm_limit(struct kvf_rdma *t)
{
	struct ibv_srq_attr a = {.srq_limit = kvf_frames_rx_count(t) / 4};
	int rc = ibv_modify_srq(t->rx.srq, &a, IBV_SRQ_LIMIT);

	t->rx.limit_at = rc ? 0 : a.srq_limit;
	if (rc)
		kvf_warn("rdma", "ibv_modify_srq(limit %u): %s: the shared receive queue will not "
			 "grow past %u frames", a.srq_limit, strerror(rc), kvf_frames_rx_count(t));
}

/* One more chunk of rdma.rq_depth frames, registered and posted. */
static int add_chunk(struct kvf_rdma *t)
{
	struct kvf_rx_chunk *ch = &t->rx.chunks[t->rx.nchunks];
	uint32_t first = t->rx.nchunks * t->rx.step;
	int rc;

	ch->buf = kvf_frames_map(chunk_bytes(t));
	if (!ch->buf)
		return -ENOMEM;
	rc = kvf_verbs_reg_mr(t->pd, ch->buf, chunk_bytes(t), IBV_ACCESS_LOCAL_WRITE,
			      "receive frames", &ch->mr);
	if (rc) {
		kvf_frames_unmap(ch->buf, chunk_bytes(t));
		ch->buf = NULL;
		return rc;
	}
	t->rx.nchunks++;
	for (uint32_t i = 0; !rc && i < t->rx.step; i++)
		rc = kvf_frames_repost(t, first + i);
	atomic_fetch_add_explicit(&t->st_rx_frames, t->rx.step, memory_order_relaxed);
	return rc;
}

void kvf_frames_on_limit(struct kvf_rdma *t)
{
	atomic_fetch_add_explicit(&t->st_srq_low, 1, memory_order_relaxed);
	if (kvf_frames_rx_count(t) + t->rx.step > t->rx.max) {
		kvf_warn("rdma", "%s: the shared receive queue is under %u free frames at its "
			 "most, %u (rdma.srq_depth): peers' sends wait (RNR) until the poller "
			 "catches up", t->rail_name[0] ? t->rail_name : "rdma", t->rx.limit_at,
			 kvf_frames_rx_count(t));
		arm_limit(t);
		return;
	}
	if (add_chunk(t))
		kvf_warn("rdma", "the shared receive queue could not grow past %u frames",
			 kvf_frames_rx_count(t));
	else
		kvf_info("rdma", "%s: shared receive queue grown to %u frames (rdma.srq_depth %u)",
			 t->rail_name[0] ? t->rail_name : "rdma", kvf_frames_rx_count(t),
			 t->rx.max);
	arm_limit(t);
}

/* Every rail's SRQ in the process, to route an SRQ event that another
 * engine's poller read (frames.h). A handful of rails: a list. */
static pthread_mutex_t srqs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvf_rdma *srqs[64 * KVF_MAX_RAILS];

static void srq_register(struct kvf_rdma *t, bool on)
{
	pthread_mutex_lock(&srqs_lock);
	for (size_t i = 0; i < sizeof(srqs) / sizeof(srqs[0]); i++) {
		if (on ? !srqs[i] : srqs[i] == t) {
			srqs[i] = on ? t : NULL;
			break;
		}
	}
	pthread_mutex_unlock(&srqs_lock);
}

void kvf_frames_srq_event(struct kvf_rdma *t, struct ibv_srq *srq, bool fatal)
{
	struct kvf_rdma *owner = srq == t->rx.srq ? t : NULL;

	pthread_mutex_lock(&srqs_lock); /* the owner is not closed under it */
	for (size_t i = 0; !owner && i < sizeof(srqs) / sizeof(srqs[0]); i++)
		if (srqs[i] && srqs[i]->rx.srq == srq)
			owner = srqs[i];
	if (owner) {
		atomic_store(fatal ? &owner->rx.dead : &owner->rx.low, true);
		kvf_rdma_wake(owner);
	}
	pthread_mutex_unlock(&srqs_lock);
	if (!owner)
		kvf_info("rdma", "%s for a shared receive queue no engine has: ignored",
			 fatal ? "IBV_EVENT_SRQ_ERR" : "IBV_EVENT_SRQ_LIMIT_REACHED");
}

/* rdma.srq_depth, within what the device has (a whole number of chunks). */
static int size_rx(struct kvf_rdma *t)
{
	struct ibv_device_attr da;
	uint32_t max = t->cfg.srq_depth;
	int rc = ibv_query_device(t->ctx, &da);

	if (rc) {
		kvf_err("rdma", "ibv_query_device: %s", strerror(rc));
		return -rc;
	}
	if (da.max_srq <= 0 || da.max_srq_wr <= 0) {
		kvf_err("rdma", "%s has no shared receive queues (max_srq %d): kvferry needs one "
			"per rail", ibv_get_device_name(t->ctx->device), da.max_srq);
		return -EOPNOTSUPP;
	}
	if ((int64_t)max > da.max_srq_wr || (int64_t)max > da.max_cqe) {
		max = (uint32_t)(da.max_srq_wr < da.max_cqe ? da.max_srq_wr : da.max_cqe);
		kvf_warn("rdma", "rdma.srq_depth %u: %s allows %u (max_srq_wr %d, max_cqe %d)",
			 t->cfg.srq_depth, ibv_get_device_name(t->ctx->device), max,
			 da.max_srq_wr, da.max_cqe);
	}
	t->rx.step = t->cfg.rq_depth < max ? t->cfg.rq_depth : max;
	t->rx.max = max / t->rx.step * t->rx.step;
	t->rx.chunks = calloc(t->rx.max / t->rx.step, sizeof(*t->rx.chunks));
	return t->rx.chunks ? 0 : -ENOMEM;
}

static int open_rx(struct kvf_rdma *t)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_sge = 1}};
	int rc = size_rx(t);

	if (rc)
		return rc;
	sa.attr.max_wr = t->rx.max;
	t->rx.srq = ibv_create_srq(t->pd, &sa);
	if (!t->rx.srq) {
		rc = -(errno ? errno : ENOMEM);
		kvf_err("rdma", "ibv_create_srq(%u frames): %s", t->rx.max, strerror(-rc));
		return rc;
	}
	/* Its context: the unacked count on_cq_events keeps (poller.c). */
	t->rx.cq = ibv_create_cq(t->ctx, (int)t->rx.max, &t->rx.cq_unacked, t->cch, 0);
	if (!t->rx.cq) {
		rc = -(errno ? errno : ENOMEM);
		kvf_err("rdma", "ibv_create_cq(%u entries) for the shared receive queue: %s",
			t->rx.max, strerror(-rc));
		return rc;
	}
	rc = add_chunk(t);
	if (!rc) {
		arm_limit(t);
		srq_register(t, true);
	}
	return rc;
}

static int open_tx(struct kvf_rdma *t)
{
	size_t len = (size_t)t->cfg.send_frames * t->frame_max;
	int rc = kvf_txpool_init(&t->tx.pool, t->cfg.send_frames);

	if (rc)
		return rc;
	t->tx.buf = kvf_frames_map(len);
	if (!t->tx.buf)
		return -ENOMEM;
	return kvf_verbs_reg_mr(t->pd, t->tx.buf, len, 0, "send frames", &t->tx.mr);
}

int kvf_frames_open(struct kvf_rdma *t)
{
	int rc = open_rx(t);

	if (!rc)
		rc = open_tx(t);
	if (!rc)
		kvf_info("rdma", "frames of %u bytes: %u receive (shared receive queue, up to %u), "
			 "%u send; for every connection of the rail", t->frame_max,
			 kvf_frames_rx_count(t), t->rx.max, t->cfg.send_frames);
	return rc;
}

void kvf_frames_close(struct kvf_rdma *t)
{
	srq_register(t, false);
	if (t->rx.cq) {
		if (t->rx.cq_unacked)
			ibv_ack_cq_events(t->rx.cq, t->rx.cq_unacked);
		ibv_destroy_cq(t->rx.cq);
	}
	if (t->rx.srq)
		ibv_destroy_srq(t->rx.srq);
	for (uint32_t i = 0; i < t->rx.nchunks; i++) {
		ibv_dereg_mr(t->rx.chunks[i].mr);
		kvf_frames_unmap(t->rx.chunks[i].buf, chunk_bytes(t));
	}
	free(t->rx.chunks);
	if (t->tx.mr)
		ibv_dereg_mr(t->tx.mr);
	kvf_frames_unmap(t->tx.buf, (size_t)t->tx.pool.n * t->frame_max);
	kvf_txpool_fini(&t->tx.pool);
	t->rx = (struct kvf_rx_frames){0};
	t->tx = (struct kvf_tx_frames){0};
}

uint8_t *kvf_frames_tx(struct kvf_rdma *t, uint32_t i)
{
	return t->tx.buf + (size_t)i * t->frame_max;
}

uint32_t kvf_frames_tx_lkey(const struct kvf_rdma *t)
{
	return t->tx.mr->lkey;
}
