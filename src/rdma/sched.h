/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler thread's own view of the connections: how the ops reach a
 * connection by id, find the live one to a peer, and know which have work
 * waiting, without a lock and without scanning the connection table.
 *
 * Ownership. The scheduler holds one reference on every connection from
 * its creation until it retires it, and keeps it in its own structures:
 * a table by id (idtab.h: chained, growing with the connections held;
 * being the scheduler's alone, a growth needs no care for readers), a map from peer address to the lead of the active group, a list
 * of all, and a list of those with frames or writes waiting. Only the
 * scheduler reads or writes them. Two lock-free stacks (Treiber, one
 * producer: the poller; one consumer: the scheduler, which takes a whole
 * stack with one exchange) carry what the poller learns:
 *   handoff  a connection the poller created (passive side), with the
 *            scheduler's reference: adopted at the next miss or progress
 *   dead     a connection the poller moved to DEAD: retired at the next
 *            progress (out of every structure here, its reference put)
 * Each push is a release, each take an acquire: what the poller wrote to
 * the connection before the push is seen by the scheduler after the take.
 * A connection is always pushed to handoff before it can be pushed to
 * dead, so taking dead, then handoff, adopts everything it retires.
 *
 * Retiring sets sched_done (release): from then on the scheduler never
 * touches the connection, and the poller (acquire) may post the send
 * queue's drain marker and destroy the queue pair. That is what lets the
 * scheduler post without a lock: the QP it posts to is never destroyed
 * under it. */
#ifndef KVF_RDMA_SCHED_H
#define KVF_RDMA_SCHED_H

#include <stdbool.h>
#include <stdint.h>

struct kvf_rdma;
struct kvf_conn;

/* Poller (or the scheduler creating an active connection): hand c, with a
 * reference the caller took for the scheduler, to the scheduler. */
void kvf_sched_handoff(struct kvf_rdma *t, struct kvf_conn *c);
/* Poller: c went DEAD; the scheduler retires it. Once per connection. */
void kvf_sched_dead(struct kvf_rdma *t, struct kvf_conn *c);

/* Scheduler: connection id, or NULL (never was, or retired). No reference
 * taken: valid until the next kvf_sched_collect. */
struct kvf_conn *kvf_sched_get(struct kvf_rdma *t, uint32_t id);
/* Scheduler: the live (not DEAD, no teardown asked) active group lead to
 * peer, or NULL. */
struct kvf_conn *kvf_sched_find_peer(struct kvf_rdma *t, const char *peer);
/* Scheduler: lead is the group to its peer from now on. */
void kvf_sched_add_peer(struct kvf_rdma *t, struct kvf_conn *lead);
/* Scheduler: retire the connections gone DEAD, adopt the handed-off ones.
 * Invalidates pointers from kvf_sched_get. */
void kvf_sched_collect(struct kvf_rdma *t);
/* Scheduler: whether c has work waiting (on the pending list). */
void kvf_sched_pending(struct kvf_rdma *t, struct kvf_conn *c, bool waiting);
/* Close: put the scheduler's references (the poller has stopped). */
void kvf_sched_close(struct kvf_rdma *t);

#endif
