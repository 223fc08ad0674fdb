/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry's rails: an engine on several RDMA devices. Included by
 * <kvferry/kvferry.h>; include that one
 * (this one includes nothing: kvferry.h has what it needs before it). */
#ifndef KVFERRY_RAILS_H
#define KVFERRY_RAILS_H

/* ------------------------------------------------------------------- rails */

/* A rail is one RDMA device of the engine (rdma.devices; rdma.device is the
 * one-rail case), with its own connections, completion poller and
 * counters. A room's transfer runs on one rail, picked by its room id among
 * the rails both sides have; a rail that fails fails its own rooms only,
 * named in their failure (docs/design.md "Rails"). */
enum kvf_rail_state {
	KVF_RAIL_UP = 0,         /* its port is ACTIVE */
	KVF_RAIL_PORT_DOWN = 1,  /* its port is not ACTIVE: no new rooms go on it */
	KVF_RAIL_DEVICE_DEAD = 2 /* a device-fatal event: nothing goes on it again */
};
KVF_API const char *kvf_rail_state_str(int state);

/* One rail's device and counters; size convention as struct kvf_stats. */
struct kvf_rail_stats {
	uint32_t size;
	uint32_t rail;         /* its index: rdma.devices order */
	char device[64];       /* verbs device name */
	char addr[64];         /* its listener's numeric address, "" none */
	uint32_t port;         /* its listener's port, 0 none */
	uint32_t state;        /* enum kvf_rail_state */
	uint64_t bytes;        /* bytes of RDMA WRITEs posted on it */
	uint64_t writes;       /* RDMA WRITEs posted on it */
	uint64_t wr_errors;    /* work completions in error (flushes not counted) */
	uint64_t conns_live;   /* gauge: its connections not dead */
	uint64_t conns_lost;   /* its connections lost (torn down) */
	uint64_t connects;     /* peer connections it started */
};
#define KVF_RAIL_STATS_INIT { .size = sizeof(struct kvf_rail_stats) }

/*
 * The engine's rails, into out[0..max-1]: out[0].size (KVF_RAIL_STATS_INIT)
 * is the size of the caller's struct, and so the step of its array. Returns the number of rails
 * (which may be more than max: only max are written), or -EINVAL (eng
 * NULL, out NULL with max > 0, a size too small), -ENOTCONN (no transport).
 * Scheduler thread, like kvf_stats.
 */
KVF_API int kvf_engine_rails(const kvf_engine *eng, struct kvf_rail_stats *out, uint32_t max);

/*
 * Every rail's listener as one peer string, "host:port,host:port" in rail
 * order (one entry with one device): what a prefill publishes so that a
 * decode connects each of its rails to the same rail here. A receiver room
 * (kvf_receiver_create, rdma.peer) takes such a list anywhere it takes
 * "host:port"; a one-rail engine uses its first entry.
 * Returns 0, or the errors of kvf_engine_listen_addr, -ERANGE when len is
 * too small (80 bytes a rail always suffice; nothing written).
 */
KVF_API int kvf_engine_endpoint(const kvf_engine *eng, char *buf, size_t len);

#endif
