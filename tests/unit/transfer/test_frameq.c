/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/frameq.c: a connection's waiting control frames are capped and
 * leave in order. (Heartbeats do not go through it: the poller posts them,
 * src/rdma/keepalive.c; tests/unit/transfer/test_liveness.c.) */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "transfer/frameq.h"

static struct kvf_frameq q;

static void teardown(void)
{
	kvf_frameq_fini(&q);
}

TestSuite(frameq, .fini = teardown);

/* A fixed frame (len > 0) tagged by room id, or a sequence (len 0). */
static struct kvf_pframe *frame(uint64_t room, bool sequence)
{
	struct kvf_pframe *f = calloc(1, sizeof(*f) + 24);

	cr_assert_not_null(f);
	f->len = sequence ? 0 : 24;
	f->room_id = room;
	if (sequence) {
		f->total = 3;
		f->info = calloc(12, 1);
	}
	return f;
}

Test(frameq, push_past_the_cap_is_refused_and_the_queue_is_unchanged)
{
	struct kvf_pframe *extra = frame(99, false);

	kvf_frameq_init(&q, 3);
	for (uint64_t i = 1; i <= 3; i++)
		cr_assert_eq(kvf_frameq_push(&q, frame(i, false)), 0);
	cr_assert_eq(kvf_frameq_push(&q, extra), -ENOBUFS);
	cr_assert_eq(q.n, 3);
	for (uint64_t i = 1; i <= 3; i++) {
		cr_assert_eq(kvf_frameq_head(&q)->room_id, i, "FIFO, the refused one not in");
		kvf_frameq_pop(&q);
	}
	cr_assert_null(kvf_frameq_head(&q));
	cr_assert_eq(kvf_frameq_push(&q, extra), 0, "room again once drained");
}
