/* SPDX-License-Identifier: Apache-2.0 */
/* The rooms bound to each connection: an intrusive doubly linked list per
 * connection through the slots (conn_prev/conn_next, like the inflight
 * list), and a small map from connection id to its list's head. PEER_LOST
 * walks the lost connection's list instead of the whole room table.
 *
 * The map: open addressing, linear probing, backward-shift deletion; an
 * entry per connection that has rooms now (removed with its last room), so
 * its size follows the live connections, not their history. It grows by
 * doubling at half full (rare: a connection's first room). Should that
 * fail, the room stays bound but unlisted and `unlisted` says so: PEER_LOST
 * then also scans the table (logged), so no room is ever missed.
 *
 * Scheduler thread only, like the slots. */
#ifndef KVF_CONN_ROOMS_H
#define KVF_CONN_ROOMS_H

#include <stdint.h>

struct kvf_slot;

struct kvf_conn_rooms {
	struct kvf_cr_ent {
		uint32_t conn;   /* 0 = empty */
		uint32_t head;   /* first room of its list, slot + 1 */
	} *tab;
	uint32_t cap;            /* a power of two, 0 before the first room */
	uint32_t n;
	uint32_t last_conn;      /* the entry found last (0 none): a connection's */
	uint32_t last_at;        /* rooms come and go in runs; moved entries clear it */
	uint64_t unlisted;       /* rooms bound while the map could not grow */
};

void kvf_conn_rooms_fini(struct kvf_conn_rooms *m);

/* Put slot (in slots[]) at the head of conn's list and record conn in its
 * list_conn. Returns 0, or -ENOMEM (counted in unlisted; the slot stays
 * out of every list). conn must be non-zero, the slot in no list. */
int kvf_conn_rooms_add(struct kvf_conn_rooms *m, struct kvf_slot *slots, uint32_t slot,
		       uint32_t conn);

/* Take slot out of the list it is in (list_conn), if any. */
void kvf_conn_rooms_del(struct kvf_conn_rooms *m, struct kvf_slot *slots, uint32_t slot);

/* The first room of conn's list, slot + 1, or 0 when it has none. */
uint32_t kvf_conn_rooms_first(const struct kvf_conn_rooms *m, uint32_t conn);

#endif
