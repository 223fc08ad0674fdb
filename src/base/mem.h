/* SPDX-License-Identifier: Apache-2.0 */
/* Zeroed tables sized at engine creation (room slots, id map, deadline
 * heap). Large ones are mapped with transparent huge pages asked for: with
 * a million live rooms a lookup otherwise pays a TLB miss on top of the
 * cache miss. */
#ifndef KVF_MEM_H
#define KVF_MEM_H

#include <stddef.h>

void *kvf_table_alloc(size_t n, size_t size);
void kvf_table_free(void *p, size_t n, size_t size);

#endif
