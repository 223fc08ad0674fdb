/* SPDX-License-Identifier: Apache-2.0 */
/* The transport's two ways to reach another thread: wake the poller (the
 * scheduler added work it must start), push an event to the scheduler
 * (the poller's only way to it: the ring). A leaf every file may use. */
#include "rdma/rdma_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

void kvf_rdma_wake(struct kvf_rdma *t)
{
	uint64_t one = 1;

	if (write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		kvf_warn("rdma", "waking the poller: %s", strerror(errno));
}

void kvf_rdma_push(struct kvf_rdma *t, const struct kvf_event *ev)
{
	kvf_ring_push(t->ring, ev);
}
