/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/sendq.c without a device: hand-made pool layouts in, the exact
 * work requests and scatter-gather lists handed to the post function out
 * (a recorder here), and the credits around them. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "transfer/sendq.h"

#define MAX_REC 64

/* What the post function saw: each WR as posted, its SGEs copied (the
 * queue reuses its scratch). */
struct rec_wr {
	struct ibv_send_wr wr;
	struct ibv_sge sge[KVF_SQ_MAX_SGE];
};

static struct {
	struct rec_wr wr[MAX_REC];
	uint32_t n;       /* WRs recorded */
	uint32_t posts;   /* calls */
	int fail_at;      /* -1: never; else fail at the WR with this index */
	int err;
} rec;

static int record(void *ctx, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)ctx;
	rec.posts++;
	for (; wr; wr = wr->next) {
		if (rec.fail_at >= 0 && rec.n == (uint32_t)rec.fail_at) {
			*bad = wr;
			return -rec.err;
		}
		cr_assert_lt(rec.n, MAX_REC);
		rec.wr[rec.n].wr = *wr;
		cr_assert_leq(wr->num_sge, (int)KVF_SQ_MAX_SGE);
		memcpy(rec.wr[rec.n].sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*wr->sg_list));
		rec.n++;
	}
	return 0;
}

static struct kvf_sendq sq;

static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	rec.fail_at = -1;
}

static void teardown(void)
{
	kvf_sendq_fini(&sq);
}

TestSuite(sendq, .init = setup, .fini = teardown);

#define LADDR 0x100000000ull
#define RADDR 0x7f0000000000ull
#define LKEY 0x11u
#define RKEY 0x22u

static const struct kvf_sq_buf local1[] = {{.addr = LADDR, .block_size = 4096, .key = LKEY}};
static const struct kvf_sq_buf remote1[] = {{.addr = RADDR, .block_size = 4096, .key = RKEY}};

static void init(uint32_t depth, uint32_t max_sge, uint32_t signal_every)
{
	cr_assert_eq(kvf_sendq_init(&sq, 7, depth, max_sge, signal_every, record, NULL), 0);
}

static void credits_hold(void)
{
	cr_assert_eq(sq.credits + sq.held + sq.stranded, sq.depth,
		     "credits %u + held %u + stranded %u != depth %u", sq.credits, sq.held,
		     sq.stranded, sq.depth);
}

static void expect_sge(uint32_t w, uint32_t k, uint64_t addr, uint32_t len)
{
	const struct ibv_sge *s = &rec.wr[w].sge[k];

	cr_assert_eq(s->addr, addr, "wr %u sge %u addr %#lx, want %#lx", w, k,
		     (unsigned long)s->addr, (unsigned long)addr);
	cr_assert_eq(s->length, len, "wr %u sge %u length %u, want %u", w, k, s->length, len);
	cr_assert_eq(s->lkey, LKEY);
}

static void expect_wr(uint32_t w, uint64_t raddr, int nsge, bool signaled, bool imm)
{
	const struct ibv_send_wr *r = &rec.wr[w].wr;

	cr_assert_eq(r->wr.rdma.remote_addr, raddr, "wr %u raddr %#lx, want %#lx", w,
		     (unsigned long)r->wr.rdma.remote_addr, (unsigned long)raddr);
	cr_assert_eq(r->wr.rdma.rkey, RKEY);
	cr_assert_eq(r->num_sge, nsge, "wr %u: %d SGEs, want %d", w, r->num_sge, nsge);
	cr_assert_eq(!!(r->send_flags & IBV_SEND_SIGNALED), signaled, "wr %u signaled", w);
	cr_assert_eq(r->opcode, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
		     "wr %u opcode %d", w, r->opcode);
}

Test(sendq, contiguous_run_is_one_wr_one_sge)
{
	uint32_t src[] = {3, 4, 5}, dst[] = {10, 11, 12};

	init(16, 4, 8);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 0xabc, 0x12345, src, dst, 3), 1);
	cr_assert_eq(rec.n, 0, "nothing is posted by add_room");
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 1);
	expect_wr(0, RADDR + 10 * 4096, 1, true, true);
	expect_sge(0, 0, LADDR + 3 * 4096, 3 * 4096);
	cr_assert_eq(rec.wr[0].wr.wr_id, 0xabc);
	cr_assert_eq(ntohl(rec.wr[0].wr.imm_data), 0x12345u);
	cr_assert_eq(sq.credits, 15);
	credits_hold();
}

Test(sendq, local_gaps_become_sges_up_to_the_limit)
{
	/* Remote contiguous 0..5, local scattered: one SGE each, max_sge 3,
	 * so the run splits after three SGEs. The local 8,9 pair merges. */
	uint32_t src[] = {0, 2, 8, 9, 4, 6}, dst[] = {0, 1, 2, 3, 4, 5};

	init(16, 3, 16);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 6), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 2);
	expect_wr(0, RADDR, 3, false, false);
	expect_sge(0, 0, LADDR + 0 * 4096, 4096);
	expect_sge(0, 1, LADDR + 2 * 4096, 4096);
	expect_sge(0, 2, LADDR + 8 * 4096, 2 * 4096);
	expect_wr(1, RADDR + 4 * 4096, 2, true, true);
	expect_sge(1, 0, LADDR + 4 * 4096, 4096);
	expect_sge(1, 1, LADDR + 6 * 4096, 4096);
}

Test(sendq, remote_gap_starts_a_new_wr)
{
	uint32_t src[] = {0, 1, 2}, dst[] = {5, 6, 9};

	init(16, 4, 16);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 3), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 2);
	expect_wr(0, RADDR + 5 * 4096, 1, false, false);
	expect_sge(0, 0, LADDR, 2 * 4096);
	expect_wr(1, RADDR + 9 * 4096, 1, true, true);
	expect_sge(1, 0, LADDR + 2 * 4096, 4096);
}

Test(sendq, wr_byte_limit_splits_a_run)
{
	/* 256 MiB blocks: four make KVF_SQ_MAX_WR_BYTES, the fifth goes on. */
	const uint64_t bs = KVF_SQ_MAX_WR_BYTES / 4;
	const struct kvf_sq_buf l[] = {{.addr = LADDR, .block_size = bs, .key = LKEY}};
	const struct kvf_sq_buf r[] = {{.addr = RADDR, .block_size = bs, .key = RKEY}};
	uint32_t src[] = {0, 1, 2, 3, 4}, dst[] = {0, 1, 2, 3, 4};

	init(16, 4, 16);
	cr_assert_eq(kvf_sendq_add_room(&sq, l, r, 1, 1, 0, src, dst, 5), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 2);
	expect_wr(0, RADDR, 1, false, false);
	expect_sge(0, 0, LADDR, (uint32_t)KVF_SQ_MAX_WR_BYTES);
	expect_wr(1, RADDR + 4 * bs, 1, true, true);
	expect_sge(1, 0, LADDR + 4 * bs, (uint32_t)bs);
}

Test(sendq, every_buffer_gets_its_wrs_and_only_the_last_carries_the_immediate)
{
	const struct kvf_sq_buf l[] = {{.addr = LADDR, .block_size = 4096, .key = LKEY},
				       {.addr = LADDR + 0x10000000, .block_size = 512, .key = LKEY}};
	const struct kvf_sq_buf r[] = {{.addr = RADDR, .block_size = 4096, .key = RKEY},
				       {.addr = RADDR + 0x10000000, .block_size = 512, .key = RKEY}};
	uint32_t src[] = {1, 2}, dst[] = {7, 8};

	init(16, 4, 16);
	cr_assert_eq(kvf_sendq_add_room(&sq, l, r, 2, 5, 99, src, dst, 2), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 2);
	expect_wr(0, RADDR + 7 * 4096, 1, false, false);
	expect_sge(0, 0, LADDR + 4096, 2 * 4096);
	expect_wr(1, RADDR + 0x10000000 + 7 * 512, 1, true, true);
	expect_sge(1, 0, LADDR + 0x10000000 + 512, 2 * 512);
	cr_assert_eq(ntohl(rec.wr[1].wr.imm_data), 99u);
}

Test(sendq, no_blocks_is_one_zero_byte_write_with_immediate)
{
	init(4, 4, 4);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 3, 42, NULL, NULL, 0), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 1);
	expect_wr(0, RADDR, 0, true, true);
	cr_assert_eq(ntohl(rec.wr[0].wr.imm_data), 42u);
}

Test(sendq, selective_signalling)
{
	/* Five single-block WRs (every remote block apart), one signaled
	 * every two and the last: 2nd, 4th, 5th. */
	uint32_t src[] = {0, 1, 2, 3, 4}, dst[] = {0, 2, 4, 6, 8};
	bool want[] = {false, true, false, true, true};

	init(16, 4, 2);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 5), 3);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 5);
	for (uint32_t w = 0; w < 5; w++)
		expect_wr(w, RADDR + dst[w] * 4096ull, 1, want[w], w == 4);
	/* Entries held by each signaled WR: 2, 2, 1. */
	cr_assert_eq(sq.credits, 11);
	cr_assert_eq(sq.held, 5);
	kvf_sendq_completed(&sq);
	cr_assert_eq(sq.credits, 13);
	kvf_sendq_completed(&sq);
	kvf_sendq_completed(&sq);
	cr_assert_eq(sq.credits, 16);
	credits_hold();
}

Test(sendq, credits_run_out_and_come_back)
{
	/* depth 4, signal every 2: 10 WRs are 5 segments of 2. */
	uint32_t src[10], dst[10];

	for (uint32_t i = 0; i < 10; i++) {
		src[i] = i;
		dst[i] = 2 * i;
	}
	init(4, 4, 2);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 10), 5);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 4, "only what the credits cover is posted");
	cr_assert_eq(sq.credits, 0);
	cr_assert_eq(kvf_sendq_waiting(&sq), 6);
	credits_hold();
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 4, "no credit, no post");
	kvf_sendq_completed(&sq);
	cr_assert_eq(sq.credits, 2);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 6);
	for (uint32_t i = 0; i < 4; i++)
		kvf_sendq_completed(&sq);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 10);
	cr_assert_eq(kvf_sendq_waiting(&sq), 0);
	expect_wr(9, RADDR + 18 * 4096, 1, true, true);
	credits_hold();
}

Test(sendq, a_segment_waits_whole_for_room)
{
	/* signal every 3: a segment is 3 WRs; with 2 credits free nothing of
	 * it goes, so no posted WR is left without a completion. */
	uint32_t src[] = {0, 1, 2, 3, 4, 5}, dst[] = {0, 2, 4, 6, 8, 10};

	init(4, 4, 3);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 6), 2);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 3);
	cr_assert_eq(sq.credits, 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 3);
	kvf_sendq_completed(&sq);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 6);
	credits_hold();
}

Test(sendq, control_send_takes_a_credit_and_gives_it_back)
{
	struct ibv_sge sge = {.addr = 0x1000, .length = 64, .lkey = 9};
	struct ibv_send_wr wr = {.wr_id = 77, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND};

	init(2, 4, 1);
	cr_assert_eq(kvf_sendq_post_one(&sq, &wr), 0);
	cr_assert(rec.wr[0].wr.send_flags & IBV_SEND_SIGNALED);
	cr_assert_eq(rec.wr[0].wr.opcode, IBV_WR_SEND);
	cr_assert_eq(kvf_sendq_post_one(&sq, &wr), 0);
	cr_assert_eq(kvf_sendq_post_one(&sq, &wr), -ENOSPC);
	cr_assert_eq(rec.posts, 2);
	kvf_sendq_completed(&sq);
	cr_assert_eq(sq.credits, 1);
	credits_hold();
}

Test(sendq, signaled_work_in_flight_is_capped_by_sig_max)
{
	/* The send CQ is shared (src/rdma/sendcq.h): a queue may have sig_max
	 * completions owed at most, whatever its credits. Ten one-WR rooms,
	 * each signaled (its immediate), on a deep queue with sig_max 3. */
	struct ibv_sge sge = {.addr = 0x1000, .length = 64, .lkey = 9};
	struct ibv_send_wr wr = {.wr_id = 77, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND};
	uint32_t src = 0, dst = 0;

	init(64, 4, 16);
	sq.sig_max = 3;
	for (uint64_t r = 1; r <= 10; r++)
		cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, r, 0, &src, &dst, 1), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 3, "three completions owed at most");
	cr_assert_eq(kvf_sendq_sig_inflight(&sq), 3);
	cr_assert_eq(kvf_sendq_credits(&sq), 0, "no room for a control send either");
	cr_assert_eq(kvf_sendq_post_one(&sq, &wr), -ENOSPC);
	kvf_sendq_completed(&sq);
	cr_assert_eq(kvf_sendq_credits(&sq), 62);
	cr_assert_eq(kvf_sendq_post_one(&sq, &wr), 0, "a control send takes the freed slot");
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 4, "and the writes wait for the next");
	for (int i = 0; i < 4; i++) {
		kvf_sendq_completed(&sq);
		cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	}
	cr_assert_eq(rec.n, 8);
	cr_assert_eq(kvf_sendq_sig_inflight(&sq), 3);
	credits_hold();
}

Test(sendq, failed_post_strands_what_no_completion_covers)
{
	/* signal every 4, 4 WRs, the post fails at the third: two went in,
	 * unsignaled, and no completion will free them. */
	uint32_t src[] = {0, 1, 2, 3}, dst[] = {0, 2, 4, 6};

	init(8, 4, 4);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 4), 1);
	rec.fail_at = 2;
	rec.err = EIO;
	cr_assert_eq(kvf_sendq_post_writes(&sq), -EIO);
	cr_assert_eq(rec.n, 2);
	cr_assert_eq(sq.stranded, 2);
	cr_assert_eq(sq.credits, 6);
	cr_assert_eq(kvf_sendq_waiting(&sq), 2);
	credits_hold();
}

Test(sendq, not_connected_posts_nothing_and_keeps_the_writes)
{
	uint32_t src[] = {0}, dst[] = {0};

	init(8, 4, 4);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 1), 1);
	rec.fail_at = 0;
	rec.err = ENOTCONN;
	cr_assert_eq(kvf_sendq_post_writes(&sq), -ENOTCONN);
	cr_assert_eq(sq.credits, 8);
	cr_assert_eq(kvf_sendq_waiting(&sq), 1);
	credits_hold();
}

Test(sendq, cancel_drops_only_that_rooms_waiting_writes)
{
	uint32_t src[] = {0, 1, 2}, dst[] = {0, 2, 4};

	init(2, 4, 1);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 100, 0, src, dst, 3), 3);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 200, 0, src, dst, 3), 3);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 2); /* two of room 100 posted */
	cr_assert_eq(kvf_sendq_cancel(&sq, 100), 1);
	cr_assert_eq(kvf_sendq_waiting(&sq), 3);
	kvf_sendq_completed(&sq);
	kvf_sendq_completed(&sq);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 4);
	cr_assert_eq(rec.wr[2].wr.wr_id, 200);
	cr_assert_eq(rec.wr[3].wr.wr_id, 200);
	credits_hold();
}

Test(sendq, init_refuses_what_cannot_work)
{
	cr_assert_eq(kvf_sendq_init(&sq, 1, 0, 4, 1, record, NULL), -EINVAL);
	cr_assert_eq(kvf_sendq_init(&sq, 1, 4, 0, 1, record, NULL), -EINVAL);
	cr_assert_eq(kvf_sendq_init(&sq, 1, 4, 4, 0, record, NULL), -EINVAL);
	cr_assert_eq(kvf_sendq_init(&sq, 1, 4, 4, 1, NULL, NULL), -EINVAL);
	cr_assert_eq(kvf_sendq_init(&sq, 1, 4, 9, 9, record, NULL), 0);
	cr_assert_eq(sq.max_sge, KVF_SQ_MAX_SGE);
	cr_assert_eq(sq.signal_every, 4);
}

/* The waiting queue is bounded (pend_max): a room whose writes would pass
 * it is refused whole with -ENOBUFS, the rooms queued before it are intact
 * and still post, and once they drained a room fits again. */
Test(sendq, waiting_writes_are_bounded_and_a_room_past_the_bound_is_refused_whole)
{
	/* remote blocks apart: one WR per block */
	uint32_t src[] = {0, 1, 2}, dst[] = {0, 2, 4};

	init(4, 4, 8);
	sq.pend_max = 8;
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 1, 0, src, dst, 3), 1);
	cr_assert_eq(kvf_sendq_waiting(&sq), 3);
	/* up to 4 more (3 blocks + 1): 7 of 8 */
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 2, 0, src, dst, 3), 1);
	cr_assert_eq(kvf_sendq_waiting(&sq), 6);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 3, 0, src, dst, 3), -ENOBUFS);
	cr_assert_eq(kvf_sendq_waiting(&sq), 6, "nothing of the refused room is queued");
	for (size_t i = sq.pend_head; i < sq.pend_tail; i++)
		cr_assert_neq(sq.pend[i].wr_id, 3);
	/* the queue goes on: room 1 posts (3 WRs fit 4 credits) */
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 3);
	cr_assert_eq(kvf_sendq_waiting(&sq), 3);
	kvf_sendq_completed(&sq);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 6);
	cr_assert_eq(kvf_sendq_waiting(&sq), 0);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 3, 0, src, dst, 3), 1,
		     "drained: the room fits again");
	credits_hold();
}

static void bump_addr(void *ctx, struct kvf_wdesc *d)
{
	(void)ctx;
	d->sge[0].addr += 1; /* what a rebase does: the SGE of the tagged write only */
}

static void clear_hold(void *ctx, struct kvf_wdesc *d)
{
	(void)ctx;
	d->flags &= (uint8_t)~KVF_WD_HELD;
}

Test(sendq, held_writes_and_everything_after_them_wait_for_their_release)
{
	uint32_t a[] = {0}, b[] = {5}, c[] = {9};

	init(16, 4, 8);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 0xa, 1, a, a, 1), 1);
	/* a staged chunk: held under tag 7 */
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 0xb, 2, b, b, 1), 1);
	kvf_sendq_hold_tail(&sq, 1, 7);
	/* another room after it: must not pass it */
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 0xc, 3, c, c, 1), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 1, "only the write before the held one");
	cr_assert_eq(rec.wr[0].wr.wr_id, 0xa);
	cr_assert_eq(kvf_sendq_each_tagged(&sq, 7, bump_addr, NULL), 1);
	cr_assert_eq(kvf_sendq_each_tagged(&sq, 8, bump_addr, NULL), 0);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 1, "still held");
	kvf_sendq_each_tagged(&sq, 7, clear_hold, NULL);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 3);
	cr_assert_eq(rec.wr[1].wr.wr_id, 0xb);
	expect_sge(1, 0, LADDR + 5 * 4096 + 1, 4096);
	cr_assert_eq(rec.wr[2].wr.wr_id, 0xc);
	credits_hold();
}

Test(sendq, cancel_drops_held_writes_too)
{
	uint32_t b[] = {5};

	init(16, 4, 8);
	cr_assert_eq(kvf_sendq_add_room(&sq, local1, remote1, 1, 0xb, 2, b, b, 1), 1);
	kvf_sendq_hold_tail(&sq, 1, 3);
	cr_assert_eq(kvf_sendq_cancel(&sq, 0xb), 1);
	cr_assert_eq(kvf_sendq_waiting(&sq), 0);
	credits_hold();
}

/* ------------------------------------------------------ head slicing */

#define SHB 128u /* bytes per head per token */

/* Prefill 8 heads [0, 8) into decode rank 1 of TP2, heads [4, 8), 5
 * tokens a page: the destination page is one run, so a WR gathers
 * max_sge tokens' source pieces: 2 WRs for the page (4 + 1 SGEs). */
Test(sendq, sliced_page_to_fewer_heads_gathers_tokens_into_one_wr)
{
	const struct kvf_sq_buf l[] = {{.addr = LADDR, .block_size = 5 * 8 * SHB, .key = LKEY}};
	const struct kvf_sq_buf r[] = {{.addr = RADDR, .block_size = 5 * 4 * SHB, .key = RKEY}};
	struct kvf_slice s = {.tokens = 5, .src_token_bytes = 8 * SHB, .dst_token_bytes = 4 * SHB,
			      .src_off = 4 * SHB, .dst_off = 0, .len = 4 * SHB};
	struct kvf_sq_part p = {l, r, &s, 1, 1, (const uint32_t[]){3}, (const uint32_t[]){7}};
	uint32_t imm = 9;

	init(16, 4, 8);
	cr_assert_eq(kvf_sendq_add_parts(&sq, &p, 1, 0xabc, &imm, r), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.posts, 1, "one post, one doorbell");
	cr_assert_eq(rec.n, 2);
	expect_wr(0, RADDR + 7 * 5 * 4 * SHB, 4, false, false);
	for (uint32_t t = 0; t < 4; t++)
		expect_sge(0, t, LADDR + 3 * 5 * 8 * SHB + t * 8 * SHB + 4 * SHB, 4 * SHB);
	expect_wr(1, RADDR + 7 * 5 * 4 * SHB + 4 * 4 * SHB, 1, true, true);
	expect_sge(1, 0, LADDR + 3 * 5 * 8 * SHB + 4 * 8 * SHB + 4 * SHB, 4 * SHB);
	cr_assert_eq(rec.wr[0].wr.next, &sq.wrs[1], "the page's WRs are one chained list");
	credits_hold();
}

/* Prefill rank 1 of TP2 (heads [4, 8)) into a decode of 8 heads: the
 * destination is strided, one WR a token, each one SGE; a whole buffer in
 * the same part keeps its one WR. */
Test(sendq, sliced_page_to_more_heads_is_one_wr_per_token)
{
	const struct kvf_sq_buf l[] = {{.addr = LADDR, .block_size = 3 * 4 * SHB, .key = LKEY},
				       {.addr = LADDR + 0x10000, .block_size = 64, .key = LKEY}};
	const struct kvf_sq_buf r[] = {{.addr = RADDR, .block_size = 3 * 8 * SHB, .key = RKEY},
				       {.addr = RADDR + 0x10000, .block_size = 64, .key = RKEY}};
	struct kvf_slice s[2] = {{.tokens = 3, .src_token_bytes = 4 * SHB,
				  .dst_token_bytes = 8 * SHB, .src_off = 0, .dst_off = 4 * SHB,
				  .len = 4 * SHB}, {0}};
	struct kvf_sq_part p = {l, r, s, 2, 1, (const uint32_t[]){2}, (const uint32_t[]){5}};
	uint32_t imm = 9;

	init(16, 4, 8);
	cr_assert_eq(kvf_sendq_add_parts(&sq, &p, 1, 0xabc, &imm, r), 1);
	cr_assert_eq(kvf_sendq_post_writes(&sq), 0);
	cr_assert_eq(rec.n, 4, "3 token WRs and the whole buffer's one");
	for (uint32_t t = 0; t < 3; t++) {
		expect_wr(t, RADDR + 5 * 3 * 8 * SHB + t * 8 * SHB + 4 * SHB, 1, false, false);
		expect_sge(t, 0, LADDR + 2 * 3 * 4 * SHB + t * 4 * SHB, 4 * SHB);
	}
	expect_wr(3, RADDR + 0x10000 + 5 * 64, 1, true, true);
	expect_sge(3, 0, LADDR + 0x10000 + 2 * 64, 64);
	credits_hold();
}
