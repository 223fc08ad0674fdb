/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/liveness.c: the poller's liveness decisions from its stamps,
 * and when it sends a keepalive. */
#include <criterion/criterion.h>
#include <string.h>

#include "transfer/liveness.h"

#define MS 1000000ull
#define T0 (1000 * MS) /* clocks that do not start at 0 */

static struct kvf_presence w;
static struct kvf_liveness l;

/* A poller that runs: a round every ms from T0 to `to`. */
static void rounds(uint64_t from, uint64_t to)
{
	for (uint64_t t = from; t <= to; t += MS)
		kvf_presence_round(&w, t);
}

static void start(uint64_t interval_ms)
{
	kvf_presence_init(&w, 150 * MS, T0);
	kvf_live_start(&l, &w, interval_ms * MS, T0);
}

Test(liveness, lost_only_past_misses_times_interval_of_silence)
{
	start(1000);
	rounds(T0, T0 + 5000 * MS);
	cr_assert_eq(kvf_live_silence(&l, &w, T0 + 5000 * MS), 5000 * MS);
	cr_assert_not(kvf_live_lost(&l, &w, 5000 * MS, T0 + 5000 * MS), "at the limit: not yet");
	kvf_presence_round(&w, T0 + 5000 * MS + 1);
	cr_assert(kvf_live_lost(&l, &w, 5000 * MS, T0 + 5000 * MS + 1), "past it: lost");
	cr_assert_not(kvf_live_lost(&l, &w, 0, T0 + 5000 * MS + 1), "limit 0: never lost");
}

Test(liveness, a_receive_restarts_the_silence)
{
	start(1000);
	rounds(T0, T0 + 4000 * MS);
	kvf_live_heard(&l, &w, T0 + 4000 * MS);
	rounds(T0 + 4001 * MS, T0 + 8000 * MS);
	cr_assert_eq(kvf_live_silence(&l, &w, T0 + 8000 * MS), 4000 * MS);
	cr_assert_not(kvf_live_lost(&l, &w, 5000 * MS, T0 + 8000 * MS));
}

Test(liveness, the_pollers_own_absence_is_not_the_peers_silence)
{
	/* Heard at T0, then the poller is away 30 s (blocked on a full ring,
	 * the process stopped): the round after it counts 30 s less the
	 * longest sleep as away. What the peer sent meanwhile is in the CQ,
	 * polled before the next round: silence is what was watched. */
	start(1000);
	rounds(T0, T0 + 100 * MS);
	kvf_presence_round(&w, T0 + 30100 * MS);
	cr_assert_eq(w.away_ns, 30000 * MS - 150 * MS);
	cr_assert_eq(kvf_live_silence(&l, &w, T0 + 30100 * MS), 250 * MS);
	cr_assert_not(kvf_live_lost(&l, &w, 5000 * MS, T0 + 30100 * MS), "no false loss");
	/* and it still finds a peer that really went quiet, 5 s watched later */
	rounds(T0 + 30101 * MS, T0 + 34850 * MS);
	cr_assert_not(kvf_live_lost(&l, &w, 5000 * MS, T0 + 34850 * MS));
	rounds(T0 + 34851 * MS, T0 + 34860 * MS);
	cr_assert(kvf_live_lost(&l, &w, 5000 * MS, T0 + 34860 * MS));
}

Test(liveness, sleeps_up_to_the_expected_gap_are_watched_time)
{
	/* A poller asleep on its fds wakes for any completion: 100 ms naps
	 * (heartbeat.interval_ms / 4, capped) are time it watched. */
	start(1000);
	for (uint64_t t = T0; t <= T0 + 6000 * MS; t += 100 * MS)
		kvf_presence_round(&w, t);
	cr_assert_eq(w.away_ns, 0);
	cr_assert(kvf_live_lost(&l, &w, 5000 * MS, T0 + 6000 * MS));
}

Test(liveness, a_stamp_later_than_now_is_no_time)
{
	start(1000);
	kvf_live_heard(&l, &w, T0 + 10 * MS);
	cr_assert_eq(kvf_live_silence(&l, &w, T0 + 5 * MS), 0, "no wrap to 584 years");
	kvf_presence_round(&w, T0 - 5 * MS); /* a round with an older clock read */
	cr_assert_eq(w.away_ns, 0);
	cr_assert_eq(w.last_ns, T0);
}

Test(liveness, the_first_keepalive_comes_an_interval_after_establishment)
{
	start(1000);
	cr_assert_eq(kvf_live_keepalive(&l, 1000 * MS, T0), KVF_KA_WAIT,
		     "the scheduler's HELLO normally goes first");
	cr_assert_eq(kvf_live_keepalive(&l, 1000 * MS, T0 + 999 * MS), KVF_KA_WAIT);
	cr_assert_eq(kvf_live_keepalive(&l, 1000 * MS, T0 + 1000 * MS), KVF_KA_SEND);
	cr_assert_eq(kvf_live_keepalive(&l, 0, T0 + 9000 * MS), KVF_KA_WAIT, "interval 0: off");
}

Test(liveness, one_keepalive_per_interval_while_they_complete)
{
	uint64_t t = T0 + 1000 * MS;
	unsigned sent = 0;

	start(1000);
	for (; t <= T0 + 10000 * MS; t += MS) {
		if (kvf_live_keepalive(&l, 1000 * MS, t) == KVF_KA_SEND) {
			kvf_live_ka_posted(&l, 1000 * MS, t);
			sent++;
		}
		if (l.ka_inflight)
			kvf_live_ka_done(&l, true, t); /* a ms later: ACKed */
	}
	cr_assert_eq(sent, 10, "one a second from 1 s to 10 s");
	cr_assert_eq(l.ka_acked, 10);
}

Test(liveness, a_keepalive_stuck_in_flight_is_late_once_per_interval)
{
	unsigned late = 0;

	start(1000);
	cr_assert_eq(kvf_live_keepalive(&l, 1000 * MS, T0 + 1000 * MS), KVF_KA_SEND);
	kvf_live_ka_posted(&l, 1000 * MS, T0 + 1000 * MS);
	/* the peer takes nothing (RNR, a dead path): 5 s with it in flight */
	for (uint64_t t = T0 + 1001 * MS; t <= T0 + 6000 * MS; t += MS)
		late += kvf_live_keepalive(&l, 1000 * MS, t) == KVF_KA_LATE;
	cr_assert_eq(late, 5, "due at 2, 3, 4, 5, 6 s: late each time, none posted");
	/* it completes at last: the next one goes at once, not an interval on */
	kvf_live_ka_done(&l, true, T0 + 6500 * MS);
	cr_assert_eq(kvf_live_keepalive(&l, 1000 * MS, T0 + 6500 * MS), KVF_KA_SEND);
}

Test(liveness, acks_without_a_word_from_the_peer_say_its_process_is_not_there)
{
	char why[256];

	start(1000);
	kvf_live_ka_done(&l, true, T0 + 1 * MS);
	kvf_live_ka_done(&l, false, T0 + 2 * MS); /* a flush: not an ACK */
	kvf_live_why(why, sizeof(why), &l, 5012 * MS, 5, 1000);
	cr_assert_str_eq(why, "nothing heard for 5012 ms (5 heartbeats of 1000 ms); its NIC "
			 "ACKed 1 of our heartbeats meanwhile: host and link up, process not "
			 "(stopped or hung)");
	/* whole in a room's failure detail at the widest numbers */
	kvf_live_why(why, sizeof(why), &l, 100000 * MS, 100, 100000);
	cr_assert_lt(strlen("connection 1024 to the peer is gone ()") + strlen(why), 192);
	kvf_live_heard(&l, &w, T0 + 3 * MS);
	cr_assert_eq(l.ka_acked, 0, "the peer spoke: the ACKs meant nothing more");
	kvf_live_why(why, sizeof(why), &l, 10001 * MS, 2, 5000);
	cr_assert_str_eq(why, "nothing heard for 10001 ms (2 heartbeats of 5000 ms)");
	cr_assert_lt(kvf_live_why(why, 8, &l, 1, 2, 3), 100, "truncated, no overrun");
	cr_assert_eq(strlen(why), 7);
}
