/* SPDX-License-Identifier: Apache-2.0 */
/* One connection's control frames waiting for a send buffer and a credit,
 * as the scheduler thread keeps them: HELLO aside (sent first, by ctrl.c),
 * ROOM_INFO sequences, ABORT, ABORT_ACK. Heartbeats never wait here: the
 * poller posts them on the QP itself (keepalive.h), so no backlog of
 * frames, and no scheduler away from kvf_progress(), can hold one back.
 *
 * A bound on what a peer can make us hold: at most `max` frames wait. Every
 * frame waiting is owed for a room or an early entry of ours, so more than
 * the caller's bound (conn.c: twice the room table plus the early table) can
 * only be a peer that stopped draining its receive queue while making us
 * reply: the push is refused and the caller tears the connection down with
 * that reason.
 *
 * Scheduler thread only; no device: tests/unit/transfer/test_frameq.c. */
#ifndef KVF_FRAMEQ_H
#define KVF_FRAMEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A control frame waiting for a send buffer (len bytes of data); or, with
 * len 0, a room's whole ROOM_INFO sequence (proto.h): encoded frame by frame
 * straight into the send buffers when posted, each to the peer's frame size,
 * and kept at the head of the queue until its last frame is posted, so
 * nothing comes between its frames on the queue pair. */
struct kvf_pframe {
	struct kvf_pframe *next;
	uint32_t len;
	uint32_t total, sent;      /* sequence: bytes of the info, bytes posted */
	uint64_t room_id, recv_handle;
	uint8_t *info;             /* sequence: the encoded info (malloc'd, proto.h) */
	uint8_t data[];
};

struct kvf_frameq {
	struct kvf_pframe *head, **tail;
	uint32_t n;                /* frames waiting */
	uint32_t max;              /* refuse a push beyond this many */
};

/* An empty queue that holds at most max frames (max >= 1). */
void kvf_frameq_init(struct kvf_frameq *q, uint32_t max);
/* Free every frame waiting. */
void kvf_frameq_fini(struct kvf_frameq *q);

/* Queue f at the tail. Returns 0, or -ENOBUFS when max frames wait
 * already (f is not queued; the caller still owns it). */
int kvf_frameq_push(struct kvf_frameq *q, struct kvf_pframe *f);

/* The next frame to post, NULL when none waits. */
static inline struct kvf_pframe *kvf_frameq_head(const struct kvf_frameq *q) { return q->head; }
/* The head frame was posted whole (or dropped): unlink and free it. */
void kvf_frameq_pop(struct kvf_frameq *q);

#endif
