/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/geom_map.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/conn.h"
#include "transfer/geom.h"
#include "rdma/pool.h"
#include "transfer/proto.h"
#include "rdma/rdma_internal.h"

static bool has_geom(const struct kvf_buf_geometry *g)
{
	return g && !kvf_geom_none(&g[0]); /* all or none: registration and HELLO check */
}

/* Without geometry anywhere: one shape, pairs by position. */
static bool same_shape(const struct kvf_pool *p, const struct kvf_sq_buf *pb, uint32_t nt,
		       char *why, size_t wlen)
{
	uint64_t *ours = malloc(((size_t)p->nbufs + nt) * sizeof(*ours));
	bool ok;

	if (!ours) {
		snprintf(why, wlen, "region '%s': no memory to compare layouts", p->name);
		return false;
	}
	for (uint32_t b = 0; b < p->nbufs; b++)
		ours[b] = p->bufs[b].block_size;
	for (uint32_t b = 0; b < nt; b++)
		ours[p->nbufs + b] = pb[b].block_size;
	ok = kvf_proto_same_shape(p->name, ours, p->nbufs, ours + p->nbufs, nt, why, wlen);
	free(ours);
	return ok;
}

/* Pair the sender's buffers with the receiver's: pairs[] gets one per
 * sender buffer. Returns 0, -EPROTO (why) or -ENOMEM. */
static int pair(const struct kvf_pool *p, const struct kvf_peer_pool *pp, uint32_t idx,
		bool we_send, struct kvf_geom_pair *pairs, char *why, size_t wlen)
{
	const struct kvf_buf_geometry *pg = pp->geom + pp->first_buf[idx];
	uint32_t nt = pp->regions[idx].nbufs;
	bool ours = has_geom(p->geom), theirs = has_geom(pg);

	if (!ours && !theirs) {
		if (!same_shape(p, pp->bufs + pp->first_buf[idx], nt, why, wlen))
			return -EPROTO;
		for (uint32_t b = 0; b < p->nbufs; b++)
			pairs[b] = (struct kvf_geom_pair){.dst = b};
		return 0;
	}
	if (ours != theirs) {
		snprintf(why, wlen, "region '%s': buffer geometry at the %s, none at the %s (field "
			 "geometry)", p->name, ours == we_send ? "sender" : "receiver",
			 ours == we_send ? "receiver" : "sender");
		return -EPROTO;
	}
	if (we_send)
		return kvf_geom_pair(p->name, p->geom, p->nbufs, pg, nt, pairs, why, wlen);
	return kvf_geom_pair(p->name, pg, nt, p->geom, p->nbufs, pairs, why, wlen);
}

bool kvf_geom_map_check(const struct kvf_pool *p, const struct kvf_peer_pool *pp, uint32_t idx,
			bool we_send, char *why, size_t wlen)
{
	uint32_t ns = we_send ? p->nbufs : pp->regions[idx].nbufs;
	struct kvf_geom_pair *pairs = calloc(ns, sizeof(*pairs));
	int rc;

	if (!pairs) {
		snprintf(why, wlen, "region '%s': no memory to pair buffers", p->name);
		return false;
	}
	rc = pair(p, pp, idx, we_send, pairs, why, wlen);
	free(pairs);
	return rc == 0;
}

bool kvf_geom_map_check_conn(const struct kvf_conn *c, const struct kvf_peer_pool *pp,
			     char *why, size_t wlen)
{
	for (uint32_t i = 0; i < pp->nregions; i++) {
		for (uint32_t id = 0; id < KVF_MAX_REGIONS; id++) {
			const struct kvf_pool *p = c->t->regions[id];

			if (p && strcmp(p->name, pp->regions[i].name) == 0 &&
			    !kvf_geom_map_check(p, pp, i, !c->active, why, wlen))
				return false;
		}
	}
	return true;
}

static void map_free(struct kvf_geom_map *m)
{
	if (!m)
		return;
	free(m->remote);
	free(m->slices);
	free(m);
}

/* Make the map from the pairs: the partner of each of our buffers, the
 * slices only when some pair is sliced (else the whole-block path). */
static int map_make(const struct kvf_pool *p, const struct kvf_peer_pool *pp, uint32_t idx,
		    const struct kvf_geom_pair *pairs, struct kvf_geom_map *m)
{
	const struct kvf_sq_buf *pb = pp->bufs + pp->first_buf[idx];
	bool sliced = false;

	m->seq = p->seq;
	m->peer_idx = idx;
	m->remote = calloc(p->nbufs, sizeof(*m->remote));
	if (!m->remote)
		return -ENOMEM;
	for (uint32_t b = 0; b < p->nbufs; b++) {
		m->remote[b] = pb[pairs[b].dst];
		sliced |= pairs[b].slice.tokens != 0;
	}
	if (!sliced)
		return 0;
	m->slices = calloc(p->nbufs, sizeof(*m->slices));
	if (!m->slices)
		return -ENOMEM;
	for (uint32_t b = 0; b < p->nbufs; b++)
		m->slices[b] = pairs[b].slice;
	return 0;
}

/* The biggest room there can be must still fit the queue of waiting
 * writes alone (conn.c sets the bound for whole items): a sliced page
 * takes up to page_tokens WRs. The bound only caps growth, so raising it
 * costs nothing until a backlog is there. */
static void room_for_slices(struct kvf_conn *c, const struct kvf_geom_map *m, uint32_t nbufs)
{
	uint32_t most = 1;
	size_t need;

	for (uint32_t b = 0; b < nbufs; b++) {
		uint32_t w = kvf_slice_wrs_per_page(&m->slices[b], c->sq.max_sge);

		most = w > most ? w : most;
	}
	need = (size_t)KVF_HELLO_MAX_BUFS * c->t->cfg.max_blocks_per_room * most + 1;
	if (c->sq.pend_max < need)
		c->sq.pend_max = need;
}

int kvf_geom_map_get(struct kvf_conn *c, const struct kvf_pool *p,
		     const struct kvf_peer_pool *pp, uint32_t idx,
		     const struct kvf_geom_map **out, char *why, size_t wlen)
{
	struct kvf_geom_map *m = c->gmap[p->id];
	struct kvf_geom_pair *pairs;
	int rc;

	if (m && m->seq == p->seq && m->peer_idx == idx) {
		*out = m;
		return 0;
	}
	map_free(m);
	c->gmap[p->id] = NULL;
	pairs = calloc(p->nbufs, sizeof(*pairs));
	m = calloc(1, sizeof(*m));
	rc = !pairs || !m ? -ENOMEM : pair(p, pp, idx, true, pairs, why, wlen);
	if (!rc)
		rc = map_make(p, pp, idx, pairs, m);
	free(pairs);
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(why, wlen, "region '%s': no memory for its buffer map", p->name);
		map_free(m);
		return rc;
	}
	if (m->slices)
		room_for_slices(c, m, p->nbufs);
	c->gmap[p->id] = m;
	*out = m;
	return 0;
}

void kvf_geom_map_free_all(struct kvf_conn *c)
{
	for (uint32_t i = 0; i < KVF_MAX_REGIONS; i++) {
		map_free(c->gmap[i]);
		c->gmap[i] = NULL;
	}
}
