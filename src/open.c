/* SPDX-License-Identifier: Apache-2.0 */
/* Above the folders (docs/design.md, The tree): an engine opened from a
 * configuration and closed. Opening loads the configuration, creates the
 * engine (src/engine/), starts the HTTP server (src/obs/) and the transport
 * (src/rdma/: one device, or rails); closing stops both and frees the
 * engine. The one file that includes every folder. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kvf_build.h"
#include "base/log.h"
#include "config/config.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/guard.h"
#include "obs/metrics.h"
#if HAVE_RDMA
#include "rdma/rails.h"
#include "rdma/rdma.h"
#endif

/* The failure of a stage after the config, as one line for the caller
 * (the stage logged its details). */
static int open_failed(char *err, size_t errlen, const char *stage, int rc)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s (details in the log)", stage, strerror(-rc));
	return rc;
}

/* The snapshot the endpoint serves exists before the endpoint does. */
static int metrics_open(struct kvf_engine *eng, char *err, size_t errlen)
{
	int rc = kvf_metrics_init(eng);

	if (!rc)
		rc = kvf_metrics_publish(eng);
	if (!rc)
		rc = kvf_http_start(eng->metrics, eng->cfg.metrics_listen_addr,
				    eng->cfg.metrics_listen_port);
	return rc ? open_failed(err, errlen, "metrics endpoint", rc) : 0;
}

#if HAVE_RDMA
/* Several devices: a ring for each further rail, its poller the one
 * producer of it. */
static int open_rails(kvf_engine *eng, const struct kvf_config *cfg,
		      char (*devs)[KVF_CFG_STR], uint32_t n, const struct kvf_transport_ops **ops,
		      void **t)
{
	struct kvf_ring *rings[KVF_MAX_RAILS] = {eng->ring};

	for (uint32_t k = 1; k < n; k++) {
		rings[k] = eng->xrings[k - 1] = kvf_ring_create(eng->cfg.ring_size);
		if (!rings[k])
			return -ENOMEM;
		kvf_ring_set_wake_fd(rings[k], eng->wake_fd);
		eng->nxrings = k;
	}
	return kvf_rails_create(cfg, devs, n, rings, ops, t);
}
#endif

/* The transport: one device on the engine's ring, or rails. */
static int open_transport(kvf_engine *eng, char *err, size_t errlen)
{
#if HAVE_RDMA
	char devs[KVF_MAX_RAILS][KVF_CFG_STR];
	const struct kvf_transport_ops *ops;
	void *t;
	int n = kvf_rails_pick(&eng->cfg, devs, kvf_rails_devices(&eng->cfg, devs));
	int rc = n < 0 ? n : 0;

	/* rdma.devices (or near_gpu's choice), even of one: rails, each on its
	 * device's own address; rdma.device alone: the one device as set. */
	if (!rc && n > 0 && (eng->cfg.devices[0] || eng->cfg.near_gpu[0])) {
		struct kvf_config cfg = eng->cfg;

		if (!cfg.devices[0]) /* rails.c: "one of a list" is what names a rail */
			snprintf(cfg.devices, sizeof(cfg.devices), "%s", devs[0]);
		rc = open_rails(eng, &cfg, devs, (uint32_t)n, &ops, &t);
	} else if (!rc) {
		rc = kvf_rdma_create(&eng->cfg, eng->ring, &ops, &t);
	}
	if (rc)
		return open_failed(err, errlen, "rdma transport", rc);
	kvf_engine_set_transport(eng, ops, t);
	return 0;
#else
	(void)eng;
	kvf_err("engine", "rdma keys are set but kvferry was built without ibverbs/rdma_cm");
	return open_failed(err, errlen, "rdma transport", -ENOTSUP);
#endif
}

int kvf_engine_open_with(const char *config_path, const char *const *overrides,
			 size_t noverrides, char *err, size_t errlen, kvf_engine **out)
{
	struct kvf_config cfg;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!out || (noverrides && !overrides)) {
		if (err && errlen)
			snprintf(err, errlen, "kvf_engine_open_with: %s", !out ? "out is NULL" :
				 "overrides is NULL and noverrides > 0");
		return -EINVAL;
	}
	rc = kvf_config_load_overrides(config_path, overrides, noverrides, &cfg, err, errlen);
	if (rc)
		return rc; /* the loader logged, and wrote err: file:line or override, key */
	kvf_log_set_level(cfg.log_level);
	rc = kvf_engine_create(&cfg, NULL, NULL, out);
	if (rc)
		return open_failed(err, errlen, "engine", rc);
	if (cfg.metrics_listen_port)
		rc = metrics_open(*out, err, errlen);
	if (!rc && cfg.rdma_enabled)
		rc = open_transport(*out, err, errlen);
	if (rc) {
		kvf_engine_close(*out);
		*out = NULL;
	}
	return rc;
}

int kvf_engine_open(const char *config_path, kvf_engine **out)
{
	if (!config_path)
		return -EINVAL;
	return kvf_engine_open_with(config_path, NULL, 0, NULL, 0, out);
}

int kvf_engine_listen_addr(const kvf_engine *eng, char *host, size_t hostlen, uint16_t *port)
{
	if (!eng || (!host && hostlen))
		return -EINVAL;
#if HAVE_RDMA
	return kvf_rails_listen_addr(eng->ops, eng->t, host, hostlen, port);
#else
	(void)port;
	return -ENOTCONN;
#endif
}

int kvf_engine_endpoint(const kvf_engine *eng, char *buf, size_t len)
{
	if (!eng || (!buf && len))
		return -EINVAL;
#if HAVE_RDMA
	return eng->ops ? kvf_rails_endpoint(eng->ops, eng->t, buf, len) : -ENOTCONN;
#else
	return -ENOTCONN;
#endif
}

void kvf_engine_close(kvf_engine *eng)
{
	if (!eng)
		return;
	kvf_guard_untrack(eng);
	/* Stop the HTTP thread and the poller first: after this nothing
	 * reads a snapshot or produces into the ring (in a child after fork
	 * both are the parent's: guard.c left nothing to stop). */
	kvf_metrics_fini(eng);
	if (eng->ops && eng->ops->close)
		eng->ops->close(eng->t);
	kvf_engine_destroy(eng);
}
