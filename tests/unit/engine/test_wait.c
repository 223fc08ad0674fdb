/* SPDX-License-Identifier: Apache-2.0 */
/* kvf_engine_wait / kvf_engine_fd / kvf_engine_wait_prepare (src/engine/wait.c,
 * the ring's waiter line in src/base/ring.c): the wait returns on a pushed event,
 * on a due deadline, on the transport's bound and on its timeout, and a
 * producer thread's events are never left unseen by a sleeping scheduler. */
#include <criterion/criterion.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "fake_transport.h"

#define MS 1000000ull

static struct kvf_config cfg;
static struct fake f;
static kvf_engine *eng;

static void setup(void)
{
	fake_cfg(&cfg);
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
}

static void teardown(void)
{
	kvf_engine_close(eng);
}

TestSuite(wait, .init = setup, .fini = teardown);

/* ms since t0 on the real clock. */
static double ms_since(uint64_t t0)
{
	return (double)(kvf_monotonic_ns() - t0) / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static bool fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, timeout_ms) == 1;
}

Test(wait, times_out_with_nothing_to_do)
{
	uint64_t t0 = kvf_monotonic_ns();

	cr_assert_eq(kvf_engine_wait(eng, 60), 0);
	cr_expect_geq(ms_since(t0), 55.0, "returned after %.1f ms", ms_since(t0));
	cr_expect_lt(ms_since(t0), 2000.0);
	cr_assert_eq(kvf_engine_wait(eng, 0), 0, "a zero timeout does not sleep");
}

Test(wait, returns_at_once_when_an_event_is_pending)
{
	uint64_t t0 = kvf_monotonic_ns();

	push_lost(eng, 99);
	cr_assert_eq(kvf_engine_wait(eng, 5000), 1);
	cr_expect_lt(ms_since(t0), 1000.0);
	cr_assert_eq(kvf_progress(eng), 1, "the event is still there for progress");
}

static void *push_later(void *arg)
{
	(void)arg;
	sleep_ms(50);
	push_lost(eng, 99);
	return NULL;
}

Test(wait, returns_when_the_poller_pushes)
{
	pthread_t th;
	uint64_t t0 = kvf_monotonic_ns();

	cr_assert_eq(pthread_create(&th, NULL, push_later, NULL), 0);
	cr_assert_eq(kvf_engine_wait(eng, 5000), 1);
	pthread_join(th, NULL);
	cr_expect_geq(ms_since(t0), 45.0);
	cr_expect_lt(ms_since(t0), 2000.0, "woken after %.1f ms, not by the push", ms_since(t0));
	cr_assert_eq(kvf_progress(eng), 1);
}

Test(wait, returns_at_once_when_a_deadline_is_due)
{
	kvf_room h;
	uint64_t t0;

	cr_assert_eq(kvf_sender_create(eng, 1, &h), 0);
	fake_clock += (uint64_t)cfg.bootstrap_s * SEC;
	t0 = kvf_monotonic_ns();
	cr_assert_eq(kvf_engine_wait(eng, 5000), 1);
	cr_expect_lt(ms_since(t0), 1000.0);
	cr_assert_eq(kvf_progress(eng), 1);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
}

/* The sleep ends when the earliest deadline falls due, not at the timeout. */
Test(wait, sleeps_until_the_earliest_deadline)
{
	kvf_room a, b;
	uint64_t t0;

	cr_assert_eq(kvf_sender_create(eng, 1, &a), 0);
	fake_clock += SEC / 2;
	cr_assert_eq(kvf_sender_create(eng, 2, &b), 0);
	fake_clock += (uint64_t)cfg.bootstrap_s * SEC - SEC / 2 - 40 * MS; /* a due in 40 ms */
	t0 = kvf_monotonic_ns();
	cr_assert_eq(kvf_engine_wait(eng, 10000), 1);
	cr_expect_geq(ms_since(t0), 35.0, "returned after %.1f ms", ms_since(t0));
	cr_expect_lt(ms_since(t0), 2000.0, "slept %.1f ms past a deadline", ms_since(t0));
	fake_clock += 40 * MS;
	cr_assert_eq(kvf_progress(eng), 1);
	cr_assert_eq(kvf_poll(eng, a), KVF_FAILED);
	cr_assert_eq(kvf_poll(eng, b), KVF_BOOTSTRAPPING);
}

/* On the real clock: bootstrap_s (1 s) bounds a wait of 20 s. */
Test(wait, real_clock_deadline_bounds_the_sleep)
{
	kvf_room h;
	uint64_t t0;
	int n = 0;

	kvf_engine_close(eng);
	cfg.bootstrap_s = 1;
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	kvf_engine_set_clock(eng, NULL, NULL);
	cr_assert_eq(kvf_sender_create(eng, 1, &h), 0);
	t0 = kvf_monotonic_ns();
	while (kvf_poll(eng, h) != KVF_FAILED && ms_since(t0) < 20000.0) {
		cr_assert_geq(kvf_engine_wait(eng, 20000), 0);
		kvf_progress(eng);
		n++;
	}
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_expect_lt(ms_since(t0), (double)cfg.bootstrap_s * 1000.0 + 1500.0,
		     "the deadline was applied after %.1f ms", ms_since(t0));
	cr_expect_leq(n, 3, "%d waits for one deadline: the wait spins", n);
}

Test(wait, the_transport_bounds_the_sleep)
{
	uint64_t t0 = kvf_monotonic_ns();

	f.wait_bound_ns = 30 * MS;
	cr_assert_eq(kvf_engine_wait(eng, 10000), 1);
	cr_expect_geq(ms_since(t0), 25.0);
	cr_expect_lt(ms_since(t0), 2000.0);
}

Test(wait, fd_is_written_only_after_prepare)
{
	int fd = kvf_engine_fd(eng);

	cr_assert_geq(fd, 0);
	cr_assert_eq(kvf_engine_fd(NULL), -EINVAL);
	push_lost(eng, 99);
	cr_assert_not(fd_readable(fd, 0), "a push with no sleep announced wrote the fd");
	cr_assert_eq(kvf_engine_wait_prepare(eng), 0, "work pending: sleep 0 ms");
	cr_assert_eq(kvf_progress(eng), 1);
	cr_assert_eq(kvf_engine_wait_prepare(eng), INT_MAX, "nothing due on any clock");
	cr_assert_not(fd_readable(fd, 0));
	push_lost(eng, 99);
	cr_assert(fd_readable(fd, 1000), "the push after prepare did not wake the fd");
	cr_assert_eq(kvf_progress(eng), 1);
	cr_assert_not(fd_readable(fd, 0), "progress did not drain the fd");
}

/* The poller of an earlier sleep wrote the fd after that sleep drained it
 * (it took the flag first): the next sleep returns at once for it, and must
 * drain it, or every later sleep returns at once (a spin). */
Test(wait, a_late_wakeup_is_drained)
{
	uint64_t one = 1, t0;

	cr_assert_eq(write(kvf_engine_fd(eng), &one, sizeof(one)), (ssize_t)sizeof(one));
	cr_assert_geq(kvf_engine_wait(eng, 1000), 0);
	t0 = kvf_monotonic_ns();
	cr_assert_eq(kvf_engine_wait(eng, 60), 0, "the stale wakeup was left in the fd");
	cr_expect_geq(ms_since(t0), 55.0, "returned after %.1f ms", ms_since(t0));
	kvf_engine_wait_prepare(eng);
	cr_assert_eq(write(kvf_engine_fd(eng), &one, sizeof(one)), (ssize_t)sizeof(one));
	kvf_progress(eng);
	cr_assert_not(fd_readable(kvf_engine_fd(eng), 0), "progress left a stale wakeup in the fd");
}

Test(wait, prepare_rounds_the_deadline_up)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, 1, &h), 0);
	fake_clock += (uint64_t)cfg.bootstrap_s * SEC - 2 * MS - 1;
	cr_assert_eq(kvf_engine_wait_prepare(eng), 3);
	fake_clock += 2 * MS + 1;
	cr_assert_eq(kvf_engine_wait_prepare(eng), 0);
	cr_assert_eq(kvf_engine_wait(NULL, 0), -EINVAL);
	cr_assert_eq(kvf_engine_wait_prepare(NULL), -EINVAL);
}

/* ------------------------------------------------------------ stress */

enum { STRESS_EVENTS = 20000, STRESS_TIMEOUT_MS = 1000 };

/* Bursts and gaps: most pushes find the scheduler awake, some asleep, some
 * in the middle of announcing its sleep (the race the fences close). */
static void *producer(void *arg)
{
	unsigned seed = 7;

	(void)arg;
	for (int i = 0; i < STRESS_EVENTS; i++) {
		push_lost(eng, 99);
		unsigned r = (unsigned)rand_r(&seed) % 16;
		if (r < 2) {
			struct timespec ts = {0, (long)(rand_r(&seed) % 100000)};
			nanosleep(&ts, NULL);
		} else if (r < 4) {
			for (volatile int k = rand_r(&seed) % 2000; k > 0; k--)
				;
		}
	}
	return NULL;
}

Test(wait, stress_no_lost_wakeup, .timeout = 120)
{
	pthread_t th;
	long seen = 0;
	int timeouts = 0;
	double longest = 0;

	cr_assert_eq(pthread_create(&th, NULL, producer, NULL), 0);
	while (seen < STRESS_EVENTS && timeouts < 3) {
		uint64_t t0 = kvf_monotonic_ns();
		int rc = kvf_engine_wait(eng, STRESS_TIMEOUT_MS);
		double ms = ms_since(t0);

		cr_assert_geq(rc, 0);
		longest = ms > longest ? ms : longest;
		/* The producer never pauses 1 s: a timeout here is a lost wakeup. */
		timeouts += rc == 0;
		/* A lost wakeup sleeps the whole timeout (the next push, at most
		 * 100 us later, found the flag already taken or never saw it);
		 * a woken wait lasts until that push. */
		cr_assert_lt(ms, STRESS_TIMEOUT_MS * 0.9, "a wait of %.0f ms: a lost wakeup", ms);
		seen += kvf_progress(eng);
	}
	pthread_join(th, NULL);
	seen += kvf_progress(eng);
	cr_assert_eq(timeouts, 0, "%d waits timed out with events pushed (lost wakeups)", timeouts);
	cr_assert_eq(seen, STRESS_EVENTS, "saw %ld of %d events", seen, STRESS_EVENTS);
	cr_log_info("longest wait %.2f ms", longest);
}
