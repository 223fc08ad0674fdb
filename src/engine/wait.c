/* SPDX-License-Identifier: Apache-2.0 */
/* Waiting for work instead of spinning: kvf_engine_wait, kvf_engine_fd,
 * kvf_engine_wait_prepare (include/kvferry/kvferry.h).
 *
 * The scheduler announces a sleep in the ring (kvf_ring_wait_arm: flag up,
 * fence, ring re-checked; ring.c says why no wakeup is lost), then bounds
 * the sleep by everything kvf_progress owes on a clock rather than on an
 * event: the earliest room deadline (the timer heap's top), the oldest
 * tombstone or parked ROOM_INFO, the periodic summary, the metrics
 * snapshot, and the transport's own (heartbeats, queued frames: its
 * wait_ns). So no deadline passes unapplied while the scheduler sleeps.
 * The bound is read after arming: work the poller hands over outside the
 * ring (its connection stacks) is published, then kvf_ring_wake, so the
 * transport's wait_ns sees it or the poller sees the flag. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/guard.h"
#include "engine/engine_impl.h"

static uint64_t until(uint64_t now, uint64_t when)
{
	return when > now ? when - now : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ns from now until kvf_progress owes clock-driven work, at most cap. */
static uint64_t work_bound_ns(struct kvf_engine *eng, uint64_t cap)
{
	uint64_t now = kvf_now(eng), when, b = cap;

	if (kvf_timers_next(&eng->timers, &when))
		b = min_u64(b, until(now, when));
	if (kvf_early_next(&eng->early, &when))
		b = min_u64(b, until(now, when));
	if (eng->metrics_hooks && eng->metrics_hooks->next(eng, &when))
		b = min_u64(b, until(now, when));
	if (eng->cfg.summary_interval_s)
		b = min_u64(b, until(now, eng->next_summary_ns));
	if (b && eng->ops && eng->ops->wait_ns)
		b = min_u64(b, eng->ops->wait_ns(eng->t, b));
	return b;
}

/* Announce the sleep. false: work is there already (nothing armed). */
static bool arm(struct kvf_engine *eng)
{
	/* Every rail's ring, or none: one that has work already undoes the
	 * others (their producers then write the fd at most once, spuriously). */
	for (uint32_t k = 0; k <= eng->nxrings; k++) {
		if (!kvf_ring_wait_arm(kvf_engine_rail_ring(eng, k))) {
			while (k-- > 0)
				kvf_ring_wait_disarm(kvf_engine_rail_ring(eng, k));
			return false;
		}
	}
	eng->wait_armed = true;
	return true;
}

bool kvf_engine_wait_end(struct kvf_engine *eng)
{
	bool taken = false;

	eng->wait_armed = false;
	for (uint32_t k = 0; k <= eng->nxrings; k++)
		taken |= kvf_ring_wait_disarm(kvf_engine_rail_ring(eng, k));
	return taken;
}

int kvf_engine_fd(const kvf_engine *eng)
{
	return eng ? eng->wake_fd : -EINVAL;
}

/* Announce the sleep, then read the bound (after arming: see the top).
 * Returns the ns to sleep at most; 0: work is pending, nothing armed. */
static uint64_t arm_and_bound(struct kvf_engine *eng)
{
	uint64_t ns;

	if (!eng->wait_armed && !arm(eng))
		return 0;
	ns = work_bound_ns(eng, UINT64_MAX);
	if (ns == 0)
		kvf_engine_wait_end(eng);
	return ns;
}

int kvf_engine_wait_prepare(kvf_engine *eng)
{
	uint64_t ns, ms;
	int rc;

	if (!eng)
		return -EINVAL;
	rc = kvf_guard_enter(eng, "kvf_engine_wait_prepare");
	if (rc)
		return rc;
	ns = arm_and_bound(eng);
	kvf_guard_leave(eng);
	if (ns == 0)
		return 0;
	/* Rounded up: a poll in ms wakes at or after the deadline, never
	 * before it with nothing to do (a spin). */
	ms = ns / 1000000u + (ns % 1000000u != 0);
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Sleep on the eventfd for at most ns (UINT64_MAX: no limit). Returns
 * > 0 readable, 0 timed out, or -errno (-EINTR: a signal). */
static int sleep_fd(int fd, uint64_t ns)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};
	int rc = ppoll(&p, 1, ns == UINT64_MAX ? NULL : &ts, NULL);

	return rc < 0 ? -errno : rc;
}

int kvf_engine_wait(kvf_engine *eng, int timeout_ms)
{
	uint64_t cap, ns;
	bool woke;
	int rc;

	if (!eng)
		return -EINVAL;
	rc = kvf_guard_enter(eng, "kvf_engine_wait");
	if (rc)
		return rc;
	cap = timeout_ms < 0 ? UINT64_MAX : (uint64_t)timeout_ms * 1000000u;
	ns = arm_and_bound(eng);
	if (ns == 0) {
		kvf_guard_leave(eng);
		return 1;
	}
	rc = cap ? sleep_fd(eng->wake_fd, min_u64(ns, cap)) : 0;
	woke = kvf_engine_wait_end(eng);
	kvf_guard_leave(eng);
	if (rc < 0)
		return rc;
	/* Woken, or the limit was the engine's (a deadline is due now). */
	return woke || rc > 0 || ns <= cap ? 1 : 0;
}
