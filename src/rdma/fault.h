/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection for the chaos matrix (scripts/chaos.sh, docs/chaos.md).
 *
 * Compiled only into test builds (meson -Dfault_inject=true defines
 * KVF_FAULT_INJECT); otherwise every hook below is a constant and no
 * kvf_fault_ symbol exists (.ci/run checks that with nm). The faults are
 * chosen at run time by the environment of the process:
 *   KVF_FAULT       rules, comma-separated (grammar in docs/chaos.md)
 *   KVF_FAULT_SEED  the random seed (default 1)
 * A spec that does not parse makes the engine refuse to open, with the rule
 * and what was wrong in the log.
 *
 * Where the hooks are, and why there:
 *  - control frames: where the poller takes a received frame (poller.c).
 *    Dropping or holding a frame there is what a lost or late SEND looks
 *    like to the engine, with no change to the sender's credits or buffers;
 *  - send completions (poller.c): move the QP to error after N;
 *  - CQ polling (poller.c): stop polling for a while;
 *  - the engine's ring drain (engine.c): stop draining, so the ring fills;
 *  - posting (conn.c): an RDMA WRITE with a wrong rkey.
 * The poller thread runs the first three, the scheduler thread the last
 * two; each thread draws from a random stream of its own. */
#ifndef KVF_RDMA_FAULT_H
#define KVF_RDMA_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/fault_ring.h" /* the engine's ring hook, implemented in fault.c */

struct ibv_send_wr;
struct kvf_conn;

#ifdef KVF_FAULT_INJECT

/* Parse KVF_FAULT (again: counts reset). 0, or -EINVAL logged. */
int kvf_fault_setup(void);
/* One log line with how many of each fault were injected. */
void kvf_fault_report(void);
/* A received control frame of len bytes at buf (in place: may be
 * corrupted). Returns how many times to deliver it now: 0 (dropped or
 * held), 1, or 2 (duplicated). tag is the transport the connection
 * belongs to (frames held for one are released to it only). */
int kvf_fault_rx(const void *tag, uint32_t conn, uint8_t *buf, uint32_t len);
/* A frame held for tag whose time came (or that another frame on its
 * connection passed): returned (the caller frees it) with its connection
 * and length; NULL when none is due. *held: how many are still held. */
uint8_t *kvf_fault_next_held(const void *tag, uint64_t now, uint32_t *conn, uint32_t *len,
			     uint32_t *held);
/* A frame on conn was delivered: frames held to be reordered behind it are
 * due. */
void kvf_fault_passed(const void *tag, uint32_t conn);
/* A send completion on c: true when c's QP was just moved to error. */
bool kvf_fault_send_wc(struct kvf_conn *c);
/* CQ polling: true while a stall is on; polled(n) may start one. */
bool kvf_fault_cq_stalled(uint64_t now);
void kvf_fault_cq_polled(int n, uint64_t now);
/* A chain about to be posted: an RDMA WRITE in it may get a wrong rkey. */
void kvf_fault_post(struct ibv_send_wr *wr);

#define KVF_FAULT_SETUP() kvf_fault_setup()
#define KVF_FAULT_REPORT() kvf_fault_report()
#define KVF_FAULT_RX(tag, conn, buf, len) kvf_fault_rx(tag, conn, buf, len)
#define KVF_FAULT_PASSED(tag, conn) kvf_fault_passed(tag, conn)
#define KVF_FAULT_SEND_WC(c) kvf_fault_send_wc(c)
#define KVF_FAULT_CQ_STALLED(now) kvf_fault_cq_stalled(now)
#define KVF_FAULT_CQ_POLLED(n, now) kvf_fault_cq_polled(n, now)
#define KVF_FAULT_POST(wr) kvf_fault_post(wr)

#else

#define KVF_FAULT_SETUP() 0
#define KVF_FAULT_REPORT() ((void)0)
#define KVF_FAULT_RX(tag, conn, buf, len) 1
#define KVF_FAULT_PASSED(tag, conn) ((void)0)
#define KVF_FAULT_SEND_WC(c) false
#define KVF_FAULT_CQ_STALLED(now) false
#define KVF_FAULT_CQ_POLLED(n, now) ((void)0)
#define KVF_FAULT_POST(wr) ((void)0)

#endif
#endif
