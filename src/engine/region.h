/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's regions (kvf_region_register): their names, shapes and how
 * many live rooms use each, so that one in use cannot be unregistered. The
 * memory itself is the transport's business (src/rdma/pool.c). Scheduler
 * thread only. */
#ifndef KVF_REGION_H
#define KVF_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#define KVF_REGION_MAX_BUFS 1024u /* buffers over every region (HELLO carries them all) */
#define KVF_NO_REGION UINT32_MAX

struct kvf_region_ent {
	char name[KVF_REGION_NAME_MAX + 1]; /* "" = a free id */
	uint32_t nbufs;
	uint32_t nitems;
	uint64_t item_bytes; /* one item over every buffer */
	uint32_t users;      /* live rooms that hold it (kvf_regions_hold) */
};

struct kvf_regions {
	struct kvf_region_ent r[KVF_MAX_REGIONS];
	uint32_t nbufs; /* over every registered region */
};

/* Check desc (every refusal logged with the field). Returns 0 or -EINVAL,
 * -EEXIST (the name is taken), -ENOSPC (no id, or too many buffers);
 * *id gets the free id it would take. */
int kvf_regions_check(const struct kvf_regions *rs, const struct kvf_region_desc *desc,
		      uint32_t *id);
/* desc's geometry list when it has one (its .size covers the field, the
 * list is given and not all zero), else NULL. */
const struct kvf_buf_geometry *kvf_region_desc_geom(const struct kvf_region_desc *desc);
/* Take id for desc (checked). */
void kvf_regions_add(struct kvf_regions *rs, uint32_t id, const struct kvf_region_desc *desc);
/* Give id back: -EINVAL no such region, -EBUSY rooms use it. */
int kvf_regions_remove(struct kvf_regions *rs, uint32_t id);

/* The region with this id, or NULL. */
static inline const struct kvf_region_ent *kvf_regions_get(const struct kvf_regions *rs,
							   uint32_t id)
{
	return id < KVF_MAX_REGIONS && rs->r[id].name[0] ? &rs->r[id] : NULL;
}
/* The id of the region named name, or KVF_NO_REGION. */
uint32_t kvf_regions_find(const struct kvf_regions *rs, const char *name);

/* A room holds the regions of mask (bit per id) until it drops them. */
void kvf_regions_hold(struct kvf_regions *rs, uint32_t mask);
void kvf_regions_drop(struct kvf_regions *rs, uint32_t mask);

#endif
