/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), not
 * linked: a build with CUDA must still run on a host without the driver
 * and say so only when a device pointer shows up. One table for the pool's
 * registration (src/rdma/pool.c) and the staging copier (copier_cuda.c). */
#ifndef KVF_CUDA_API_H
#define KVF_CUDA_API_H

#include "kvf_build.h"

#if HAVE_CUDA
#include <cuda.h>
#include <stdbool.h>

struct kvf_cuda {
	/* always there when the table is */
	CUresult (*init)(unsigned int);
	CUresult (*ptr_attr)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*ctx_push)(CUcontext);
	CUresult (*ctx_pop)(CUcontext *);
	/* NULL where the driver lacks them: callers check */
	CUresult (*range_handle)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
				 unsigned long long);
	CUresult (*stream_create)(CUstream *, unsigned int);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned int);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_query)(CUevent);
	CUresult (*event_sync)(CUevent);
	CUresult (*event_destroy)(CUevent);
	CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*host_register)(void *, size_t, unsigned int);
	CUresult (*host_unregister)(void *);
	CUresult (*err_str)(CUresult, const char **);
	CUresult (*device_get)(CUdevice *, int);          /* rdma.near_gpu by ordinal */
	CUresult (*pci_bus_id)(char *, int, CUdevice);
	bool copies; /* the stream, event and async-copy calls are all there */
};

/* The table, loaded and cuInit'ed once (thread-safe); NULL: no driver, no
 * usable GPU, or a driver without the pointer and context calls (logged
 * once). */
const struct kvf_cuda *kvf_cuda(void);

/* r as text, "unknown CUDA error" when the driver has none. */
const char *kvf_cuda_str(CUresult r);
#endif

#endif
