/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/open.c: an engine opened from code: kvf_engine_open_with (a
 * config file, overrides, both or neither; the caller's error line) and
 * kvf_engine_listen_addr on an engine that does not listen. The
 * transport's listener (port 0 included) is proven on a device by the RDMA
 * suite (tests/rxe/scenarios/ephemeral.sh). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <kvferry/kvferry.h>

static void quiet(void)
{
	if (!freopen("/dev/null", "w", stderr))
		cr_log_warn("stderr not redirected");
}

TestSuite(engine, .init = quiet);

Test(engine, open_with_overrides_alone)
{
	const char *o[] = { "engine.max_rooms=2", "log.level=error" };
	kvf_engine *eng = NULL;
	kvf_room r[3];
	char err[256] = "junk";

	cr_assert_eq(kvf_engine_open_with(NULL, o, 2, err, sizeof(err), &eng), 0, "%s", err);
	cr_expect_str_eq(err, "", "success clears err");
	/* engine.max_rooms = 2 took effect: a third room does not fit */
	cr_expect_eq(kvf_sender_create(eng, 1, &r[0]), 0);
	cr_expect_eq(kvf_sender_create(eng, 2, &r[1]), 0);
	cr_expect_eq(kvf_sender_create(eng, 3, &r[2]), -ENOSPC);
	kvf_engine_close(eng);
}

Test(engine, open_with_nothing_gives_a_default_engine)
{
	kvf_engine *eng = NULL;

	cr_assert_eq(kvf_engine_open_with(NULL, NULL, 0, NULL, 0, &eng), 0);
	cr_assert(eng);
	kvf_engine_close(eng);
}

Test(engine, a_bad_override_reaches_the_caller)
{
	const char *o[] = { "engine.max_rooms=2", "rdma.devcie=mlx5_3" };
	kvf_engine *eng = (kvf_engine *)&o; /* must stay untouched */
	char err[256];

	cr_assert_eq(kvf_engine_open_with(NULL, o, 2, err, sizeof(err), &eng), -EINVAL);
	cr_expect_str_eq(err, "override 1: unknown key 'rdma.devcie' (did you mean 'rdma.device'?)");
	cr_expect_eq(eng, (kvf_engine *)&o);
}

Test(engine, a_missing_file_reaches_the_caller)
{
	kvf_engine *eng = NULL;
	char err[256];

	cr_assert_eq(kvf_engine_open_with("/nonexistent/kvferry.conf", NULL, 0, err, sizeof(err),
					  &eng), -ENOENT);
	cr_expect_str_eq(err, "/nonexistent/kvferry.conf: No such file or directory");
	cr_expect_eq(kvf_engine_open("/nonexistent/kvferry.conf", &eng), -ENOENT);
}

Test(engine, null_arguments)
{
	const char *o[] = { "engine.id=x" };
	kvf_engine *eng = NULL;
	char err[256];

	cr_expect_eq(kvf_engine_open_with(NULL, o, 1, err, sizeof(err), NULL), -EINVAL);
	cr_expect_str_eq(err, "kvf_engine_open_with: out is NULL");
	cr_expect_eq(kvf_engine_open_with(NULL, NULL, 1, NULL, 0, &eng), -EINVAL);
	cr_expect_eq(kvf_engine_open(NULL, &eng), -EINVAL, "kvf_engine_open still needs a file");
}

Test(engine, listen_addr_without_a_listener)
{
	kvf_engine *eng = NULL;
	char host[64] = "x";
	uint16_t port = 7;

	cr_expect_eq(kvf_engine_listen_addr(NULL, host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(kvf_engine_open_with(NULL, NULL, 0, NULL, 0, &eng), 0);
	cr_expect_eq(kvf_engine_listen_addr(eng, NULL, 8, &port), -EINVAL);
	cr_expect_eq(kvf_engine_listen_addr(eng, host, sizeof(host), &port), -ENOTCONN);
	cr_expect_eq(kvf_engine_listen_addr(eng, NULL, 0, NULL), -ENOTCONN);
	cr_expect_str_eq(host, "x", "nothing written on an error");
	cr_expect_eq(port, 7);
	kvf_engine_close(eng);
}
