/* SPDX-License-Identifier: Apache-2.0 */
/* The ibverbs + rdma_cm transport, as the rest of the library sees it: one
 * constructor. Everything else goes through the ops of the seam
 * (src/engine/transport.h). What the transport's own files share is in
 * rdma_internal.h; nothing outside src/rdma/ includes that, so no verbs or
 * rdma_cm header reaches the engine through this one. */
#ifndef KVF_RDMA_H
#define KVF_RDMA_H

#include "config/config.h"
#include "base/ring.h"
#include "engine/transport.h"

/*
 * Create the transport: pick the device, allocate the protection domain,
 * listen on cfg->listen_addr:listen_port when set, start the poller thread.
 * Returns 0 with *ops and *t, or -EINVAL (bad config), -ENOMEM, -ENODEV (no
 * device/port as configured, logged), -EADDRINUSE, or -errno from verbs or
 * rdma_cm (logged).
 */
int kvf_rdma_create(const struct kvf_config *cfg, struct kvf_ring *ring,
		    const struct kvf_transport_ops **ops, void **t);
/* The same for rail number rail of a rails transport (rails.h): its
 * connection ids carry the rail (kvf_conn_rail). */
int kvf_rdma_create_rail(const struct kvf_config *cfg, struct kvf_ring *ring, uint32_t rail,
			 const struct kvf_transport_ops **ops, void **t);

/*
 * The listener's bound address (numeric, into host) and port: the real
 * port when rdma.listen_port is 0. ops and t as kvf_rdma_create gave them;
 * -ENOTCONN when they are not this transport's or it does not listen,
 * -ERANGE when host (hostlen bytes; NULL with 0 = port only) is too small,
 * -EAFNOSUPPORT when the address has no numeric form. port may be NULL.
 */
int kvf_rdma_listen_addr(const struct kvf_transport_ops *ops, void *t, char *host,
			 size_t hostlen, uint16_t *port);

#endif
