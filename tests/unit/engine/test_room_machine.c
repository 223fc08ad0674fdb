/* SPDX-License-Identifier: Apache-2.0 */
/* The room state machine's one door (src/engine/room.c): the table of allowed
 * transitions, walked state by state through real rooms; the work
 * completion names the engine prints without the verbs headers; and a
 * quiescence rule (an ABORT_ACK never hands back a live room's blocks). */
#include <criterion/criterion.h>
#include <signal.h>

#include "room_fixture.h"
#include "kvf_build.h"
#include "engine/names.h"
#if HAVE_RDMA
#include <infiniband/verbs.h>
#endif

TestSuite(room_machine, .init = room_setup, .fini = room_teardown);

enum { FREE = KVF_ROOM_FREE, BOOT = KVF_BOOTSTRAPPING, WAIT = KVF_WAITING_FOR_INPUT,
       XFER = KVF_TRANSFERRING, OK = KVF_SUCCESS, FAIL = KVF_FAILED };

/* docs/design.md's table, written out: (role, from, to). */
static const int expected[][3] = {
	{ KVF_SENDER, FREE, BOOT }, { KVF_SENDER, BOOT, WAIT }, { KVF_SENDER, BOOT, FAIL },
	{ KVF_SENDER, WAIT, XFER }, { KVF_SENDER, WAIT, FAIL }, { KVF_SENDER, XFER, OK },
	{ KVF_SENDER, XFER, FAIL }, { KVF_SENDER, OK, FREE },   { KVF_SENDER, FAIL, FREE },
	{ KVF_RECEIVER, FREE, BOOT }, { KVF_RECEIVER, BOOT, WAIT }, { KVF_RECEIVER, BOOT, FAIL },
	{ KVF_RECEIVER, WAIT, OK },   { KVF_RECEIVER, WAIT, FAIL }, { KVF_RECEIVER, OK, FREE },
	{ KVF_RECEIVER, FAIL, FREE },
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

static bool is_expected(int role, int from, int to)
{
	for (size_t i = 0; i < NEXPECTED; i++)
		if (expected[i][0] == role && expected[i][1] == from && expected[i][2] == to)
			return true;
	return false;
}

static void release(kvf_room h)
{
	cr_assert_eq(kvf_release(eng, h), 0);
}

/* Drive real rooms through every transition of the table. */
static void walk_every_transition(void)
{
	uint32_t b[2] = { 0, 1 };
	kvf_room s1, s2, s3, s4, r1, r2, r3;

	kvf_sender_create(eng, 1, &s1); /* BOOT -> FAIL */
	kvf_abort(eng, s1);
	kvf_sender_create(eng, 2, &s2); /* BOOT -> WAIT -> FAIL */
	kvf_sender_create(eng, 3, &s3); /* ... -> XFER -> OK */
	kvf_sender_create(eng, 4, &s4); /* ... -> XFER -> FAIL */
	push_info(eng, 2, 7, 1, 2);
	push_info(eng, 3, 7, 1, 2);
	push_info(eng, 4, 7, 1, 2);
	kvf_progress(eng);
	kvf_abort(eng, s2);
	cr_assert_eq(kvf_sender_send(eng, s3, b, 2), 0);
	cr_assert_eq(kvf_sender_send(eng, s4, b, 2), 0);
	push_wc(eng, s3, 0);
	push_wc(eng, s4, 12 /* RETRY_EXC_ERR */);
	kvf_receiver_create(eng, 5, "10.0.0.1:1", &r1); /* BOOT -> FAIL */
	kvf_abort(eng, r1);
	kvf_receiver_create(eng, 6, "10.0.0.1:1", &r2); /* BOOT -> WAIT -> OK */
	kvf_receiver_create(eng, 7, "10.0.0.1:1", &r3); /* BOOT -> WAIT -> FAIL */
	kvf_receiver_init(eng, r2, b, 2);
	kvf_receiver_init(eng, r3, b, 2);
	push_data_done(eng, r2);
	kvf_progress(eng);
	kvf_abort(eng, r3);
	push_ack(eng, 7, 7);
	kvf_progress(eng);
	kvf_room all[] = { s1, s2, s3, s4, r1, r2, r3 };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		release(all[i]);
}

Test(room_machine, the_table_is_the_design_and_every_entry_is_taken)
{
	for (int role = KVF_SENDER; role <= KVF_RECEIVER; role++)
		for (int from = 0; from < KVF_ROOM_NSTATES; from++)
			for (int to = 0; to < KVF_ROOM_NSTATES; to++)
				cr_assert_eq(kvf_room_transition_allowed(role, from, to),
					     is_expected(role, from, to), "role %d %d -> %d", role,
					     from, to);
	cr_assert_not(kvf_room_transition_allowed(2, FREE, BOOT), "no third role");

	walk_every_transition();
	for (int role = KVF_SENDER; role <= KVF_RECEIVER; role++)
		for (int from = 0; from < KVF_ROOM_NSTATES; from++)
			for (int to = 0; to < KVF_ROOM_NSTATES; to++) {
				uint64_t n = eng->transitions[role][from][to];

				if (is_expected(role, from, to))
					cr_assert_gt(n, 0, "role %d %d -> %d never taken", role, from,
						     to);
				else
					cr_assert_eq(n, 0, "role %d %d -> %d is not in the table",
						     role, from, to);
			}
}

#ifndef NDEBUG
/* Debug builds check every transition against the table. */
Test(room_machine, a_transition_outside_the_table_asserts, .signal = SIGABRT)
{
	kvf_room h;

	kvf_log_set_level(KVF_LOG_ERROR);
	cr_assert_eq(kvf_sender_create(eng, 9, &h), 0);
	kvf_room_transition(eng, &eng->slots[(uint32_t)h.v], KVF_SUCCESS);
}
#endif

Test(room_machine, wc_status_names_without_the_verbs_headers)
{
	cr_assert_str_eq(kvf_wc_status_str(10), "remote access error");
	cr_assert_str_eq(kvf_wc_status_str(5), "Work Request Flushed Error");
	cr_assert_str_eq(kvf_wc_status_str(-1), "unknown");
	cr_assert_str_eq(kvf_wc_status_str(1000), "unknown");
	cr_assert(strstr(kvf_wc_status_hint(12), "qp_timeout"));
	cr_assert_str_eq(kvf_wc_status_hint(0), "");
#if HAVE_RDMA
	/* The table is libibverbs' own, status by status. */
	for (int s = 0; s <= IBV_WC_TM_RNDV_INCOMPLETE + 2; s++)
		cr_assert_str_eq(kvf_wc_status_str(s), ibv_wc_status_str((enum ibv_wc_status)s),
				 "status %d", s);
#endif
}

/* An ABORT_ACK for a receiver that sent no ABORT (a late one for an earlier
 * room of the same id) must not mark it quiescent: the sender may still
 * write into its blocks. */
Test(room_machine, ack_for_a_live_receiver_is_counted_not_applied)
{
	uint32_t b[2] = { 0, 1 };
	struct kvf_stats st = KVF_STATS_INIT;
	kvf_room h;

	cr_assert_eq(kvf_receiver_create(eng, 40, "10.0.0.1:1", &h), 0);
	cr_assert_eq(kvf_receiver_init(eng, h, b, 2), 0);
	push_ack(eng, 40, 7);
	kvf_progress(eng);
	kvf_stats(eng, &st);
	cr_assert_eq(st.ignored[KVF_IGN_BAD_EVENT], 1);
	kvf_abort(eng, h);
	cr_assert_eq(kvf_quiescent(eng, h), 0, "the early ACK did not count");
	cr_assert_eq(kvf_release(eng, h), -EBUSY);
	push_ack(eng, 40, 7);
	kvf_progress(eng);
	cr_assert_eq(kvf_quiescent(eng, h), 1);
}
