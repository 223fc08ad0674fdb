/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/backoff.c: the connect backoff per peer. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "transfer/backoff.h"

#define MS 1000000ull

static struct kvf_backoff b;

Test(backoff, a_peer_never_failed_connects_now)
{
	kvf_backoff_init(&b, 100, 5000);
	cr_assert_null(kvf_backoff_check(&b, "10.0.0.1:7000", 0));
	kvf_backoff_ok(&b, "10.0.0.1:7000"); /* nothing to reset: no entry made */
	cr_assert_null(kvf_backoff_check(&b, "10.0.0.1:7000", 0));
}

Test(backoff, the_wait_doubles_per_failure_up_to_the_max)
{
	const uint64_t want[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
	uint64_t now = 1000 * MS;

	kvf_backoff_init(&b, 100, 5000);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct kvf_backoff_peer *p;

		kvf_backoff_failed(&b, "p:1", now, "rejected (status 8)");
		p = kvf_backoff_check(&b, "p:1", now);
		cr_assert_not_null(p, "failure %u", i + 1);
		cr_assert_eq(p->fails, i + 1);
		cr_assert_eq(p->retry_ns - now, want[i] * MS, "failure %u: waits %llu ms", i + 1,
			     (unsigned long long)((p->retry_ns - now) / MS));
		cr_assert_str_eq(p->why, "rejected (status 8)");
		cr_assert_not_null(kvf_backoff_check(&b, "p:1", now + want[i] * MS - 1));
		cr_assert_null(kvf_backoff_check(&b, "p:1", now + want[i] * MS),
			       "connects again once the wait is over");
		now += want[i] * MS;
	}
}

Test(backoff, an_established_connection_resets_it)
{
	kvf_backoff_init(&b, 100, 5000);
	for (int i = 0; i < 5; i++)
		kvf_backoff_failed(&b, "p:1", 0, "x");
	kvf_backoff_ok(&b, "p:1");
	cr_assert_null(kvf_backoff_check(&b, "p:1", 0));
	kvf_backoff_failed(&b, "p:1", 0, "x");
	cr_assert_eq(kvf_backoff_check(&b, "p:1", 0)->retry_ns, 100 * MS, "from the base again");
}

Test(backoff, peers_are_apart)
{
	kvf_backoff_init(&b, 100, 5000);
	kvf_backoff_failed(&b, "a:1", 0, "gone");
	cr_assert_not_null(kvf_backoff_check(&b, "a:1", 0));
	cr_assert_null(kvf_backoff_check(&b, "a:2", 0));
	cr_assert_null(kvf_backoff_check(&b, "b:1", 0));
}

Test(backoff, base_zero_is_no_backoff)
{
	kvf_backoff_init(&b, 0, 5000);
	kvf_backoff_failed(&b, "p:1", 0, "x");
	cr_assert_null(kvf_backoff_check(&b, "p:1", 0));
}

Test(backoff, a_full_table_forgets_the_stalest_peer)
{
	char name[32];

	kvf_backoff_init(&b, 1000, 1000);
	for (unsigned i = 0; i < KVF_BACKOFF_PEERS; i++) {
		snprintf(name, sizeof(name), "p:%u", i);
		kvf_backoff_failed(&b, name, (i + 1) * MS, "x");
	}
	kvf_backoff_failed(&b, "new:1", 100 * MS, "y");
	cr_assert_not_null(kvf_backoff_check(&b, "new:1", 100 * MS));
	cr_assert_null(kvf_backoff_check(&b, "p:0", 100 * MS), "the oldest failure went");
	cr_assert_not_null(kvf_backoff_check(&b, "p:1", 100 * MS));
}

Test(backoff, a_missing_why_is_named)
{
	kvf_backoff_init(&b, 100, 100);
	kvf_backoff_failed(&b, "p:1", 0, "");
	cr_assert_str_eq(kvf_backoff_check(&b, "p:1", 0)->why, "no reason given");
}
