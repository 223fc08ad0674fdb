/* SPDX-License-Identifier: Apache-2.0 */
/* Room id -> slot: open addressing with linear probing and backward-shift
 * deletion (no tombstones, so lookups stay short however long it runs).
 * The key is (room id, role): one process may be sender and receiver of the
 * same room id. Capacity is fixed at creation, at most half full. */
#ifndef KVF_IDMAP_H
#define KVF_IDMAP_H

#include <stdbool.h>
#include <stdint.h>

struct kvf_idmap_ent {
	uint64_t id;
	uint32_t val;   /* slot + 1; 0 = empty */
	uint32_t role;
};

struct kvf_idmap {
	struct kvf_idmap_ent *tab;
	uint32_t mask;
	uint32_t n;
	uint32_t max;   /* refuse inserts beyond this */
};

/* Room for max entries. Returns 0 or -ENOMEM. */
int kvf_idmap_init(struct kvf_idmap *m, uint32_t max);
void kvf_idmap_fini(struct kvf_idmap *m);
/* Returns 0, -EEXIST (key present, map unchanged) or -ENOSPC. */
int kvf_idmap_insert(struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t slot);
/* true and *slot when found. */
bool kvf_idmap_find(const struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t *slot);
/* Returns true when it was there. */
bool kvf_idmap_remove(struct kvf_idmap *m, uint64_t id, uint32_t role);

#endif
