/* SPDX-License-Identifier: Apache-2.0 */
/* A thin layer over libibverbs: one place that turns verbs' mixed error
 * conventions (NULL + errno, positive errno) into -errno and logs strerror,
 * plus what the transport asks of a device (async events, ports, MTUs).
 * Work-completion names and hints are src/engine/names.c's (one table, for the
 * room engine and the transport). */
#ifndef KVF_VERBS_H
#define KVF_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>

/* What an asynchronous event takes down, for a transport on one port. */
enum kvf_async_class {
	KVF_ASYNC_INFO = 0,    /* log it */
	KVF_ASYNC_QP_FATAL,    /* that queue pair's connection (element.qp) */
	KVF_ASYNC_CQ_FATAL,    /* that completion queue's connection (element.cq):
	                          each connection has a CQ of its own */
	KVF_ASYNC_PORT_FATAL,  /* our port: every connection (they are all on it) */
	KVF_ASYNC_OTHER_PORT,  /* a port event for a port we do not use: ignored */
	KVF_ASYNC_DEV_FATAL,   /* every connection on the device */
	KVF_ASYNC_SRQ_FATAL,   /* a shared receive queue (element.srq): every
	                          connection of the rail that owns it */
	KVF_ASYNC_SRQ_LIMIT,   /* a shared receive queue ran low: its rail grows it */
};
enum kvf_async_class kvf_async_classify(const struct ibv_async_event *ae, uint8_t port);

/* Open the device named name ("" = the first with an ACTIVE port) among
 * devs (as rdma_get_devices returns them). *port gets the port to use:
 * port_num when non-zero, else the first ACTIVE one.
 * Returns 0, or -ENODEV logged with the device, port and port state. */
int kvf_verbs_pick_device(struct ibv_context **devs, int ndevs, const char *name,
			  uint32_t port_num, struct ibv_context **out, uint8_t *port);

/* Check one port is ACTIVE. Returns 0 or -ENODEV (logged with its state),
 * or -errno from ibv_query_port. */
int kvf_verbs_check_port(struct ibv_context *ctx, uint8_t port);

/* ibv_reg_mr: 0 and *mr, or -errno (logged with what and the range). */
int kvf_verbs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
		     const char *what, struct ibv_mr **mr);

/* Move a queue pair to the error state: everything posted flushes and
 * nothing more lands. Returns 0 or -errno (logged). */
int kvf_verbs_qp_to_error(struct ibv_qp *qp);

/* ibv_modify_qp: 0 or -errno (logged with the QP number and the state
 * asked for). */
int kvf_verbs_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);

/* Path MTU in bytes (256..4096) to the verbs enum, 0 for anything else;
 * and back (0 for an unknown enum). */
enum ibv_mtu kvf_verbs_mtu_enum(uint32_t bytes);
uint32_t kvf_verbs_mtu_bytes(enum ibv_mtu mtu);

/* Two threads post to one QP (the scheduler its writes and frames, the
 * poller its keepalives: keepalive.h), which rdma-core's providers allow
 * unless told the process has one thread: MLX5_SINGLE_THREADED=1 (or
 * MLX4_SINGLE_THREADED=1) drops their locks, and mlx5 aborts the process
 * when it sees two. Returns 0, or -ENOTSUP logged with the variable to
 * unset. */
int kvf_verbs_check_threads(void);

/* Set O_NONBLOCK on a verbs or rdma_cm file descriptor. 0 or -errno. */
int kvf_verbs_nonblock(int fd);

#endif
