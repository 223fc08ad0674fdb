/* SPDX-License-Identifier: Apache-2.0 */
/* What the frame suites share: the peer regions a decoder checks ROOM_INFO
 * against (a HELLO's "kv" of 100 items and "aux" of 4) and an encoder of a
 * room's info as its frames. Included by one test file each. */
#ifndef KVF_INFO_FIXTURE_H
#define KVF_INFO_FIXTURE_H

#include "transfer/proto.h"

static const struct kvf_hello_region peer_regions[2] = {
	{ .name = "kv", .id = 0, .nitems = 100, .nbufs = 2 },
	{ .name = "aux", .id = 3, .nitems = 4, .nbufs = 3 },
};

/* The info of one "kv" list of n ids (id 0 of peer_regions). */
static inline uint32_t kv_info(uint8_t *info, size_t cap, const uint32_t *ids, uint32_t n)
{
	struct kvf_proto_list l = { 0, n, ids };
	int len = kvf_proto_encode_info(info, cap, &l, 1, NULL, 0);

	return len < 0 ? 0 : (uint32_t)len;
}

/* The frame of an info of total bytes starting at offset: ROOM_INFO or
 * ROOM_INFO_CONT, as many bytes as cap holds. */
static inline int info_frame(uint8_t *buf, size_t cap, uint64_t room, uint64_t handle,
			     const uint8_t *info, uint32_t total, uint32_t offset, uint32_t *n)
{
	return kvf_proto_encode_room_info_part(buf, cap, room, handle, info, total, offset, n);
}

#endif
