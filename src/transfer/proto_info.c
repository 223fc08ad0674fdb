/* SPDX-License-Identifier: Apache-2.0 */
/* The ROOM_INFO body (docs/wire.md 5.2): its item lists checked against
 * the receiver's HELLO. */
#include "transfer/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/event.h"

#include "transfer/proto_bytes.h"

/* ------------------------------------------------------- the info */

static const struct kvf_hello_region *lim_region(const struct kvf_proto_limits *lim, uint32_t id)
{
	for (uint32_t i = 0; i < lim->nregions; i++)
		if (lim->regions[i].id == id)
			return &lim->regions[i];
	return NULL;
}

/* A list's items, as items: each below the region's nitems. Into ids
 * (room for them) unless NULL. Returns the bytes it took, or -EBADMSG. */
static int list_items(const uint8_t *p, size_t len, uint32_t n,
		      const struct kvf_hello_region *r, uint32_t room, uint32_t *ids,
		      char *detail, size_t dlen)
{
	if (n > room || len / 4u < n)
		BAD(-EBADMSG, "ROOM_INFO list for region '%s' of %" PRIu32 " items: %s", r->name,
		    n, len / 4u < n ? "runs past the info" :
		    "more items than engine.max_blocks_per_room over the lists");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t item = get32(p + 4u * i);

		if (item >= r->nitems)
			BAD(-EBADMSG, "ROOM_INFO list for region '%s': item %" PRIu32 " is %" PRIu32
			    ", outside its %" PRIu32, r->name, i, item, r->nitems);
		if (ids)
			ids[i] = item;
	}
	return (int)(n * 4u);
}

/* A list's items, as nruns runs (start, count): each run inside the
 * region, not empty; *nitems gets the items they make. Returns the bytes
 * it took, or -EBADMSG. */
static int list_runs(const uint8_t *p, size_t len, uint32_t nruns,
		     const struct kvf_hello_region *r, uint32_t room, uint32_t *ids,
		     uint32_t *nitems, char *detail, size_t dlen)
{
	uint32_t at = 0;

	if (len / KVF_PROTO_RUN_LEN < nruns)
		BAD(-EBADMSG, "ROOM_INFO list for region '%s' of %" PRIu32 " runs: runs past the "
		    "info", r->name, nruns);
	for (uint32_t k = 0; k < nruns; k++, p += KVF_PROTO_RUN_LEN) {
		uint32_t start = get32(p), count = get32(p + 4);

		if (!count || start >= r->nitems || count > r->nitems - start)
			BAD(-EBADMSG, "ROOM_INFO list for region '%s': run %" PRIu32 " (items %"
			    PRIu32 "+%" PRIu32 ") is %s its %" PRIu32, r->name, k, start, count,
			    count ? "outside" : "empty in", r->nitems);
		if (count > room - at)
			BAD(-EBADMSG, "ROOM_INFO list for region '%s': more items than "
			    "engine.max_blocks_per_room over the lists", r->name);
		for (uint32_t i = 0; ids && i < count; i++)
			ids[at + i] = start + i;
		at += count;
	}
	*nitems = at;
	return (int)(nruns * KVF_PROTO_RUN_LEN);
}

/* The lists of an info, from p (len bytes left), into pi (room for nids
 * items, counted by the caller's first pass: pass pi NULL to count). A
 * list is items or runs (docs/wire.md 5.4); pi holds items either way. */
static int info_lists(const uint8_t *p, size_t len, uint32_t nlists,
		      const struct kvf_proto_limits *lim, struct kvf_peer_info *pi,
		      uint32_t *nids, char *detail, size_t dlen)
{
	uint32_t seen = 0, at = 0;

	for (uint32_t k = 0; k < nlists; k++) {
		const struct kvf_hello_region *r;
		uint32_t word, id, n, items;
		bool runs;
		int used;

		if (len < KVF_PROTO_INFO_LIST_FIXED)
			BAD(-EBADMSG, "ROOM_INFO info ends inside list %" PRIu32 "'s header", k);
		word = get32(p);
		runs = word & KVF_PROTO_INFO_RUNS;
		id = word & ~KVF_PROTO_INFO_RUNS;
		n = get32(p + 4);
		p += KVF_PROTO_INFO_LIST_FIXED;
		len -= KVF_PROTO_INFO_LIST_FIXED;
		r = lim_region(lim, id);
		if (!r || (seen >> id & 1u))
			BAD(-EBADMSG, "ROOM_INFO list %" PRIu32 " names region id %" PRIu32 ", %s", k,
			    id, r ? "named by an earlier list" : "not in the peer's HELLO");
		seen |= 1u << id;
		if (n == 0)
			BAD(-EBADMSG, "ROOM_INFO list for region '%s' is empty", r->name);
		items = n;
		used = runs ? list_runs(p, len, n, r, lim->max_blocks - at, pi ? pi->ids + at : NULL,
					&items, detail, dlen) :
			      list_items(p, len, n, r, lim->max_blocks - at, pi ? pi->ids + at : NULL,
					 detail, dlen);
		if (used < 0)
			return used;
		if (pi) {
			memcpy(pi->lists[k].name, r->name, sizeof(pi->lists[k].name));
			pi->lists[k].peer_region = id;
			pi->lists[k].n = items;
			pi->lists[k].first = at;
		}
		at += items;
		p += used;
		len -= (size_t)used;
	}
	if (len)
		BAD(-EBADMSG, "ROOM_INFO info has %zu bytes after its last list", len);
	*nids = at;
	return 0;
}

int kvf_proto_decode_info(const void *buf, size_t len, const struct kvf_proto_limits *lim,
			  uint64_t room_id, uint64_t recv_handle, struct kvf_peer_info **out,
			  char *detail, size_t dlen)
{
	const uint8_t *p = buf;
	uint32_t nlists, ulen, nids;
	struct kvf_peer_info *pi;
	int rc;

	if (len < KVF_PROTO_INFO_FIXED)
		BAD(-EBADMSG, "ROOM_INFO info of %zu bytes, shorter than its fixed part (%u)", len,
		    KVF_PROTO_INFO_FIXED);
	nlists = get32(p);
	ulen = get32(p + 4);
	/* No lists: a receiver that needs no data (a dummy rank of a fan-out). */
	if (nlists > KVF_PROTO_MAX_REGIONS || ulen > KVF_PROTO_USER_MAX ||
	    pad4(ulen) > len - KVF_PROTO_INFO_FIXED)
		BAD(-EBADMSG, "ROOM_INFO info with %" PRIu32 " lists (0..%u) and %" PRIu32
		    " bytes of user data (0..%u) in %zu bytes", nlists, KVF_PROTO_MAX_REGIONS, ulen,
		    KVF_PROTO_USER_MAX, len);
	for (uint32_t i = ulen; i < pad4(ulen); i++)
		if (p[KVF_PROTO_INFO_FIXED + i])
			BAD(-EBADMSG, "ROOM_INFO user data padding byte %" PRIu32 " is not 0", i);
	p += KVF_PROTO_INFO_FIXED + pad4(ulen);
	len -= KVF_PROTO_INFO_FIXED + pad4(ulen);
	rc = info_lists(p, len, nlists, lim, NULL, &nids, detail, dlen);
	if (rc)
		return rc;
	pi = kvf_peer_info_alloc(nids);
	if (!pi)
		BAD(-ENOMEM, "no memory for a ROOM_INFO of %" PRIu32 " items", nids);
	pi->room_id = room_id;
	pi->recv_handle = recv_handle;
	pi->nlists = nlists;
	pi->nids = nids;
	pi->user_len = ulen;
	memcpy(pi->user, (const uint8_t *)buf + KVF_PROTO_INFO_FIXED, ulen);
	info_lists(p, len, nlists, lim, pi, &nids, detail, dlen);
	*out = pi;
	return 0;
}
