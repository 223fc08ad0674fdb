/* SPDX-License-Identifier: Apache-2.0 */
/* The room API of kvferry.h: sender/receiver calls of the scheduler thread. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chunk.h"
#include "engine/api.h"
#include "engine/engine.h"
#include "base/log.h"
#include "engine/engine_impl.h"
#include "base/sized.h"

/* ----------------------------------------------------------------- regions */

int kvf_region_register(kvf_engine *eng, const struct kvf_region_desc *desc, uint32_t *region)
{
	uint32_t id;
	int rc;

	if (!eng || !region)
		return -EINVAL;
	rc = kvf_regions_check(&eng->regions, desc, &id);
	if (rc)
		return rc;
	if (eng->ops && eng->ops->region_register) {
		struct kvf_region_layout l = { id, desc->name, desc->nbufs, desc->nitems, desc->bufs,
					       desc->item_size, kvf_region_desc_geom(desc) };

		rc = eng->ops->region_register(eng->t, &l);
		if (rc)
			return rc;
	}
	kvf_regions_add(&eng->regions, id, desc);
	kvf_info("region", "region '%s' registered: id %u, %u buffers x %u items", desc->name, id,
		 desc->nbufs, desc->nitems);
	*region = id;
	return 0;
}

int kvf_region_unregister(kvf_engine *eng, uint32_t region)
{
	int rc;

	if (!eng)
		return -EINVAL;
	rc = kvf_regions_remove(&eng->regions, region);
	if (rc)
		return rc;
	if (eng->ops && eng->ops->region_unregister)
		eng->ops->region_unregister(eng->t, region);
	return 0;
}

int kvf_pool_register(kvf_engine *eng, uint32_t nbufs, void *const *bufs,
		      const uint64_t *block_size, uint32_t nblocks)
{
	struct kvf_region_desc d = { .size = sizeof(d), .nbufs = nbufs, .name = KVF_API_KV_REGION,
				     .nitems = nblocks, .bufs = bufs, .item_size = block_size };
	uint32_t id;

	if (!eng)
		return -EINVAL;
	if (eng->st.created) {
		/* Its contract since the first version: the pool before any room. */
		kvf_err("pool", "kvf_pool_register after %" PRIu64 " rooms were created: it must "
			"come before the first room", eng->st.created);
		return -EBUSY;
	}
	return kvf_region_register(eng, &d, &id);
}

/* ------------------------------------------------------------------ create */

/* What arrived before the room: a tombstone fails it now, a parked
 * ROOM_INFO moves it on. An entry applies only to a room of the connection
 * that left it: a new sender room is bound to none yet (conn 0: the entry
 * binds it); a receiver room is the connection's to its peer (conn), from
 * creation if that connection exists, else from kvf_receiver_init. */
void kvf_api_apply_early(kvf_engine *eng, struct kvf_slot *r, uint32_t conn)
{
	struct kvf_early_ent e;

	if (kvf_early_empty(&eng->early) || !kvf_early_take(&eng->early, r->id, r->role, conn, &e))
		return;
	if (e.kind == KVF_EARLY_TOMBSTONE) {
		eng->st.tombstones_applied++;
		kvf_room_peer_abort(eng, r, e.conn, e.reason, true);
		return;
	}
	/* Parked ROOM_INFOs, one per receiver (a fan-out's chained): each
	 * joins a slot of its own; one more than the room has receivers
	 * hears ABORT, as if it had expired. */
	for (struct kvf_peer_info *pi = e.info, *next; pi; pi = next) {
		struct kvf_slot *m = r->fan ? kvf_fan_pick(eng, r, pi->peer) : r;

		next = pi->next;
		pi->next = NULL;
		if (m->state == KVF_BOOTSTRAPPING && !m->conn) {
			eng->st.early_infos_applied++;
			kvf_room_peer_info(eng, m, pi);
			continue;
		}
		eng->st.early_infos_expired++;
		eng->st.room_infos_refused++;
		kvf_warn("room", "room %#" PRIx64 ": ROOM_INFO parked from conn %u, but the room "
			 "has no receiver left for it; aborting it (room refused)", r->id, pi->peer);
		if (eng->ops && pi->peer)
			eng->ops->send_abort(eng->t, pi->peer, r->id, KVF_RECEIVER, KVF_FAIL_REFUSED);
		free(pi);
	}
}

void kvf_api_apply_early_peer(kvf_engine *eng, struct kvf_slot *r, uint16_t idx)
{
	for (uint32_t k = 0; k < KVF_MAX_RAILS; k++)
		if (eng->peer_conns[idx * KVF_MAX_RAILS + k])
			kvf_api_apply_early(eng, r, eng->peer_conns[idx * KVF_MAX_RAILS + k]);
}

int kvf_api_sender_new(kvf_engine *eng, uint64_t room_id, uint8_t flags, kvf_room *out)
{
	struct kvf_slot *r;
	int rc;

	if (!eng || !out)
		return -EINVAL;
	rc = kvf_room_new(eng, room_id, KVF_SENDER, true, &r);
	if (rc)
		return rc;
	r->flags |= flags;
	kvf_api_apply_early(eng, r, 0);
	*out = kvf_room_handle(eng, r);
	return 0;
}

int kvf_sender_create(kvf_engine *eng, uint64_t room_id, kvf_room *out)
{
	return kvf_api_sender_new(eng, room_id, 0, out);
}

/* One "host:port" of len bytes, the port numeric in [1, 65535]. */
static bool hostport_valid(const char *p, size_t len)
{
	const char *colon = memrchr(p, ':', len);
	char *end;
	long port;

	if (!colon || colon == p)
		return false;
	port = strtol(colon + 1, &end, 10);
	return end == p + len && end != colon + 1 && port > 0 && port <= 65535;
}

/* "host:port", or a rail list of them "host:port,host:port". */
bool kvf_api_peer_valid(const char *peer)
{
	for (const char *p = peer; p; ) {
		const char *comma = strchr(p, ',');

		if (!hostport_valid(p, comma ? (size_t)(comma - p) : strlen(p)))
			return false;
		p = comma ? comma + 1 : NULL;
	}
	return peer != NULL;
}

/* Peers are few; a linear search keeps one copy of each address. */
int kvf_api_peer_intern(kvf_engine *eng, const char *peer, uint16_t *idx)
{
	char **grown;
	uint32_t *conns;

	for (uint32_t i = 0; i < eng->npeers; i++) {
		if (strcmp(eng->peers[i], peer) == 0) {
			*idx = (uint16_t)i;
			return 0;
		}
	}
	if (eng->npeers >= UINT16_MAX)
		return -ENOSPC;
	grown = realloc(eng->peers, (eng->npeers + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	eng->peers = grown;
	conns = realloc(eng->peer_conns, (eng->npeers + 1) * KVF_MAX_RAILS * sizeof(*conns));
	if (!conns)
		return -ENOMEM;
	eng->peer_conns = conns;
	memset(&conns[eng->npeers * KVF_MAX_RAILS], 0, KVF_MAX_RAILS * sizeof(*conns));
	eng->peers[eng->npeers] = strdup(peer);
	if (!eng->peers[eng->npeers])
		return -ENOMEM;
	*idx = (uint16_t)eng->npeers++;
	return 0;
}

int kvf_receiver_create(kvf_engine *eng, uint64_t room_id, const char *peer, kvf_room *out)
{
	struct kvf_slot *r;
	uint16_t idx;
	int rc;

	if (!eng || !out)
		return -EINVAL;
	if (!peer)
		peer = eng->cfg.peer;
	if (!kvf_api_peer_valid(peer)) {
		kvf_err("api", "room %#" PRIx64 ": peer '%s' is not host:port", room_id,
			peer ? peer : "");
		return -EINVAL;
	}
	rc = kvf_api_peer_intern(eng, peer, &idx);
	if (rc)
		return rc;
	rc = kvf_room_new(eng, room_id, KVF_RECEIVER, true, &r);
	if (rc)
		return rc;
	r->peer = idx;
	kvf_api_apply_early_peer(eng, r, idx);
	*out = kvf_room_handle(eng, r);
	return 0;
}

/* ------------------------------------------------------------- init / send */

/* The refusals of every room call that takes lists: -EINVAL for a handle
 * that is not a room of role, -ECANCELED for a failed one. */
static int check_room(struct kvf_slot *r, enum kvf_role role)
{
	if (!r || r->role != role)
		return -EINVAL;
	return r->state == KVF_FAILED ? -ECANCELED : 0;
}

/* A caller's lists: known regions, each once, non-empty, within the room's
 * item budget. *mask gets their regions, *nitems their items. */
static int check_lists(kvf_engine *eng, uint64_t id, const struct kvf_index_list *lists,
		       uint32_t nlists, uint32_t *mask, uint64_t *nitems)
{
	*mask = 0;
	*nitems = 0;
	if (!lists || !nlists || nlists > KVF_MAX_REGIONS)
		return -EINVAL;
	for (uint32_t k = 0; k < nlists; k++) {
		const struct kvf_index_list *l = &lists[k];

		if (!kvf_regions_get(&eng->regions, l->region) || !l->n || !l->items ||
		    (*mask >> l->region & 1u)) {
			kvf_err("api", "room %#" PRIx64 ": list %u: %s", id, k,
				!kvf_regions_get(&eng->regions, l->region) ? "unknown region id" :
				!l->n || !l->items ? "no items" : "its region has a list already");
			return -EINVAL;
		}
		*mask |= 1u << l->region;
		*nitems += l->n;
	}
	if (*nitems > eng->cfg.max_blocks_per_room) {
		kvf_err("api", "room %#" PRIx64 ": %" PRIu64 " items, engine.max_blocks_per_room is %u",
			id, *nitems, eng->cfg.max_blocks_per_room);
		return -EINVAL;
	}
	return 0;
}

/* -ERANGE and the room FAILED (BAD_REQUEST) when an item is outside its
 * region. what: "list" (receiver) or "chunk part" (sender). */
int kvf_api_check_items(kvf_engine *eng, struct kvf_slot *r, const char *what, uint32_t k,
			uint32_t region, const uint32_t *items, uint32_t n)
{
	const struct kvf_region_ent *e = kvf_regions_get(&eng->regions, region);

	for (uint32_t i = 0; i < n; i++) {
		if (items[i] >= e->nitems) {
			kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, ERANGE,
				      "%s %u, region '%s': item[%u] = %u is outside the region "
				      "(%u items)", what, k, e->name, i, items[i], e->nitems);
			return -ERANGE;
		}
	}
	return 0;
}

/* The room holds its regions from now until it is released. */
static void hold_regions(kvf_engine *eng, struct kvf_slot *r, uint32_t mask)
{
	kvf_regions_hold(&eng->regions, mask & ~(uint32_t)r->regions);
	r->regions |= (uint16_t)mask;
}

/* Send slot r its ROOM_INFO (the room's lists, checked: mask their
 * regions, nitems and bytes theirs) and move it on. */
static int info_to(kvf_engine *eng, struct kvf_slot *r, const struct kvf_index_list *lists,
		   uint32_t nlists, const void *user, uint32_t user_len, uint32_t mask,
		   uint64_t nitems, uint64_t bytes)
{
	char why[160] = "";
	struct kvf_info_out out = { .room_id = r->id, .recv_handle = kvf_room_handle(eng, r).v,
				    .lists = lists, .nlists = nlists, .user = user,
				    .user_len = user_len, .why = why, .whylen = sizeof(why) };
	uint32_t conn = 0, *last;
	int rc;

	hold_regions(eng, r, mask);
	kvf_room_last(eng, r, KVF_LAST_INIT);
	rc = eng->ops ? eng->ops->send_room_info(eng->t, eng->peers[r->peer], &out, &conn)
		      : -ENOTCONN;
	if (rc == -ESTALE) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, ESTALE, "a region of the room was "
			      "registered after the HELLO of the connection to %s: that peer does "
			      "not know it (regions reach a peer in HELLO)", eng->peers[r->peer]);
		return rc;
	}
	if (rc == -ENOTSUP) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, ENOTSUP, "a region of the room is staged "
			      "through host memory (CUDA memory the NIC cannot register): a receiver "
			      "needs GPUDirect (dmabuf or peer memory) or host memory");
		return rc;
	}
	if (rc) {
		if (why[0])
			kvf_room_fail(eng, r, KVF_FAIL_CONNECT, -rc, "%s", why);
		else
			kvf_room_fail(eng, r, KVF_FAIL_CONNECT, -rc, "sending ROOM_INFO to %s "
				      "failed: %s", eng->peers[r->peer], strerror(-rc));
		return rc;
	}
	/* Connection ids are never reused: another id for the same peer is
	 * a new connection after the last one was lost. */
	last = &eng->peer_conns[r->peer * KVF_MAX_RAILS + kvf_conn_rail(conn) % KVF_MAX_RAILS];
	if (*last && *last != conn)
		eng->oc.reconnects++;
	*last = conn;
	kvf_room_info_sent(eng, r, conn, (uint32_t)nitems, bytes);
	kvf_api_apply_early(eng, r, conn); /* a tombstone its connection left before it was bound */
	return 0;
}

#define ALL_SLOTS UINT32_MAX

/* Init slot k of the receiver room (ALL_SLOTS: every one) with the lists
 * (none: a dummy, which needs no data). */
static int receiver_init(kvf_engine *eng, kvf_room room, uint32_t k,
			 const struct kvf_index_list *lists, uint32_t nlists, const void *user,
			 uint32_t user_len)
{
	struct kvf_slot *r = kvf_api_room(eng, room);
	uint32_t mask = 0, from, to;
	uint64_t nitems = 0, bytes = 0;
	int rc = check_room(r, KVF_RECEIVER);

	if (rc)
		return rc;
	if (user_len > KVF_USER_DATA_MAX || (user_len && !user) ||
	    (k != ALL_SLOTS && k >= kvf_api_nslots(r)))
		return -EINVAL;
	if (lists || nlists) {
		rc = check_lists(eng, r->id, lists, nlists, &mask, &nitems);
		if (rc)
			return rc;
	}
	from = k == ALL_SLOTS ? 0 : k;
	to = k == ALL_SLOTS ? kvf_api_nslots(r) : k + 1;
	for (uint32_t j = from; j < to; j++)
		if (kvf_api_slot(eng, r, j)->state != KVF_BOOTSTRAPPING)
			return -EALREADY;
	for (uint32_t j = 0; j < nlists; j++) {
		rc = kvf_api_check_items(eng, r, "list", j, lists[j].region, lists[j].items, lists[j].n);
		if (rc)
			return rc;
		bytes += (uint64_t)lists[j].n * eng->regions.r[lists[j].region].item_bytes;
	}
	for (uint32_t j = from; j < to; j++) {
		rc = info_to(eng, kvf_api_slot(eng, r, j), lists, nlists, user, user_len, mask, nitems,
			     bytes);
		if (rc)
			return rc; /* that slot failed, and the room with it */
	}
	return 0;
}

int kvf_receiver_init_regions(kvf_engine *eng, kvf_room room, const struct kvf_index_list *lists,
			      uint32_t nlists, const void *user, uint32_t user_len)
{
	if (!lists && !nlists)
		return -EINVAL; /* no lists is kvf_receiver_init_dummy's */
	return receiver_init(eng, room, ALL_SLOTS, lists, nlists, user, user_len);
}

int kvf_receiver_init_part(kvf_engine *eng, kvf_room room, uint32_t k,
			   const struct kvf_index_list *lists, uint32_t nlists, const void *user,
			   uint32_t user_len)
{
	if (!lists != !nlists)
		return -EINVAL; /* both absent: sender k is a dummy */
	return receiver_init(eng, room, k, lists, nlists, user, user_len);
}

int kvf_receiver_init_dummy(kvf_engine *eng, kvf_room room)
{
	return receiver_init(eng, room, ALL_SLOTS, NULL, 0, NULL, 0);
}

int kvf_receiver_init(kvf_engine *eng, kvf_room room, const uint32_t *blocks, uint32_t nblocks)
{
	struct kvf_index_list l = { .n = nblocks, .items = blocks };

	if (!eng)
		return -EINVAL;
	l.region = kvf_regions_find(&eng->regions, KVF_API_KV_REGION);
	if (l.region == KVF_NO_REGION) {
		if (check_room(kvf_api_room(eng, room), KVF_RECEIVER) == -EINVAL)
			return -EINVAL;
		kvf_err("api", "kvf_receiver_init: no pool registered (kvf_pool_register)");
		return -ENOBUFS;
	}
	return kvf_receiver_init_regions(eng, room, &l, 1, NULL, 0);
}

/* A sender room whose receivers' ROOM_INFOs all arrived, or the error
 * saying why not. */
int kvf_api_sender_info(kvf_engine *eng, kvf_room room, struct kvf_slot **out)
{
	struct kvf_slot *r = kvf_api_room(eng, room);

	if (!r || r->role != KVF_SENDER)
		return -EINVAL;
	for (uint32_t k = 0; k < kvf_api_nslots(r); k++)
		if (!kvf_api_slot(eng, r, k)->info)
			return kvf_api_state(eng, r) == KVF_FAILED ? -ECANCELED : -EAGAIN;
	*out = r;
	return 0;
}

/* Receiver k of a sender room that has them all. */
static int sender_peer(kvf_engine *eng, kvf_room room, uint32_t k, struct kvf_slot **out)
{
	struct kvf_slot *r;
	int rc = kvf_api_sender_info(eng, room, &r);

	if (rc == -ECANCELED)
		rc = -EAGAIN; /* failed before every ROOM_INFO: there is nothing to give */
	if (rc)
		return rc;
	if (k >= kvf_api_nslots(r))
		return -EINVAL;
	*out = kvf_api_slot(eng, r, k);
	return 0;
}

int kvf_sender_peer_count_k(kvf_engine *eng, kvf_room room, uint32_t k, uint32_t region,
			    uint32_t *count)
{
	struct kvf_slot *r;
	int rc = sender_peer(eng, room, k, &r), i;

	if (rc)
		return rc;
	if (!count || !kvf_regions_get(&eng->regions, region))
		return -EINVAL;
	i = r->chunks ? kvf_chunks_list(r->chunks, region) : -1;
	*count = i < 0 ? 0 : r->info->lists[i].n;
	return 0;
}

int kvf_sender_peer_count(kvf_engine *eng, kvf_room room, uint32_t region, uint32_t *count)
{
	return kvf_sender_peer_count_k(eng, room, 0, region, count);
}

int kvf_sender_user_data_k(kvf_engine *eng, kvf_room room, uint32_t k, void *buf,
			   uint32_t buflen, uint32_t *len)
{
	struct kvf_slot *r;
	int rc = sender_peer(eng, room, k, &r);

	if (rc)
		return rc;
	if (!len || (buflen && !buf))
		return -EINVAL;
	*len = r->info->user_len;
	if (buflen)
		memcpy(buf, r->info->user, buflen < *len ? buflen : *len);
	return 0;
}

int kvf_sender_user_data(kvf_engine *eng, kvf_room room, void *buf, uint32_t buflen,
			 uint32_t *len)
{
	return kvf_sender_user_data_k(eng, room, 0, buf, buflen, len);
}

int kvf_sender_pending(kvf_engine *eng, uint64_t room_id, void *buf, uint32_t buflen,
		       uint32_t *len)
{
	const struct kvf_early_ent *e;
	int n = 0;

	if (!eng || !len || (buflen && !buf))
		return -EINVAL;
	*len = 0;
	e = kvf_early_peek(&eng->early, room_id, KVF_SENDER);
	if (!e)
		return 0;
	if (e->kind == KVF_EARLY_TOMBSTONE)
		return -ECANCELED;
	*len = e->info->user_len;
	if (buflen)
		memcpy(buf, e->info->user, buflen < *len ? buflen : *len);
	for (const struct kvf_peer_info *pi = e->info; pi; pi = pi->next)
		n++;
	return n;
}

int kvf_sender_receivers(kvf_engine *eng, kvf_room room, uint32_t *n, uint32_t *dummies)
{
	struct kvf_slot *r = kvf_api_room(eng, room);

	if (!r || r->role != KVF_SENDER || !n)
		return -EINVAL;
	*n = kvf_api_nslots(r);
	if (dummies) {
		*dummies = 0;
		for (uint32_t k = 0; k < *n; k++) {
			const struct kvf_peer_info *pi = kvf_api_slot(eng, r, k)->info;

			*dummies += pi && pi->nlists == 0;
		}
	}
	return 0;
}
