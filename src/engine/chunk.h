/* SPDX-License-Identifier: Apache-2.0 */
/* A sender room's chunks against the receiver's lists (kvf_sender_send_chunk):
 * which entries of each list have been sent, so that a chunk running past a
 * list, one overlapping what was sent, and a LAST chunk leaving entries
 * unsent are refused with the region and the offsets. A bit per entry: the
 * lists are at most engine.max_blocks_per_room items in all. Scheduler
 * thread only; no device (tests/unit/engine/test_chunk.c). */
#ifndef KVF_CHUNK_H
#define KVF_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "base/event.h"
#include "engine/region.h"
#include "engine/transport.h"

struct kvf_chunk_list {
	uint32_t local;  /* our region of the list's name, KVF_NO_REGION if none */
	uint32_t done;   /* entries sent */
	uint64_t *sent;  /* a bit per entry, in the same allocation, after l[] */
};

/* Sized to the ROOM_INFO (one allocation: the lists, then their bits): a
 * room's bookkeeping is a few dozen bytes, not a table of every list. */
struct kvf_chunks {
	uint32_t nlists; /* = the ROOM_INFO's */
	struct kvf_chunk_list l[];
};

/* The bookkeeping of pi's lists, each mapped by name to our region of rs.
 * *mask gets the bit of every region of ours it maps to. NULL: no memory. */
struct kvf_chunks *kvf_chunks_new(const struct kvf_peer_info *pi, const struct kvf_regions *rs,
				  uint32_t *mask);

/* The list of pi that our region maps to, or -1. */
int kvf_chunks_list(const struct kvf_chunks *cs, uint32_t region);

/*
 * Check one chunk against the lists and mark its entries sent; out[i] gets
 * part i's writes (dst points into pi->ids). Returns 0, or -EMSGSIZE with
 * why filled (the room fails): a part of a region the receiver did not ask
 * for, one that runs past its list, one overlapping entries already sent.
 * Parts must name our registered regions (the caller checked).
 */
int kvf_chunks_take(struct kvf_chunks *cs, const struct kvf_peer_info *pi,
		    const struct kvf_chunk_part *parts, uint32_t nparts,
		    struct kvf_xfer_part *out, char *why, size_t wlen);

/* After the LAST chunk: 0 when every entry of every list was sent, else
 * -EMSGSIZE with why naming the region and the first gap. */
int kvf_chunks_whole(const struct kvf_chunks *cs, const struct kvf_peer_info *pi, char *why,
		     size_t wlen);

#endif
