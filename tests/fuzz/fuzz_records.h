/* SPDX-License-Identifier: Apache-2.0 */
/* The input format of the harnesses that take a sequence of frames
 * (fuzz_reasm, fuzz_engine): records of
 *   op u8, len u16 little-endian, len bytes
 * What op means is the harness's. A last record cut short takes what is
 * left. seed_gen.c writes seeds in this format. */
#ifndef KVF_FUZZ_RECORDS_H
#define KVF_FUZZ_RECORDS_H

#include <stddef.h>
#include <stdint.h>

struct fuzz_record {
	uint8_t op;
	const uint8_t *data;
	size_t len;
};

/* The next record of *in (*n bytes left): 1 and *r, or 0 at the end. */
static inline int fuzz_next_record(const uint8_t **in, size_t *n, struct fuzz_record *r)
{
	size_t want;

	if (*n < 3)
		return 0;
	r->op = (*in)[0];
	want = (size_t)(*in)[1] | (size_t)(*in)[2] << 8;
	*in += 3;
	*n -= 3;
	r->len = want < *n ? want : *n;
	r->data = *in;
	*in += r->len;
	*n -= r->len;
	return 1;
}

#endif
