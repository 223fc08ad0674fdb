/* SPDX-License-Identifier: Apache-2.0 */
/* One registered region (kvf_region_register): nbufs buffers x nitems
 * items, each buffer registered once. Host memory always; CUDA device
 * memory when built with CUDA (dmabuf first, then ibv_reg_mr through peer
 * memory). */
#ifndef KVF_POOL_H
#define KVF_POOL_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/sendq.h"
#include "engine/transport.h"

struct kvf_pool_buf {
	uint64_t addr;       /* base address, also the remote-visible address */
	uint64_t block_size;
	struct ibv_mr *mr;
	bool cuda;           /* device memory */
	bool staged;         /* not registered: sent through host staging slots */
	int dmabuf_fd;       /* -1 unless registered through dmabuf */
};

struct kvf_pool {
	char name[KVF_REGION_NAME_MAX + 1];
	uint32_t id;
	uint64_t seq;       /* registration order (kvf_rdma.region_seq): which
	                       HELLOs announced it */
	uint32_t nbufs;
	uint32_t nblocks;   /* items per buffer */
	uint8_t stage;      /* enum kvf_pool_stage: how its buffers are sent */
	struct kvf_sq_buf *wr_bufs; /* the buffers as the send queue builds WRs
	                               from them (key: the lkey) */
	struct kvf_buf_geometry *geom; /* per buffer, or NULL: none */
	struct kvf_pool_buf bufs[];
};

/* Staging through host memory (src/rdma/stage.c) for a region: */
enum kvf_pool_stage {
	KVF_POOL_REG = 0,        /* registered: writes go from its own memory */
	KVF_POOL_STAGE_CUDA = 1, /* CUDA memory the NIC cannot register */
	KVF_POOL_STAGE_HOST = 2, /* host memory staged anyway (KVF_TEST_STAGE_REGIONS) */
};
/* What kvf_pool_create may do (rdma.cuda_staging and the test hook). */
enum kvf_pool_stage_ok {
	KVF_STAGE_REFUSE = 0,    /* CUDA memory the NIC cannot take is an error */
	KVF_STAGE_ALLOW = 1,     /* ... is staged */
	KVF_STAGE_FORCE = 2,     /* every buffer is staged, host memory too */
};

/*
 * Register every buffer of layout on pd (stage_ok: enum kvf_pool_stage_ok). Returns 0 and *out, or
 *   -EINVAL   a NULL buffer, zero items or item size, a size that overflows,
 *             an item size over KVF_SQ_MAX_WR_BYTES (one RDMA WRITE; logged)
 *   -ENOMEM
 *   -ENOTSUP  CUDA device memory in a build without CUDA, or a region
 *             mixing staged CUDA and staged host buffers (logged)
 *   -ENODEV   CUDA device memory but no usable driver (libcuda not loadable)
 *   -errno    from the registration (logged with the buffer index)
 */
int kvf_pool_create(struct ibv_pd *pd, const struct kvf_region_layout *layout, int stage_ok,
		    struct kvf_pool **out);
void kvf_pool_destroy(struct kvf_pool *p);

/* The transport's region_register and region_unregister ops (transport.h):
 * its table of regions, the buffer limit of HELLO, staging (stage.h). */
int kvf_rdma_region_register(void *t, const struct kvf_region_layout *layout);
void kvf_rdma_region_unregister(void *t, uint32_t id);

/* Register one CUDA buffer (the CUDA half of pool.c). Returns 0 and
 * fills b->mr (and b->dmabuf_fd), 1 when addr is not device memory (the
 * caller registers it as host memory), or -errno. */
int kvf_pool_reg_cuda(struct ibv_pd *pd, struct kvf_pool_buf *b, uint64_t len, int access);

#endif
