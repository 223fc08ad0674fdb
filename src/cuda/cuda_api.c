/* SPDX-License-Identifier: Apache-2.0 */
#include "cuda/cuda_api.h"

#if HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>

#include "base/log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct kvf_cuda cu;
static bool usable;

#define SYM(f, name) (*(void **)&cu.f = dlsym(h, name))

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		kvf_dbg("cuda", "no CUDA driver: %s", dlerror());
		return;
	}
	SYM(err_str, "cuGetErrorString");
	SYM(range_handle, "cuMemGetHandleForAddressRange");
	SYM(host_register, "cuMemHostRegister_v2");
	SYM(host_unregister, "cuMemHostUnregister");
	SYM(device_get, "cuDeviceGet");
	SYM(pci_bus_id, "cuDeviceGetPCIBusId");
	cu.copies = SYM(stream_create, "cuStreamCreate") &&
		    SYM(stream_destroy, "cuStreamDestroy_v2") &&
		    SYM(event_create, "cuEventCreate") && SYM(event_record, "cuEventRecord") &&
		    SYM(event_query, "cuEventQuery") && SYM(event_sync, "cuEventSynchronize") &&
		    SYM(event_destroy, "cuEventDestroy_v2") &&
		    SYM(dtoh_async, "cuMemcpyDtoHAsync_v2");
	if (!SYM(init, "cuInit") || !SYM(ptr_attr, "cuPointerGetAttribute") ||
	    !SYM(ctx_push, "cuCtxPushCurrent_v2") || !SYM(ctx_pop, "cuCtxPopCurrent_v2")) {
		kvf_warn("cuda", "libcuda.so.1 lacks the pointer and context API");
		return;
	}
	if (cu.init(0) != CUDA_SUCCESS) {
		kvf_dbg("cuda", "cuInit failed: no usable GPU");
		return;
	}
	usable = true;
}

const struct kvf_cuda *kvf_cuda(void)
{
	pthread_once(&once, load);
	return usable ? &cu : NULL;
}

const char *kvf_cuda_str(CUresult r)
{
	const char *s = NULL;

	if (cu.err_str)
		cu.err_str(r, &s);
	return s ? s : "unknown CUDA error";
}
#endif
