/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/frameq.c: a connection's waiting control frames are capped, and
 * the heartbeat goes ahead of them (never into a ROOM_INFO sequence that
 * has begun). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "rdma/frameq.h"

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

Test(frameq, heartbeat_goes_ahead_of_every_queued_frame_and_is_owed_once)
{
	kvf_frameq_init(&q, 100);
	for (uint64_t i = 1; i <= 50; i++)
		cr_assert_eq(kvf_frameq_push(&q, frame(i, i == 7)), 0);
	cr_assert_not(kvf_frameq_hb_next(&q), "nothing owed yet");
	kvf_frameq_heartbeat(&q);
	kvf_frameq_heartbeat(&q);
	cr_assert(kvf_frameq_hb_next(&q), "ahead of 50 waiting frames");
	kvf_frameq_hb_sent(&q);
	cr_assert_not(kvf_frameq_hb_next(&q), "two due, one owed: sent once");
	cr_assert_eq(kvf_frameq_head(&q)->room_id, 1);
	cr_assert_eq(q.n, 50, "the heartbeat took no place in the queue");
}

Test(frameq, heartbeat_waits_for_a_sequence_that_has_begun)
{
	kvf_frameq_init(&q, 10);
	cr_assert_eq(kvf_frameq_push(&q, frame(1, true)), 0);
	cr_assert_eq(kvf_frameq_push(&q, frame(2, false)), 0);
	kvf_frameq_heartbeat(&q);
	cr_assert(kvf_frameq_hb_next(&q), "a sequence not begun yet: the heartbeat first");
	kvf_frameq_head(&q)->sent = 1; /* its first frame is posted */
	cr_assert_not(kvf_frameq_hb_next(&q), "nothing between a sequence's frames");
	kvf_frameq_head(&q)->sent = 3;
	kvf_frameq_pop(&q);
	cr_assert(kvf_frameq_hb_next(&q), "then ahead of the rest");
}
