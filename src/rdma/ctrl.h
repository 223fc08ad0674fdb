/* SPDX-License-Identifier: Apache-2.0 */
/* A connection's control frames (ctrl.c), on the scheduler thread. */
#ifndef KVF_RDMA_CTRL_H
#define KVF_RDMA_CTRL_H

#include <stddef.h>
#include <stdint.h>

struct kvf_conn;
struct kvf_pframe;

/* Ask the poller to tear c down; the first request stands. */
void kvf_ctrl_teardown(struct kvf_conn *c, uint16_t reason, const char *why);
/* Once the peer's HELLO is in: regions of one name must have one shape or
 * pair by geometry, or the connection goes after our HELLO has gone. */
void kvf_ctrl_check_shapes(struct kvf_conn *c);
/* Post what can go; c goes on (or leaves) the pending list op_progress walks. */
void kvf_ctrl_kick(struct kvf_conn *c);
/* Queue f (taken: freed when refused) and post what can go. */
int kvf_ctrl_enqueue(struct kvf_conn *c, struct kvf_pframe *f);
/* A frame of len payload bytes, zeroed; NULL when out of memory. */
struct kvf_pframe *kvf_ctrl_frame_alloc(size_t len);

#endif
