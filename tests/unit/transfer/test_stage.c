/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/stage_pool.c (the staging slots and their ledger) and the memcpy
 * copier: slots granted all at once and in order, waits counted once per
 * chunk, and slots back only when quiescent: no copy in flight into them
 * and every signaled write of their chunk completed (or never posted). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "cuda/copier.h"
#include "transfer/stage_pool.h"

#define SLOT 4096u

static struct kvf_stage_pool p;
static uint32_t ngranted;

static void fini(void)
{
	kvf_stage_pool_fini(&p);
}

TestSuite(stage, .fini = fini);

static void on_grant(void *ctx, struct kvf_stage_claim *c)
{
	(void)ctx;
	ngranted++;
	cr_assert_eq(c->state, KVF_CLAIM_COPYING);
}

/* A claim of nslots for room (conn 1, wr_id), its chunk of nsig signaled
 * writes queued first, as kvf_staging_add does. */
static struct kvf_stage_claim *claim(uint64_t wr_id, uint32_t nslots, uint32_t nsig)
{
	struct kvf_stage_claim *c;

	cr_assert_eq(kvf_stage_claim_new(&p, 1, wr_id, nslots, nslots * 100ull, &c), 0);
	kvf_stage_queued(&p, 1, wr_id, nsig);
	c->sig_end = c->room->queued;
	return c;
}

Test(stage, bad_sizes_are_refused)
{
	cr_assert_eq(kvf_stage_pool_init(&p, 0, 4), -EINVAL);
	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 0), -EINVAL);
}

Test(stage, slots_are_granted_whole_and_in_order_and_waits_count_once)
{
	struct kvf_stage_claim *a, *b, *c;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 4), 0);
	a = claim(1, 3, 1);
	b = claim(2, 2, 1);
	c = claim(3, 1, 1);
	cr_assert_eq(kvf_stage_grant(&p, on_grant, NULL), 1);
	/* b does not fit the one free slot; c would, but does not pass b */
	cr_assert_eq(b->state, KVF_CLAIM_WAITING);
	cr_assert_eq(c->state, KVF_CLAIM_WAITING);
	cr_assert_eq(kvf_stage_busy_slots(&p), 3);
	cr_assert_eq(kvf_stage_grant(&p, on_grant, NULL), 0);
	cr_assert_eq(p.waits, 1, "b waited once, however often it is asked");
	/* a's copy done and its one write completed: its 3 slots come back */
	a->state = KVF_CLAIM_COPIED;
	kvf_stage_completed(&p, 1, 1);
	cr_assert_eq(kvf_stage_reap(&p), 1);
	cr_assert_eq(kvf_stage_grant(&p, on_grant, NULL), 2);
	cr_assert_eq(kvf_stage_busy_slots(&p), 3);
	cr_assert_eq(p.granted, 3);
	cr_assert_eq(p.bytes, 600);
	/* distinct slots */
	cr_assert_neq(b->slots[0], b->slots[1]);
	cr_assert_neq(c->slots[0], b->slots[0]);
	cr_assert_neq(c->slots[0], b->slots[1]);
}

Test(stage, a_chunk_bigger_than_the_pool_is_refused)
{
	struct kvf_stage_claim *c;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 2), 0);
	cr_assert_eq(kvf_stage_claim_new(&p, 1, 7, 3, 0, &c), -E2BIG);
	cr_assert_eq(p.nclaims, 0);
}

Test(stage, slots_stay_taken_until_the_chunk_s_own_writes_completed)
{
	struct kvf_stage_claim *c;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 2), 0);
	/* a registered chunk of the room went first: 2 signaled writes */
	kvf_stage_queued(&p, 1, 9, 2);
	c = claim(9, 1, 3);
	cr_assert_eq(c->sig_end, 5);
	kvf_stage_grant(&p, on_grant, NULL);
	cr_assert_eq(kvf_stage_reap(&p), 0, "copy in flight");
	c->state = KVF_CLAIM_COPIED;
	for (int i = 0; i < 4; i++)
		kvf_stage_completed(&p, 1, 9);
	cr_assert_eq(kvf_stage_reap(&p), 0, "the NIC may still read its last write");
	cr_assert_eq(kvf_stage_busy_slots(&p), 1);
	kvf_stage_completed(&p, 1, 9);
	cr_assert_eq(kvf_stage_reap(&p), 1);
	cr_assert_eq(kvf_stage_busy_slots(&p), 0);
	cr_assert_null(p.rooms, "the ledger forgets a room with nothing outstanding");
}

Test(stage, cancel_returns_slots_only_when_quiescent)
{
	struct kvf_stage_claim *w, *k;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 1), 0);
	k = claim(1, 1, 2);            /* granted, copying */
	w = claim(2, 1, 1);            /* waiting */
	kvf_stage_grant(&p, on_grant, NULL);
	cr_assert_eq(w->state, KVF_CLAIM_WAITING);
	/* the waiting one holds nothing: gone at once */
	kvf_stage_cancel(&p, 1, 2, 1);
	cr_assert_eq(kvf_stage_reap(&p), 1);
	/* the copying one: its writes were all still queued (2 dropped),
	 * but the copy still writes the slot */
	kvf_stage_cancel(&p, 1, 1, 2);
	cr_assert(k->cancelled);
	cr_assert_eq(k->sig_end, 0);
	cr_assert_eq(kvf_stage_reap(&p), 0);
	cr_assert_eq(kvf_stage_busy_slots(&p), 1);
	k->state = KVF_CLAIM_COPIED;
	cr_assert_eq(kvf_stage_reap(&p), 1);
	cr_assert_eq(kvf_stage_busy_slots(&p), 0);
	cr_assert_eq(p.nclaims, 0);
}

Test(stage, cancel_after_part_was_posted_waits_for_the_posted_part)
{
	struct kvf_stage_claim *c;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 1), 0);
	c = claim(4, 1, 3);
	kvf_stage_grant(&p, on_grant, NULL);
	c->state = KVF_CLAIM_COPIED;
	/* one signaled write posted, two dropped */
	kvf_stage_cancel(&p, 1, 4, 2);
	cr_assert_eq(c->sig_end, 1);
	cr_assert_eq(kvf_stage_reap(&p), 0, "the posted write is still in flight");
	kvf_stage_completed(&p, 1, 4);
	cr_assert_eq(kvf_stage_reap(&p), 1);
}

Test(stage, a_lost_connection_completes_its_rooms)
{
	struct kvf_stage_claim *c, *other;

	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 2), 0);
	c = claim(5, 1, 4);
	cr_assert_eq(kvf_stage_claim_new(&p, 2, 5, 1, 0, &other), 0);
	kvf_stage_queued(&p, 2, 5, 1);
	other->sig_end = other->room->queued;
	kvf_stage_grant(&p, on_grant, NULL);
	c->state = other->state = KVF_CLAIM_COPIED;
	kvf_stage_conn_gone(&p, 1);
	cr_assert_eq(kvf_stage_reap(&p), 1, "only conn 1's claim");
	cr_assert_eq(p.head, other);
	cr_assert_eq(kvf_stage_busy_slots(&p), 1);
}

Test(stage, completions_of_a_room_without_a_ledger_entry_are_ignored)
{
	cr_assert_eq(kvf_stage_pool_init(&p, SLOT, 1), 0);
	kvf_stage_completed(&p, 1, 77);
	kvf_stage_cancel(&p, 1, 77, 3);
	cr_assert_null(p.rooms);
}

Test(stage, host_copier_copies_and_is_done_on_the_second_ask)
{
	struct kvf_copier *cp = kvf_copier_host_create();
	char src[64], dst[64] = {0};
	void *ev;

	cr_assert_not_null(cp);
	memset(src, 0x5a, sizeof(src));
	cr_assert_eq(cp->ops->copy(cp, dst, (uint64_t)(uintptr_t)src, sizeof(src)), 0);
	cr_assert_eq(cp->ops->mark(cp, &ev), 0);
	cr_assert_eq(cp->ops->done(cp, ev), 0);
	cr_assert_eq(cp->ops->done(cp, ev), 1);
	cr_assert_arr_eq(dst, src, sizeof(src));
	cp->ops->destroy(cp);
}

Test(stage, cuda_copier_without_a_gpu_says_so)
{
	struct kvf_copier *cp = NULL;
	int rc = kvf_copier_cuda_create(0x1000, NULL, 0, &cp);

	/* no libcuda here (-ENODEV), or a build without CUDA (-ENOTSUP) */
	cr_assert(rc == -ENODEV || rc == -ENOTSUP || rc == -EIO, "rc %d", rc);
	cr_assert_null(cp);
}
