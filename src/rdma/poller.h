/* SPDX-License-Identifier: Apache-2.0 */
/* The completion poller thread: one per transport. It polls every
 * connection's CQ in batches, and after rdma.poll_idle_us with nothing to do
 * arms the CQs and sleeps in poll() on the completion channel, the rdma_cm
 * channel, the device's async fd and the scheduler's wake eventfd. Every
 * completion and connection event becomes a ring event; it never touches
 * room state. */
#ifndef KVF_POLLER_H
#define KVF_POLLER_H

#include "rdma/rdma_internal.h"

/* pthread entry point; arg is the struct kvf_rdma. */
void *kvf_poller_main(void *arg);

#endif
