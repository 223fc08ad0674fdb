/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/pool.c: a layout the send queue could not post is refused at
 * registration, before any verbs call, with a line naming the buffer and
 * its size. (Registering a good layout needs a device: the rxe suite.) */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "rdma/pool.h"

static char a[64], b[64];

static void setup(void)
{
	cr_redirect_stderr();
	kvf_log_set_level(KVF_LOG_ERROR);
}

TestSuite(pool, .init = setup);

/* NULL pd: any call that got past the checks would crash, not pass. */
static int create(uint64_t bs0, uint64_t bs1, uint32_t nblocks)
{
	void *bufs[] = {a, b};
	uint64_t bs[] = {bs0, bs1};
	struct kvf_region_layout l = {.name = "kv", .nbufs = 2, .nitems = nblocks, .bufs = bufs,
				     .item_size = bs};
	struct kvf_pool *p = NULL;
	int rc = kvf_pool_create(NULL, &l, KVF_STAGE_REFUSE, &p);

	cr_assert_null(p);
	return rc;
}

static void expect_log(const char *what)
{
	char line[1024] = "";
	FILE *err;
	size_t n;

	fflush(stderr);
	err = cr_get_redirected_stderr();
	n = fread(line, 1, sizeof(line) - 1, err);
	line[n] = '\0';
	cr_assert(strstr(line, what), "log '%s' lacks '%s'", line, what);
}

Test(pool, block_over_one_write_is_refused)
{
	/* 4 GiB would have been cut to 0 in a 32-bit SGE length. */
	cr_assert_eq(create(4096, 4ull << 30, 4), -EINVAL);
	expect_log("buffer 1");
}

Test(pool, block_between_one_and_four_gib_is_refused)
{
	cr_assert_eq(create(KVF_SQ_MAX_WR_BYTES + 4096, 4096, 4), -EINVAL);
	expect_log("block size 1073745920 bytes is over 1073741824");
}

Test(pool, zero_block_size_is_refused)
{
	cr_assert_eq(create(4096, 0, 4), -EINVAL);
	expect_log("buffer 1: block size 0");
}

Test(pool, no_blocks_is_refused)
{
	cr_assert_eq(create(4096, 4096, 0), -EINVAL);
	expect_log("no blocks");
}

/* The test hook (KVF_TEST_STAGE_REGIONS): host buffers are staged, not
 * registered (a NULL pd proves no verbs call), and the region says so once. */
Test(pool, the_test_hook_stages_host_buffers_without_registering_them)
{
	void *bufs[] = {a, b};
	uint64_t bs[] = {16, 32};
	struct kvf_region_layout l = {.name = "kv", .nbufs = 2, .nitems = 2, .bufs = bufs,
				     .item_size = bs};
	struct kvf_pool *p = NULL;

	kvf_log_set_level(KVF_LOG_INFO);
	cr_assert_eq(kvf_pool_create(NULL, &l, KVF_STAGE_FORCE, &p), 0);
	cr_assert_eq(p->stage, KVF_POOL_STAGE_HOST);
	for (uint32_t i = 0; i < 2; i++) {
		cr_assert(p->bufs[i].staged);
		cr_assert_null(p->bufs[i].mr);
		cr_assert_eq(p->wr_bufs[i].key, 0);
	}
	kvf_pool_destroy(p);
	expect_log("region 'kv': 2 of 2 buffers staged through registered host memory");
}
