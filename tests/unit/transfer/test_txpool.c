/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/txpool.c: the rail's send frames are shared by its connections;
 * every frame comes back, by its completion or, for a connection destroyed
 * before its flush drained, all at once. */
#include <criterion/criterion.h>

#include "transfer/txpool.h"

static struct kvf_txpool p;

static void teardown(void)
{
	kvf_txpool_fini(&p);
}

TestSuite(txpool, .fini = teardown);

Test(txpool, frames_are_taken_until_none_is_free)
{
	cr_assert_eq(kvf_txpool_init(&p, 3), 0);
	cr_assert_eq(kvf_txpool_take(&p, 7), 0, "the lowest frame first");
	cr_assert_eq(kvf_txpool_take(&p, 7), 1);
	cr_assert_eq(kvf_txpool_take(&p, 9), 2);
	cr_assert_eq(kvf_txpool_take(&p, 9), KVF_TXPOOL_NONE);
	cr_assert_eq(p.waits, 1, "a take that found none is counted");
	cr_assert(kvf_txpool_give(&p, 1));
	cr_assert_eq(kvf_txpool_take(&p, 9), 1, "a frame given back is taken again");
}

Test(txpool, a_frame_comes_back_once)
{
	uint32_t i;

	cr_assert_eq(kvf_txpool_init(&p, 2), 0);
	i = kvf_txpool_take(&p, 1);
	cr_assert(kvf_txpool_give(&p, i));
	cr_assert_not(kvf_txpool_give(&p, i), "a completion seen twice changes nothing");
	cr_assert_not(kvf_txpool_give(&p, 2), "not a frame of the pool");
	cr_assert_not(kvf_txpool_give(&p, KVF_TXPOOL_NONE));
	cr_assert_eq(p.nfree, 2);
}

Test(txpool, reclaim_takes_back_only_that_connections_frames)
{
	uint32_t a0, a1, b0;

	cr_assert_eq(kvf_txpool_init(&p, 4), 0);
	a0 = kvf_txpool_take(&p, 10);
	b0 = kvf_txpool_take(&p, 11);
	a1 = kvf_txpool_take(&p, 10);
	cr_assert_eq(kvf_txpool_reclaim(&p, 10), 2);
	cr_assert_eq(p.nfree, 3);
	cr_assert_eq(p.reclaimed, 2);
	cr_assert_eq(p.owner[b0], 11, "another connection's frame stays taken");
	cr_assert_not(kvf_txpool_give(&p, a0), "a late completion of a reclaimed frame is a no-op");
	cr_assert_not(kvf_txpool_give(&p, a1));
	cr_assert_eq(kvf_txpool_reclaim(&p, 10), 0, "nothing left to reclaim");
	cr_assert(kvf_txpool_give(&p, b0));
	cr_assert_eq(p.nfree, 4);
}
