/* SPDX-License-Identifier: Apache-2.0 */
/* src/engine/chunk.c through kvf_sender_send_chunk: chunks in any order at their
 * offsets, the final immediate only with LAST (and alone when LAST carries
 * nothing), overrun, overlap and a gap at LAST failing the room with the
 * region and the offsets, and the two sender deadlines: between chunks,
 * and from LAST to success. */
#include <criterion/criterion.h>

#include "room_fixture.h"

TestSuite(chunk, .init = room_setup, .fini = room_teardown);

static uint64_t mem[3][64];
static void *bufs3[3] = { mem[0], mem[1], mem[2] };
static const uint64_t sizes3[3] = { 8, 16, 4 };
static const uint32_t src[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* A sender room whose receiver asked for nkv kv items and 1 aux item. */
static kvf_room ready_sender_n(uint64_t id, uint32_t *aux, uint32_t nkv)
{
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	struct fake_list fl[2] = { { "kv", nkv }, { "aux", 1 } };
	kvf_room h;

	d.name = "aux";
	d.nbufs = 3;
	d.nitems = 4;
	d.bufs = bufs3;
	d.item_size = sizes3;
	if (kvf_regions_find(&eng->regions, "aux") == KVF_NO_REGION)
		cr_assert_eq(kvf_region_register(eng, &d, aux), 0);
	cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
	push_info_lists(eng, id, 7, 0x100000005ull, fl, 2, NULL, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_WAITING_FOR_INPUT);
	return h;
}

static kvf_room ready_sender(uint64_t id, uint32_t *aux)
{
	return ready_sender_n(id, aux, 10);
}

static struct kvf_chunk_part part(uint32_t region, uint32_t off, uint32_t n)
{
	return (struct kvf_chunk_part){ region, off, n, src };
}

Test(chunk, chunks_in_any_order_then_last_with_aux_succeed)
{
	uint32_t aux;
	kvf_room h = ready_sender(1, &aux);
	struct kvf_chunk_part p[2];

	p[0] = part(0, 6, 4);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), 0);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING);
	cr_assert_not(f.write_has_imm, "no immediate before LAST");
	cr_assert_eq(f.write_parts[0].dst[0], 6, "dst is the receiver's entry 6");
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING, "a drained chunk is not success");
	p[0] = part(0, 0, 6);
	p[1] = part(aux, 0, 1);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 2, KVF_SEND_LAST), 0);
	cr_assert(f.write_has_imm);
	cr_assert_eq(f.write_imm, kvf_imm(5, 1));
	cr_assert_eq(f.write_nparts, 2);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 0, KVF_SEND_LAST), -EALREADY);
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, h), 0);
}

/* LAST with no part at all: the chunk is the immediate alone. */
Test(chunk, last_with_nothing_left_is_the_immediate_alone)
{
	uint32_t aux;
	kvf_room h = ready_sender(2, &aux);
	struct kvf_chunk_part p[2] = { part(0, 0, 10), part(aux, 0, 1) };

	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 2, 0), 0);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, NULL, 0, KVF_SEND_LAST), 0);
	cr_assert(f.write_has_imm);
	cr_assert_eq(f.write_nparts, 0);
	struct kvf_room_stats rs = KVF_ROOM_STATS_INIT;

	cr_assert_eq(kvf_room_stats(eng, h, &rs), 0);
	cr_assert_eq(rs.outstanding, 2, "one signaled write per chunk (the fake's answer)");
}

static void expect_bad(kvf_room h, const char *a, const char *b)
{
	struct kvf_failure fl = failure(h);

	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(fl.reason, KVF_FAIL_BAD_REQUEST);
	cr_assert(strstr(fl.detail, a) && strstr(fl.detail, b), "%s", fl.detail);
}

Test(chunk, overrun_overlap_and_gap_fail_the_room_saying_which)
{
	uint32_t aux;
	kvf_room h = ready_sender(3, &aux);
	struct kvf_chunk_part p[2] = { part(0, 8, 3) };

	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), -EMSGSIZE);
	expect_bad(h, "region 'kv'", "entries 8..10 run past the receiver's list of 10");

	h = ready_sender(4, &aux);
	p[0] = part(0, 0, 5);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), 0);
	p[0] = part(0, 4, 2);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), -EMSGSIZE);
	expect_bad(h, "region 'kv'", "entries 4..5 overlap what was sent (entry 4)");

	h = ready_sender(5, &aux);
	p[0] = part(0, 0, 4);
	p[1] = part(aux, 0, 1);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), 0);
	p[0] = part(0, 7, 3);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 2, KVF_SEND_LAST), -EMSGSIZE);
	expect_bad(h, "region 'kv'", "leaves entries 4..6 of the receiver's 10 unsent");

	h = ready_sender(6, &aux);
	p[0] = part(0, 0, 10);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, KVF_SEND_LAST), -EMSGSIZE);
	expect_bad(h, "region 'aux'", "entries 0..0 of the receiver's 1 unsent");
}

/* A fresh 150-entry sender room sends entries [off0, off0 + n0), then
 * [off, off + n), which overlaps them: refused, the room failed saying why. */
static void overlap_refused(uint64_t id, uint32_t off0, uint32_t n0, uint32_t off, uint32_t n,
			    const uint32_t *items, const char *why)
{
	uint32_t aux;
	kvf_room h = ready_sender_n(id, &aux, 150);
	struct kvf_chunk_part p = { 0, off0, n0, items };

	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, 0), 0);
	p = (struct kvf_chunk_part){ 0, off, n, items };
	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, 0), -EMSGSIZE);
	expect_bad(h, "region 'kv'", why);
}

/* A list of 150 entries is three words of sent bits: ranges that start,
 * end or overlap inside a word and across words. */
Test(chunk, ranges_across_bitmap_words_are_checked_and_marked_whole)
{
	static uint32_t s150[150];
	uint32_t aux;
	kvf_room h = ready_sender_n(7, &aux, 150);
	struct kvf_chunk_part p[2];

	for (uint32_t i = 0; i < 150; i++)
		s150[i] = i % 16;
	p[0] = (struct kvf_chunk_part){ 0, 60, 10, s150 };
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), 0);
	push_wc(eng, h, 0);
	p[0] = (struct kvf_chunk_part){ 0, 70, 80, s150 };
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 1, 0), 0);
	push_wc(eng, h, 0);
	kvf_progress(eng);
	p[0] = (struct kvf_chunk_part){ 0, 0, 60, s150 };
	p[1] = part(aux, 0, 1);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 2, KVF_SEND_LAST), 0, "0..149 all sent once");
	push_wc(eng, h, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, h), 0);

	overlap_refused(8, 130, 20, 100, 40, s150,
			"entries 100..139 overlap what was sent (entry 130)");
	overlap_refused(9, 0, 64, 63, 2, s150, "entries 63..64 overlap what was sent (entry 63)");
}

Test(chunk, a_source_outside_our_region_fails_the_room)
{
	uint32_t aux, big = 4;
	kvf_room h = ready_sender(7, &aux);
	struct kvf_chunk_part p = { aux, 0, 1, &big };

	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, 0), -ERANGE);
	expect_bad(h, "region 'aux'", "outside the region (4 items)");
}

/* The seeds' bug was an unbounded wait after the last chunk: both waits
 * of a chunked sender have their deadline, and each chunk starts the
 * between-chunks one again. */
Test(chunk, between_chunks_deadline_restarts_with_each_chunk)
{
	uint32_t aux;
	kvf_room h = ready_sender(8, &aux);
	struct kvf_chunk_part p = part(0, 0, 2);

	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, 0), 0);
	push_wc(eng, h, 0);
	fake_clock += (cfg.between_chunks_s - 1) * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING);
	p = part(0, 2, 2);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, &p, 1, 0), 0);
	push_wc(eng, h, 0);
	fake_clock += (cfg.between_chunks_s - 1) * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_TRANSFERRING, "the second chunk armed it again");
	fake_clock += 2 * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED);
	cr_assert_eq(failure(h).reason, KVF_FAIL_DEADLINE);
	cr_assert_eq(failure(h).deadline, KVF_DL_BETWEEN_CHUNKS);
	cr_assert_str_eq(kvf_deadline_key(KVF_DL_BETWEEN_CHUNKS), "deadlines.between_chunks_s");
}

Test(chunk, inflight_deadline_bounds_last_to_success)
{
	uint32_t aux;
	kvf_room h = ready_sender(9, &aux);
	struct kvf_chunk_part p[2] = { part(0, 0, 10), part(aux, 0, 1) };

	eng->cfg.inflight_s = 5;
	cr_assert_eq(kvf_sender_send_chunk(eng, h, p, 2, 0), 0);
	fake_clock += 10 * SEC; /* under between_chunks_s */
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_send_chunk(eng, h, NULL, 0, KVF_SEND_LAST), 0);
	fake_clock += 10 * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, h), KVF_FAILED, "no completion after LAST: inflight_s");
	cr_assert_eq(failure(h).deadline, KVF_DL_INFLIGHT);
}
