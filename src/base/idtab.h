/* SPDX-License-Identifier: Apache-2.0 */
/* Id -> object, intrusive and growing: a chained hash whose power-of-two
 * bucket array doubles (every node rehashed into a new array, the old one
 * freed) once it holds more nodes than buckets. The connection table of a
 * transport (src/rdma/conn.c) and the scheduler's view of it (sched.c)
 * are two of them: no fixed cap here, the caller bounds what it inserts
 * (rdma.max_conns).
 *
 * Not thread-safe, and no reader may run during an insert: a growth
 * moves every node to the new array and frees the old one. Both users
 * need no more: the transport's table is only touched under its mutex,
 * the scheduler's by the scheduler thread alone (docs/design.md,
 * "Connections: how many"). That is why a plain rehash is enough and no
 * retirement scheme (epochs, RCU) is needed.
 *
 * A zeroed struct is an empty table of one bucket (inline, nothing
 * allocated); the first growth goes to KVF_IDTAB_MIN_BUCKETS. A failed
 * growth (out of memory) is not an error: the old array stays, chains get
 * longer, every lookup is still right. So nothing here can fail. */
#ifndef KVF_IDTAB_H
#define KVF_IDTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvf_idtab_node {
	struct kvf_idtab_node *next; /* in its bucket's chain */
	uint32_t id;                 /* the key: unique among the nodes held */
};

struct kvf_idtab {
	struct kvf_idtab_node **b;   /* mask + 1 buckets; NULL: just `one` */
	struct kvf_idtab_node *one;  /* the bucket of a table never grown */
	uint32_t mask;
	uint32_t n;                  /* nodes held */
	uint32_t max_buckets;        /* growth stops here (a power of two;
	                                0: 2^31) */
	uint32_t grows;              /* times it doubled (tests, logs) */
};

#define KVF_IDTAB_MIN_BUCKETS 64u

/* Empty, growing up to the power of two at or above max_n buckets (the
 * most nodes the caller will hold; 0: 2^31). Allocates nothing. */
void kvf_idtab_init(struct kvf_idtab *h, uint32_t max_n);
/* Free the bucket array (not the nodes): empty again. */
void kvf_idtab_fini(struct kvf_idtab *h);
/* Add node (its id set, not held already). Grows first when full. */
void kvf_idtab_insert(struct kvf_idtab *h, struct kvf_idtab_node *node);
/* The node of id, or NULL. */
struct kvf_idtab_node *kvf_idtab_find(const struct kvf_idtab *h, uint32_t id);
/* Take node out; false when it was not held. */
bool kvf_idtab_remove(struct kvf_idtab *h, struct kvf_idtab_node *node);

/* The object a node is embedded in. */
#define kvf_idtab_entry(node, type, member) \
	((type *)((char *)(node) - offsetof(type, member)))

#endif
