/* SPDX-License-Identifier: Apache-2.0 */
/* Two-thread stress test of the SPSC ring: one producer pushes events with
 * aux = sequence number, one consumer pops in batches of varying size and
 * checks strict order, no loss and no duplication.
 *
 * Plain main() so CI can build it alone under ThreadSanitizer.
 * Usage: ring_stress [items [ring_size]]   (default 10000000 items, ring 1024)
 * Exit 0 on success, 1 on any error. */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/ring.h"

#define MAX_BATCH 64

struct stress {
	struct kvf_ring *ring;
	uint64_t items;
};

/* Event contents derived from the sequence, so a torn or stale slot shows. */
static uint64_t key_of(uint64_t seq)
{
	return seq * 0x9E3779B97F4A7C15ull;
}

static void *producer(void *arg)
{
	struct stress *s = arg;
	for (uint64_t seq = 0; seq < s->items; seq++) {
		struct kvf_event ev = {
			.kind = KVF_EV_WC,
			.role = (uint8_t)seq,
			.status = (uint16_t)seq,
			.peer = (uint32_t)(seq >> 3),
			.key = key_of(seq),
			.aux = seq,
		};
		kvf_ring_push(s->ring, &ev);
	}
	return NULL;
}

static bool parse_u64(const char *arg, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(arg, &end, 0);
	if (*arg == '\0' || *end != '\0' || *arg == '-')
		return false;
	*out = v;
	return true;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	uint64_t items = 10000000, ring_size = 1024;
	if (argc > 3 || (argc > 1 && !parse_u64(argv[1], &items)) ||
	    (argc > 2 && !parse_u64(argv[2], &ring_size)) || ring_size > UINT32_MAX) {
		fprintf(stderr, "usage: %s [items [ring_size]]\n", argv[0]);
		return 1;
	}
	struct stress s = { .ring = kvf_ring_create((uint32_t)ring_size), .items = items };
	if (!s.ring) {
		fprintf(stderr, "ring_stress: bad ring size %" PRIu64 "\n", ring_size);
		return 1;
	}

	double t0 = now_s();
	pthread_t t;
	if (pthread_create(&t, NULL, producer, &s) != 0) {
		fprintf(stderr, "ring_stress: pthread_create failed\n");
		return 1;
	}

	struct kvf_event out[MAX_BATCH];
	uint64_t next = 0, errors = 0, empty_polls = 0, batches = 0;
	uint32_t max = 1;
	while (next < items && errors == 0) {
		/* Batch limit cycles through 1..MAX_BATCH. */
		max = max % MAX_BATCH + 1;
		uint32_t n = kvf_ring_pop_batch(s.ring, out, max);
		if (n == 0) {
			empty_polls++;
			sched_yield();
			continue;
		}
		if (n > max) {
			fprintf(stderr, "ring_stress: popped %u > max %u\n", n, max);
			errors++;
		}
		batches++;
		for (uint32_t i = 0; i < n && errors == 0; i++, next++) {
			const struct kvf_event *ev = &out[i];
			if (ev->aux != next || ev->key != key_of(next) || ev->kind != KVF_EV_WC ||
			    ev->role != (uint8_t)next || ev->status != (uint16_t)next ||
			    ev->peer != (uint32_t)(next >> 3) || ev->data != NULL) {
				fprintf(stderr, "ring_stress: item %" PRIu64 ": got aux %" PRIu64
					" key %#" PRIx64 " (%s)\n", next, ev->aux, ev->key,
					ev->aux < next ? "duplicate or stale" :
					ev->aux > next ? "lost items" : "corrupt event");
				errors++;
			}
		}
	}
	if (errors) {
		/* The producer may be blocked on a full ring: don't join it. */
		fprintf(stderr, "ring_stress: FAILED\n");
		return 1;
	}
	pthread_join(t, NULL);
	double secs = now_s() - t0;

	/* Nothing more than what was pushed. */
	if (kvf_ring_pop_batch(s.ring, out, MAX_BATCH) != 0 || kvf_ring_count(s.ring) != 0) {
		fprintf(stderr, "ring_stress: FAILED: ring not empty after %" PRIu64 " items\n", items);
		return 1;
	}
	printf("ring_stress: items %" PRIu64 " ring %" PRIu64 " seconds %.3f Mitems/s %.2f "
	       "stalls %" PRIu64 " batches %" PRIu64 " empty_polls %" PRIu64 ": OK\n",
	       items, ring_size, secs, secs > 0 ? (double)items / secs / 1e6 : 0.0,
	       kvf_ring_stalls(s.ring), batches, empty_polls);
	kvf_ring_destroy(s.ring);
	return 0;
}
