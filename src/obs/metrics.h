/* SPDX-License-Identifier: Apache-2.0 */
/* Observability: the numbers the scheduler thread keeps beyond kvf_stats
 * (histograms, per-role failures), the snapshot it publishes for the HTTP
 * thread, and the renderers (/metrics, /rooms) that read a snapshot.
 *
 * Threads. The scheduler thread owns every number and writes snapshots
 * (metrics.c); the HTTP thread (metrics_http.c) only reads a published
 * one. A snapshot is never rewritten while a reader holds it: a reader
 * announces itself in the snapshot's reader count before it trusts the
 * pointer, and the scheduler writes only into a buffer that is neither
 * published nor held. Nothing on the room path takes a lock. */
#ifndef KVF_METRICS_H
#define KVF_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "base/hist.h"
#include "engine/transport.h"

struct kvf_engine;

/* One room in a snapshot: kvf_room_stats plus the failure's detail. */
struct kvf_snap_room {
	struct kvf_room_stats rs;
	char detail[192];
};

/* A published snapshot. */
struct kvf_snap {
	atomic_uint readers;           /* HTTP-thread readers holding it */
	uint64_t seq;                  /* 1, 2, ...: the scheduler's count */
	uint64_t taken_mono_ns;        /* CLOCK_MONOTONIC when taken */
	uint64_t interval_ns;          /* metrics.interval_ms */
	char engine_id[128];
	struct kvf_stats st;
	struct kvf_obs_counters oc;
	bool have_tst;                 /* the transport reported stats */
	struct kvf_transport_stats tst;
	uint32_t nrails;               /* the transport's rails (rail_stats), 0 none */
	struct kvf_rail_stats rails[KVF_MAX_RAILS];
	uint32_t nrooms, cap;
	struct kvf_snap_room *rooms;   /* cap of them, nrooms used */
};

#define KVF_SNAP_BUFS 3

/* The engine's observability state; NULL in the engine when metrics are off. */
struct kvf_metrics {
	struct kvf_snap bufs[KVF_SNAP_BUFS];
	_Atomic(struct kvf_snap *) cur; /* the published one, NULL before the first */
	uint64_t seq;
	uint64_t next_ns;               /* engine clock: the next snapshot is due */
	uint64_t skipped;               /* no free buffer (every one held): next time */
	struct kvf_http *http;          /* the server, NULL when not listening */
};

/* ------------------------------------------------------- scheduler thread */

/* Allocate the metrics state (no server). Returns 0, -ENOMEM. */
int kvf_metrics_init(struct kvf_engine *eng);
/* Stop the server (if any) and free every snapshot. */
void kvf_metrics_fini(struct kvf_engine *eng);
/* Take and publish a snapshot when one is due (kvf_progress). */
void kvf_metrics_tick(struct kvf_engine *eng, uint64_t now);
/* When the next snapshot is due, in *when. false: metrics are off. */
bool kvf_metrics_next(const struct kvf_engine *eng, uint64_t *when);
/* Take and publish one now. Returns 0, -EBUSY (every buffer held), -ENOMEM. */
int kvf_metrics_publish(struct kvf_engine *eng);

/* ----------------------------------------------------------- any thread */

/* The latest published snapshot, held until kvf_snap_put; NULL if none. */
struct kvf_snap *kvf_snap_get(struct kvf_metrics *m);
void kvf_snap_put(struct kvf_snap *s);

/* A growable output buffer; on allocation failure it keeps failed set
 * and what fitted. */
struct kvf_buf {
	char *p;
	size_t len, cap;
	bool failed;
};
void kvf_buf_printf(struct kvf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kvf_buf_free(struct kvf_buf *b);
/* A label value or JSON string body: backslash, quote and newline escaped
 * (both formats take these three the same way); other control bytes are
 * dropped in labels and \u-escaped in JSON. */
void kvf_buf_escaped(struct kvf_buf *b, const char *s, bool json);
/* "sender" or "receiver". */
const char *kvf_role_name(unsigned role);

/* /rooms' filters: state and role -1 = any. */
struct kvf_rooms_filter {
	int state;
	int role;
	double min_age_s;
};

/* Prometheus text exposition format 0.0.4 of the snapshot. */
void kvf_render_metrics(const struct kvf_snap *s, struct kvf_buf *b);
/* /rooms' JSON: the rooms that pass the filter, oldest first. */
void kvf_render_rooms(const struct kvf_snap *s, const struct kvf_rooms_filter *f, uint64_t now_mono,
		      struct kvf_buf *b);

/* ------------------------------------------------------------ HTTP server */

/* Serve /metrics and /rooms on addr:port (port 0: any free port) from the
 * engine's snapshots. Returns 0, -ENOTSUP (built without libmicrohttpd),
 * -EINVAL (addr does not resolve), -EADDRINUSE or another -errno. */
int kvf_http_start(struct kvf_metrics *m, const char *addr, uint32_t port);
/* The port it listens on (the one picked for port 0), 0 when not. */
uint16_t kvf_http_port(const struct kvf_metrics *m);
void kvf_http_stop(struct kvf_metrics *m);

#endif
