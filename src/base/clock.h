/* SPDX-License-Identifier: Apache-2.0 */
/* The one monotonic clock of the library, in nanoseconds. The room engine
 * reads it through kvf_now() (replaceable with kvf_engine_set_clock); the
 * transport and the logger read it directly. */
#ifndef KVF_CLOCK_H
#define KVF_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t kvf_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
