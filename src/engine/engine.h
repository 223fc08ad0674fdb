/* SPDX-License-Identifier: Apache-2.0 */
/* Engine internals shared with transports, tools and tests. */
#ifndef KVF_ENGINE_H
#define KVF_ENGINE_H

#include <kvferry/kvferry.h>

#include "config/config.h"
#include "base/ring.h"
#include "engine/transport.h"

/* Create an engine from a config already loaded, on the given transport
 * (ops NULL = no transport: rooms only, for tests and benchmarks).
 * Returns 0 or -EINVAL, -ENOMEM. */
int kvf_engine_create(const struct kvf_config *cfg,
		      const struct kvf_transport_ops *ops, void *tctx,
		      kvf_engine **out);

/* Attach a transport after creation (kvf_engine_open: the transport needs
 * the ring, the ring lives in the engine). */
void kvf_engine_set_transport(kvf_engine *eng, const struct kvf_transport_ops *ops,
			      void *tctx);

/* End a sleep kvf_engine_wait_prepare announced (wait.c; kvf_progress
 * calls it). Returns true when the poller had woken it. */
bool kvf_engine_wait_end(kvf_engine *eng);

/* The ring the transport's poller thread produces into (rail 0's). */
struct kvf_ring *kvf_engine_ring(kvf_engine *eng);
/* Rail k's ring (0 is kvf_engine_ring's), NULL past the last rail. */
struct kvf_ring *kvf_engine_rail_ring(const kvf_engine *eng, uint32_t k);


#endif
