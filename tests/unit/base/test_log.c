/* SPDX-License-Identifier: Apache-2.0 */
/* src/base/log.c: the escaping of peer strings for log lines, and the log sink. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

Test(log, escape_passes_printable_text)
{
	char out[64];

	cr_assert_str_eq(kvf_log_escape(out, sizeof(out), "prefill-0 A~", 12), "prefill-0 A~");
}

Test(log, escape_turns_controls_and_high_bytes_into_hex)
{
	const char in[] = "a\nb\x1b[2J\\\x7f\xff";
	char out[64];

	kvf_log_escape(out, sizeof(out), in, sizeof(in) - 1);
	cr_assert_str_eq(out, "a\\x0ab\\x1b[2J\\x5c\\x7f\\xff");
	for (const char *p = out; *p; p++)
		cr_assert(*p >= 0x20 && *p <= 0x7e, "byte 0x%02x left in %s", (unsigned char)*p, out);
}

Test(log, escape_takes_embedded_nul_as_a_byte)
{
	char out[64];

	kvf_log_escape(out, sizeof(out), "a\0b", 3);
	cr_assert_str_eq(out, "a\\x00b");
}

Test(log, escape_truncates_on_a_whole_escape)
{
	char out[6];

	/* "ab" + "\x0a" is 6 bytes: no room for the NUL, so the escape goes. */
	cr_assert_str_eq(kvf_log_escape(out, sizeof(out), "ab\ncd", 5), "ab");
	cr_assert_str_eq(kvf_log_escape(out, sizeof(out), "abcdefgh", 8), "abcde");
	cr_assert_str_eq(kvf_log_escape(out, 1, "abc", 3), "");
	cr_assert_str_eq(kvf_log_escape(out, sizeof(out), NULL, 3), "");
}

Test(log, esc_macro_escapes_a_string)
{
	cr_assert_str_eq(kvf_esc("x\ry"), "x\\x0dy");
}

/* kvf_set_log_callback: what a binding (the Python one) uses to take the
 * log lines instead of stderr. */
struct captured {
	int calls;
	int level;
	char module[32];
	char msg[256];
};

static void capture(void *arg, int level, const char *module, const char *msg)
{
	struct captured *c = arg;

	c->calls++;
	c->level = level;
	snprintf(c->module, sizeof(c->module), "%s", module);
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

Test(log, callback_gets_level_module_and_bare_message, .init = cr_redirect_stderr)
{
	struct captured c = { 0 };

	cr_assert_eq(kvf_set_log_callback(capture, &c), 0);
	kvf_log_msg(KVF_LOG_WARN, "room", "room %d: %s", 7, "late");
	kvf_set_log_callback(NULL, NULL);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.level, KVF_LOG_WARN);
	cr_assert_str_eq(c.module, "room");
	cr_assert_str_eq(c.msg, "room 7: late");
	/* nothing reached stderr while the callback was set */
	fflush(stderr);
	cr_assert_stderr_eq_str("");
}

Test(log, callback_respects_the_level, .init = cr_redirect_stderr)
{
	struct captured c = { 0 };
	enum kvf_log_level old = kvf_log_get_level();

	kvf_set_log_callback(capture, &c);
	kvf_log_set_level(KVF_LOG_WARN);
	kvf_dbg("room", "not seen");
	kvf_info("room", "not seen");
	kvf_err("room", "seen");
	kvf_log_set_level(old);
	kvf_set_log_callback(NULL, NULL);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.level, KVF_LOG_ERROR);
}

Test(log, null_callback_restores_stderr, .init = cr_redirect_stderr)
{
	struct captured c = { 0 };

	kvf_set_log_callback(capture, &c);
	kvf_set_log_callback(NULL, NULL);
	kvf_log_msg(KVF_LOG_ERROR, "pool", "back on stderr");
	fflush(stderr);
	cr_assert_eq(c.calls, 0);
	cr_assert_stderr_neq_str("");
}

/* The public path: a bad override is reported through the sink. */
Test(log, engine_open_errors_reach_the_callback)
{
	struct captured c = { 0 };
	const char *ov[] = { "rdma.devcie=x" };
	kvf_engine *eng = NULL;

	kvf_set_log_callback(capture, &c);
	cr_assert_eq(kvf_engine_open_with(NULL, ov, 1, NULL, 0, &eng), -EINVAL);
	kvf_set_log_callback(NULL, NULL);
	cr_assert_geq(c.calls, 1);
	cr_assert_eq(c.level, KVF_LOG_ERROR);
	cr_assert(strstr(c.msg, "rdma.devcie") != NULL, "last message: %s", c.msg);
}
