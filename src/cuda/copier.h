/* SPDX-License-Identifier: Apache-2.0 */
/* Copies from a staged region's buffers into host staging slots, queued
 * now and finished later: CUDA (copier_cuda.c: cuMemcpyDtoHAsync on a
 * stream of its own, an event per chunk) or plain memcpy (copier_host.c:
 * the host regions that KVF_TEST_STAGE_REGIONS sends through staging, so
 * the whole path runs on a machine without a GPU). Nothing here blocks:
 * the scheduler asks whether a chunk's copies are done. */
#ifndef KVF_COPIER_H
#define KVF_COPIER_H

#include <stddef.h>
#include <stdint.h>

struct kvf_copier;

struct kvf_copier_ops {
	/* Queue a copy of len bytes from src (a buffer address) to dst. */
	int (*copy)(struct kvf_copier *cp, void *dst, uint64_t src, size_t len);
	/* A mark after every copy queued so far: *ev for done(). */
	int (*mark)(struct kvf_copier *cp, void **ev);
	/* 1 when every copy before ev is done (ev is then freed), 0 not yet,
	 * -errno when the copies failed (ev freed too: the chunk fails). */
	int (*done)(struct kvf_copier *cp, void *ev);
	/* Wait for ev and free it (cancel, close: the slots must be quiet). */
	void (*drop)(struct kvf_copier *cp, void *ev);
	void (*destroy)(struct kvf_copier *cp);
};

struct kvf_copier {
	const struct kvf_copier_ops *ops;
	const char *name; /* "cuda" or "host" */
};

/* A memcpy copier. Its marks report done on the second ask, so the
 * not-yet path runs too. NULL when out of memory. */
struct kvf_copier *kvf_copier_host_create(void);

/* A CUDA copier for device memory at devptr (its context, a stream of its
 * own); host..host_len (the staging slots) is page-locked for CUDA when it
 * can be, so the copies are truly asynchronous. Returns 0 and *out, -ENOTSUP in a build without CUDA, -ENODEV
 * without a usable driver, or -EIO (logged with CUDA's reason). */
int kvf_copier_cuda_create(uint64_t devptr, void *host, size_t host_len, struct kvf_copier **out);

#endif
