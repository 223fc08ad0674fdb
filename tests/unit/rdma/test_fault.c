/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/fault.c (built with -Dfault_inject=true only): the KVF_FAULT
 * grammar refuses what it does not define, and the frame faults do what
 * docs/chaos.md says. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "rdma/fault.h"

static int setup_with(const char *spec)
{
	setenv("KVF_FAULT", spec, 1);
	return kvf_fault_setup();
}

Test(fault, bad_specs_are_refused)
{
	const char *bad[] = {
		"bogus:1", "drop:FOO:0.1", "drop:ABORT:2", "drop:ABORT:-0.1", "drop:ABORT",
		"delay:any:0.1", "delay:any:0.1:20", "delay:any:0.1:0ms", "qp_error:after:0",
		"qp_error:sometimes:5", "stall_cq:fast", "ring_full:10ms:1.5", "bad_rkey",
		"drop:ABORT:0.1,,dup:any:0.1", "drop:ABORT:0.1:extra",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(setup_with(bad[i]), -EINVAL, "'%s' was taken", bad[i]);
	cr_assert_eq(setup_with("drop:ABORT:0.1,dup:ROOM_INFO:0.05,delay:any:0.05:20ms,"
				"reorder:ABORT_ACK:1,corrupt:any:0.01,qp_error:after:500,"
				"stall_cq:200ms,ring_full:50ms:0.5,bad_rkey:0.01"), 0);
	cr_assert_eq(setup_with(""), 0, "no faults");
}

static void frame(uint8_t *buf, uint8_t type)
{
	memset(buf, 0, 32);
	memcpy(buf, "KVFR", 4);
	buf[6] = type;
}

Test(fault, frame_faults_by_type)
{
	uint8_t buf[32], orig[32];
	uint32_t conn = 0, len = 0, held = 0;
	uint8_t *got;

	cr_assert_eq(setup_with("drop:ABORT:1,dup:ABORT_ACK:1,corrupt:HEARTBEAT:1"), 0);
	frame(buf, 3);
	cr_assert_eq(kvf_fault_rx(NULL, 1, buf, 32), 0, "ABORT dropped");
	frame(buf, 4);
	cr_assert_eq(kvf_fault_rx(NULL, 1, buf, 32), 2, "ABORT_ACK delivered twice");
	frame(buf, 5);
	memcpy(orig, buf, 32);
	cr_assert_eq(kvf_fault_rx(NULL, 1, buf, 32), 1);
	cr_assert_neq(memcmp(orig, buf, 32), 0, "HEARTBEAT corrupted");
	cr_assert_eq(buf[6], 5, "never its type");
	frame(buf, 1);
	cr_assert_eq(kvf_fault_rx(NULL, 1, buf, 32), 1, "HELLO untouched");

	cr_assert_eq(setup_with("delay:any:1:20ms,drop:HELLO:1"), 0);
	frame(buf, 2);
	cr_assert_eq(kvf_fault_rx(NULL, 9, buf, 32), 0, "held");
	cr_assert_null(kvf_fault_next_held(NULL, kvf_monotonic_ns(), &conn, &len, &held));
	cr_assert_eq(held, 1);
	got = kvf_fault_next_held(NULL, kvf_monotonic_ns() + 30000000ull, &conn, &len, &held);
	cr_assert_not_null(got, "due after 20 ms");
	cr_assert_eq(conn, 9);
	cr_assert_eq(len, 32);
	cr_assert_eq(got[6], 2);
	free(got);
	frame(buf, 1);
	cr_assert_eq(kvf_fault_rx(NULL, 9, buf, 32), 0, "HELLO only when named");
}

Test(fault, stalls_and_holds_start_and_end)
{
	uint64_t now = kvf_monotonic_ns();

	cr_assert_eq(setup_with("ring_full:50ms:1,stall_cq:20ms:1"), 0);
	cr_assert_not(kvf_fault_ring_held(now));
	kvf_fault_ring_drained(0, now);
	cr_assert_not(kvf_fault_ring_held(now), "an empty drain starts nothing");
	kvf_fault_ring_drained(3, now);
	cr_assert(kvf_fault_ring_held(now + 49000000ull));
	cr_assert_not(kvf_fault_ring_held(now + 51000000ull));
	kvf_fault_cq_polled(1, now);
	cr_assert(kvf_fault_cq_stalled(now + 19000000ull));
	cr_assert_not(kvf_fault_cq_stalled(now + 21000000ull));
}

/* The hook in the engine's ring drain (engine.c), on the fake transport. */
#include "fake_transport.h"

Test(fault, ring_full_holds_the_engines_drain)
{
	struct kvf_config cfg;
	struct fake f;
	kvf_engine *eng;

	cr_assert_eq(setup_with("ring_full:10s:1"), 0);
	fake_cfg(&cfg);
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	push_abort(eng, 5, KVF_SENDER, 7);
	cr_assert_eq(kvf_progress(eng), 1, "drained, and a hold starts");
	push_abort(eng, 6, KVF_SENDER, 7);
	cr_assert_eq(kvf_progress(eng), 0, "held: nothing drained");
	kvf_engine_close(eng);
	setup_with("");
}
