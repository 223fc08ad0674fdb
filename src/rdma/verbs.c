/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* Port events: element.port_num says which port. */
static bool port_event(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return true;
	default:
		return false;
	}
}

enum kvf_async_class kvf_async_classify(const struct ibv_async_event *ae, uint8_t port)
{
	if (port_event(ae->event_type) && ae->element.port_num != (int)port)
		return KVF_ASYNC_OTHER_PORT;
	switch (ae->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		return KVF_ASYNC_QP_FATAL;
	/* The CQ overran: its completions are lost, no count of its
	 * connection can be trusted. The others' CQs are fine. */
	case IBV_EVENT_CQ_ERR:
		return KVF_ASYNC_CQ_FATAL;
	case IBV_EVENT_PORT_ERR:
		return KVF_ASYNC_PORT_FATAL;
	case IBV_EVENT_DEVICE_FATAL:
		return KVF_ASYNC_DEV_FATAL;
	/* Our rail's shared receive queue (frames.h), or another engine's
	 * on this context: element.srq says which. */
	case IBV_EVENT_SRQ_ERR:
		return KVF_ASYNC_SRQ_FATAL;
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return KVF_ASYNC_SRQ_LIMIT;
	/* WQ_FATAL: we create no WQ; QP_LAST_WQE_REACHED: a QP of ours in
	 * error took its last receive from the SRQ, nothing to do. */
	default:
		return KVF_ASYNC_INFO;
	}
}

int kvf_verbs_check_port(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr pa;
	int rc = ibv_query_port(ctx, port, &pa);

	if (rc) {
		kvf_err("verbs", "%s port %u: ibv_query_port: %s",
			ibv_get_device_name(ctx->device), port, strerror(rc));
		return -rc;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		kvf_err("verbs", "%s port %u is %s, not ACTIVE",
			ibv_get_device_name(ctx->device), port, ibv_port_state_str(pa.state));
		return -ENODEV;
	}
	return 0;
}

/* The first ACTIVE port of ctx, or 0. */
static uint8_t first_active_port(struct ibv_context *ctx)
{
	struct ibv_device_attr da;

	if (ibv_query_device(ctx, &da))
		return 0;
	for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;

		if (!ibv_query_port(ctx, p, &pa) && pa.state == IBV_PORT_ACTIVE)
			return p;
	}
	return 0;
}

int kvf_verbs_pick_device(struct ibv_context **devs, int ndevs, const char *name,
			  uint32_t port_num, struct ibv_context **out, uint8_t *port)
{
	for (int i = 0; i < ndevs; i++) {
		struct ibv_context *ctx = devs[i];
		uint8_t p;

		if (name && *name) {
			if (strcmp(ibv_get_device_name(ctx->device), name))
				continue;
			p = port_num ? (uint8_t)port_num : first_active_port(ctx);
			if (!p) {
				kvf_err("verbs", "%s has no ACTIVE port", name);
				return -ENODEV;
			}
			if (kvf_verbs_check_port(ctx, p))
				return -ENODEV;
		} else {
			p = port_num ? (uint8_t)port_num : first_active_port(ctx);
			if (!p || kvf_verbs_check_port(ctx, p))
				continue;
		}
		*out = ctx;
		*port = p;
		return 0;
	}
	if (name && *name)
		kvf_err("verbs", "RDMA device %s not found (%d devices)", name, ndevs);
	else
		kvf_err("verbs", "no RDMA device with an ACTIVE port%s (%d devices)",
			port_num ? " at rdma.port_num" : "", ndevs);
	return -ENODEV;
}

int kvf_verbs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
		     const char *what, struct ibv_mr **mr)
{
	*mr = ibv_reg_mr(pd, addr, len, access);
	if (!*mr) {
		int err = errno ? errno : ENOMEM;

		kvf_err("verbs", "ibv_reg_mr(%s, %p, %zu bytes): %s", what, addr, len,
			strerror(err));
		return -err;
	}
	return 0;
}

int kvf_verbs_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);

	if (rc) {
		kvf_err("verbs", "qp 0x%x to ERR: %s", qp->qp_num, strerror(rc));
		return -rc;
	}
	return 0;
}

static const char *qp_state_str(enum ibv_qp_state st)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned)st < sizeof(names) / sizeof(names[0]) && names[st] ? names[st] : "?";
}

int kvf_verbs_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int rc = ibv_modify_qp(qp, attr, mask);

	if (rc) {
		kvf_err("verbs", "qp 0x%x to %s (mask 0x%x): %s", qp->qp_num,
			mask & IBV_QP_STATE ? qp_state_str(attr->qp_state) : "(same state)",
			(unsigned)mask, strerror(rc));
		return -rc;
	}
	return 0;
}

enum ibv_mtu kvf_verbs_mtu_enum(uint32_t bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return (enum ibv_mtu)0;
	}
}

uint32_t kvf_verbs_mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

int kvf_verbs_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int kvf_verbs_check_threads(void)
{
	static const char *const vars[] = {"MLX5_SINGLE_THREADED", "MLX4_SINGLE_THREADED"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		/* The providers' own test: exactly "1" turns their locks off. */
		if (v && !strcmp(v, "1")) {
			kvf_err("verbs", "%s=1 tells the provider that one thread uses the device; "
				"kvferry's poller thread posts heartbeats on the queue pairs the "
				"scheduler posts to: unset %s", vars[i], vars[i]);
			return -ENOTSUP;
		}
	}
	return 0;
}
