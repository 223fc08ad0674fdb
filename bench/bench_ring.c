/* SPDX-License-Identifier: Apache-2.0 */
/* Ring throughput: kvf_ring against Concurrency Kit's ck_ring SPSC, in the
 * same run, like with like: the same 32-byte struct kvf_event copied by value
 * (ck through CK_RING_PROTOTYPE), the same ring size, the same item count,
 * producer and consumer on two threads (pinned to two CPUs when there are),
 * the same wait when full or empty (pause, then yield). The consumer checks
 * every item's sequence number in both.
 *
 * Two variants:
 *   single   the consumer takes one event per call
 *            (kvf_ring_pop_batch max 1 / ck_ring_dequeue_spsc);
 *   batchB   the consumer takes up to B per call: kvf_ring_pop_batch max B
 *            (one release store per batch) / up to B ck_ring_dequeue_spsc
 *            calls until empty (ck has no SPSC burst dequeue).
 * Each repetition runs kvf and ck back to back (alternating which goes
 * first); figures are medians, and the ratio is given both as median(kvf) /
 * median(ck) and as the median of each repetition's kvf/ck ("paired").
 *
 * Usage: bench_ring [--items N] [--ring SIZE] [--reps R] [--batch B]
 *                   [--no-pin] [--json]
 * Note ck_ring of size S holds S - 1 events, kvf_ring holds S. */
#include <ck_ring.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/ring.h"

CK_RING_PROTOTYPE(kvf_event, kvf_event)

#define SPIN_BEFORE_YIELD 128
#define MAX_REPS 101
#define MAX_BATCH 4096

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The same wait as kvf_ring_push uses internally. */
static void backoff(unsigned *spins)
{
	if ((*spins)++ < SPIN_BEFORE_YIELD)
		cpu_relax();
	else
		sched_yield();
}

enum impl { KVF, CK };

struct run {
	enum impl impl;
	uint64_t items;
	uint32_t ring_size;
	uint32_t batch;          /* 1: single */
	bool pin;
	atomic_int ready;        /* threads at the start line */
	atomic_bool go;
	/* rings */
	struct kvf_ring *kvf;
	struct ck_ring ck;
	struct kvf_event *ck_buf;
	/* results */
	bool bad;
	uint64_t stalls;
};

static void pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void start_line(struct run *r, int cpu)
{
	if (r->pin)
		pin_to(cpu);
	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		cpu_relax();
}

static void *producer(void *arg)
{
	struct run *r = arg;
	start_line(r, 0);
	struct kvf_event ev = { .kind = KVF_EV_WC };
	if (r->impl == KVF) {
		for (uint64_t i = 0; i < r->items; i++) {
			ev.aux = i;
			kvf_ring_push(r->kvf, &ev);
		}
	} else {
		for (uint64_t i = 0; i < r->items; i++) {
			ev.aux = i;
			unsigned spins = 0;
			while (!CK_RING_ENQUEUE_SPSC(kvf_event, &r->ck, r->ck_buf, &ev))
				backoff(&spins);
		}
	}
	return NULL;
}

static void consume(struct run *r)
{
	struct kvf_event out[MAX_BATCH];
	uint64_t next = 0;
	unsigned spins = 0;

	while (next < r->items) {
		uint32_t n = 0;
		if (r->impl == KVF) {
			n = kvf_ring_pop_batch(r->kvf, out, r->batch);
		} else {
			while (n < r->batch &&
			       CK_RING_DEQUEUE_SPSC(kvf_event, &r->ck, r->ck_buf, &out[n]))
				n++;
		}
		if (n == 0) {
			backoff(&spins);
			continue;
		}
		spins = 0;
		for (uint32_t i = 0; i < n; i++, next++)
			if (out[i].aux != next)
				r->bad = true;
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timed run; returns Mitems/s, or a negative value on error. */
static double run_once(enum impl impl, uint64_t items, uint32_t ring_size,
		       uint32_t batch, bool pin, uint64_t *stalls)
{
	struct run r = { .impl = impl, .items = items, .ring_size = ring_size,
			 .batch = batch, .pin = pin };
	atomic_init(&r.ready, 0);
	atomic_init(&r.go, false);
	if (impl == KVF) {
		r.kvf = kvf_ring_create(ring_size);
		if (!r.kvf)
			return -1;
	} else {
		r.ck_buf = aligned_alloc(64, (size_t)ring_size * sizeof(struct kvf_event));
		if (!r.ck_buf)
			return -1;
		ck_ring_init(&r.ck, ring_size);
	}

	pthread_t t;
	if (pthread_create(&t, NULL, producer, &r) != 0)
		return -1;
	/* This thread is the consumer. */
	if (pin)
		pin_to(1);
	atomic_fetch_add(&r.ready, 1);
	while (atomic_load(&r.ready) < 2)
		cpu_relax();
	double t0 = now_s();
	atomic_store_explicit(&r.go, true, memory_order_release);
	consume(&r);
	double secs = now_s() - t0;
	pthread_join(t, NULL);

	if (impl == KVF) {
		*stalls = kvf_ring_stalls(r.kvf);
		kvf_ring_destroy(r.kvf);
	} else {
		*stalls = 0;
		free(r.ck_buf);
	}
	if (r.bad)
		return -1;
	return (double)items / secs / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, unsigned n)
{
	double s[MAX_REPS];
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

struct variant {
	char name[32];
	uint32_t batch;
	double kvf[MAX_REPS], ck[MAX_REPS];
	uint64_t kvf_stalls[MAX_REPS];
	double ratio[MAX_REPS];  /* kvf / ck of the same repetition */
	double kvf_med, ck_med, ratio_med;
};

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--items N] [--ring SIZE] [--reps R] [--batch B] "
		"[--no-pin] [--json]\n", prog);
	exit(2);
}

static uint64_t arg_u64(int argc, char **argv, int *i, uint64_t min, uint64_t max)
{
	if (*i + 1 >= argc)
		usage(argv[0]);
	char *end;
	const char *s = argv[++*i];
	unsigned long long v = strtoull(s, &end, 0);
	if (*s == '\0' || *s == '-' || *end != '\0' || v < min || v > max)
		usage(argv[0]);
	return v;
}

static void print_runs(const char *key, const double *v, unsigned n)
{
	printf("\"%s\": [", key);
	for (unsigned i = 0; i < n; i++)
		printf("%s%.3f", i ? ", " : "", v[i]);
	printf("]");
}

int main(int argc, char **argv)
{
	uint64_t items = 10000000;
	uint32_t ring_size = 1024, batch = 32;
	unsigned reps = 5;
	bool json = false, pin = true;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--items"))
			items = arg_u64(argc, argv, &i, 1, UINT64_MAX);
		else if (!strcmp(argv[i], "--ring"))
			ring_size = (uint32_t)arg_u64(argc, argv, &i, 2, 1u << 31);
		else if (!strcmp(argv[i], "--reps"))
			reps = (unsigned)arg_u64(argc, argv, &i, 1, MAX_REPS);
		else if (!strcmp(argv[i], "--batch"))
			batch = (uint32_t)arg_u64(argc, argv, &i, 2, MAX_BATCH);
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--no-pin"))
			pin = false;
		else
			usage(argv[0]);
	}
	if (ring_size & (ring_size - 1)) {
		fprintf(stderr, "bench_ring: --ring must be a power of two\n");
		return 2;
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		pin = false;

	struct variant v[2] = { { .batch = 1 }, { .batch = batch } };
	snprintf(v[0].name, sizeof(v[0].name), "single");
	snprintf(v[1].name, sizeof(v[1].name), "batch%u", batch);

	for (unsigned k = 0; k < 2; k++) {
		for (unsigned rep = 0; rep < reps; rep++) {
			uint64_t stalls = 0, unused;
			double a, b;
			if (rep % 2 == 0) {
				a = run_once(KVF, items, ring_size, v[k].batch, pin, &stalls);
				b = run_once(CK, items, ring_size, v[k].batch, pin, &unused);
			} else {
				b = run_once(CK, items, ring_size, v[k].batch, pin, &unused);
				a = run_once(KVF, items, ring_size, v[k].batch, pin, &stalls);
			}
			if (a < 0 || b < 0) {
				fprintf(stderr, "bench_ring: %s run failed (%s)\n", v[k].name,
					a < 0 ? "kvf_ring" : "ck_ring");
				return 1;
			}
			v[k].kvf[rep] = a;
			v[k].ck[rep] = b;
			v[k].kvf_stalls[rep] = stalls;
			v[k].ratio[rep] = a / b;
		}
		v[k].kvf_med = median(v[k].kvf, reps);
		v[k].ck_med = median(v[k].ck, reps);
		v[k].ratio_med = median(v[k].ratio, reps);
	}

	/* With --json the table goes to stderr, so one run gives both. */
	FILE *out = json ? stderr : stdout;

	fprintf(out, "bench_ring: %" PRIu64 " items, ring %u slots, struct kvf_event (%zu bytes) "
	       "by value,\n  ck_ring via CK_RING_PROTOTYPE spsc, %u reps, median, %s\n",
	       items, ring_size, sizeof(struct kvf_event), reps,
	       pin ? "threads pinned to CPUs 0 and 1" : "threads not pinned");
	fprintf(out, "  %-8s %14s %14s %8s %8s\n", "variant", "kvf Mitems/s", "ck Mitems/s",
	       "kvf/ck", "paired");
	for (unsigned k = 0; k < 2; k++)
		fprintf(out, "  %-8s %14.2f %14.2f %8.2f %8.2f\n", v[k].name, v[k].kvf_med,
		       v[k].ck_med, v[k].kvf_med / v[k].ck_med, v[k].ratio_med);
	fprintf(out, "  kvf/ck: ratio of the medians; paired: median over repetitions of\n"
	       "  kvf/ck within the repetition (steadier when the machine is shared)\n");
	if (!json)
		return 0;
	{
		printf("{\"benchmark\": \"ring\", \"items\": %" PRIu64 ", \"ring_size\": %u, "
		       "\"reps\": %u, \"pinned\": %s, "
		       "\"element\": \"struct kvf_event, %zu bytes, by value\", "
		       "\"ck_api\": \"CK_RING_PROTOTYPE ck_ring_enqueue_spsc/ck_ring_dequeue_spsc\", "
		       "\"unit\": \"Mitems/s\", \"statistic\": \"median\", \"variants\": [",
		       items, ring_size, reps, pin ? "true" : "false", sizeof(struct kvf_event));
		for (unsigned k = 0; k < 2; k++) {
			printf("%s{\"name\": \"%s\", \"batch\": %u, \"kvf\": %.3f, \"ck\": %.3f, "
			       "\"ratio\": %.3f, \"ratio_paired\": %.3f, ", k ? ", " : "",
			       v[k].name, v[k].batch, v[k].kvf_med, v[k].ck_med,
			       v[k].kvf_med / v[k].ck_med, v[k].ratio_med);
			print_runs("kvf_runs", v[k].kvf, reps);
			printf(", ");
			print_runs("ck_runs", v[k].ck, reps);
			printf(", ");
			print_runs("ratio_runs", v[k].ratio, reps);
			printf(", \"kvf_stalls\": [");
			for (unsigned i = 0; i < reps; i++)
				printf("%s%" PRIu64, i ? ", " : "", v[k].kvf_stalls[i]);
			printf("]}");
		}
		printf("]}\n");
	}
	return 0;
}
