/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration: one libconfig file, read in one place (config.c).
 * Every key is in the key table in config.c, typed and range-checked, and
 * documented in docs/config.md (a unit test keeps the two equal). */
#ifndef KVF_CONFIG_H
#define KVF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"

#define KVF_CFG_STR 128

/* The most scatter-gather entries one RDMA WRITE gathers (rdma.max_sge):
 * a write's gather list is a fixed array of this many (rdma.h
 * KVF_SQ_MAX_SGE (src/transfer/sendq.h), which must equal it; test_config.c checks). */
#define KVF_CFG_MAX_SGE 4u

struct kvf_config {
	/* log */
	enum kvf_log_level log_level;         /* log.level */

	/* engine */
	char engine_id[KVF_CFG_STR];          /* engine.id */
	uint32_t max_rooms;                   /* engine.max_rooms */
	uint32_t ring_size;                   /* engine.ring_size (power of two) */
	uint32_t max_blocks_per_room;         /* engine.max_blocks_per_room */
	uint32_t tombstone_ttl_s;             /* engine.tombstone_ttl_s */
	uint32_t max_tombstones;              /* engine.max_tombstones */
	uint32_t max_parked_info_bytes;       /* engine.max_parked_info_bytes */
	uint32_t summary_interval_s;          /* engine.summary_interval_s, 0 = off */

	/* deadlines (seconds; 0 = off only where the doc says so) */
	uint32_t bootstrap_s;                 /* deadlines.bootstrap_s */
	uint32_t waiting_for_input_s;         /* deadlines.waiting_for_input_s, 0 = off */
	uint32_t inflight_s;                  /* deadlines.inflight_s */
	uint32_t between_chunks_s;            /* deadlines.between_chunks_s */
	uint32_t receiver_waiting_s;          /* deadlines.receiver_waiting_s */
	uint32_t quiesce_s;                   /* deadlines.quiesce_s */

	/* heartbeat */
	uint32_t heartbeat_interval_ms;       /* heartbeat.interval_ms */
	uint32_t heartbeat_misses;            /* heartbeat.misses */

	/* metrics (the HTTP endpoint; off while listen_port is 0) */
	char metrics_listen_addr[KVF_CFG_STR]; /* metrics.listen_addr */
	uint32_t metrics_listen_port;         /* metrics.listen_port, 0 = off */
	uint32_t metrics_interval_ms;         /* metrics.interval_ms */

	/* rdma (the transport; absent section = no transport) */
	bool rdma_enabled;                    /* true when the rdma group exists */
	char device[KVF_CFG_STR];             /* rdma.device, "" = first ACTIVE port */
	char devices[KVF_CFG_STR];            /* rdma.devices: "dev,dev" (a libconfig
	                                         list is joined so), "" = rdma.device */
	char near_gpu[KVF_CFG_STR];           /* rdma.near_gpu: PCI bus id or CUDA
	                                         ordinal, "" = no topology choice */
	uint32_t port_num;                    /* rdma.port_num */
	int32_t gid_index;                    /* rdma.gid_index, -1 = auto (RoCE v2 of addr) */
	char listen_addr[KVF_CFG_STR];        /* rdma.listen_addr, "" = do not listen */
	uint32_t listen_port;                 /* rdma.listen_port */
	char peer[KVF_CFG_STR];               /* rdma.peer, default "host:port" for receivers */
	char source_addr[KVF_CFG_STR];        /* rdma.source_addr, "" = routing picks */
	char auth_token[KVF_CFG_STR];         /* rdma.auth_token */
	uint32_t auth_timeout_ms;             /* rdma.auth_timeout_ms */
	uint32_t qps_per_peer;                /* rdma.qps_per_peer */
	uint32_t max_conns;                   /* rdma.max_conns, per rail */
	uint32_t sq_depth;                    /* rdma.sq_depth */
	uint32_t rq_depth;                    /* rdma.rq_depth */
	uint32_t srq_depth;                   /* rdma.srq_depth */
	uint32_t send_frames;                 /* rdma.send_frames */
	uint32_t frame_size;                  /* rdma.frame_size, 0 = auto */
	uint32_t idle_close_s;                /* rdma.idle_close_s, 0 = never */
	uint32_t max_sge;                     /* rdma.max_sge */
	uint32_t signal_every;                /* rdma.signal_every */
	uint32_t qp_timeout;                  /* rdma.qp_timeout (4.096us * 2^n) */
	uint32_t retry_cnt;                   /* rdma.retry_cnt */
	uint32_t rnr_retry;                   /* rdma.rnr_retry */
	uint32_t mtu;                         /* rdma.mtu, 0 = port's active MTU */
	uint32_t traffic_class;               /* rdma.traffic_class */
	uint32_t service_level;               /* rdma.service_level */
	uint32_t poll_batch;                  /* rdma.poll_batch */
	uint32_t poll_idle_us;                /* rdma.poll_idle_us, then sleep on the channel */
	uint32_t connect_timeout_ms;          /* rdma.connect_timeout_ms */
	uint32_t reconnect_backoff_ms;        /* rdma.reconnect_backoff_ms */
	uint32_t reconnect_backoff_max_ms;    /* rdma.reconnect_backoff_max_ms */
	uint32_t cuda_staging;                /* rdma.cuda_staging: 1 = stage CUDA memory the
	                                         NIC cannot register */
	uint32_t staging_pool_mb;             /* rdma.staging_pool_mb */
};

/* Fill with the defaults (see docs/config.md). */
void kvf_config_defaults(struct kvf_config *cfg);

/*
 * Load path into cfg (defaults first, then the file). On error, logs and
 * writes into err (if non-NULL) one message naming the file, the line, the
 * key and what was expected (or the nearest valid key for an unknown one).
 * cfg is written only on success.
 * Returns 0, -EINVAL (bad file, or path/cfg NULL), -ENOMEM, or the -errno
 * of opening/reading path: -ENOENT (no such file), -EACCES, -EISDIR, ...
 */
int kvf_config_load(const char *path, struct kvf_config *cfg, char *err, size_t errlen);

/* Same, from a string (tests); "name" stands for the file in messages.
 * Returns 0, -EINVAL or -ENOMEM. */
int kvf_config_load_string(const char *text, const char *name,
			   struct kvf_config *cfg, char *err, size_t errlen);

/*
 * Load path (NULL = no file: the defaults), then apply the n overrides in
 * order, then check the rules between keys on the result. An override is
 * "group.key=value" with the value in libconfig's literal syntax, except
 * that a string key's value not starting with '"' is taken bare, as is
 * ("rdma.device=mlx5_3"); blanks around the key and the value are dropped.
 * An rdma.* override turns the transport on, as an rdma group would. An
 * error in an override is reported like one in the file, "override I"
 * (its 0-based index) standing for "file:line". overrides may be NULL when
 * n is 0. Returns as kvf_config_load; -EINVAL also for cfg NULL or
 * overrides NULL with n > 0.
 */
int kvf_config_load_overrides(const char *path, const char *const *overrides, size_t n,
			      struct kvf_config *cfg, char *err, size_t errlen);

/* Same, from a string (text NULL = no file). Returns 0, -EINVAL or -ENOMEM. */
int kvf_config_load_string_overrides(const char *text, const char *name,
				     const char *const *overrides, size_t n,
				     struct kvf_config *cfg, char *err, size_t errlen);

/* The key table, for docs checks: full dotted names, NULL-terminated. */
const char *const *kvf_config_keys(void);

#endif
