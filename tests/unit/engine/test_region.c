/* SPDX-License-Identifier: Apache-2.0 */
/* src/engine/region.c through the API: registering regions (every refusal with its
 * errno), the region a room holds until it is released (unregister refused
 * with -EBUSY meanwhile), and the receiver's lists and user data as the
 * transport gets them. */
#include <criterion/criterion.h>

#include "room_fixture.h"

TestSuite(region, .init = room_setup, .fini = room_teardown);

static uint64_t mem[3][64];
static void *bufs3[3] = { mem[0], mem[1], mem[2] };
static const uint64_t sizes3[3] = { 8, 16, 4 };

static int reg(const char *name, uint32_t nbufs, uint32_t nitems, uint32_t *id)
{
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;

	d.name = name;
	d.nbufs = nbufs;
	d.nitems = nitems;
	d.bufs = bufs3;
	d.item_size = sizes3;
	return kvf_region_register(eng, &d, id);
}

Test(region, register_refusals_name_the_errno)
{
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	uint32_t id, ids[KVF_MAX_REGIONS];
	char name[8];

	cr_assert_eq(reg("aux", 3, 4, &id), 0);
	cr_assert_neq(id, 0, "kv (the fixture's pool) holds id 0");
	cr_assert_eq(reg("aux", 3, 4, &id), -EEXIST);
	cr_assert_eq(reg("", 3, 4, &id), -EINVAL);
	cr_assert_eq(reg("a-name-that-is-longer-than-31-bytes", 3, 4, &id), -EINVAL);
	cr_assert_eq(reg("z", 0, 4, &id), -EINVAL, "no buffers");
	cr_assert_eq(reg("z", 3, 0, &id), -EINVAL, "no items");
	d.name = "flags";
	d.nbufs = 1;
	d.nitems = 1;
	d.bufs = bufs3;
	d.item_size = sizes3;
	d.flags = 1;
	cr_assert_eq(kvf_region_register(eng, &d, &id), -EINVAL, "flags must be 0");
	d.flags = 0;
	d.size = 8;
	cr_assert_eq(kvf_region_register(eng, &d, &id), -EINVAL, ".size too small");
	for (uint32_t i = 2; i < KVF_MAX_REGIONS; i++) {
		snprintf(name, sizeof(name), "r%u", i);
		cr_assert_eq(reg(name, 1, 1, &ids[i]), 0, "region %u", i);
	}
	cr_assert_eq(reg("one-too-many", 1, 1, &id), -ENOSPC);
	cr_assert_eq(kvf_region_unregister(eng, ids[5]), 0);
	cr_assert_eq(kvf_region_unregister(eng, ids[5]), -EINVAL, "gone already");
	cr_assert_eq(reg("again", 1, 1, &id), 0, "its id is free again");
	cr_assert_eq(id, ids[5]);
}

/* A receiver holds the regions of its lists until release; a sender those
 * its receiver's lists name. */
Test(region, unregister_is_refused_while_a_live_room_uses_it)
{
	uint32_t aux, kvitems[2] = { 1, 2 }, auxitem = 3, src[2] = { 0, 1 };
	struct kvf_index_list l[2];
	struct fake_list fl[2] = { { "kv", 2 }, { "aux", 1 } };
	kvf_room r, s;

	cr_assert_eq(reg("aux", 3, 4, &aux), 0);
	l[0] = (struct kvf_index_list){ 0, 2, kvitems };
	l[1] = (struct kvf_index_list){ aux, 1, &auxitem };
	cr_assert_eq(kvf_receiver_create(eng, 1, "10.0.0.1:1", &r), 0);
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, "x", 1), 0);
	cr_assert_eq(kvf_region_unregister(eng, aux), -EBUSY);
	cr_assert_eq(kvf_abort(eng, r), 0);
	push_ack(eng, 1, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_region_unregister(eng, aux), -EBUSY, "failed but not released");
	cr_assert_eq(kvf_release(eng, r), 0);

	cr_assert_eq(kvf_sender_create(eng, 2, &s), 0);
	push_info_lists(eng, 2, 7, 5, fl, 2, NULL, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_region_unregister(eng, aux), -EBUSY, "the sender's ROOM_INFO names it");
	struct kvf_chunk_part p[2] = { { 0, 0, 2, src }, { aux, 0, 1, src } };
	cr_assert_eq(kvf_sender_send_chunk(eng, s, p, 2, KVF_SEND_LAST), 0);
	push_wc(eng, s, 0);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, s), KVF_SUCCESS);
	cr_assert_eq(kvf_release(eng, s), 0);
	cr_assert_eq(kvf_region_unregister(eng, aux), 0, "no live room uses it");
	cr_assert_eq(kvf_region_unregister(eng, 0), 0, "nor kv");
}

Test(region, receiver_lists_and_user_data_reach_the_transport)
{
	uint32_t aux, kvitems[3] = { 1, 2, 15 }, auxitem = 3, bad = 16;
	struct kvf_index_list l[2];
	uint8_t user[KVF_USER_DATA_MAX + 1] = { 0x42, 0x43 };
	kvf_room r;

	cr_assert_eq(reg("aux", 3, 4, &aux), 0);
	l[0] = (struct kvf_index_list){ 0, 3, kvitems };
	l[1] = (struct kvf_index_list){ aux, 1, &auxitem };
	cr_assert_eq(kvf_receiver_create(eng, 1, "10.0.0.1:1", &r), 0);
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, user, KVF_USER_DATA_MAX + 1), -EINVAL,
		     "user data over the maximum");
	l[1].region = 0;
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, NULL, 0), -EINVAL, "kv twice");
	l[1].region = 9;
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, NULL, 0), -EINVAL, "unknown region");
	l[1].region = aux;
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, user, 64), 0);
	cr_assert_eq(f.info_nlists, 2);
	cr_assert_eq(f.info_user_len, 64);
	cr_assert_eq(f.info_user[1], 0x43);
	cr_assert_eq(kvf_poll(eng, r), KVF_WAITING_FOR_INPUT);
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 2, NULL, 0), -EALREADY);

	cr_assert_eq(kvf_receiver_create(eng, 2, "10.0.0.1:1", &r), 0);
	l[0] = (struct kvf_index_list){ 0, 1, &bad };
	cr_assert_eq(kvf_receiver_init_regions(eng, r, l, 1, NULL, 0), -ERANGE, "kv has 16 items");
	cr_assert_eq(failure(r).reason, KVF_FAIL_BAD_REQUEST);
	cr_assert(strstr(failure(r).detail, "region 'kv'"), "%s", failure(r).detail);
}

/* Regions a peer's receiver names reach the sender by name; what it asked
 * of a region we lack counts 0 for ours, and the user data is the peer's. */
Test(region, sender_reads_peer_counts_and_user_data)
{
	struct fake_list fl[2] = { { "kv", 5 }, { "state", 2 } };
	uint32_t aux, count = 99, len = 0;
	char got[8] = { 0 };
	kvf_room s;

	cr_assert_eq(reg("aux", 3, 4, &aux), 0);
	cr_assert_eq(kvf_sender_create(eng, 3, &s), 0);
	cr_assert_eq(kvf_sender_peer_count(eng, s, 0, &count), -EAGAIN, "no ROOM_INFO yet");
	cr_assert_eq(kvf_sender_user_data(eng, s, got, sizeof(got), &len), -EAGAIN);
	push_info_lists(eng, 3, 7, 5, fl, 2, "prefix=3", 8);
	kvf_progress(eng);
	cr_assert_eq(kvf_sender_peer_count(eng, s, 0, &count), 0);
	cr_assert_eq(count, 5);
	cr_assert_eq(kvf_sender_peer_count(eng, s, aux, &count), 0);
	cr_assert_eq(count, 0, "the receiver asked for no aux");
	cr_assert_eq(kvf_sender_peer_count(eng, s, 11, &count), -EINVAL, "no region 11 here");
	cr_assert_eq(kvf_sender_user_data(eng, s, NULL, 0, &len), 0);
	cr_assert_eq(len, 8);
	cr_assert_eq(kvf_sender_user_data(eng, s, got, 6, &len), 0);
	cr_assert_eq(memcmp(got, "prefix\0", 7), 0, "6 bytes copied, no more");
}
