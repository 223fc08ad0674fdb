/* SPDX-License-Identifier: Apache-2.0 */
/* The rails transport (rails.h): one transport per device, and the routing
 * of the seam's ops by the rail a connection id carries. */
#include "rdma/rails.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "rdma/rdma.h"

struct kvf_rails {
	uint32_t n;
	const struct kvf_transport_ops *ops; /* every rail's: kvf_rdma_ops */
	void *t[KVF_MAX_RAILS];
	char dev[KVF_MAX_RAILS][KVF_CFG_STR];
	char peer_default[KVF_CFG_STR];      /* rdma.peer */
	uint64_t skipped;                    /* rooms that went to another rail than
	                                        their own (port down, backoff) */
};

/* ------------------------------------------------------------ lists */

/* Entry i of a comma list: its start and length. */
static const char *list_next(const char *s, size_t *len)
{
	const char *end = strchr(s, ',');

	*len = end ? (size_t)(end - s) : strlen(s);
	return end ? end + 1 : NULL;
}

int kvf_rails_devices(const struct kvf_config *cfg, char (*out)[KVF_CFG_STR])
{
	const char *s = cfg->devices[0] ? cfg->devices : cfg->device, *p = s;
	uint32_t n = 0;
	size_t len;

	while (p && *s) {
		const char *next = list_next(p, &len);

		if (!len || n == KVF_MAX_RAILS) {
			kvf_err("rdma", "rdma.devices '%s': %s", s, !len ? "an empty entry" :
				"more than 8 devices");
			return -EINVAL;
		}
		snprintf(out[n], KVF_CFG_STR, "%.*s", (int)len, p);
		for (uint32_t i = 0; i < n; i++) {
			if (!strcmp(out[i], out[n])) {
				kvf_err("rdma", "rdma.devices '%s': %s twice (a device is one rail)",
					s, out[n]);
				return -EINVAL;
			}
		}
		n++;
		p = next;
	}
	return (int)n;
}

uint32_t kvf_peer_split(const char *peer, char (*out)[KVF_PEER_ADDR_MAX], uint32_t max)
{
	uint32_t n = 0;
	size_t len;

	for (const char *p = peer; p && n < max; n++) {
		const char *next = list_next(p, &len);

		if (!len || len >= KVF_PEER_ADDR_MAX)
			return 0;
		memcpy(out[n], p, len);
		out[n][len] = '\0';
		p = next;
	}
	return n;
}

/* ------------------------------------------------------------ routing */

static void *rail_of(struct kvf_rails *r, uint32_t conn)
{
	uint32_t k = kvf_conn_rail(conn);

	return k < r->n ? r->t[k] : NULL;
}

static int op_region_register(void *tp, const struct kvf_region_layout *reg)
{
	struct kvf_rails *r = tp;
	int rc = 0;
	uint32_t k;

	/* Every rail registers every region: its own PD, its own keys. */
	for (k = 0; k < r->n && !rc; k++)
		rc = r->ops->region_register(r->t[k], reg);
	if (rc) {
		kvf_err("rdma", "region '%s' on rail %u (%s): %s", reg->name, k - 1, r->dev[k - 1],
			strerror(-rc));
		while (--k > 0)
			r->ops->region_unregister(r->t[k - 1], reg->id);
	}
	return rc;
}

static void op_region_unregister(void *tp, uint32_t id)
{
	struct kvf_rails *r = tp;

	for (uint32_t k = 0; k < r->n; k++)
		r->ops->region_unregister(r->t[k], id);
}

/* Whether a room whose own rail is first may go on rail k (the i-th tried):
 * a rail connected, or connecting for the first time, takes it; one whose
 * connects failed takes only the rooms of its own (i == 0) once its backoff
 * is over, one at a time: that room is the probe a recovering rail needs,
 * and the others go where a connection is up instead of failing with it. */
static bool rail_takes(struct kvf_rails *r, uint32_t k, const char *addr, uint32_t i)
{
	switch (kvf_rdma_rail_peer(r->t[k], addr)) {
	case KVF_RAIL_PEER_UP:
	case KVF_RAIL_PEER_NEW:
	case KVF_RAIL_PEER_FIRST:
		return true;
	case KVF_RAIL_PEER_PROBE:
		return i == 0;
	default:
		return false;
	}
}

/* The rail rail_takes() gives the room, else its own (which then refuses
 * it with its reason, or has it wait on its connect). */
static uint32_t pick_rail(struct kvf_rails *r, char (*addr)[KVF_PEER_ADDR_MAX], uint32_t n,
			  uint32_t first)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = (first + i) % n;

		if (rail_takes(r, k, addr[k], i)) {
			r->skipped += i > 0;
			return k;
		}
	}
	return first;
}

/* A room's rail: its id hashed over the rails both sides have, moved by
 * pick_rail off a rail that is failing. A refusal that sent nothing moves
 * it on too: the rail's port is down (-ENETDOWN), its device dead
 * (-ENODEV), its peer in backoff (-ECONNREFUSED). */
static int op_send_room_info(void *tp, const char *peer, const struct kvf_info_out *info,
			     uint32_t *conn)
{
	char addr[KVF_MAX_RAILS][KVF_PEER_ADDR_MAX];
	struct kvf_rails *r = tp;
	uint32_t m, n, first;
	int rc = -EINVAL;

	m = kvf_peer_split(peer && *peer ? peer : r->peer_default, addr, KVF_MAX_RAILS);
	if (!m || !info)
		return -EINVAL;
	n = m < r->n ? m : r->n;
	first = pick_rail(r, addr, n, (uint32_t)(kvf_mix64(info->room_id) % n));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = (first + i) % n;

		rc = r->ops->send_room_info(r->t[k], addr[k], info, conn);
		if (rc != -ENETDOWN && rc != -ENODEV && rc != -ECONNREFUSED)
			break;
		if (i + 1 < n)
			r->skipped++;
	}
	return rc;
}

static int op_post_chunk(void *tp, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
			 uint32_t nparts, const uint32_t *imm)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	return t ? r->ops->post_chunk(t, conn, wr_id, parts, nparts, imm) : -ENOTCONN;
}

static int op_cancel_writes(void *tp, uint32_t conn, uint64_t wr_id)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	return t ? r->ops->cancel_writes(t, conn, wr_id) : 0;
}

static int op_send_abort(void *tp, uint32_t conn, uint64_t room_id, uint8_t to_role,
			 uint16_t reason)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	return t ? r->ops->send_abort(t, conn, room_id, to_role, reason) : -ENOTCONN;
}

static int op_send_abort_ack(void *tp, uint32_t conn, uint64_t room_id)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	return t ? r->ops->send_abort_ack(t, conn, room_id) : -ENOTCONN;
}

static void op_teardown(void *tp, uint32_t conn, const char *why)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	if (t)
		r->ops->teardown(t, conn, why);
}

static void op_conn_busy(void *tp, uint32_t conn, bool busy)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, conn);

	if (t && r->ops->conn_busy)
		r->ops->conn_busy(t, conn, busy);
}

static bool op_on_wc(void *tp, const struct kvf_event *ev)
{
	struct kvf_rails *r = tp;
	void *t = rail_of(r, ev->peer);

	return t ? r->ops->on_wc(t, ev) : kvf_wr_kind(ev->key) == KVF_WR_DATA;
}

static int op_progress(void *tp, uint64_t now_ns)
{
	struct kvf_rails *r = tp;
	int rc = 0;

	for (uint32_t k = 0; k < r->n; k++) {
		int e = r->ops->progress(r->t[k], now_ns);

		if (e < 0 && !rc)
			rc = e;
	}
	return rc;
}

static uint64_t op_wait_ns(void *tp, uint64_t max_ns)
{
	struct kvf_rails *r = tp;

	for (uint32_t k = 0; k < r->n; k++)
		max_ns = r->ops->wait_ns(r->t[k], max_ns);
	return max_ns;
}

static void add_stats(struct kvf_transport_stats *sum, const struct kvf_transport_stats *s)
{
	uint64_t *a = &sum->wrs_posted;
	const uint64_t *b = &s->wrs_posted;

	/* Every field from wrs_posted on is a uint64_t count or gauge. */
	for (size_t i = 0; i < (sizeof(*sum) - offsetof(struct kvf_transport_stats, wrs_posted)) /
			       sizeof(uint64_t); i++)
		a[i] += b[i];
	for (int f = 0; f < KVF_FRAME_TYPES; f++) {
		sum->frames_tx[f] += s->frames_tx[f];
		sum->frames_rx[f] += s->frames_rx[f];
	}
}

static int op_stats(void *tp, struct kvf_transport_stats *out)
{
	struct kvf_rails *r = tp;

	for (uint32_t k = 0; k < r->n; k++) {
		struct kvf_transport_stats s = {0};
		int rc = r->ops->stats(r->t[k], &s);

		if (rc)
			return rc;
		memcpy(out->frame_names, s.frame_names, sizeof(out->frame_names));
		add_stats(out, &s);
	}
	return 0;
}

static int op_rail_stats(void *tp, uint32_t i, struct kvf_rail_stats *out)
{
	struct kvf_rails *r = tp;
	int rc;

	if (i >= r->n)
		return -ERANGE;
	rc = r->ops->rail_stats(r->t[i], 0, out);
	out->rail = i;
	return rc < 0 ? rc : (int)r->n;
}

static void op_close(void *tp)
{
	struct kvf_rails *r = tp;

	if (!r)
		return;
	if (r->skipped)
		kvf_info("rdma", "%" PRIu64 " rooms went to another rail than their own (port down "
			 "or peer in backoff)", r->skipped);
	for (uint32_t k = 0; k < r->n; k++)
		r->ops->close(r->t[k]);
	free(r);
}

static const struct kvf_transport_ops rails_ops = {
	.region_register = op_region_register,
	.region_unregister = op_region_unregister,
	.send_room_info = op_send_room_info,
	.post_chunk = op_post_chunk,
	.cancel_writes = op_cancel_writes,
	.send_abort = op_send_abort,
	.send_abort_ack = op_send_abort_ack,
	.teardown = op_teardown,
	.conn_busy = op_conn_busy,
	.on_wc = op_on_wc,
	.progress = op_progress,
	.wait_ns = op_wait_ns,
	.stats = op_stats,
	.rail_stats = op_rail_stats,
	.close = op_close,
};

/* ------------------------------------------------------------ create */

/* Rail k's own config: its device (rdma.devices stays: it says the rail
 * is one of several), and its address as the listener's
 * and the connections' source (rail 0's port on every rail, so one port
 * and the list of addresses make the endpoint). */
static int rail_cfg(const struct kvf_config *cfg, const char *dev, uint32_t port,
		    struct kvf_config *out)
{
	char ip[64];
	int rc = kvf_rail_ipv4(dev, ip, sizeof(ip));

	if (rc)
		return rc;
	*out = *cfg;
	snprintf(out->device, sizeof(out->device), "%s", dev);
	snprintf(out->source_addr, sizeof(out->source_addr), "%s", ip);
	if (cfg->listen_addr[0]) {
		snprintf(out->listen_addr, sizeof(out->listen_addr), "%s", ip);
		out->listen_port = port;
	}
	return 0;
}

/* Several devices: the listener and source address are each rail's own,
 * so the one-address keys can only say "listen" (a wildcard). */
static int check_keys(const struct kvf_config *cfg)
{
	const char *l = cfg->listen_addr;

	if (l[0] && strcmp(l, "0.0.0.0") && strcmp(l, "::")) {
		kvf_err("rdma", "rdma.listen_addr %s with rdma.devices: each rail listens on its "
			"device's own address; set rdma.listen_addr to \"0.0.0.0\" (listen) or \"\"", l);
		return -EINVAL;
	}
	if (cfg->source_addr[0]) {
		kvf_err("rdma", "rdma.source_addr %s with rdma.devices: each rail connects from "
			"its device's own address; leave it \"\"", cfg->source_addr);
		return -EINVAL;
	}
	return 0;
}

int kvf_rails_create(const struct kvf_config *cfg, char (*devs)[KVF_CFG_STR], uint32_t ndev,
		     struct kvf_ring **rings, const struct kvf_transport_ops **ops, void **out)
{
	struct kvf_rails *r;
	uint16_t port = 0;
	int rc = check_keys(cfg);

	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	snprintf(r->peer_default, sizeof(r->peer_default), "%s", cfg->peer);
	for (uint32_t k = 0; k < ndev && !rc; k++) {
		struct kvf_config rc_cfg;

		rc = rail_cfg(cfg, devs[k], k ? port : cfg->listen_port, &rc_cfg);
		if (!rc)
			rc = kvf_rdma_create_rail(&rc_cfg, rings[k], k, &r->ops, &r->t[k]);
		if (rc) {
			kvf_err("rdma", "rail %u (%s): %s", k, devs[k], strerror(-rc));
			break;
		}
		snprintf(r->dev[k], sizeof(r->dev[k]), "%s", devs[k]);
		r->n++;
		if (!k && cfg->listen_addr[0])
			rc = kvf_rdma_listen_addr(r->ops, r->t[0], NULL, 0, &port);
	}
	if (rc) {
		op_close(r);
		return rc;
	}
	kvf_info("rdma", "%u rails: %s%s%s%s", r->n, r->dev[0], r->n > 1 ? ", " : "",
		 r->n > 1 ? r->dev[1] : "", r->n > 2 ? ", ..." : "");
	*ops = &rails_ops;
	*out = r;
	return 0;
}

int kvf_rails_listen_addr(const struct kvf_transport_ops *ops, void *tp, char *host,
			  size_t hostlen, uint16_t *port)
{
	const struct kvf_rails *r = tp;

	if (ops == &rails_ops)
		return kvf_rdma_listen_addr(r->ops, r->t[0], host, hostlen, port);
	return kvf_rdma_listen_addr(ops, tp, host, hostlen, port);
}

int kvf_rails_endpoint(const struct kvf_transport_ops *ops, void *tp, char *buf, size_t len)
{
	const struct kvf_rails *r = tp;
	uint32_t n = ops == &rails_ops ? r->n : 1;
	size_t at = 0;

	if (!len)
		return -ERANGE;
	for (uint32_t k = 0; k < n; k++) {
		char host[64];
		uint16_t port;
		int rc = kvf_rdma_listen_addr(ops == &rails_ops ? r->ops : ops,
					      ops == &rails_ops ? r->t[k] : tp, host,
					      sizeof(host), &port);
		int w;

		if (rc)
			return rc;
		w = snprintf(buf + at, len - at, strchr(host, ':') ? "%s[%s]:%u" : "%s%s:%u",
			     k ? "," : "", host, port);
		if (w < 0 || (size_t)w >= len - at)
			return -ERANGE;
		at += (size_t)w;
	}
	return 0;
}
