/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/config/config_scan.c: numbers are tokenized as libconfig 1.5's
 * lexer tokenizes them (checked against the installed libconfig itself),
 * wrapping is judged as libconfig stores values, and the walk reports each
 * literal with its line and key, at any depth. */
#include <criterion/criterion.h>

#include <libconfig.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_scan.h"

/* ---- one token ---- */

struct tok {
	const char *in;
	size_t len;
	enum kvf_num_kind kind;
};

Test(config_scan, tokens_follow_flex_longest_match)
{
	static const struct tok t[] = {
		{ "5", 1, KVF_NUM_INT },
		{ "-5", 2, KVF_NUM_INT },
		{ "+5;", 2, KVF_NUM_INT },
		{ "4294985811listen_addr", 10, KVF_NUM_INT },
		{ "5l", 1, KVF_NUM_INT },          /* no lower-case suffix */
		{ "5L", 2, KVF_NUM_INT64 },
		{ "5LL", 3, KVF_NUM_INT64 },
		{ "5LLL", 3, KVF_NUM_INT64 },
		{ "-5Lx", 3, KVF_NUM_INT64 },
		{ "0x1F", 4, KVF_NUM_HEX },
		{ "0x1Fg", 4, KVF_NUM_HEX },
		{ "0x1FL", 5, KVF_NUM_HEX64 },
		{ "0X1fLL;", 6, KVF_NUM_HEX64 },
		{ "0x", 1, KVF_NUM_INT },          /* "0" then the name "x" */
		{ "-0x5", 2, KVF_NUM_INT },        /* hex takes no sign */
		{ "1e5", 3, KVF_NUM_FLOAT },
		{ "1e", 1, KVF_NUM_INT },
		{ "1e+", 1, KVF_NUM_INT },
		{ "1E-5x", 4, KVF_NUM_FLOAT },
		{ "1.5e", 3, KVF_NUM_FLOAT },
		{ "1.5e5L", 5, KVF_NUM_FLOAT },
		{ "5.", 2, KVF_NUM_FLOAT },
		{ ".", 1, KVF_NUM_FLOAT },
		{ "-.5", 3, KVF_NUM_FLOAT },
		{ "1.5.5", 3, KVF_NUM_FLOAT },
		{ "-", 0, KVF_NUM_NONE },
		{ "+x", 0, KVF_NUM_NONE },
		{ "x5", 0, KVF_NUM_NONE },
		{ "", 0, KVF_NUM_NONE },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		enum kvf_num_kind k;
		size_t n = kvf_scan_number(t[i].in, &k);

		cr_expect_eq(n, t[i].len, "'%s': length %zu, want %zu", t[i].in, n, t[i].len);
		cr_expect_eq(k, t[i].kind, "'%s': kind %d, want %d", t[i].in, k, t[i].kind);
	}
}

static bool wraps(const char *s)
{
	enum kvf_num_kind k;
	size_t n = kvf_scan_number(s, &k);

	cr_assert_gt(n, 0, "'%s' is no number", s);
	return kvf_scan_wraps(s, n, k);
}

Test(config_scan, wrapping_is_what_libconfig_15_stores)
{
	static const char *const wrap[] = { "4294967297", "2147483648",
		"-2147483649", "99999999999999999999", "4294985811listen_addr",
		"99999999999999999999L", "0x100000000", "0x80000000",
		"0xFFFFFFFF", "0x8000000000000000L", "0x10000000000000000L" };
	static const char *const fits[] = { "2147483647", "-2147483648", "0",
		"000000000000000000000000000000000000000000000000000000000005",
		"4294967297L", "9223372036854775807L", "-9223372036854775808LL",
		"0x7FFFFFFF", "0x7FFFFFFFFFFFFFFFL", "1e300", "5l" };

	for (size_t i = 0; i < sizeof(wrap) / sizeof(wrap[0]); i++)
		cr_expect(wraps(wrap[i]), "%s should wrap", wrap[i]);
	for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++)
		cr_expect_not(wraps(fits[i]), "%s should fit", fits[i]);
}

/* ---- against the installed libconfig ---- */

/* "a = S;" parses iff S is one numeric token, of the type our kind says,
 * with the written value whenever we say it does not wrap. */
static void agree_with_libconfig(const char *s)
{
	enum kvf_num_kind k;
	size_t n = kvf_scan_number(s, &k);
	bool whole = n > 0 && n == strlen(s);
	char text[64];
	config_t c;
	int ok;

	snprintf(text, sizeof(text), "a = %s;", s);
	config_init(&c);
	ok = config_read_string(&c, text);
	cr_assert_eq(ok, whole, "'%s': libconfig %s, scan says %zu of %zu bytes",
		     s, ok ? "accepts" : "refuses", n, strlen(s));
	if (ok) {
		const config_setting_t *a = config_lookup(&c, "a");
		int want = k == KVF_NUM_FLOAT ? CONFIG_TYPE_FLOAT :
			   k == KVF_NUM_INT64 || k == KVF_NUM_HEX64 ? CONFIG_TYPE_INT64 :
			   CONFIG_TYPE_INT;

		cr_assert_eq(config_setting_type(a), want, "'%s': type", s);
		if (want != CONFIG_TYPE_FLOAT && !kvf_scan_wraps(s, n, k)) {
			bool hex = k == KVF_NUM_HEX || k == KVF_NUM_HEX64;
			long long v = hex ? (long long)strtoull(s, NULL, 16) : strtoll(s, NULL, 10);

			cr_assert_eq(config_setting_get_int64(a), v, "'%s': value", s);
		}
	}
	config_destroy(&c);
}

Test(config_scan, random_literals_tokenize_as_libconfig_does)
{
	static const char alpha[] = "0123456789012345678901234567890123456789"
				    "xXLLLLlee.E+-abfg";
	unsigned seed = 12345;

	agree_with_libconfig("4294985811");
	agree_with_libconfig("0x1FLL");
	agree_with_libconfig("-.");
	for (int i = 0; i < 20000; i++) {
		char s[16];
		size_t n = 1 + (size_t)rand_r(&seed) % 12;

		for (size_t j = 0; j < n; j++)
			s[j] = alpha[(size_t)rand_r(&seed) % (sizeof(alpha) - 1)];
		s[n] = '\0';
		agree_with_libconfig(s);
	}
}

/* ---- the walk ---- */

struct seen {
	int n;
	struct kvf_scan_item it[16];
	char text[16][32];
	int stop_at;  /* return nonzero at this item (1-based), 0 = never */
	bool strings; /* collect string pieces too */
};

static int collect(void *arg, const struct kvf_scan_item *it)
{
	struct seen *s = arg;

	if (it->what == KVF_SCAN_STRING && !s->strings)
		return 0;

	if (s->n < 16) {
		s->it[s->n] = *it;
		snprintf(s->text[s->n], sizeof(s->text[0]), "%.*s", (int)it->len,
			 it->text ? it->text : "");
	}
	s->n++;
	return s->n == s->stop_at ? 7 : 0;
}

Test(config_scan, walk_reports_key_line_and_text)
{
	struct seen s = { 0 };
	int rc = kvf_scan_text("# 1 2 3\nengine = {\n  max_rooms = 4294967297;\n"
			       "  id = \"5 \\\" 6\n7\";\n  /* 8\n9 */ ring_size : 0x40L;\n};\n"
			       "// 10\nrdma = { listen_port = 4294985811listen_addr = \"x\"; };\n",
			       collect, &s);

	cr_assert_eq(rc, 0);
	cr_assert_eq(s.n, 3);
	cr_expect_str_eq(s.text[0], "4294967297");
	cr_expect_str_eq(s.it[0].key, "engine.max_rooms");
	cr_expect_eq(s.it[0].line, 3);
	cr_expect_eq(s.it[0].kind, KVF_NUM_INT);
	cr_expect_str_eq(s.text[1], "0x40L");
	cr_expect_str_eq(s.it[1].key, "engine.ring_size");
	cr_expect_eq(s.it[1].line, 7);
	cr_expect_eq(s.it[1].kind, KVF_NUM_HEX64);
	cr_expect_str_eq(s.text[2], "4294985811");
	cr_expect_str_eq(s.it[2].key, "rdma.listen_port");
	cr_expect_eq(s.it[2].line, 10);
}

Test(config_scan, only_a_top_level_group_setting_has_a_key)
{
	struct seen s = { 0 };

	cr_assert_eq(kvf_scan_text("a = 1; l = (2, { b = 3; }); g = { c = [4]; d = 5; };"
				   " e = { f = { g = 6; }; };", collect, &s), 0);
	cr_assert_eq(s.n, 6);
	for (int i = 0; i < 6; i++)
		cr_expect_str_eq(s.it[i].key, i == 4 ? "g.d" : "", "item %d (%s): key '%s'",
				 i, s.text[i], s.it[i].key);
}

Test(config_scan, any_depth_is_only_counted)
{
	size_t depth = 1000000;
	char *t = malloc(2 * depth + 64);
	struct seen s = { 0 };

	cr_assert(t);
	strcpy(t, "g = { k = ");
	memset(t + strlen(t), '(', depth);
	strcpy(t + 10 + depth, "4294967297");
	memset(t + 20 + depth, ')', depth);
	strcpy(t + 20 + 2 * depth, "; k = 9; }; ))))) x = { y = 1; };");
	cr_assert_eq(kvf_scan_text(t, collect, &s), 0);
	free(t);
	cr_assert_eq(s.n, 3);
	cr_expect_str_eq(s.it[0].key, "");
	cr_expect_str_eq(s.it[1].key, "g.k");
	/* Stray closers never take the depth below zero. */
	cr_expect_str_eq(s.it[2].key, "x.y");
}

Test(config_scan, include_is_reported_and_callback_stops_the_walk)
{
	struct seen s = { .stop_at = 2 };

	cr_assert_eq(kvf_scan_text("a = 1;\n@include \"x\"\nb = 2; c = 3;", collect, &s), 7);
	cr_assert_eq(s.n, 2);
	cr_expect_eq(s.it[1].what, KVF_SCAN_INCLUDE);
	cr_expect_eq(s.it[1].line, 2);
}

Test(config_scan, unterminated_comment_and_string_end_the_walk)
{
	struct seen s = { .strings = true };

	cr_assert_eq(kvf_scan_text("a = 1; /* 2", collect, &s), 0);
	cr_assert_eq(kvf_scan_text("b = \"3\\", collect, &s), 0);
	cr_assert_eq(kvf_scan_text("c = 4 # 5", collect, &s), 0);
	cr_assert_eq(s.n, 3);
	cr_expect_eq(s.it[1].what, KVF_SCAN_STRING);
	cr_expect_eq(s.it[1].len, 2);  /* '3' and the lone backslash */
}

Test(config_scan, strings_are_measured_as_libconfig_decodes_them)
{
	static const char text[] = "g = {\n k = \"ab\\n\\x41\\x4\\q\\\\\\\"\" \"\n\";"
				   " };\nl = (\"x\");";
	struct seen s = { .strings = true };
	config_t c;

	/* libconfig agrees: the two pieces make one 12-byte string. */
	config_init(&c);
	cr_assert(config_read_string(&c, text));
	cr_expect_eq(strlen(config_setting_get_string(config_lookup(&c, "g.k"))), 12);
	config_destroy(&c);
	cr_assert_eq(kvf_scan_text(text, collect, &s), 0);
	cr_assert_eq(s.n, 3);
	/* a b \n \x41 \ x 4 \ q \\ \" */
	cr_expect_eq(s.it[0].len, 11);
	cr_expect_str_eq(s.it[0].key, "g.k");
	cr_expect_eq(s.it[0].line, 2);
	/* The second piece holds a newline: the next line count follows. */
	cr_expect_eq(s.it[1].len, 1);
	cr_expect_str_eq(s.it[1].key, "g.k");
	cr_expect_eq(s.it[2].line, 4);
	cr_expect_str_eq(s.it[2].key, "");
}
