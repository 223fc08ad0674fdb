/* SPDX-License-Identifier: Apache-2.0 */
/* Copying a growable public struct out to a caller whose header may be
 * older (smaller) or newer (larger) than ours: the size-field convention of
 * kvferry.h (struct kvf_stats, struct kvf_failure). */
#ifndef KVF_SIZED_H
#define KVF_SIZED_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* full is our whole struct (have bytes) whose first field is the uint32_t
 * size; out is the caller's, whose size field says how big it is. Copies
 * the prefix both know, zeroes the caller's tail we do not know, and sets
 * out's size to the bytes filled. -EINVAL when out cannot even hold the
 * first field after the size. */
static inline int kvf_sized_copy(void *out, const void *full, size_t have, size_t first)
{
	uint32_t want;
	size_t n;

	memcpy(&want, out, sizeof(want));
	if (want < first)
		return -EINVAL;
	n = want < have ? want : have;
	memcpy((char *)out + sizeof(want), (const char *)full + sizeof(want), n - sizeof(want));
	if (want > have)
		memset((char *)out + have, 0, want - have);
	want = (uint32_t)n;
	memcpy(out, &want, sizeof(want));
	return 0;
}

#endif
