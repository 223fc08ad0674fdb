/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copier: cuMemcpyDtoHAsync on a stream of its own, one event per
 * chunk, asked with cuEventQuery (never a wait on the scheduler thread).
 * libcuda comes from cuda_api.h. */
#include "cuda/copier.h"

#include <errno.h>
#include <stdlib.h>

#include "kvf_build.h"
#include "base/log.h"

#if !HAVE_CUDA

int kvf_copier_cuda_create(uint64_t devptr, void *host, size_t host_len, struct kvf_copier **out)
{
	(void)devptr, (void)host, (void)host_len, (void)out;
	return -ENOTSUP;
}

#else

#include "cuda/cuda_api.h"

/* set by kvf_copier_cuda_create before any copier exists */
static const struct kvf_cuda *cu;

struct cuda_copier {
	struct kvf_copier base;
	CUcontext ctx;
	CUstream stream;
	void *pinned; /* host area registered with CUDA, or NULL */
};

/* Every call runs in the buffers' context, pushed and popped around it:
 * the scheduler thread has no current context of its own to keep. */
static CUresult pop_ctx(CUresult r)
{
	CUcontext popped;

	cu->ctx_pop(&popped);
	return r;
}

static int cuda_copy(struct kvf_copier *cp, void *dst, uint64_t src, size_t len)
{
	struct cuda_copier *c = (struct cuda_copier *)cp;
	CUresult r;

	cu->ctx_push(c->ctx);
	r = pop_ctx(cu->dtoh_async(dst, (CUdeviceptr)src, len, c->stream));
	if (r != CUDA_SUCCESS) {
		kvf_err("copier", "cuMemcpyDtoHAsync(0x%llx, %zu bytes): %s",
			(unsigned long long)src, len, kvf_cuda_str(r));
		return -EIO;
	}
	return 0;
}

static int cuda_mark(struct kvf_copier *cp, void **ev)
{
	struct cuda_copier *c = (struct cuda_copier *)cp;
	CUevent e = NULL;
	CUresult r;

	cu->ctx_push(c->ctx);
	r = cu->event_create(&e, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS) {
		r = cu->event_record(e, c->stream);
		if (r != CUDA_SUCCESS)
			cu->event_destroy(e);
	}
	pop_ctx(r);
	if (r != CUDA_SUCCESS) {
		kvf_err("copier", "CUDA event for a staged chunk: %s", kvf_cuda_str(r));
		return -EIO;
	}
	*ev = e;
	return 0;
}

static int cuda_done(struct kvf_copier *cp, void *ev)
{
	struct cuda_copier *c = (struct cuda_copier *)cp;
	CUresult r;

	cu->ctx_push(c->ctx);
	r = cu->event_query((CUevent)ev);
	if (r != CUDA_ERROR_NOT_READY)
		cu->event_destroy((CUevent)ev);
	pop_ctx(r);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	if (r != CUDA_SUCCESS) {
		kvf_err("copier", "a staged chunk's copy failed: %s", kvf_cuda_str(r));
		return -EIO;
	}
	return 1;
}

static void cuda_drop(struct kvf_copier *cp, void *ev)
{
	struct cuda_copier *c = (struct cuda_copier *)cp;

	cu->ctx_push(c->ctx);
	cu->event_sync((CUevent)ev);
	pop_ctx(cu->event_destroy((CUevent)ev));
}

static void cuda_destroy(struct kvf_copier *cp)
{
	struct cuda_copier *c = (struct cuda_copier *)cp;

	cu->ctx_push(c->ctx);
	cu->stream_destroy(c->stream);
	if (c->pinned && cu->host_unregister)
		cu->host_unregister(c->pinned);
	pop_ctx(CUDA_SUCCESS);
	free(c);
}

static const struct kvf_copier_ops cuda_ops = {
	.copy = cuda_copy,
	.mark = cuda_mark,
	.done = cuda_done,
	.drop = cuda_drop,
	.destroy = cuda_destroy,
};

/* Page-lock the staging slots for CUDA: without it the copies still work,
 * through CUDA's own bounce buffer, but the stream waits on the host. */
static void pin(struct cuda_copier *c, void *host, size_t len)
{
	CUresult r = cu->host_register ? cu->host_register(host, len, 0) : CUDA_ERROR_NOT_SUPPORTED;

	if (r == CUDA_SUCCESS)
		c->pinned = host;
	else
		kvf_warn("copier", "staging slots not page-locked for CUDA (%s): copies are "
			 "slower", kvf_cuda_str(r));
}

int kvf_copier_cuda_create(uint64_t devptr, void *host, size_t host_len, struct kvf_copier **out)
{
	struct cuda_copier *c;
	CUresult r;

	cu = kvf_cuda();
	if (!cu)
		return -ENODEV;
	if (!cu->copies) {
		kvf_warn("copier", "libcuda.so.1 lacks the stream, event or copy API");
		return -ENOTSUP;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = cu->ptr_attr(&c->ctx, CU_POINTER_ATTRIBUTE_CONTEXT, devptr);
	if (r == CUDA_SUCCESS && (r = cu->ctx_push(c->ctx)) == CUDA_SUCCESS) {
		r = cu->stream_create(&c->stream, CU_STREAM_NON_BLOCKING);
		if (r == CUDA_SUCCESS)
			pin(c, host, host_len);
		pop_ctx(r);
	}
	if (r != CUDA_SUCCESS) {
		kvf_err("copier", "CUDA stream for staging 0x%llx: %s",
			(unsigned long long)devptr, kvf_cuda_str(r));
		free(c);
		return -EIO;
	}
	c->base = (struct kvf_copier){.ops = &cuda_ops, .name = "cuda"};
	*out = &c->base;
	return 0;
}

#endif
