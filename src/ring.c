/* SPDX-License-Identifier: Apache-2.0 */
/* SPSC ring of struct kvf_event (see ring.h).
 *
 * Indices are free-running uint32_t, masked on use: tail - head is the number
 * of events in the ring (0..size), correct across wraparound. The producer
 * owns tail, the consumer owns head; each lives on its own cache line with
 * that side's private copy of the other side's index, refreshed only when the
 * copy says "full" (producer) or "fewer than asked for" (consumer). So the
 * producer reads the consumer's line about once per lap when the ring runs
 * full, and the consumer reads the producer's line once per batch at most,
 * instead of each side doing so once per event.
 *
 * Memory order, two pairs:
 *   producer: slot writes, then store-release tail  --> consumer: load-acquire
 *             tail, then slot reads;
 *   consumer: slot reads, then store-release head   --> producer: load-acquire
 *             head, then slot writes (reuse). */
#include "ring.h"

#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CACHELINE 64
#define SPIN_BEFORE_YIELD 128

struct kvf_ring {
	/* Read-only after create. */
	uint32_t size;
	uint32_t mask;

	/* Producer's line. */
	alignas(CACHELINE) _Atomic uint32_t tail; /* next slot to write */
	uint32_t head_cache;                      /* producer's copy of head */
	_Atomic uint64_t stalls;                  /* written by the producer only */

	/* Consumer's line. */
	alignas(CACHELINE) _Atomic uint32_t head; /* next slot to read */
	uint32_t tail_cache;                      /* consumer's copy of tail */

	alignas(CACHELINE) struct kvf_event slots[];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

struct kvf_ring *kvf_ring_create_at(uint32_t size, uint32_t start)
{
	if (size < 2 || (size & (size - 1)) != 0)
		return NULL;
	/* sizeof is a multiple of 64 (alignas) and so is 32 * size: valid for
	 * aligned_alloc. size <= 2^31, so this cannot overflow a 64-bit size_t. */
	_Static_assert(sizeof(struct kvf_event) == 32, "kvf_event is 32 bytes");
	size_t bytes = sizeof(struct kvf_ring) + (size_t)size * sizeof(struct kvf_event);
	struct kvf_ring *r = aligned_alloc(CACHELINE, bytes);
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->size = size;
	r->mask = size - 1;
	atomic_init(&r->tail, start);
	atomic_init(&r->head, start);
	atomic_init(&r->stalls, 0);
	r->head_cache = start;
	r->tail_cache = start;
	return r;
}

struct kvf_ring *kvf_ring_create(uint32_t size)
{
	return kvf_ring_create_at(size, 0);
}

void kvf_ring_destroy(struct kvf_ring *r)
{
	free(r);
}

static inline bool ring_put(struct kvf_ring *r, const struct kvf_event *ev)
{
	/* Our own index: only we write it. */
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (tail - r->head_cache == r->size) {
		/* Acquire pairs with the store-release of head in
		 * kvf_ring_pop_batch: the consumer's reads of the slots it freed
		 * happen before we overwrite them. */
		r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
		if (tail - r->head_cache == r->size)
			return false;
	}
	r->slots[tail & r->mask] = *ev;
	/* Release pairs with the load-acquire of tail in kvf_ring_pop_batch:
	 * the slot write above is visible before the consumer sees it counted. */
	atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
	return true;
}

bool kvf_ring_try_push(struct kvf_ring *r, const struct kvf_event *ev)
{
	return ring_put(r, ev);
}

/* Out of line so that push's fast path needs no saved registers. */
__attribute__((noinline, cold))
static void push_wait(struct kvf_ring *r, const struct kvf_event *ev)
{
	/* Single writer: a relaxed load + store is enough, readers only need an
	 * untorn value. */
	atomic_store_explicit(&r->stalls,
			      atomic_load_explicit(&r->stalls, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	for (unsigned spins = 0; !ring_put(r, ev); spins++) {
		if (spins < SPIN_BEFORE_YIELD)
			cpu_relax();
		else
			sched_yield();
	}
}

void kvf_ring_push(struct kvf_ring *r, const struct kvf_event *ev)
{
	if (!ring_put(r, ev))
		push_wait(r, ev);
}

uint32_t kvf_ring_pop_batch(struct kvf_ring *r, struct kvf_event *out, uint32_t max)
{
	/* Our own index: only we write it. */
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t avail = r->tail_cache - head;

	if (avail < max) {
		/* Acquire pairs with the store-release of tail in ring_put
		 * (push / try_push): the slots up to tail are written. */
		r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
		avail = r->tail_cache - head;
	}
	uint32_t n = avail < max ? avail : max;
	if (n == 0)
		return 0;

	for (uint32_t k = 0; k < n; k++)
		out[k] = r->slots[(head + k) & r->mask];
	/* One release for the whole batch; pairs with the load-acquire of head
	 * in ring_put: our slot reads above happen before the producer reuses
	 * those slots. */
	atomic_store_explicit(&r->head, head + n, memory_order_release);
	return n;
}

uint32_t kvf_ring_count(const struct kvf_ring *r)
{
	/* Head first, with acquire pairing with the store-release of head in
	 * kvf_ring_pop_batch: the tail read after it is at least the tail that
	 * consumer had seen, so tail - head never goes negative. It can exceed
	 * size if the consumer moves on in between: clamp. */
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t n = tail - head;
	return n <= r->size ? n : r->size;
}

uint64_t kvf_ring_stalls(const struct kvf_ring *r)
{
	return atomic_load_explicit(&r->stalls, memory_order_relaxed);
}
