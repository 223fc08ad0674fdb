/* SPDX-License-Identifier: Apache-2.0 */
/* Events handed from the completion poller thread to the scheduler thread
 * through the SPSC ring (ring.h). Fixed size, no pointers owned by the ring:
 * when data is non-NULL the consumer owns it and frees it. */
#ifndef KVF_EVENT_H
#define KVF_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum kvf_event_kind {
	KVF_EV_NONE = 0,
	KVF_EV_WC,          /* work completion: key = wr_id, status = ibv_wc_status,
	                       aux = vendor_err << 32 | qp_num */
	KVF_EV_PEER_INFO,   /* receiver's ROOM_INFO for a sender room:
	                       key = room id, data = struct kvf_peer_info * */
	KVF_EV_PEER_ABORT,  /* ABORT from the peer: key = room id, role = the local
	                       role it is for, status = the peer's fail reason */
	KVF_EV_ABORT_ACK,   /* ABORT_ACK from the peer: key = room id (receiver) */
	KVF_EV_PEER_LOST,   /* peer = connection id; status = enum kvf_fail_reason
	                       (PEER_LOST, CONNECT, DEVICE) */
	KVF_EV_DATA_DONE,   /* receiver: final write-with-immediate landed;
	                       key = receiver handle value (slot | gen << 32),
	                       aux = kvf_monotonic_ns() when the poller took
	                       its completion (0 = not stamped) */
	KVF_EV_BAD_FRAME,   /* malformed frame: key = room id or 0 when it names
	                       none, role = local role, data = detail string */
	KVF_EV_NUM
};

struct kvf_event {
	uint8_t kind;    /* enum kvf_event_kind */
	uint8_t role;    /* enum kvf_role, where it matters */
	uint16_t status; /* per kind, see above */
	uint32_t peer;   /* connection id, 0 = none */
	uint64_t key;    /* per kind, see above */
	uint64_t aux;    /* per kind; the ring stress test uses it as a sequence */
	void *data;      /* consumer-owned payload, or NULL */
};

/* Payload of KVF_EV_PEER_INFO: what the receiver told us about its room
 * (docs/wire.md, the ROOM_INFO body), checked against the receiver's HELLO
 * by the decoder: every list names a region of it, once, and every item is
 * inside it. */
#define KVF_INFO_MAX_LISTS 16     /* = KVF_MAX_REGIONS */
#define KVF_INFO_NAME_LEN 31      /* = KVF_REGION_NAME_MAX */
#define KVF_INFO_USER_MAX 256     /* = KVF_USER_DATA_MAX */
struct kvf_peer_list {
	char name[KVF_INFO_NAME_LEN + 1]; /* the receiver's region, as its HELLO named it */
	uint32_t peer_region;             /* its id in the receiver's HELLO */
	uint32_t n;                       /* the receiver's items */
	uint32_t first;                   /* index of its first item in ids[] */
};
struct kvf_peer_info {
	uint64_t room_id;
	uint64_t recv_handle;  /* receiver's slot | gen << 32, echoed in the imm */
	uint32_t peer;         /* connection id it came on */
	uint32_t nlists;
	uint32_t nids;         /* items over every list */
	uint32_t user_len;
	struct kvf_peer_info *next; /* parked (early.h): the next receiver's, of a fan-out */
	uint8_t user[KVF_INFO_USER_MAX];
	struct kvf_peer_list lists[KVF_INFO_MAX_LISTS];
	uint32_t ids[];        /* the lists' items, list after list */
};

/* A ROOM_INFO with room for NIDS items, the fields before user[] zeroed;
 * user[] and lists[] are the caller's to fill and are read only up to
 * user_len and nlists. malloc, not calloc: glibc's calloc passes its
 * per-thread cache by and would clear the whole kilobyte, the largest cost
 * of a room's lifecycle in bench_engine's callgrind profile. NULL: no memory. */
static inline struct kvf_peer_info *kvf_peer_info_alloc(uint32_t nids)
{
	struct kvf_peer_info *pi = malloc(sizeof(*pi) + (size_t)nids * sizeof(pi->ids[0]));

	if (pi)
		memset(pi, 0, offsetof(struct kvf_peer_info, user));
	return pi;
}

#endif
