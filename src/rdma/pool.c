/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/pool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_api.h"
#include "kvf_build.h"
#include "base/log.h"
#include "transfer/proto.h"
#include "rdma/rdma_internal.h"
#include "rdma/stage.h"
#include "rdma/verbs.h"

#define POOL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void unreg_buf(struct kvf_pool_buf *b)
{
	if (b->mr)
		ibv_dereg_mr(b->mr);
	if (b->dmabuf_fd >= 0)
		close(b->dmabuf_fd);
	b->mr = NULL;
	b->dmabuf_fd = -1;
}

static int reg_buf(struct ibv_pd *pd, struct kvf_pool_buf *b, uint32_t idx, uint64_t len,
		   int stage_ok)
{
	char what[48];
	int rc = kvf_pool_reg_cuda(pd, b, len, POOL_ACCESS);

	/* No MR: stage.c copies it into registered slots. The test hook
	 * stages host memory only (its copier is memcpy). */
	if ((rc == 1 && stage_ok == KVF_STAGE_FORCE) || (rc < 0 && b->cuda && stage_ok)) {
		b->staged = true;
		return 0;
	}
	if (rc <= 0) {
		if (rc < 0)
			kvf_err("pool", "buffer %" PRIu32 " (0x%" PRIx64 ", %" PRIu64
				" bytes): CUDA registration failed: %s", idx, b->addr, len,
				strerror(-rc));
		return rc;
	}
	snprintf(what, sizeof(what), "pool buffer %" PRIu32, idx);
	return kvf_verbs_reg_mr(pd, (void *)(uintptr_t)b->addr, len, POOL_ACCESS, what, &b->mr);
}

/* What the send queue cannot post is refused here, once, with its reason:
 * a block bigger than one RDMA WRITE would be cut short (SGE lengths are 32
 * bit) or make a WR over the transport's own limit. */
static int check_layout(const struct kvf_region_layout *layout)
{
	if (!layout || !layout->nbufs || !layout->nitems || !layout->bufs ||
	    !layout->item_size) {
		kvf_err("pool", "pool layout: %s", !layout ? "none given" :
			!layout->nbufs ? "no buffers" : !layout->nitems ? "no blocks" :
			"no buffer or block size list");
		return -EINVAL;
	}
	for (uint32_t i = 0; i < layout->nbufs; i++) {
		uint64_t bs = layout->item_size[i];

		if (!layout->bufs[i] || !bs || bs > UINT64_MAX / layout->nitems) {
			kvf_err("pool", "buffer %" PRIu32 ": %s", i, !layout->bufs[i] ? "NULL address" :
				!bs ? "block size 0" : "block size x blocks overflows 64 bits");
			return -EINVAL;
		}
		if (bs > KVF_SQ_MAX_WR_BYTES) {
			kvf_err("pool", "buffer %" PRIu32 " (%p): block size %" PRIu64 " bytes is over "
				"%llu, the most one RDMA WRITE carries", i, layout->bufs[i], bs,
				KVF_SQ_MAX_WR_BYTES);
			return -EINVAL;
		}
	}
	return 0;
}

static void pool_free(struct kvf_pool *p, uint32_t nreg)
{
	while (nreg-- > 0)
		unreg_buf(&p->bufs[nreg]);
	free(p->wr_bufs);
	free(p->geom);
	free(p);
}

void kvf_pool_destroy(struct kvf_pool *p)
{
	if (!p)
		return;
	pool_free(p, p->nbufs);
}

/* Once per region: that it is staged, and why (the buffers' own messages
 * from the failed registrations came before). */
static int log_staged(struct kvf_pool *p)
{
	uint32_t n = 0, ncuda = 0;

	for (uint32_t i = 0; i < p->nbufs; i++) {
		n += p->bufs[i].staged;
		ncuda += p->bufs[i].staged && p->bufs[i].cuda;
	}
	if (!n)
		return 0;
	if (ncuda && ncuda < n) {
		kvf_err("pool", "region '%s': %" PRIu32 " staged CUDA buffers and %" PRIu32 " staged "
			"host buffers (KVF_TEST_STAGE_REGIONS): one copier per region", p->name,
			ncuda, n - ncuda);
		return -ENOTSUP;
	}
	p->stage = ncuda ? KVF_POOL_STAGE_CUDA : KVF_POOL_STAGE_HOST;
	kvf_info("pool", "region '%s': %" PRIu32 " of %" PRIu32 " buffers staged through registered "
		 "host memory: %s", p->name, n, p->nbufs, p->stage == KVF_POOL_STAGE_HOST ?
		 "KVF_TEST_STAGE_REGIONS names it (test hook)" :
		 "CUDA memory the NIC cannot register (no dmabuf, no peer memory)");
	return 0;
}

int kvf_pool_create(struct ibv_pd *pd, const struct kvf_region_layout *layout, int stage_ok,
		    struct kvf_pool **out)
{
	struct kvf_pool *p;
	uint32_t i;
	int rc = check_layout(layout);

	if (rc)
		return rc;
	p = calloc(1, sizeof(*p) + layout->nbufs * sizeof(p->bufs[0]));
	if (!p)
		return -ENOMEM;
	p->nbufs = layout->nbufs;
	p->nblocks = layout->nitems;
	p->id = layout->id;
	snprintf(p->name, sizeof(p->name), "%s", layout->name ? layout->name : "");
	p->wr_bufs = calloc(p->nbufs, sizeof(*p->wr_bufs));
	if (layout->geom && (p->geom = calloc(p->nbufs, sizeof(*p->geom))))
		memcpy(p->geom, layout->geom, p->nbufs * sizeof(*p->geom));
	if (!p->wr_bufs || (layout->geom && !p->geom)) {
		pool_free(p, 0);
		return -ENOMEM;
	}
	for (i = 0; i < p->nbufs; i++) {
		struct kvf_pool_buf *b = &p->bufs[i];

		b->addr = (uint64_t)(uintptr_t)layout->bufs[i];
		b->block_size = layout->item_size[i];
		b->dmabuf_fd = -1;
		rc = reg_buf(pd, b, i, b->block_size * p->nblocks, stage_ok);
		if (rc) {
			pool_free(p, i);
			return rc;
		}
		p->wr_bufs[i] = (struct kvf_sq_buf){.addr = b->addr, .block_size = b->block_size,
						    .key = b->mr ? b->mr->lkey : 0};
	}
	rc = log_staged(p);
	if (rc) {
		pool_free(p, p->nbufs);
		return rc;
	}
	kvf_info("pool", "region '%s': registered %" PRIu32 " buffers x %" PRIu32 " items",
		 p->name, p->nbufs, p->nblocks);
	*out = p;
	return 0;
}

/* -------------------------------------------- the transport's regions */

int kvf_rdma_region_register(void *tp, const struct kvf_region_layout *layout)
{
	struct kvf_rdma *t = tp;
	uint32_t nbufs = layout->nbufs;
	int rc;

	if (layout->id >= KVF_MAX_REGIONS || t->regions[layout->id])
		return -EEXIST;
	for (uint32_t i = 0; i < KVF_MAX_REGIONS; i++)
		nbufs += t->regions[i] ? t->regions[i]->nbufs : 0;
	if (nbufs > KVF_HELLO_MAX_BUFS) {
		kvf_err("rdma", "region '%s': %u buffers over every region, at most %u",
			layout->name, nbufs, KVF_HELLO_MAX_BUFS);
		return -ENOSPC;
	}
	/* Our HELLO names every buffer in one frame (docs/wire.md 5.3). */
	if (kvf_proto_hello_len(t->nregions + 1, nbufs) > t->frame_max) {
		kvf_err("rdma", "region '%s': a HELLO of %u regions and %u buffers is %zu bytes, "
			"over the %u-byte frames of rdma.frame_size: raise it (0 sizes frames for "
			"%u buffers)", layout->name, t->nregions + 1, nbufs,
			kvf_proto_hello_len(t->nregions + 1, nbufs), t->frame_max, KVF_HELLO_MAX_BUFS);
		return -EMSGSIZE;
	}
	rc = kvf_staging_pool_create(t, layout, &t->regions[layout->id]);
	if (rc)
		return rc;
	t->regions[layout->id]->seq = ++t->region_seq;
	t->nregions++;
	return 0;
}

/* No room uses it (the engine checked): nothing of ours is posted from or
 * into it, and a peer may only write into it for a room we name it in. */
void kvf_rdma_region_unregister(void *tp, uint32_t id)
{
	struct kvf_rdma *t = tp;

	kvf_pool_destroy(t->regions[id]);
	t->regions[id] = NULL;
	t->nregions--;
}

/* ------------------------------------------------------------- CUDA */

#if !HAVE_CUDA

int kvf_pool_reg_cuda(struct ibv_pd *pd, struct kvf_pool_buf *b, uint64_t len, int access)
{
	/* Without CUDA a device pointer looks like any address; ibv_reg_mr
	 * fails on it with EFAULT, which the caller reports. */
	return 1;
}

#else

/* set by kvf_pool_reg_cuda before the calls below */
static const struct kvf_cuda *cu;

/* dmabuf: export the page-aligned range and register it with the virtual
 * address as iova, so remote addresses stay plain virtual addresses. */
static int reg_dmabuf(struct ibv_pd *pd, struct kvf_pool_buf *b, uint64_t len, int access)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = b->addr & ~(page - 1);
	uint64_t size = ((b->addr + len + page - 1) & ~(page - 1)) - start;
	int fd = -1;
	CUresult r;

	if (!cu->range_handle)
		return -ENOTSUP;
	r = cu->range_handle(&fd, start, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS) {
		kvf_info("pool", "dmabuf export of 0x%" PRIx64 ": %s; trying peer memory",
			 b->addr, kvf_cuda_str(r));
		return -ENOTSUP;
	}
	b->mr = ibv_reg_dmabuf_mr(pd, 0, size, start, fd, access);
	if (!b->mr) {
		int err = errno ? errno : EINVAL;

		kvf_info("pool", "ibv_reg_dmabuf_mr(0x%" PRIx64 "): %s; trying peer memory",
			 b->addr, strerror(err));
		close(fd);
		return -err;
	}
	b->dmabuf_fd = fd;
	return 0;
}

int kvf_pool_reg_cuda(struct ibv_pd *pd, struct kvf_pool_buf *b, uint64_t len, int access)
{
	unsigned int memtype = 0;
	CUcontext ctx = NULL, popped;
	int rc;

	cu = kvf_cuda();
	if (!cu)
		return 1; /* no driver: it cannot be device memory we can use */
	if (cu->ptr_attr(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b->addr) != CUDA_SUCCESS ||
	    memtype != CU_MEMORYTYPE_DEVICE)
		return 1; /* unknown to CUDA, or host/managed memory */
	b->cuda = true;
	if (cu->ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, b->addr) != CUDA_SUCCESS ||
	    cu->ctx_push(ctx) != CUDA_SUCCESS)
		return -ENODEV;
	rc = reg_dmabuf(pd, b, len, access);
	if (rc) /* peer memory (nvidia_peermem) takes device pointers as is */
		rc = kvf_verbs_reg_mr(pd, (void *)(uintptr_t)b->addr, len, access,
				      "CUDA buffer via peer memory", &b->mr);
	cu->ctx_pop(&popped);
	if (!rc)
		kvf_info("pool", "CUDA buffer 0x%" PRIx64 " registered via %s", b->addr,
			 b->dmabuf_fd >= 0 ? "dmabuf" : "peer memory");
	return rc;
}

#endif
