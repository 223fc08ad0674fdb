/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check: which path CUDA memory takes on this host (scripts/gpu-check.sh;
 * docs/design.md, "GPU memory and staging").
 *
 *   gpu_check [--device DEV --addr ADDR] [--items N] [--item-bytes B]
 *
 * Allocates N items of B bytes of CUDA memory on GPU 0, fills it, registers
 * it as the region "kv" of a prefill engine on DEV and prints the path the
 * registration took: "path: dmabuf", "path: peer memory" or "path: staging".
 * Then a decode engine in the same process (host memory, same device,
 * connecting to ADDR) receives every item in one room; its bytes are
 * compared with a CUDA copy back of the GPU buffer. Exit: 0 moved and
 * checked, 1 a failure, 2 usage or no RDMA device given, 3 no GPU (no
 * libcuda, or no device), said on the first line.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvferry/kvferry.h>

#include "kvf_build.h"

#define EXIT_NO_GPU 3

#if !HAVE_CUDA

int main(void)
{
	printf("gpu-check: no GPU: this build has no CUDA support (cuda.h not found at setup)\n");
	return EXIT_NO_GPU;
}

#else

#include <cuda.h>
#include <dlfcn.h>

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*dev_count)(int *);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} cu;

/* The pool's and the stage's log lines name the path taken. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *path;

static void on_log(void *arg, int level, const char *module, const char *msg)
{
	(void)arg;
	fprintf(stderr, "[%s] %s\n", module, msg);
	pthread_mutex_lock(&log_lock);
	if (strstr(msg, "registered via dmabuf"))
		path = "dmabuf";
	else if (strstr(msg, "registered via peer memory"))
		path = "peer memory";
	else if (strstr(msg, "staged through registered host memory"))
		path = "staging";
	pthread_mutex_unlock(&log_lock);
	(void)level;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 0, or EXIT_NO_GPU with the reason printed. */
static int cuda_up(CUdeviceptr *mem, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUcontext ctx;
	CUdevice dev;
	int n = 0;

	if (!h) {
		printf("gpu-check: no GPU: libcuda.so.1 cannot be loaded (%s)\n", dlerror());
		return EXIT_NO_GPU;
	}
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.dev_count = dlsym(h, "cuDeviceGetCount");
	*(void **)&cu.dev_get = dlsym(h, "cuDeviceGet");
	*(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.set_current = dlsym(h, "cuCtxSetCurrent");
	*(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&cu.free = dlsym(h, "cuMemFree_v2");
	*(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	if (!cu.init || !cu.dev_count || !cu.dev_get || !cu.retain || !cu.set_current ||
	    !cu.alloc || !cu.free || !cu.htod || !cu.dtoh) {
		printf("gpu-check: no GPU: libcuda.so.1 lacks the driver API this check uses\n");
		return EXIT_NO_GPU;
	}
	if (cu.init(0) != CUDA_SUCCESS || cu.dev_count(&n) != CUDA_SUCCESS || n < 1) {
		printf("gpu-check: no GPU: the CUDA driver finds no device\n");
		return EXIT_NO_GPU;
	}
	if (cu.dev_get(&dev, 0) != CUDA_SUCCESS || cu.retain(&ctx, dev) != CUDA_SUCCESS ||
	    cu.set_current(ctx) != CUDA_SUCCESS || cu.alloc(mem, len) != CUDA_SUCCESS) {
		printf("gpu-check: GPU 0: context or %zu-byte allocation failed\n", len);
		return 1;
	}
	printf("gpu-check: GPU: %d device(s); %zu bytes of CUDA memory at 0x%llx\n", n, len,
	       (unsigned long long)*mem);
	return 0;
}

struct opts {
	const char *device, *addr;
	uint32_t items;
	uint64_t item_bytes;
};

static int open_engine(const char *const *sets, size_t n, kvf_engine **eng, uint32_t *region,
		       void *mem, const struct opts *o)
{
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	void *bufs[1] = {mem};
	uint64_t sizes[1] = {o->item_bytes};
	char err[512];
	int rc = kvf_engine_open_with(NULL, sets, n, err, sizeof(err), eng);

	if (rc) {
		printf("gpu-check: engine: %s\n", err);
		return rc;
	}
	d.nbufs = 1;
	d.name = "kv";
	d.nitems = o->items;
	d.bufs = bufs;
	d.item_size = sizes;
	rc = kvf_region_register(*eng, &d, region);
	if (rc)
		printf("gpu-check: kvf_region_register: %s\n", strerror(-rc));
	return rc;
}

/* One room, every item, prefill -> decode. 0 when both sides SUCCESS. */
static int move_room(kvf_engine *p, kvf_engine *d, uint32_t preg, uint32_t dreg,
		     const uint32_t *items, uint32_t n)
{
	struct kvf_index_list l = {dreg, n, items};
	struct kvf_chunk_part part = {preg, 0, n, items};
	kvf_room s, r;
	double end = mono() + 60;
	bool sent = false;
	int ps = 0, ds = 0;

	if (kvf_sender_create(p, 1, &s) || kvf_receiver_create(d, 1, NULL, &r) ||
	    kvf_receiver_init_regions(d, r, &l, 1, NULL, 0))
		return -EIO;
	while (mono() < end) {
		kvf_progress(p);
		kvf_progress(d);
		ps = kvf_poll(p, s);
		ds = kvf_poll(d, r);
		if (ps == KVF_WAITING_FOR_INPUT && !sent)
			sent = kvf_sender_send_chunk(p, s, &part, 1, KVF_SEND_LAST) == 0;
		if ((ps == KVF_SUCCESS || ps == KVF_FAILED) && (ds == KVF_SUCCESS || ds == KVF_FAILED))
			break;
	}
	printf("gpu-check: room: prefill %s, decode %s\n", kvf_poll_str(ps), kvf_poll_str(ds));
	kvf_release(p, s);
	kvf_release(d, r);
	return ps == KVF_SUCCESS && ds == KVF_SUCCESS ? 0 : -EIO;
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.items = 64, .item_bytes = 65536};
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--device"))
			o->device = argv[i + 1];
		else if (!strcmp(argv[i], "--addr"))
			o->addr = argv[i + 1];
		else if (!strcmp(argv[i], "--items"))
			o->items = (uint32_t)strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--item-bytes"))
			o->item_bytes = strtoull(argv[i + 1], NULL, 0);
		else
			return -1;
	}
	return argc % 2 == 1 && o->items && o->item_bytes ? 0 : -1;
}

static const char *path_seen(void)
{
	const char *p;

	for (double end = mono() + 2;;) {
		pthread_mutex_lock(&log_lock);
		p = path;
		pthread_mutex_unlock(&log_lock);
		if (p || mono() > end)
			return p;
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
}

static int check(const struct opts *o, CUdeviceptr mem, const uint8_t *got, size_t len,
		 kvf_engine *p)
{
	uint8_t *back = malloc(len);
	struct kvf_stats st = KVF_STATS_INIT;
	size_t bad = 0;

	if (!back || cu.dtoh(back, mem, len) != CUDA_SUCCESS) {
		printf("gpu-check: the CUDA copy back failed\n");
		free(back);
		return 1;
	}
	for (size_t i = 0; i < len; i++)
		bad += back[i] != got[i];
	kvf_stats(p, &st);
	printf("gpu-check: %u items x %llu bytes moved: %zu bytes checked against a CUDA copy "
	       "back, %zu bad; staged %llu bytes in %llu chunks, %llu waits\n", o->items,
	       (unsigned long long)o->item_bytes, len, bad, (unsigned long long)st.staged_bytes,
	       (unsigned long long)st.staged_chunks, (unsigned long long)st.stage_waits);
	free(back);
	return bad ? 1 : 0;
}

/* The prefill engine on the CUDA region at mem, the decode's on host, over
 * o->device: the prefill listens on an ephemeral port the decode dials. */
static int open_pair(const struct opts *o, CUdeviceptr mem, uint8_t *host,
		     kvf_engine **p, uint32_t *preg, kvf_engine **d, uint32_t *dreg)
{
	char psets[4][160], dsets[3][160], listen[64];
	const char *pv[4], *dv[3], *pth;
	uint16_t port = 0;

	snprintf(psets[0], sizeof(psets[0]), "rdma.device=%s", o->device);
	snprintf(psets[1], sizeof(psets[1]), "rdma.listen_addr=%s", o->addr);
	snprintf(psets[2], sizeof(psets[2]), "rdma.listen_port=0");
	snprintf(psets[3], sizeof(psets[3]), "engine.id=gpu-check-prefill");
	for (int i = 0; i < 4; i++)
		pv[i] = psets[i];
	if (open_engine(pv, 4, p, preg, (void *)(uintptr_t)mem, o))
		return 1;
	pth = path_seen();
	printf("gpu-check: path: %s\n", pth ? pth : "unknown (no registration line; see the log)");
	if (kvf_engine_listen_addr(*p, listen, sizeof(listen), &port))
		return 1;
	snprintf(dsets[0], sizeof(dsets[0]), "rdma.device=%s", o->device);
	snprintf(dsets[1], sizeof(dsets[1]), "rdma.peer=%s:%u", listen, port);
	snprintf(dsets[2], sizeof(dsets[2]), "engine.id=gpu-check-decode");
	for (int i = 0; i < 3; i++)
		dv[i] = dsets[i];
	return open_engine(dv, 3, d, dreg, host, o) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	CUdeviceptr mem;
	size_t len;
	uint8_t *host, *pat;
	uint32_t preg, dreg, *items;
	kvf_engine *p = NULL, *d = NULL;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: gpu_check [--device DEV --addr ADDR] [--items N] "
			"[--item-bytes B]\n");
		return 2;
	}
	len = (size_t)o.items * o.item_bytes;
	rc = cuda_up(&mem, len);
	if (rc)
		return rc;
	if (!o.device || !o.addr) {
		printf("gpu-check: no RDMA device given (--device, --addr): no path to check\n");
		return 2;
	}
	host = calloc(1, len);
	pat = malloc(len);
	items = calloc(o.items, sizeof(*items));
	if (!host || !pat || !items)
		return 1;
	for (size_t i = 0; i < len; i++)
		pat[i] = (uint8_t)(i * 131 + (i >> 12));
	for (uint32_t i = 0; i < o.items; i++)
		items[i] = i;
	if (cu.htod(mem, pat, len) != CUDA_SUCCESS)
		return 1;
	kvf_set_log_callback(on_log, NULL);
	if (open_pair(&o, mem, host, &p, &preg, &d, &dreg))
		return 1;
	rc = move_room(p, d, preg, dreg, items, o.items) ? 1 : check(&o, mem, host, len, p);
	kvf_engine_close(d);
	kvf_engine_close(p);
	cu.free(mem);
	free(host);
	free(pat);
	free(items);
	return rc;
}

#endif
