/* SPDX-License-Identifier: Apache-2.0 */
#include "engine/region.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/log.h"

/* The transport's limit on one item: an RDMA WRITE of it must fit an SGE's
 * 32-bit length (src/transfer/sendq.h, KVF_SQ_MAX_WR_BYTES). */
#define ITEM_MAX (1ull << 30)

static int check_bufs(const struct kvf_region_desc *d, const char *name)
{
	for (uint32_t i = 0; i < d->nbufs; i++) {
		uint64_t is = d->item_size[i];

		if (!d->bufs[i] || !is || is > ITEM_MAX || is > UINT64_MAX / d->nitems) {
			kvf_err("region", "region '%s': buffer %" PRIu32 ": %s", name, i,
				!d->bufs[i] ? "NULL address" : !is ? "item size 0" :
				is > ITEM_MAX ? "item size over 1 GiB (one RDMA WRITE)" :
				"item size x nitems overflows 64 bits");
			return -EINVAL;
		}
	}
	return 0;
}

static bool geom_none(const struct kvf_buf_geometry *g)
{
	return !g->page_tokens && !g->heads && !g->head0 && !g->head_bytes && !g->layer &&
	       !g->kind;
}

/* Buffer i's geometry, given (not all zero): its fields against its item
 * size, and its (layer, kind) not taken by an earlier buffer. */
static const char *geom_bad(const struct kvf_region_desc *d, uint32_t i)
{
	const struct kvf_buf_geometry *g = &d->geom[i];

	if (!g->page_tokens || !g->heads || !g->head_bytes)
		return !g->page_tokens ? "geometry page_tokens 0" : !g->heads ?
		       "geometry heads 0" : "geometry head_bytes 0";
	if (g->head0 > UINT32_MAX - g->heads)
		return "geometry head0 + heads passes 2^32";
	if ((uint64_t)g->page_tokens * g->heads * g->head_bytes != d->item_size[i])
		return "geometry page_tokens x heads x head_bytes is not the item size";
	for (uint32_t j = 0; j < i; j++)
		if (d->geom[j].layer == g->layer && d->geom[j].kind == g->kind)
			return "geometry (layer, kind) given to an earlier buffer too";
	return NULL;
}

const struct kvf_buf_geometry *kvf_region_desc_geom(const struct kvf_region_desc *d)
{
	if (d->size < offsetof(struct kvf_region_desc, geom) + sizeof(d->geom) || !d->geom ||
	    geom_none(&d->geom[0]))
		return NULL;
	return d->geom;
}

/* Geometry for every buffer or for none (all zero = none). */
static int check_geom(const struct kvf_region_desc *d)
{
	bool first_none;

	if (d->size < offsetof(struct kvf_region_desc, geom) + sizeof(d->geom) || !d->geom)
		return 0;
	first_none = geom_none(&d->geom[0]);
	for (uint32_t i = 0; i < d->nbufs; i++) {
		const char *bad = geom_none(&d->geom[i]) != first_none ?
				  "geometry given for some buffers and not others" :
				  first_none ? NULL : geom_bad(d, i);

		if (bad) {
			const struct kvf_buf_geometry *g = &d->geom[i];

			kvf_err("region", "region '%s': buffer %" PRIu32 " (layer %" PRIu32 " kind %"
				PRIu32 ", item size %" PRIu64 "): %s", d->name, i, g->layer, g->kind,
				d->item_size[i], bad);
			return -EINVAL;
		}
	}
	return 0;
}

int kvf_regions_check(const struct kvf_regions *rs, const struct kvf_region_desc *d,
		      uint32_t *id)
{
	size_t len;
	int rc;

	if (!d || d->size < offsetof(struct kvf_region_desc, item_size) + sizeof(d->item_size) ||
	    !d->name) {
		kvf_err("region", "kvf_region_register: %s", !d ? "no descriptor" :
			!d->name ? "no name" : ".size is smaller than struct kvf_region_desc");
		return -EINVAL;
	}
	len = strnlen(d->name, KVF_REGION_NAME_MAX + 1);
	if (!len || len > KVF_REGION_NAME_MAX || !d->nbufs || !d->nitems || !d->bufs ||
	    !d->item_size || d->flags) {
		kvf_err("region", "region '%.*s': %s", KVF_REGION_NAME_MAX, d->name,
			!len ? "empty name" : len > KVF_REGION_NAME_MAX ? "name over 31 bytes" :
			!d->nbufs ? "nbufs 0" : !d->nitems ? "nitems 0" :
			!d->bufs ? "no buffer list" : !d->item_size ? "no item size list" :
			"flags not 0");
		return -EINVAL;
	}
	if (kvf_regions_find(rs, d->name) != KVF_NO_REGION) {
		kvf_err("region", "region '%s' is registered already", d->name);
		return -EEXIST;
	}
	if (d->nbufs > KVF_REGION_MAX_BUFS - rs->nbufs) {
		kvf_err("region", "region '%s': %" PRIu32 " buffers on top of %" PRIu32 " pass the "
			"%u over every region", d->name, d->nbufs, rs->nbufs, KVF_REGION_MAX_BUFS);
		return -ENOSPC;
	}
	for (*id = 0; *id < KVF_MAX_REGIONS && rs->r[*id].name[0]; (*id)++)
		;
	if (*id == KVF_MAX_REGIONS) {
		kvf_err("region", "region '%s': %u regions are registered (the most)", d->name,
			KVF_MAX_REGIONS);
		return -ENOSPC;
	}
	rc = check_bufs(d, d->name);
	return rc ? rc : check_geom(d);
}

void kvf_regions_add(struct kvf_regions *rs, uint32_t id, const struct kvf_region_desc *d)
{
	struct kvf_region_ent *e = &rs->r[id];

	memset(e, 0, sizeof(*e));
	memcpy(e->name, d->name, strnlen(d->name, KVF_REGION_NAME_MAX));
	e->nbufs = d->nbufs;
	e->nitems = d->nitems;
	for (uint32_t i = 0; i < d->nbufs; i++)
		e->item_bytes += d->item_size[i];
	rs->nbufs += d->nbufs;
}

int kvf_regions_remove(struct kvf_regions *rs, uint32_t id)
{
	struct kvf_region_ent *e;

	if (!kvf_regions_get(rs, id))
		return -EINVAL;
	e = &rs->r[id];
	if (e->users) {
		kvf_err("region", "region '%s' (id %" PRIu32 ") is used by %" PRIu32 " live rooms: "
			"not unregistered", e->name, id, e->users);
		return -EBUSY;
	}
	rs->nbufs -= e->nbufs;
	memset(e, 0, sizeof(*e));
	return 0;
}

uint32_t kvf_regions_find(const struct kvf_regions *rs, const char *name)
{
	for (uint32_t i = 0; i < KVF_MAX_REGIONS; i++)
		if (rs->r[i].name[0] && strncmp(rs->r[i].name, name, KVF_REGION_NAME_MAX + 1) == 0)
			return i;
	return KVF_NO_REGION;
}

/* Only the set bits: a room holds one or two regions of the sixteen, and
 * this runs twice in every room's life. */
void kvf_regions_hold(struct kvf_regions *rs, uint32_t mask)
{
	for (; mask; mask &= mask - 1)
		rs->r[__builtin_ctz(mask)].users++;
}

void kvf_regions_drop(struct kvf_regions *rs, uint32_t mask)
{
	for (; mask; mask &= mask - 1)
		rs->r[__builtin_ctz(mask)].users--;
}
