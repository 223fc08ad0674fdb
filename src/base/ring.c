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
 *             head, then slot writes (reuse).
 *
 * Waking a consumer that sleeps (kvf_ring_wait_arm): a third line, the
 * waiter's, holds a flag the consumer raises before it sleeps and an eventfd
 * it sleeps on. The pair is Dekker's, with a seq_cst fence on each side:
 *   consumer: store sleeping = 1; fence; load tail (empty? then sleep)
 *   producer: store tail;         fence; load sleeping (set? then write fd)
 * The fences order each side's store before its load, and all seq_cst
 * fences are in one total order: whichever fence comes second, its load
 * sees the other side's store. So either the consumer sees the event and
 * does not sleep, or the producer sees the flag and writes the eventfd
 * (which stays readable until read): a wakeup cannot be lost. The producer
 * pays one fence and a load of a line that is written only around a sleep
 * (it stays shared in its cache); the eventfd write, a syscall, only when
 * the consumer announced a sleep, once per sleep (exchange). */
#include "base/ring.h"

#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

	/* Waiter's line: written by the consumer around a sleep, and by the
	 * producer's exchange once per sleep. */
	alignas(CACHELINE) _Atomic uint32_t sleeping;
	int wake_fd;                              /* eventfd, -1 = none */

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
	atomic_init(&r->sleeping, 0);
	r->wake_fd = -1;
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

/* The consumer announced a sleep: one write per sleep (whoever takes the
 * flag first writes; a second producer push finds it down). */
__attribute__((noinline, cold))
static void wake_now(struct kvf_ring *r)
{
	uint64_t one = 1;

	if (!atomic_exchange_explicit(&r->sleeping, 0, memory_order_relaxed) || r->wake_fd < 0)
		return;
	/* EAGAIN: the counter is full, so the fd is readable already. */
	while (write(r->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
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

/* After an event is counted: wake the consumer if it announced a sleep.
 * The fence pairs with the one in kvf_ring_wait_arm (see the top). */
static inline void wake_check(struct kvf_ring *r)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->sleeping, memory_order_relaxed))
		wake_now(r);
}

void kvf_ring_wake(struct kvf_ring *r)
{
	wake_check(r);
}

bool kvf_ring_try_push(struct kvf_ring *r, const struct kvf_event *ev)
{
	if (!ring_put(r, ev))
		return false;
	wake_check(r);
	return true;
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
	wake_check(r);
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

void kvf_ring_set_wake_fd(struct kvf_ring *r, int fd)
{
	r->wake_fd = fd;
}

bool kvf_ring_wait_arm(struct kvf_ring *r)
{
	atomic_store_explicit(&r->sleeping, 1, memory_order_relaxed);
	/* Pairs with the fence in wake_check (see the top): after it, either
	 * we see the producer's tail or it sees our flag. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->tail, memory_order_relaxed) ==
	    atomic_load_explicit(&r->head, memory_order_relaxed))
		return true;
	atomic_store_explicit(&r->sleeping, 0, memory_order_relaxed);
	return false;
}

bool kvf_ring_wait_disarm(struct kvf_ring *r)
{
	/* Down already: a producer took it, and wrote or is about to. */
	bool taken = !atomic_exchange_explicit(&r->sleeping, 0, memory_order_relaxed);
	uint64_t n;

	/* Read the fd whether or not it was taken: the producer of an earlier
	 * sleep may have written after that sleep's read, so the fd can be
	 * readable with the flag still up (this sleep then returned at once).
	 * Left unread, it would end every later sleep at once: a spin. One
	 * nonblocking read per sleep; a write after it is one spurious wakeup. */
	if (r->wake_fd >= 0)
		while (read(r->wake_fd, &n, sizeof(n)) < 0 && errno == EINTR)
			;
	return taken;
}
