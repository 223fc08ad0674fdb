/* SPDX-License-Identifier: Apache-2.0 */
/* Rails: an engine on several RDMA devices (rdma.devices). Each device is a
 * transport of its own (device.c: its PD, CQs, listener, poller thread and
 * ring), and this one sits above them behind the same seam, routing every
 * op by the rail a connection id carries (kvf_conn_rail, transport.h).
 *
 * A room runs on one rail, picked from its room id among the rails both
 * sides have (rail k of the decode to rail k of the prefill: the rail-
 * optimised fabric of a GPU cluster wires NIC k of every node to leaf k).
 * Its ROOM_INFO, writes, final WRITE_WITH_IMM and ABORTs share that rail's
 * one RC connection, so SUCCESS keeps meaning what it means on one device:
 * every write of the room was ordered before the immediate that ends it.
 * A rail that fails fails only the rooms on it; a new room skips a rail
 * whose port is down or whose peer is in connect backoff. */
#ifndef KVF_RAILS_H
#define KVF_RAILS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "base/ring.h"
#include "engine/transport.h"

#define KVF_PEER_ADDR_MAX 80 /* one "host:port" of a peer list */

/* The devices of rdma.devices (or rdma.device), into out; their count
 * (0: neither is set, any device). -EINVAL (logged) for an empty entry, a
 * device named twice or more than KVF_MAX_RAILS. */
int kvf_rails_devices(const struct kvf_config *cfg, char (*out)[KVF_CFG_STR]);

/* rdma.near_gpu set: devs[0..n-1] (n 0: every device) narrowed to those
 * nearest to that GPU (logged with the reason); their count, or -errno
 * (logged): -ENODEV a CUDA ordinal without the driver, -ENOENT no such GPU
 * or device in sysfs, -EINVAL a bad bus id. Unset: n as it is. */
int kvf_rails_pick(const struct kvf_config *cfg, char (*devs)[KVF_CFG_STR], int n);

/* The entries of a peer list "host:port,host:port", at most max, into out;
 * their count, 0 when an entry is empty or too long. */
uint32_t kvf_peer_split(const char *peer, char (*out)[KVF_PEER_ADDR_MAX], uint32_t max);

/* The IPv4 address rdma_cm maps to device dev (the address of its netdev,
 * or IPoIB interface), numeric into out. 0, -ENOENT (none; logged). */
int kvf_rail_ipv4(const char *dev, char *out, size_t len);

/* The transport of ndev rails on rings[0..ndev-1], one per device of
 * devs. Returns 0 with *ops and *t, or the first rail's -errno (logged,
 * the rails opened before it closed). */
int kvf_rails_create(const struct kvf_config *cfg, char (*devs)[KVF_CFG_STR], uint32_t ndev,
		     struct kvf_ring **rings, const struct kvf_transport_ops **ops, void **t);

/* What one rail's transport knows of its connection to peer, for the
 * choice of a room's rail (ops.c). */
enum kvf_rail_peer {
	KVF_RAIL_PEER_UP,       /* connected */
	KVF_RAIL_PEER_NEW,      /* no connection and no failure: one may start */
	KVF_RAIL_PEER_FIRST,    /* connecting, no failure before */
	KVF_RAIL_PEER_PROBE,    /* no connection; connects failed, backoff over */
	KVF_RAIL_PEER_RETRYING, /* connecting again after failures */
	KVF_RAIL_PEER_REFUSED,  /* in connect backoff, port down or device dead */
};
enum kvf_rail_peer kvf_rdma_rail_peer(void *t, const char *peer);

/* kvf_rdma_listen_addr of rail 0 (or of the one device). */
int kvf_rails_listen_addr(const struct kvf_transport_ops *ops, void *t, char *host,
			  size_t hostlen, uint16_t *port);
/* "host:port[,host:port...]" of every rail's listener (the endpoint), of
 * the rails transport or of one device's. 0, -ERANGE, kvf_rdma_listen_addr's. */
int kvf_rails_endpoint(const struct kvf_transport_ops *ops, void *t, char *buf, size_t len);

#endif
