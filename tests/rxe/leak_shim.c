/* SPDX-License-Identifier: Apache-2.0 */
/*
 * leak_shim: names every heap byte an engine leaves behind (issue 22). An
 * LD_PRELOAD library over malloc and its kin: once kvf_leak_start() is
 * called it records each allocation with the object (executable or shared
 * library) whose code asked for it, the first frame of the caller's stack
 * outside libc; kvf_leak_report() prints what is still allocated, bytes
 * and blocks per object. kvf_driver --leak-check calls both through dlsym
 * when the shim is loaded (tests/rxe/scenarios/chaos.sh preloads it), so a
 * growth after close is either a library's one-time state (librdmacm's
 * device list, a provider's tables: named, freed only at exit) or kvferry's
 * own (the driver's object, which links libkvferry statically): a leak.
 *
 * Every thread's allocations count (the poller's arena too, which
 * mallinfo2 does not see). Frees of blocks allocated before the start are
 * not recorded and not counted.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOBJ 64
#define TAB (1u << 20) /* live tracked blocks at most: a test run holds far fewer */
#define DEPTH 12

struct rec {
	uintptr_t p;   /* 0 free, 1 deleted */
	size_t size;
	uint32_t obj;
};

void kvf_leak_start(void);
void kvf_leak_report(FILE *out, const char *prefix);

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* dlsym may calloc before the real one is known: served from here. */
static _Alignas(16) char boot[8192];
static size_t boot_used;

static atomic_bool tracking;
static __thread int inside; /* this thread is in the shim: its own calls pass */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rec *tab;
static char objs[NOBJ][64];
static uint32_t nobj;

static void *boot_alloc(size_t n)
{
	void *p = boot + boot_used;

	n = (n + 15) & ~(size_t)15;
	if (boot_used + n > sizeof(boot))
		return NULL;
	boot_used += n;
	memset(p, 0, n);
	return p;
}

static int from_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + sizeof(boot);
}

__attribute__((constructor)) static void init(void)
{
	void *frames[2];

	*(void **)&real_calloc = dlsym(RTLD_NEXT, "calloc");
	*(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc");
	*(void **)&real_realloc = dlsym(RTLD_NEXT, "realloc");
	*(void **)&real_free = dlsym(RTLD_NEXT, "free");
	*(void **)&real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	*(void **)&real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	*(void **)&real_memalign = dlsym(RTLD_NEXT, "memalign");
	inside++;
	backtrace(frames, 2); /* loads the unwinder now, not inside a malloc */
	inside--;
}

/* The object a block is for: the first frame outside libc and the shim
 * (its file name: the loader's string, which lives as long as the object). */
static const char *caller_name(void)
{
	void *frames[DEPTH];
	int n = backtrace(frames, DEPTH);
	Dl_info di;

	for (int i = 2; i < n; i++) {
		const char *name, *slash;

		if (!dladdr(frames[i], &di) || !di.dli_fname)
			continue;
		slash = strrchr(di.dli_fname, '/');
		name = slash ? slash + 1 : di.dli_fname;
		if (strncmp(name, "libc.so", 7) && !strstr(name, "leak_shim"))
			return name;
	}
	return NULL;
}

/* Under mu: name's index in objs, NOBJ ("other") when none or full. */
static uint32_t intern(const char *name)
{
	for (uint32_t k = 0; name && k < nobj; k++)
		if (!strcmp(objs[k], name))
			return k;
	if (!name || nobj == NOBJ)
		return NOBJ;
	snprintf(objs[nobj], sizeof(objs[0]), "%s", name);
	return nobj++;
}

static size_t slot_of(uintptr_t p)
{
	return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ull >> 44) & (TAB - 1);
}

/* Under mu. */
static void put(void *p, size_t size, uint32_t obj)
{
	for (size_t i = slot_of((uintptr_t)p), k = 0; k < TAB; k++, i = (i + 1) & (TAB - 1)) {
		if (tab[i].p <= 1) {
			tab[i] = (struct rec){ .p = (uintptr_t)p, .size = size, .obj = obj };
			return;
		}
	}
}

/* Under mu. */
static void drop(void *p)
{
	for (size_t i = slot_of((uintptr_t)p), k = 0; k < TAB && tab[i].p; k++,
	     i = (i + 1) & (TAB - 1)) {
		if (tab[i].p == (uintptr_t)p) {
			tab[i].p = 1;
			return;
		}
	}
}

static void *note(void *p, size_t size)
{
	const char *name;

	if (!p || inside || !atomic_load_explicit(&tracking, memory_order_relaxed))
		return p;
	inside++;
	name = caller_name();
	pthread_mutex_lock(&mu);
	put(p, size, intern(name));
	pthread_mutex_unlock(&mu);
	inside--;
	return p;
}

static void forget(void *p)
{
	if (!p || inside || !atomic_load_explicit(&tracking, memory_order_relaxed))
		return;
	inside++;
	pthread_mutex_lock(&mu);
	drop(p);
	pthread_mutex_unlock(&mu);
	inside--;
}

void *malloc(size_t n)
{
	if (!real_malloc)
		return boot_alloc(n);
	return note(real_malloc(n), n);
}

void *calloc(size_t n, size_t m)
{
	if (!real_calloc)
		return boot_alloc(n * m);
	return note(real_calloc(n, m), n * m);
}

void *realloc(void *p, size_t n)
{
	void *q;

	if (from_boot(p) || !real_realloc) {
		size_t left = p ? (size_t)(boot + sizeof(boot) - (char *)p) : 0;

		q = malloc(n);
		if (q && p)
			memcpy(q, p, n < left ? n : left);
		return q;
	}
	forget(p);
	q = real_realloc(p, n);
	return note(q, n);
}

void free(void *p)
{
	if (!p || from_boot(p))
		return;
	forget(p);
	real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	int rc = real_posix_memalign(out, align, n);

	if (!rc)
		note(*out, n);
	return rc;
}

void *aligned_alloc(size_t align, size_t n)
{
	return note(real_aligned_alloc(align, n), n);
}

void *memalign(size_t align, size_t n)
{
	return note(real_memalign(align, n), n);
}

void kvf_leak_start(void)
{
	inside++;
	if (!tab) {
		tab = mmap(NULL, TAB * sizeof(*tab), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tab == MAP_FAILED)
			tab = NULL;
	}
	inside--;
	if (tab)
		atomic_store(&tracking, true);
}

/* "<prefix> OBJ=BYTES/BLOCKS ..." of what is still allocated, then total. */
void kvf_leak_report(FILE *out, const char *prefix)
{
	size_t bytes[NOBJ + 1] = { 0 }, blocks[NOBJ + 1] = { 0 }, total = 0;

	if (!tab)
		return;
	inside++;
	atomic_store(&tracking, false);
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < TAB; i++) {
		if (tab[i].p > 1) {
			bytes[tab[i].obj] += tab[i].size;
			blocks[tab[i].obj]++;
			total += tab[i].size;
		}
	}
	pthread_mutex_unlock(&mu);
	fprintf(out, "%s total=%zu", prefix, total);
	for (uint32_t k = 0; k <= NOBJ; k++)
		if (blocks[k])
			fprintf(out, " %s=%zu/%zu", k < nobj ? objs[k] : "other", bytes[k], blocks[k]);
	fprintf(out, "\n");
	inside--;
}
