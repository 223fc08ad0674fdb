/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/config/config_keys.c, the key table: the defaults, and that
 * docs/config.md and config/kvferry.conf say what the table says (every
 * key, default, side and integer range). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>

#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fixture.h"

#ifndef KVF_SOURCE_ROOT
#define KVF_SOURCE_ROOT "."
#endif

#define DOCS KVF_SOURCE_ROOT "/docs/config.md"
#define EXAMPLE KVF_SOURCE_ROOT "/config/kvferry.conf"

TestSuite(config_keys, .init = config_quiet);

/* ---- defaults ---- */

Test(config_keys, defaults_follow_sglang_and_design)
{
	struct kvf_config c;

	kvf_config_defaults(&c);
	cr_assert_eq(c.log_level, KVF_LOG_INFO);
	cr_assert_str_eq(c.engine_id, "kvferry");
	cr_assert_eq(c.bootstrap_s, 300);
	cr_assert_eq(c.receiver_waiting_s, 300);
	cr_assert_eq(c.inflight_s, 300);
	cr_assert_eq(c.waiting_for_input_s, 0);
	cr_assert_eq(c.quiesce_s, 30);
	cr_assert_eq(c.heartbeat_interval_ms, 5000);
	cr_assert_eq(c.heartbeat_misses, 2);
	cr_assert_eq(c.tombstone_ttl_s, 60);
	cr_assert_eq(c.max_tombstones, 65536);
	cr_assert_eq(c.max_parked_info_bytes, 16u << 20);
	cr_assert_eq(c.max_rooms, 4096);
	cr_assert_eq(c.max_blocks_per_room, 2097152);
	cr_assert_eq(c.ring_size, 16384);
	cr_assert_eq(c.summary_interval_s, 60);
	cr_assert_not(c.rdma_enabled);
	cr_assert_str_eq(c.device, "");
	cr_assert_eq(c.port_num, 1);
	cr_assert_eq(c.gid_index, -1);
	cr_assert_eq(c.listen_port, 18515);
	cr_assert_eq(c.qps_per_peer, 2);
	cr_assert_eq(c.sq_depth, 256);
	cr_assert_eq(c.rq_depth, 256);
	cr_assert_eq(c.max_sge, 4);
	cr_assert_eq(c.signal_every, 64);
	cr_assert_eq(c.qp_timeout, 18);
	cr_assert_eq(c.retry_cnt, 7);
	cr_assert_eq(c.rnr_retry, 7);
	cr_assert_eq(c.mtu, 0);
	cr_assert_eq(c.poll_batch, 32);
	cr_assert_eq(c.poll_idle_us, 1000);
	cr_assert_eq(c.connect_timeout_ms, 5000);
	cr_assert_eq(c.cuda_staging, 1);
	cr_assert_eq(c.staging_pool_mb, 64);
}

Test(config_keys, key_list_has_no_duplicates)
{
	const char *const *k = kvf_config_keys();
	size_t n = 0;

	for (; k[n]; n++)
		for (size_t j = 0; j < n; j++)
			cr_assert_str_neq(k[n], k[j]);
	cr_assert_gt(n, 0);
}

/* ---- config/kvferry.conf ---- */

Test(config_keys, example_file_loads_as_the_defaults)
{
	struct kvf_config c, d;
	int rc = kvf_config_load(EXAMPLE, &c, err, sizeof(err));

	cr_assert_eq(rc, 0, "%s: rc %d: %s", EXAMPLE, rc, err);
	kvf_config_defaults(&d);
	/* The example sets every key to its default, with rdma present. */
	cr_assert(c.rdma_enabled);
	d.rdma_enabled = true;
	cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0,
		     "config/kvferry.conf values differ from the defaults");
}

Test(config_keys, example_file_sets_every_key)
{
	const char *const *k = kvf_config_keys();
	char missing[2048] = "";
	config_t lc;

	config_init(&lc);
	cr_assert(config_read_file(&lc, EXAMPLE), "%s:%d: %s", EXAMPLE,
		  config_error_line(&lc), config_error_text(&lc));
	for (; *k; k++)
		if (!config_lookup(&lc, *k))
			snprintf(missing + strlen(missing),
				 sizeof(missing) - strlen(missing), " %s", *k);
	config_destroy(&lc);
	cr_assert_str_empty(missing, "config/kvferry.conf lacks:%s", missing);
}

/* ---- docs/config.md ---- */

struct doc_row {
	char key[64], side[32], dflt[160], range[160];
};

/* Copy cell number i of a "| a | b |" row, trimmed; "" if absent. */
static void cell(const char *line, int i, char *out, size_t len)
{
	const char *p = line;
	size_t n;

	for (int k = 0; k <= i && p; k++)
		p = strchr(p + (k > 0), '|');
	out[0] = '\0';
	if (!p)
		return;
	p++;
	while (*p == ' ')
		p++;
	n = strcspn(p, "|");
	while (n && p[n - 1] == ' ')
		n--;
	snprintf(out, len, "%.*s", (int)n, p);
}

/* Strip one pair of enclosing backticks in place. */
static void unquote(char *s)
{
	size_t n = strlen(s);

	if (n >= 2 && s[0] == '`' && s[n - 1] == '`') {
		memmove(s, s + 1, n - 2);
		s[n - 2] = '\0';
	}
}

/* The table rows whose first cell is a key in backticks. */
static size_t doc_rows(struct doc_row *rows, size_t max)
{
	FILE *f = fopen(DOCS, "r");
	char line[2048];
	size_t n = 0;

	cr_assert(f, "cannot open %s", DOCS);
	while (fgets(line, sizeof(line), f) && n < max) {
		if (strncmp(line, "| `", 3) != 0)
			continue;
		cell(line, 0, rows[n].key, sizeof(rows[n].key));
		unquote(rows[n].key);
		cell(line, 1, rows[n].side, sizeof(rows[n].side));
		cell(line, 3, rows[n].dflt, sizeof(rows[n].dflt));
		unquote(rows[n].dflt);
		cell(line, 4, rows[n].range, sizeof(rows[n].range));
		n++;
	}
	fclose(f);
	return n;
}

static bool in_list(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

Test(config_keys, docs_list_exactly_the_code_keys)
{
	static struct doc_row rows[128];
	const char *doc_keys[128];
	const char *const *code = kvf_config_keys();
	size_t nd = doc_rows(rows, 128), nc = 0;
	char only_docs[1024] = "", only_code[1024] = "";

	for (size_t i = 0; i < nd; i++)
		doc_keys[i] = rows[i].key;
	while (code[nc])
		nc++;
	for (size_t i = 0; i < nd; i++)
		if (!in_list(doc_keys[i], code, nc))
			snprintf(only_docs + strlen(only_docs),
				 sizeof(only_docs) - strlen(only_docs), " %s", doc_keys[i]);
	for (size_t i = 0; i < nc; i++)
		if (!in_list(code[i], doc_keys, nd))
			snprintf(only_code + strlen(only_code),
				 sizeof(only_code) - strlen(only_code), " %s", code[i]);
	cr_assert(only_docs[0] == '\0' && only_code[0] == '\0',
		  "docs/config.md and the key table differ; only in docs:%s; "
		  "only in code:%s", only_docs, only_code);
	cr_assert_eq(nd, nc, "a key is listed twice in docs/config.md");
}

Test(config_keys, docs_sides_are_valid)
{
	static struct doc_row rows[128];
	size_t nd = doc_rows(rows, 128);

	for (size_t i = 0; i < nd; i++)
		cr_assert(strcmp(rows[i].side, "prefill") == 0 ||
			  strcmp(rows[i].side, "decode") == 0 ||
			  strcmp(rows[i].side, "both") == 0,
			  "%s: side '%s'", rows[i].key, rows[i].side);
}

/* "group.key" + value -> "group = { key = value; };" */
static void one_key(const char *key, const char *value, char *out, size_t len)
{
	const char *dot = strchr(key, '.');

	snprintf(out, len, "%.*s = { %s = %s; };", (int)(dot - key), key,
		 dot + 1, value);
}

Test(config_keys, docs_defaults_are_the_code_defaults)
{
	static struct doc_row rows[128];
	size_t nd = doc_rows(rows, 128);

	for (size_t i = 0; i < nd; i++) {
		struct kvf_config c, d;
		char text[256];

		one_key(rows[i].key, rows[i].dflt, text, sizeof(text));
		expect_ok(text, &c);
		kvf_config_defaults(&d);
		d.rdma_enabled = strncmp(rows[i].key, "rdma.", 5) == 0;
		cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0,
			     "docs/config.md default of %s (%s) is not the code's",
			     rows[i].key, rows[i].dflt);
	}
}

Test(config_keys, docs_ranges_are_the_code_ranges)
{
	static struct doc_row rows[128];
	size_t nd = doc_rows(rows, 128), checked = 0;

	for (size_t i = 0; i < nd; i++) {
		const char *br = strchr(rows[i].range, '[');
		long long lo, hi;
		char text[256], v[32], want[128];

		if (!br || sscanf(br, "[%lld, %lld]", &lo, &hi) != 2)
			continue;
		snprintf(want, sizeof(want), "%s: expected", rows[i].key);
		snprintf(v, sizeof(v), "%lld", hi + 1);
		one_key(rows[i].key, v, text, sizeof(text));
		expect_err_has(text, want);
		snprintf(want, sizeof(want), "[%lld, %lld]", lo, hi);
		cr_assert(strstr(err, want), "%s: docs say %s, code says: %s",
			  rows[i].key, want, err);
		snprintf(v, sizeof(v), "%lld", lo - 1);
		one_key(rows[i].key, v, text, sizeof(text));
		expect_err_has(text, want);
		checked++;
	}
	cr_assert_geq(checked, 29, "only %zu integer ranges found in the docs", checked);
}

