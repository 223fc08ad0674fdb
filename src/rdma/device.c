/* SPDX-License-Identifier: Apache-2.0 */
/* The transport's device and lifetime: the config checks, the device and
 * port, the protection domain and channels, the listener, the poller
 * thread; kvf_rdma_create and its unwinding, kvf_rdma_close. */
#include "rdma/rdma_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transfer/auth.h"
#include "rdma/conn.h"
#include "rdma/fault.h"
#include "rdma/frames.h"
#include "rdma/keepalive.h"
#include "base/log.h"
#include "rdma/poller.h"
#include "rdma/pool.h"
#include "transfer/proto.h"
#include "rdma/sched.h"
#include "transfer/sendq.h"
#include "rdma/stage.h"
#include "rdma/verbs.h"

#define FRAME_CAP (64u * 1024u)

/* ============================================================ lifetime */

void kvf_rdma_close(void *tp)
{
	struct kvf_rdma *t = tp;

	if (!t)
		return;
	if (t->poller_started) {
		struct kvf_event ev[32];
		uint32_t k;

		/* Release pairs with the load-acquire of stop in
		 * kvf_poller_main's loop. */
		atomic_store_explicit(&t->stop, true, memory_order_release);
		kvf_rdma_wake(t);
		/* The poller may be waiting for room in a full ring (its push never
		 * drops), and we are the ring's consumer: keep discarding until it
		 * is out, or the join would wait forever. Nobody applies events
		 * after close. Acquire pairs with the store-release of
		 * poller_done as kvf_poller_main returns. */
		while (!atomic_load_explicit(&t->poller_done, memory_order_acquire)) {
			while ((k = kvf_ring_pop_batch(t->ring, ev, 32)))
				for (uint32_t i = 0; i < k; i++)
					free(ev[i].data);
			sched_yield();
		}
		pthread_join(t->poller, NULL);
		KVF_FAULT_REPORT(); /* test builds: what was injected, and frames held freed */
	}
	kvf_sched_close(t);
	for (uint32_t i = 0; i < t->np; i++)
		kvf_conn_put(t->plist[i]);
	free(t->plist);
	free(t->wcs);
	kvf_conn_table_close(t);
	kvf_idtab_fini(&t->qps);
	kvf_frames_close(t); /* every QP that took from it is gone */
	kvf_sendcq_close(t);
	if (t->listen_id)
		rdma_destroy_id(t->listen_id);
	for (uint32_t i = 0; i < KVF_MAX_REGIONS; i++)
		kvf_pool_destroy(t->regions[i]);
	kvf_staging_destroy(t); /* its MR before the PD */
	kvf_keepalive_fini(t);  /* every QP that sent from it is gone */
	if (t->cch)
		ibv_destroy_comp_channel(t->cch);
	if (t->pd)
		ibv_dealloc_pd(t->pd);
	if (t->devs)
		rdma_free_devices(t->devs);
	if (t->ech)
		rdma_destroy_event_channel(t->ech);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int check_cfg(struct kvf_rdma *t)
{
	struct kvf_config *cfg = &t->cfg;
	size_t fm;

	/* The ranges and check_cross() in config.c guarantee sq_depth and
	 * rq_depth >= 16, signal_every <= sq_depth, max_sge <= KVF_SQ_MAX_SGE. */
	/* Every frame is frame_max bytes (the rail's, frames.h): cap it. A
	 * ROOM_INFO over the cap goes as a sequence of frames (proto.h). */
	fm = kvf_proto_room_info_len(kvf_proto_info_max(cfg->max_blocks_per_room));
	if (fm > FRAME_CAP)
		fm = FRAME_CAP;
	if (fm < kvf_proto_hello_len(KVF_PROTO_MAX_REGIONS, KVF_HELLO_MAX_BUFS))
		fm = kvf_proto_hello_len(KVF_PROTO_MAX_REGIONS, KVF_HELLO_MAX_BUFS);
	/* Set: smaller frames (every rail's frame memory scales with them),
	 * and a HELLO of fewer buffers (checked at region registration). */
	if (cfg->frame_size)
		fm = cfg->frame_size;
	fm = (fm + 4095) & ~(size_t)4095;
	t->frame_max = (uint32_t)fm;
	t->signal_every = cfg->signal_every;
	t->max_sge = cfg->max_sge;
	return 0;
}

static void make_cm_priv(struct kvf_rdma *t)
{
	struct kvf_cm_hello h = {.version = KVF_PROTO_VERSION, .frame_max = t->frame_max,
				 .mtu = t->want_mtu};

	/* No nonce: each connection puts its own in (cm.c). The token never
	 * goes into private data: the AUTH frames prove it (handshake.h). */
	snprintf(h.engine_id, sizeof(h.engine_id), "%.28s", t->cfg.engine_id);
	kvf_proto_encode_cm(t->cm_priv, &h);
}

static int bind_listener(struct kvf_rdma *t)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				 .ai_socktype = SOCK_STREAM}, *ai;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%u", t->cfg.listen_port);
	rc = getaddrinfo(t->cfg.listen_addr, port, &hints, &ai);
	if (rc) {
		kvf_err("rdma", "rdma.listen_addr %s: %s", t->cfg.listen_addr, gai_strerror(rc));
		return -EINVAL;
	}
	if (rdma_create_id(t->ech, &t->listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(t->listen_id, ai->ai_addr)) {
		rc = -errno;
		kvf_err("rdma", "binding %s:%s: %s", t->cfg.listen_addr, port, strerror(-rc));
	}
	freeaddrinfo(ai);
	return rc;
}

/* The device rdma.source_addr is on (bound to it once, like the listener),
 * or NULL where it is not set or not on an RDMA device (logged). */
static struct ibv_context *source_device(struct kvf_rdma *t)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *ai;
	struct rdma_cm_id *id = NULL;
	struct ibv_context *ctx = NULL;

	if (!t->cfg.source_addr[0] || getaddrinfo(t->cfg.source_addr, NULL, &hints, &ai))
		return NULL;
	if (!rdma_create_id(t->ech, &id, NULL, RDMA_PS_TCP) && !rdma_bind_addr(id, ai->ai_addr)) {
		ctx = id->verbs;
	}
	if (!ctx)
		kvf_warn("rdma", "rdma.source_addr %s is not on an RDMA device: %s",
			 t->cfg.source_addr, strerror(errno));
	if (id)
		rdma_destroy_id(id);
	freeaddrinfo(ai);
	return ctx;
}

/* The device: rdma.device if set, else the one the listen address (or
 * rdma.source_addr) is on, else the first with an ACTIVE port. Every
 * connection must route through it: the pool is registered there. */
static int open_device(struct kvf_rdma *t)
{
	struct ibv_context *lctx;
	struct ibv_device_attr da;
	int n = 0, rc;

	/* First: the list holds the device contexts open, so the one a
	 * short-lived id reports stays valid after that id is gone. */
	t->devs = rdma_get_devices(&n);
	if (!t->devs || !n) {
		kvf_err("rdma", "no RDMA devices");
		return -ENODEV;
	}
	lctx = t->listen_id ? t->listen_id->verbs : source_device(t);
	if (lctx && !t->cfg.device[0]) {
		t->ctx = lctx;
		t->port = (uint8_t)t->cfg.port_num; /* [1, 255] by config */
		rc = kvf_verbs_check_port(t->ctx, t->port);
	} else {
		rc = kvf_verbs_pick_device(t->devs, n, t->cfg.device, t->cfg.port_num, &t->ctx,
					   &t->port);
	}
	if (rc)
		return rc;
	if (lctx && lctx != t->ctx) {
		kvf_err("rdma", "%s %s is on %s, rdma.device is %s",
			t->listen_id ? "rdma.listen_addr" : "rdma.source_addr",
			t->listen_id ? t->cfg.listen_addr : t->cfg.source_addr,
			ibv_get_device_name(lctx->device), t->cfg.device);
		return -EINVAL;
	}
	if (!ibv_query_device(t->ctx, &da) && (uint32_t)da.max_sge < t->max_sge)
		t->max_sge = (uint32_t)da.max_sge;
	kvf_info("rdma", "device %s port %u", ibv_get_device_name(t->ctx->device), t->port);
	return 0;
}

/* What the queue pairs will be set up with, checked against the port once
 * here, so a wrong rdma.mtu or rdma.gid_index fails create with its reason
 * instead of every connection at RTR. */
static int check_port_attrs(struct kvf_rdma *t)
{
	const struct kvf_config *cfg = &t->cfg;
	const char *dev = ibv_get_device_name(t->ctx->device);
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int rc = ibv_query_port(t->ctx, t->port, &pa);

	if (rc) {
		kvf_err("rdma", "%s port %u: ibv_query_port: %s", dev, t->port, strerror(rc));
		return -rc;
	}
	t->active_mtu = (uint8_t)pa.active_mtu;
	if (cfg->mtu) {
		t->want_mtu = (uint8_t)kvf_verbs_mtu_enum(cfg->mtu);
		if (!t->want_mtu || t->want_mtu > pa.active_mtu) {
			kvf_err("rdma", "rdma.mtu %u: %s port %u has an active MTU of %u (max %u); "
				"set rdma.mtu to at most %u, or 0 for the path's", cfg->mtu, dev,
				t->port, kvf_verbs_mtu_bytes(pa.active_mtu),
				kvf_verbs_mtu_bytes(pa.max_mtu), kvf_verbs_mtu_bytes(pa.active_mtu));
			return -EINVAL;
		}
	}
	if (cfg->gid_index >= 0) {
		static const uint8_t zero[16];

		if (cfg->gid_index >= pa.gid_tbl_len ||
		    ibv_query_gid(t->ctx, t->port, cfg->gid_index, &gid) ||
		    !memcmp(gid.raw, zero, sizeof(zero))) {
			kvf_err("rdma", "rdma.gid_index %d: %s port %u has no GID there (table of %d)",
				cfg->gid_index, dev, t->port, pa.gid_tbl_len);
			return -EINVAL;
		}
	}
	kvf_info("rdma", "%s port %u: active MTU %u%s%s, gid index %s", dev, t->port,
		 kvf_verbs_mtu_bytes(pa.active_mtu), cfg->mtu ? ", rdma.mtu " : "",
		 cfg->mtu ? "set" : "", cfg->gid_index >= 0 ? "from rdma.gid_index" : "rdma_cm's");
	return 0;
}

static int open_verbs(struct kvf_rdma *t)
{
	t->pd = ibv_alloc_pd(t->ctx);
	if (!t->pd)
		return -(errno ? errno : ENOMEM);
	t->cch = ibv_create_comp_channel(t->ctx);
	if (!t->cch)
		return -(errno ? errno : ENOMEM);
	if (kvf_verbs_nonblock(t->cch->fd) || kvf_verbs_nonblock(t->ctx->async_fd))
		return -errno;
	return 0;
}

static int start(struct kvf_rdma *t)
{
	int rc;

	if (t->listen_id) {
		if (rdma_listen(t->listen_id, 128)) {
			rc = -errno;
			kvf_err("rdma", "rdma_listen on %s:%u: %s", t->cfg.listen_addr,
				t->cfg.listen_port, strerror(-rc));
			return rc;
		}
		kvf_info("rdma", "listening on %s:%u%s", t->cfg.listen_addr,
			 ntohs(rdma_get_src_port(t->listen_id)),
			 t->cfg.listen_port ? "" : " (rdma.listen_port 0: ephemeral)");
	}
	/* Allocated here, not in the thread: a poller that cannot start must
	 * fail create, not leave every transfer unpolled. */
	t->wcs = calloc(t->cfg.poll_batch ? t->cfg.poll_batch : 32, sizeof(*t->wcs));
	if (!t->wcs)
		return -ENOMEM;
	rc = pthread_create(&t->poller, NULL, kvf_poller_main, t);
	if (rc)
		return -rc;
	/* A name that top, perf and kvferry-bench's CPU figures find it by;
	 * naming is best effort (it only fails for names over 15 bytes). */
	(void)pthread_setname_np(t->poller, "kvf-poller");
	t->poller_started = true;
	return 0;
}

int kvf_rdma_listen_addr(const struct kvf_transport_ops *ops, void *tp, char *host,
			 size_t hostlen, uint16_t *port)
{
	const struct kvf_rdma *t = tp;
	const struct sockaddr *sa;
	char buf[NI_MAXHOST];
	int rc;

	if (ops != &kvf_rdma_ops || !t || !t->listen_id)
		return -ENOTCONN;
	/* Read, not kept: the bind (port 0 included) filled the id's source
	 * address, and nothing changes it while the listener lives. */
	sa = rdma_get_local_addr(t->listen_id);
	rc = getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		       : sizeof(struct sockaddr_in), buf, sizeof(buf), NULL, 0, NI_NUMERICHOST);
	if (rc) {
		kvf_err("rdma", "the listener's address (family %d): %s", sa->sa_family,
			gai_strerror(rc));
		return -EAFNOSUPPORT;
	}
	if (host && strlen(buf) >= hostlen)
		return -ERANGE;
	if (host)
		memcpy(host, buf, strlen(buf) + 1);
	if (port)
		*port = ntohs(rdma_get_src_port(t->listen_id));
	return 0;
}

/* What is checked before anything is opened: nothing to undo if it fails. */
static int preflight(struct kvf_rdma *t)
{
	int rc = KVF_FAULT_SETUP(); /* test builds: KVF_FAULT, refused when it does not parse */

	if (!rc)
		rc = kvf_verbs_check_threads(); /* before any provider reads it */
	if (!rc)
		rc = kvf_auth_warm();
	if (!rc)
		rc = check_cfg(t);
	return rc;
}

/* The event channel, listener, device, verbs objects and frames, in that
 * order (kvf_rdma_close undoes whatever of it was done). */
static int open_parts(struct kvf_rdma *t)
{
	int rc;

	t->ech = rdma_create_event_channel();
	if (!t->ech) {
		rc = -(errno ? errno : ENODEV);
		kvf_err("rdma", "rdma_create_event_channel: %s", strerror(-rc));
		return rc;
	}
	rc = kvf_verbs_nonblock(t->ech->fd);
	if (!rc && t->cfg.listen_addr[0])
		rc = bind_listener(t);
	if (!rc)
		rc = open_device(t);
	if (!rc)
		rc = check_port_attrs(t);
	if (!rc)
		rc = open_verbs(t);
	if (!rc)
		rc = kvf_keepalive_setup(t);
	if (!rc)
		rc = kvf_frames_open(t);
	if (!rc)
		rc = kvf_sendcq_open(t);
	return rc;
}

int kvf_rdma_create(const struct kvf_config *cfg, struct kvf_ring *ring,
		    const struct kvf_transport_ops **ops, void **out)
{
	return kvf_rdma_create_rail(cfg, ring, 0, ops, out);
}

int kvf_rdma_create_rail(const struct kvf_config *cfg, struct kvf_ring *ring, uint32_t rail,
			 const struct kvf_transport_ops **ops, void **out)
{
	struct kvf_rdma *t;
	int rc;

	if (!cfg || !ring || !ops || !out || rail >= KVF_MAX_RAILS)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cfg = *cfg;
	t->rail = rail;
	if (cfg->devices[0]) /* one of several (rails.c) */
		snprintf(t->rail_name, sizeof(t->rail_name), "rail %u (%s)", rail, cfg->device);
	kvf_backoff_init(&t->backoff, cfg->reconnect_backoff_ms, cfg->reconnect_backoff_max_ms);
	t->ring = ring;
	t->wake_fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	kvf_idtab_init(&t->conns, cfg->max_conns);
	kvf_idtab_init(&t->s.by_id, cfg->max_conns);
	kvf_idtab_init(&t->qps, cfg->max_conns);
	rc = preflight(t);
	if (!rc)
		rc = open_parts(t);
	if (rc)
		goto fail;
	make_cm_priv(t);
	t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = start(t);
	if (rc)
		goto fail;
	*ops = &kvf_rdma_ops;
	*out = t;
	return 0;
fail:
	/* kvf_rdma_close releases whatever was set up, in reverse. */
	kvf_rdma_close(t);
	return rc;
}
