/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the SPSC ring (src/base/ring.c). The two-thread stress test is
 * tests/unit/base/ring_stress.c. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "base/ring.h"

#include <sys/eventfd.h>
#include <unistd.h>

static struct kvf_event ev_seq(uint64_t seq)
{
	return (struct kvf_event){ .kind = KVF_EV_WC, .key = seq * 7, .aux = seq };
}

static void check_seq(const struct kvf_event *ev, uint64_t seq)
{
	cr_assert_eq(ev->aux, seq, "got aux %llu, expected %llu",
		     (unsigned long long)ev->aux, (unsigned long long)seq);
	cr_assert_eq(ev->key, seq * 7);
	cr_assert_eq(ev->kind, KVF_EV_WC);
}

Test(ring, event_is_32_bytes)
{
	cr_assert_eq(sizeof(struct kvf_event), 32);
}

Test(ring, bad_sizes_rejected)
{
	const uint32_t bad[] = { 0, 1, 3, 6, 100, 1000, 0x80000001u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_null(kvf_ring_create(bad[i]), "size %u accepted", bad[i]);

	const uint32_t good[] = { 2, 4, 64, 4096 };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct kvf_ring *r = kvf_ring_create(good[i]);
		cr_assert_not_null(r, "size %u rejected", good[i]);
		cr_assert_eq(kvf_ring_count(r), 0);
		cr_assert_eq(kvf_ring_stalls(r), 0);
		kvf_ring_destroy(r);
	}
}

Test(ring, fill_then_empty)
{
	const uint32_t size = 8;
	struct kvf_ring *r = kvf_ring_create(size);
	struct kvf_event out[16];

	cr_assert_eq(kvf_ring_pop_batch(r, out, 16), 0, "empty ring popped something");
	for (uint32_t i = 0; i < size; i++) {
		struct kvf_event ev = ev_seq(i);
		cr_assert(kvf_ring_try_push(r, &ev), "push %u of %u failed", i, size);
		cr_assert_eq(kvf_ring_count(r), i + 1);
	}
	cr_assert_eq(kvf_ring_pop_batch(r, out, 16), size);
	for (uint32_t i = 0; i < size; i++)
		check_seq(&out[i], i);
	cr_assert_eq(kvf_ring_count(r), 0);
	cr_assert_eq(kvf_ring_pop_batch(r, out, 16), 0);
	cr_assert_eq(kvf_ring_stalls(r), 0);
	kvf_ring_destroy(r);
}

Test(ring, try_push_on_full)
{
	struct kvf_ring *r = kvf_ring_create(4);
	struct kvf_event ev, out[1];

	for (uint64_t i = 0; i < 4; i++) {
		ev = ev_seq(i);
		cr_assert(kvf_ring_try_push(r, &ev));
	}
	ev = ev_seq(99);
	cr_assert_not(kvf_ring_try_push(r, &ev), "try_push succeeded on a full ring");
	cr_assert_eq(kvf_ring_count(r), 4);
	cr_assert_eq(kvf_ring_stalls(r), 0, "try_push counted a stall");

	/* One slot freed: exactly one more fits, and the rejected event left no
	 * trace. */
	cr_assert_eq(kvf_ring_pop_batch(r, out, 1), 1);
	check_seq(&out[0], 0);
	ev = ev_seq(4);
	cr_assert(kvf_ring_try_push(r, &ev));
	cr_assert_not(kvf_ring_try_push(r, &ev));
	for (uint64_t i = 1; i <= 4; i++) {
		cr_assert_eq(kvf_ring_pop_batch(r, out, 1), 1);
		check_seq(&out[0], i);
	}
	cr_assert_eq(kvf_ring_pop_batch(r, out, 1), 0);
	kvf_ring_destroy(r);
}

Test(ring, batch_pop_ordering)
{
	/* Batches of every size, crossing the end of the slot array. */
	enum { size = 16 };
	struct kvf_ring *r = kvf_ring_create(size);
	struct kvf_event out[size];
	uint64_t pushed = 0, popped = 0;

	for (uint32_t round = 0; round < 200; round++) {
		uint32_t npush = 1 + (round * 7) % size;
		uint32_t max = 1 + (round * 5) % size;
		for (uint32_t i = 0; i < npush; i++) {
			struct kvf_event ev = ev_seq(pushed);
			if (!kvf_ring_try_push(r, &ev))
				break;
			pushed++;
		}
		uint32_t before = kvf_ring_count(r);
		uint32_t n = kvf_ring_pop_batch(r, out, max);
		cr_assert_eq(n, before < max ? before : max);
		for (uint32_t i = 0; i < n; i++)
			check_seq(&out[i], popped++);
	}
	uint32_t n;
	while ((n = kvf_ring_pop_batch(r, out, size)) > 0)
		for (uint32_t i = 0; i < n; i++)
			check_seq(&out[i], popped++);
	cr_assert_eq(popped, pushed);
	cr_assert_eq(kvf_ring_pop_batch(r, out, 0), 0);
	kvf_ring_destroy(r);
}

Test(ring, index_wraparound)
{
	/* Free-running indices start 1..2*size short of 2^32: they wrap at every
	 * position (while filling, full, mid-batch, while empty). */
	enum { size = 8 };
	for (uint32_t back = 1; back <= 2 * size; back++) {
		struct kvf_ring *r = kvf_ring_create_at(size, (uint32_t)0 - back);
		struct kvf_event out[size];
		uint64_t pushed = 0, popped = 0;

		cr_assert_not_null(r);
		for (int lap = 0; lap < 4; lap++) {
			for (uint32_t i = 0; i < size; i++) {
				struct kvf_event ev = ev_seq(pushed++);
				cr_assert(kvf_ring_try_push(r, &ev));
			}
			cr_assert_eq(kvf_ring_count(r), size);
			struct kvf_event ev = ev_seq(0);
			cr_assert_not(kvf_ring_try_push(r, &ev), "full ring took more (back %u)", back);
			uint32_t n = kvf_ring_pop_batch(r, out, 3);
			cr_assert_eq(n, 3);
			n += kvf_ring_pop_batch(r, out + 3, size);
			cr_assert_eq(n, size);
			for (uint32_t i = 0; i < n; i++)
				check_seq(&out[i], popped++);
			cr_assert_eq(kvf_ring_count(r), 0);
		}
		kvf_ring_destroy(r);
	}
}

struct blocked_push {
	struct kvf_ring *r;
	uint64_t seq;
	atomic_bool done;
};

static void *push_thread(void *arg)
{
	struct blocked_push *bp = arg;
	struct kvf_event ev = ev_seq(bp->seq);
	kvf_ring_push(bp->r, &ev);
	atomic_store(&bp->done, true);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

Test(ring, push_waits_on_full_and_counts_one_stall)
{
	enum { size = 4 };
	struct kvf_ring *r = kvf_ring_create(size);
	struct kvf_event out[size];

	/* push with room: no stall. */
	for (uint64_t i = 0; i < size; i++) {
		struct kvf_event ev = ev_seq(i);
		kvf_ring_push(r, &ev);
	}
	cr_assert_eq(kvf_ring_stalls(r), 0);

	struct blocked_push bp = { .r = r, .seq = size };
	atomic_init(&bp.done, false);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, push_thread, &bp), 0);

	/* The producer must see the ring full, count it once, and keep waiting
	 * (not drop) however long we take. */
	for (int i = 0; i < 5000 && kvf_ring_stalls(r) == 0; i++)
		sleep_ms(1);
	cr_assert_eq(kvf_ring_stalls(r), 1, "producer did not count its wait");
	sleep_ms(50);
	cr_assert_not(atomic_load(&bp.done), "push returned while the ring was full");
	cr_assert_eq(kvf_ring_stalls(r), 1, "one wait counted more than once");
	cr_assert_eq(kvf_ring_count(r), size);

	cr_assert_eq(kvf_ring_pop_batch(r, out, 1), 1);
	check_seq(&out[0], 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert(atomic_load(&bp.done));
	cr_assert_eq(kvf_ring_stalls(r), 1);

	cr_assert_eq(kvf_ring_pop_batch(r, out, size), size);
	for (uint64_t i = 0; i < size; i++)
		check_seq(&out[i], i + 1);
	kvf_ring_destroy(r);
}

/* The waiter's line (kvf_ring_wait_arm / _disarm, kvf_ring_wake): arming
 * refuses when events are there, a push after arming writes the fd once,
 * and a push with nothing armed writes nothing. */
Test(ring, wait_arm_and_wake)
{
	struct kvf_ring *r = kvf_ring_create(8);
	struct kvf_event ev = {0}, out;
	int fd = eventfd(0, EFD_NONBLOCK);
	uint64_t n = 0;

	cr_assert(r && fd >= 0);
	kvf_ring_set_wake_fd(r, fd);
	kvf_ring_push(r, &ev);
	cr_assert_eq(read(fd, &n, sizeof(n)), -1, "a push with no sleep announced wrote the fd");
	cr_assert_not(kvf_ring_wait_arm(r), "armed over a pending event");
	cr_assert_eq(kvf_ring_pop_batch(r, &out, 1), 1);
	cr_assert(kvf_ring_wait_arm(r));
	kvf_ring_push(r, &ev);
	kvf_ring_push(r, &ev);
	cr_assert_eq(read(fd, &n, sizeof(n)), (ssize_t)sizeof(n));
	cr_assert_eq(n, 1, "one write per sleep, not per push (%lu)", (unsigned long)n);
	cr_assert(kvf_ring_wait_disarm(r), "the producer's wakeup went unreported");
	cr_assert(kvf_ring_wait_arm(r) == false);
	cr_assert_eq(kvf_ring_pop_batch(r, &out, 1), 1);
	cr_assert_eq(kvf_ring_pop_batch(r, &out, 1), 1);
	cr_assert(kvf_ring_wait_arm(r));
	cr_assert_not(kvf_ring_wait_disarm(r), "nothing came, yet a wakeup was reported");
	cr_assert(kvf_ring_wait_arm(r));
	kvf_ring_wake(r);
	cr_assert_eq(read(fd, &n, sizeof(n)), (ssize_t)sizeof(n), "kvf_ring_wake did not write");
	cr_assert(kvf_ring_wait_disarm(r));
	close(fd);
	kvf_ring_destroy(r);
}
