/* SPDX-License-Identifier: Apache-2.0 */
#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Below this, malloc is as good and wastes less. */
#define BIG (2u << 20)

void *kvf_table_alloc(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (n && size > SIZE_MAX / n)
		return NULL;
	bytes = n * size;
	if (bytes < BIG)
		return calloc(n ? n : 1, size);
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* a hint: fine if refused */
	return p;
}

void kvf_table_free(void *p, size_t n, size_t size)
{
	if (!p)
		return;
	if (n * size < BIG)
		free(p);
	else
		munmap(p, n * size);
}
