/* SPDX-License-Identifier: Apache-2.0 */
/* How every harness reports a broken promise. libFuzzer's stderr may be
 * closed (-close_fd_mask=2), so the message also goes through the
 * sanitizer runtime's summary, then abort() makes it a crash libFuzzer
 * keeps. Weak: a plain -fsanitize=fuzzer build has no runtime. */
#ifndef KVF_FUZZ_REPORT_H
#define KVF_FUZZ_REPORT_H

#include <stdio.h>
#include <stdlib.h>

extern void __sanitizer_report_error_summary(const char *msg) __attribute__((weak));

static inline void fuzz_broken(const char *msg)
{
	fprintf(stderr, "%s\n", msg);
	if (__sanitizer_report_error_summary)
		__sanitizer_report_error_summary(msg);
	abort();
}

#endif
