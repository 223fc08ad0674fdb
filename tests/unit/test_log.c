/* SPDX-License-Identifier: Apache-2.0 */
/* src/log.c: the escaping of peer strings for log lines. */
#include <criterion/criterion.h>
#include <string.h>

#include "log.h"

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
