/* SPDX-License-Identifier: Apache-2.0 */
/* The fixture the room-engine suites share: a fresh engine on the fake
 * transport for every test (TestSuite(name, .init = room_setup, .fini =
 * room_teardown)), and the two reads most tests assert on. Included by one
 * test file each: the definitions are static. */
#ifndef KVF_ROOM_FIXTURE_H
#define KVF_ROOM_FIXTURE_H

#include <criterion/criterion.h>

#include "fake_transport.h"

static struct kvf_config cfg;
static struct fake f;
static kvf_engine *eng;

static inline void room_setup(void)
{
	fake_cfg(&cfg);
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
}

static inline void room_teardown(void)
{
	kvf_engine_close(eng);
}

static inline struct kvf_stats stats(void)
{
	struct kvf_stats st = KVF_STATS_INIT;

	cr_assert_eq(kvf_stats(eng, &st), 0);
	return st;
}

static inline struct kvf_failure failure(kvf_room h)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;

	cr_assert_eq(kvf_failure(eng, h, &fl), 0);
	return fl;
}

#endif
