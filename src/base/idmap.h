/* SPDX-License-Identifier: Apache-2.0 */
/* Room id -> slot: open addressing with linear probing and backward-shift
 * deletion (no tombstones, so lookups stay short however long it runs).
 * The key is (room id, role): one process may be sender and receiver of the
 * same room id. Capacity is fixed at creation, at most half full.
 *
 * An entry is 8 bytes: 38 bits of the key's hash, the role and the value.
 * The full id is not stored: on a hash match it is read back through key_of
 * (the room's own slot, which the caller is about to touch anyway). Half the
 * bytes of storing ids means a million-room table mostly stays in cache. */
#ifndef KVF_IDMAP_H
#define KVF_IDMAP_H

#include <stdbool.h>
#include <stdint.h>

/* The id stored under value val (a slot index). */
typedef uint64_t (*kvf_idmap_key_fn)(const void *ctx, uint32_t val);

struct kvf_idmap {
	uint64_t *tab;   /* 0 = empty, else hash:38 | role:1 | val + 1:25 */
	uint32_t mask;
	uint32_t shift;  /* bucket = hash >> shift */
	uint32_t n;
	uint32_t max;    /* refuse inserts beyond this */
	kvf_idmap_key_fn key_of;
	const void *ctx;
};

#define KVF_IDMAP_MAX_VAL ((1u << 25) - 2)

/* Room for max entries, values <= KVF_IDMAP_MAX_VAL.
 * Returns 0, -EINVAL or -ENOMEM. */
int kvf_idmap_init(struct kvf_idmap *m, uint32_t max, kvf_idmap_key_fn key_of, const void *ctx);
void kvf_idmap_fini(struct kvf_idmap *m);
/* Returns 0, -EEXIST (key present, map unchanged) or -ENOSPC. */
int kvf_idmap_insert(struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t val);
/* Start loading the bucket (id, role) hashes to, for an insert a little
 * later (kvf_idmap_insert_h with the hash returned): on a big table the
 * bucket is a cache (and TLB) miss, which the work between then overlaps. */
uint64_t kvf_idmap_prefetch(const struct kvf_idmap *m, uint64_t id, uint32_t role);
/* kvf_idmap_insert with the hash kvf_idmap_prefetch returned for (id, role). */
int kvf_idmap_insert_h(struct kvf_idmap *m, uint64_t h, uint64_t id, uint32_t role,
		       uint32_t val);
/* true and *val when found. */
bool kvf_idmap_find(const struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t *val);
/* Returns true when it was there. */
bool kvf_idmap_remove(struct kvf_idmap *m, uint64_t id, uint32_t role);

#endif
