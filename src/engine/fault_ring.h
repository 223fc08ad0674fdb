/* SPDX-License-Identifier: Apache-2.0 */
/* The chaos matrix's hook in the engine's ring drain (engine.c): stop
 * draining a while, so that the ring fills (a ring_full rule, docs/chaos.md).
 * The rest of fault injection is the transport's (src/rdma/fault.h, which
 * implements these); test builds only (-Dfault_inject=true), else constants. */
#ifndef KVF_FAULT_RING_H
#define KVF_FAULT_RING_H

#include <stdbool.h>
#include <stdint.h>

#ifdef KVF_FAULT_INJECT
/* true while the ring must not be drained; drained(n) may start a hold. */
bool kvf_fault_ring_held(uint64_t now);
void kvf_fault_ring_drained(int n, uint64_t now);
#define KVF_FAULT_RING_HELD(now) kvf_fault_ring_held(now)
#define KVF_FAULT_RING_DRAINED(n, now) kvf_fault_ring_drained(n, now)
#else
#define KVF_FAULT_RING_HELD(now) false
#define KVF_FAULT_RING_DRAINED(n, now) ((void)0)
#endif

#endif
