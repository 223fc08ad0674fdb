/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key table. One table drives everything: the defaults, the parse
 * (config.c), the range and form checks (kvf_cfg_int_ok, kvf_cfg_str_ok),
 * the key list the docs test compares with docs/config.md, and the debug
 * dump of the effective values. Adding a key means adding one row here
 * (and bumping KVF_CFG_NKEYS), one field in struct kvf_config, one row in
 * docs/config.md and one line in config/kvferry.conf; the unit tests fail
 * until all four agree.
 */
#define _POSIX_C_SOURCE 200809L
#include "config/config_keys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const side_names[] = {
	[SIDE_PREFILL] = "prefill",
	[SIDE_DECODE] = "decode",
	[SIDE_BOTH] = "both",
};

const char *kvf_cfg_side_name(enum key_side side)
{
	return side_names[side];
}

/*
 * The field a row fills, type-checked: the dead comparison of a pointer to
 * the named field with a pointer of the row's type does not compile
 * (-Werror) when the two differ, so a row cannot name a field of another
 * type.
 */
#define FIELD(t, f)                                                       \
	.off = offsetof(struct kvf_config, f) +                           \
	       0 * sizeof((t *)0 == &((struct kvf_config *)0)->f)
#define U32_FIELD(f) .type = KT_U32, FIELD(uint32_t, f)
#define I32_FIELD(f) .type = KT_I32, FIELD(int32_t, f)
#define STR_FIELD(f) .type = KT_STR, FIELD(char, f[0]), .max = KVF_CFG_STR - 1

#define DAY 86400
#define PH_ALL "all"
#define PH_CONN "connection setup"
#define PH_XFER "TRANSFERRING"

/* One line per key here; docs/config.md has the long form. */
static const struct kvf_key keys[] = {
	/* log level: error, warn, info, debug */
	{ .name = "log.level", .type = KT_LEVEL, FIELD(enum kvf_log_level, log_level),
	  .side = SIDE_BOTH, .phase = "none (logging)", .def = KVF_LOG_INFO },

	/* this engine's name, sent in HELLO and shown in logs */
	{ .name = "engine.id", STR_FIELD(engine_id), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "kvferry", .min = 1 },
	/* live rooms at most; the RDMA immediate carries a 20-bit slot */
	{ .name = "engine.max_rooms", U32_FIELD(max_rooms), .side = SIDE_BOTH,
	  .phase = "room creation", .def = 4096, .min = 1, .max = 1 << 20 },
	/* poller -> scheduler event ring entries */
	{ .name = "engine.ring_size", U32_FIELD(ring_size), .form = KF_POW2,
	  .side = SIDE_BOTH, .phase = PH_ALL, .def = 16384, .min = 64,
	  .max = 1 << 22 },
	/* KV blocks one room may name: a 1M-token request at page size 1
	 * with room for its other lists */
	{ .name = "engine.max_blocks_per_room", U32_FIELD(max_blocks_per_room),
	  .side = SIDE_BOTH, .phase = "init()/send()", .def = 1 << 21, .min = 1,
	  .max = 1 << 24 },
	/* how long an ABORT for a not-yet-created room is kept */
	{ .name = "engine.tombstone_ttl_s", U32_FIELD(tombstone_ttl_s),
	  .side = SIDE_BOTH, .phase = "room creation", .def = 60, .min = 1,
	  .max = DAY },
	/* tombstones kept at most (oldest evicted, counted) */
	{ .name = "engine.max_tombstones", U32_FIELD(max_tombstones),
	  .side = SIDE_BOTH, .phase = "room creation", .def = 65536, .min = 1,
	  .max = 1 << 24 },
	/* bytes of early ROOM_INFOs parked at most (more are refused, counted) */
	{ .name = "engine.max_parked_info_bytes", U32_FIELD(max_parked_info_bytes),
	  .side = SIDE_PREFILL, .phase = "ROOM_INFO before its room", .def = 16u << 20,
	  .min = 4096, .max = 1u << 30 },
	/* period of the one-line stats summary, 0 = off */
	{ .name = "engine.summary_interval_s", U32_FIELD(summary_interval_s),
	  .side = SIDE_BOTH, .phase = "none (logging)", .def = 60, .min = 0,
	  .max = DAY },

	/* BOOTSTRAPPING deadline (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT) */
	{ .name = "deadlines.bootstrap_s", U32_FIELD(bootstrap_s),
	  .side = SIDE_BOTH, .phase = "BOOTSTRAPPING", .def = 300, .min = 1,
	  .max = DAY },
	/* sender: ROOM_INFO received, send() not yet called; 0 = off */
	{ .name = "deadlines.waiting_for_input_s", U32_FIELD(waiting_for_input_s),
	  .side = SIDE_PREFILL, .phase = "WAITING_FOR_INPUT", .def = 0,
	  .min = 0, .max = DAY },
	/* sender: from the LAST chunk (send()) to the last completion */
	{ .name = "deadlines.inflight_s", U32_FIELD(inflight_s),
	  .side = SIDE_PREFILL, .phase = PH_XFER, .def = 300, .min = 1,
	  .max = DAY },
	/* sender: from one chunk to the next, until LAST (chunked prefill) */
	{ .name = "deadlines.between_chunks_s", U32_FIELD(between_chunks_s),
	  .side = SIDE_PREFILL, .phase = PH_XFER, .def = 300, .min = 1,
	  .max = DAY },
	/* receiver: from ROOM_INFO posted to the final write
	 * (SGLANG_DISAGGREGATION_WAITING_TIMEOUT) */
	{ .name = "deadlines.receiver_waiting_s", U32_FIELD(receiver_waiting_s),
	  .side = SIDE_DECODE, .phase = "WAITING_FOR_INPUT", .def = 300,
	  .min = 1, .max = DAY },
	/* wait for ABORT_ACK / flush before tearing the connection down */
	{ .name = "deadlines.quiesce_s", U32_FIELD(quiesce_s), .side = SIDE_BOTH,
	  .phase = "FAILED (quiescence)", .def = 30, .min = 1, .max = 3600 },

	/* HEARTBEAT period (SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL) */
	{ .name = "heartbeat.interval_ms", U32_FIELD(heartbeat_interval_ms),
	  .side = SIDE_BOTH, .phase = "all non-terminal", .def = 5000,
	  .min = 100, .max = 600000 },
	/* missed heartbeats before the peer is lost
	 * (SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE) */
	{ .name = "heartbeat.misses", U32_FIELD(heartbeat_misses),
	  .side = SIDE_BOTH, .phase = "all non-terminal", .def = 2, .min = 1,
	  .max = 100 },

	/* address /metrics and /rooms are served on (loopback: they are not
	 * authenticated) */
	{ .name = "metrics.listen_addr", STR_FIELD(metrics_listen_addr), .form = KF_HOST,
	  .side = SIDE_BOTH, .phase = "none (observability)", .def_s = "127.0.0.1" },
	/* HTTP port of /metrics and /rooms, 0 = no endpoint */
	{ .name = "metrics.listen_port", U32_FIELD(metrics_listen_port),
	  .side = SIDE_BOTH, .phase = "none (observability)", .def = 0, .min = 0,
	  .max = 65535 },
	/* how often the scheduler publishes the snapshot they serve */
	{ .name = "metrics.interval_ms", U32_FIELD(metrics_interval_ms),
	  .side = SIDE_BOTH, .phase = "none (observability)", .def = 1000, .min = 10,
	  .max = 600000 },

	/* verbs device name, "" = first device with an ACTIVE port */
	{ .name = "rdma.device", STR_FIELD(device), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "" },
	/* several verbs devices, one rail each (a list, or "a,b"); "" = the
	 * one of rdma.device */
	{ .name = "rdma.devices", STR_FIELD(devices), .form = KF_LIST, .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "" },
	/* the GPU (PCI bus id, or CUDA ordinal) whose nearest devices, of
	 * rdma.devices or of all, become the rails; "" = no choice */
	{ .name = "rdma.near_gpu", STR_FIELD(near_gpu), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "" },
	/* device port (verbs port_num is 8-bit, from 1) */
	{ .name = "rdma.port_num", U32_FIELD(port_num), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def = 1, .min = 1, .max = 255 },
	/* GID table index, -1 = the RoCE v2 GID of the address */
	{ .name = "rdma.gid_index", I32_FIELD(gid_index), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def = -1, .min = -1, .max = 255 },
	/* address to accept connections on, "" = do not listen */
	{ .name = "rdma.listen_addr", STR_FIELD(listen_addr), .form = KF_HOST,
	  .side = SIDE_PREFILL, .phase = PH_CONN, .def_s = "" },
	/* rdma_cm port to listen on, 0 = ephemeral (kvf_engine_listen_addr) */
	{ .name = "rdma.listen_port", U32_FIELD(listen_port),
	  .side = SIDE_PREFILL, .phase = PH_CONN, .def = 18515, .min = 0,
	  .max = 65535 },
	/* default prefill peer "host:port" for receivers, "" = none */
	{ .name = "rdma.peer", STR_FIELD(peer), .form = KF_HOSTPORT,
	  .side = SIDE_DECODE, .phase = PH_CONN, .def_s = "" },
	/* local address outgoing connections start from, "" = routing picks */
	{ .name = "rdma.source_addr", STR_FIELD(source_addr), .form = KF_HOST,
	  .side = SIDE_DECODE, .phase = PH_CONN, .def_s = "" },
	/* shared secret each side proves after the accept (HMAC over both
	 * nonces and the connection: docs/wire.md 4.4); "" is the empty key */
	{ .name = "rdma.auth_token", STR_FIELD(auth_token), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "" },
	/* the peer's proof of the token is due within this of the accept;
	 * a peer that never gives it is refused and dropped */
	{ .name = "rdma.auth_timeout_ms", U32_FIELD(auth_timeout_ms),
	  .side = SIDE_BOTH, .phase = PH_CONN, .def = 5000, .min = 100,
	  .max = 600000 },
	/* RC queue pairs per peer connection */
	{ .name = "rdma.qps_per_peer", U32_FIELD(qps_per_peer),
	  .side = SIDE_DECODE, .phase = PH_CONN, .def = 2, .min = 1, .max = 64 },
	/* connections (queue pairs) one rail holds at once, up or draining:
	 * the table grows to it (src/rdma/conn_table.c), a connection past
	 * it is refused (-ENOSPC, counted) */
	{ .name = "rdma.max_conns", U32_FIELD(max_conns), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def = 65536, .min = 1, .max = 1u << 24 },
	/* send queue entries per QP: 256 (1,024 until 2026-12-07) is twice
	 * perftest's default, which reaches line rate; each entry is memory
	 * the NIC's provider allocates per QP (docs/performance.md "Scale") */
	{ .name = "rdma.sq_depth", U32_FIELD(sq_depth), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 256, .min = 16, .max = 32768 },
	/* receive frames the rail's shared receive queue starts with, and
	 * the step it grows by (frames, write-with-imm; src/rdma/frames.h) */
	{ .name = "rdma.rq_depth", U32_FIELD(rq_depth), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 256, .min = 16, .max = 32768 },
	/* receive frames the shared receive queue grows to at most */
	{ .name = "rdma.srq_depth", U32_FIELD(srq_depth), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 4096, .min = 16, .max = 1u << 20 },
	/* close a peer connection no room has used for this long; 0 never */
	{ .name = "rdma.idle_close_s", U32_FIELD(idle_close_s), .side = SIDE_DECODE,
	  .phase = PH_CONN, .def = 300, .min = 0, .max = 86400 },
	/* control frame size; 0: sized for the largest HELLO */
	{ .name = "rdma.frame_size", U32_FIELD(frame_size), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def = 0, .min = 0, .max = 65536 },
	/* send frames of a rail, for every connection on it */
	{ .name = "rdma.send_frames", U32_FIELD(send_frames), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 256, .min = 16, .max = 65536 },
	/* scatter-gather entries per RDMA WRITE (Mooncake's default, and the
	 * most a write's gather list holds: KVF_CFG_MAX_SGE) */
	{ .name = "rdma.max_sge", U32_FIELD(max_sge), .side = SIDE_PREFILL,
	  .phase = PH_XFER, .def = 4, .min = 1, .max = KVF_CFG_MAX_SGE },
	/* signal one send work request in N */
	{ .name = "rdma.signal_every", U32_FIELD(signal_every),
	  .side = SIDE_PREFILL, .phase = PH_XFER, .def = 64, .min = 1,
	  .max = 4096 },
	/* ACK timeout 4.096 us * 2^n; 0 (= infinite) refused; 18 (~1.07 s
	 * a try, ~7.5 s for 7 retries) outlasts a congestion pause or a
	 * starved host and still gives up before the 10 s heartbeat default */
	{ .name = "rdma.qp_timeout", U32_FIELD(qp_timeout), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 18, .min = 1, .max = 31 },
	/* transport retries before IBV_WC_RETRY_EXC_ERR */
	{ .name = "rdma.retry_cnt", U32_FIELD(retry_cnt), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 7, .min = 0, .max = 7 },
	/* receiver-not-ready retries, 7 = infinite (IB spec) */
	{ .name = "rdma.rnr_retry", U32_FIELD(rnr_retry), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 7, .min = 0, .max = 7 },
	/* path MTU in bytes, 0 = the port's active MTU */
	{ .name = "rdma.mtu", U32_FIELD(mtu), .form = KF_MTU, .side = SIDE_BOTH,
	  .phase = PH_CONN, .def = 0, .min = 0, .max = 4096 },
	/* GRH traffic class (RoCE: DSCP << 2 | ECN) */
	{ .name = "rdma.traffic_class", U32_FIELD(traffic_class),
	  .side = SIDE_BOTH, .phase = PH_CONN, .def = 0, .min = 0, .max = 255 },
	/* IB service level (4 bits) */
	{ .name = "rdma.service_level", U32_FIELD(service_level),
	  .side = SIDE_BOTH, .phase = PH_CONN, .def = 0, .min = 0, .max = 15 },
	/* completions taken per ibv_poll_cq */
	{ .name = "rdma.poll_batch", U32_FIELD(poll_batch), .side = SIDE_BOTH,
	  .phase = "none (poller)", .def = 32, .min = 1, .max = 1024 },
	/* busy-poll this long when idle, then sleep on the channel */
	{ .name = "rdma.poll_idle_us", U32_FIELD(poll_idle_us),
	  .side = SIDE_BOTH, .phase = "none (poller)", .def = 1000, .min = 0,
	  .max = 1000000 },
	/* rdma_cm address/route resolution and connect timeout */
	{ .name = "rdma.connect_timeout_ms", U32_FIELD(connect_timeout_ms),
	  .side = SIDE_BOTH, .phase = PH_CONN, .def = 5000, .min = 100,
	  .max = 600000 },
	/* after a connect that never got established, no new one to that
	 * peer for this long (doubling per failure in a row, up to the max);
	 * rooms for it fail at once meanwhile. 0: no backoff */
	{ .name = "rdma.reconnect_backoff_ms", U32_FIELD(reconnect_backoff_ms),
	  .side = SIDE_DECODE, .phase = PH_CONN, .def = 100, .min = 0,
	  .max = 60000 },
	{ .name = "rdma.reconnect_backoff_max_ms", U32_FIELD(reconnect_backoff_max_ms),
	  .side = SIDE_DECODE, .phase = PH_CONN, .def = 5000, .min = 0,
	  .max = 600000 },
	/* 1: a sender region of CUDA memory the NIC cannot register (no
	 * dmabuf, no peer memory) is staged through host memory; 0: refused */
	{ .name = "rdma.cuda_staging", U32_FIELD(cuda_staging), .side = SIDE_PREFILL,
	  .phase = PH_XFER, .def = 1, .min = 0, .max = 1 },
	/* registered host memory for staging, in 256 KiB slots */
	{ .name = "rdma.staging_pool_mb", U32_FIELD(staging_pool_mb), .side = SIDE_PREFILL,
	  .phase = PH_XFER, .def = 64, .min = 1, .max = 65536 },
};


_Static_assert(sizeof(keys) / sizeof(keys[0]) == KVF_CFG_NKEYS,
	       "KVF_CFG_NKEYS is not the number of rows in keys[]");

const struct kvf_key *const kvf_cfg_keys = keys;
#define NKEYS KVF_CFG_NKEYS

/* ---- key list and lookup ---- */

static const char *key_names[NKEYS + 1];
static pthread_once_t key_names_once = PTHREAD_ONCE_INIT;

static void key_names_init(void)
{
	for (size_t i = 0; i < NKEYS; i++)
		key_names[i] = keys[i].name;
	key_names[NKEYS] = NULL;
}

const char *const *kvf_config_keys(void)
{
	/* Once: callers on several threads must not race on the fill. */
	pthread_once(&key_names_once, key_names_init);
	return key_names;
}

const struct kvf_key *kvf_cfg_key_find(const char *full)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, full) == 0)
			return &keys[i];
	return NULL;
}

bool kvf_cfg_group_known(const char *g)
{
	size_t n = strlen(g);

	for (size_t i = 0; i < NKEYS; i++)
		if (strncmp(keys[i].name, g, n) == 0 && keys[i].name[n] == '.')
			return true;
	return false;
}

/* ---- fields and defaults ---- */

static void *field(struct kvf_config *cfg, const struct kvf_key *k)
{
	return (char *)cfg + k->off;
}

void kvf_cfg_set_int(struct kvf_config *cfg, const struct kvf_key *k, int64_t v)
{
	if (k->type == KT_U32)
		*(uint32_t *)field(cfg, k) = (uint32_t)v;
	else if (k->type == KT_I32)
		*(int32_t *)field(cfg, k) = (int32_t)v;
	else
		*(enum kvf_log_level *)field(cfg, k) = (enum kvf_log_level)v;
}

void kvf_cfg_set_str(struct kvf_config *cfg, const struct kvf_key *k, const char *s)
{
	/* Length is checked against KVF_CFG_STR before we get here. */
	snprintf(field(cfg, k), KVF_CFG_STR, "%s", s);
}

void kvf_config_defaults(struct kvf_config *cfg)
{
	/* Zero first so two default configs compare equal with memcmp. */
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NKEYS; i++) {
		if (keys[i].type == KT_STR)
			kvf_cfg_set_str(cfg, &keys[i], keys[i].def_s);
		else
			kvf_cfg_set_int(cfg, &keys[i], keys[i].def);
	}
	cfg->rdma_enabled = false;
}

void kvf_cfg_expected(const struct kvf_key *k, char *buf, size_t len)
{
	switch (k->type) {
	case KT_LEVEL:
		snprintf(buf, len, "one of \"error\", \"warn\", \"info\", \"debug\"");
		return;
	case KT_STR:
		if (k->form == KF_HOST)
			snprintf(buf, len, "\"\" or an IP address or host name");
		else if (k->form == KF_HOSTPORT)
			snprintf(buf, len, "\"\" or \"host:port\" with port in [1, 65535]");
		else if (k->form == KF_LIST)
			snprintf(buf, len, "\"\", a list of up to 8 names or \"a,b\" (no blanks)");
		else
			snprintf(buf, len, "a %sstring of at most %d bytes",
				 k->min > 0 ? "non-empty " : "", KVF_CFG_STR - 1);
		return;
	default:
		break;
	}
	if (k->form == KF_MTU)
		snprintf(buf, len, "0 or one of 256, 512, 1024, 2048, 4096");
	else
		snprintf(buf, len, "%s in [%" PRId64 ", %" PRId64 "]",
			 k->form == KF_POW2 ? "a power of two" : "an integer",
			 k->min, k->max);
}

/* ---- values: what each key accepts ---- */

/* RFC 1123 host name: dot-separated labels of letters, digits, '-'. */
static bool is_hostname(const char *s, size_t n)
{
	size_t label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || (c == '-' && label > 0)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0 && s[n - 1] != '-';
}

static bool is_host(const char *s, size_t n)
{
	char buf[KVF_CFG_STR];
	unsigned char addr[16];

	if (n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(AF_INET, buf, addr) == 1 ||
	       inet_pton(AF_INET6, buf, addr) == 1 || is_hostname(buf, n);
}

static bool is_port(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno == 0 && *end == '\0' && v >= 1 && v <= 65535;
}

/* "host:port" or "[v6]:port"; a bare IPv6 address is ambiguous, refused. */
/* "a,b,c": no empty entry, no blank, no more than 8 (the rails). */
static bool is_list(const char *s)
{
	unsigned n = 1;

	if (*s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return false;
	for (; *s; s++) {
		if (*s == ' ' || *s == '\t')
			return false;
		n += *s == ',';
	}
	return n <= 8;
}

static bool is_hostport(const char *s)
{
	const char *colon;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		char v6[KVF_CFG_STR];
		unsigned char addr[16];
		size_t n;

		if (!close || close[1] != ':')
			return false;
		n = (size_t)(close - s - 1);
		memcpy(v6, s + 1, n);
		v6[n] = '\0';
		return inet_pton(AF_INET6, v6, addr) == 1 && is_port(close + 2);
	}
	colon = strchr(s, ':');
	if (!colon || strchr(colon + 1, ':'))
		return false;
	return is_host(s, (size_t)(colon - s)) && is_port(colon + 1);
}

/* "host:port", or a rail list of them "host:port,host:port" (at most 8:
 * kvf_engine_endpoint's form). */
static bool is_hostports(const char *s)
{
	char one[KVF_CFG_STR];
	unsigned n = 0;

	for (const char *p = s; p; n++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (n == 8 || len >= sizeof(one))
			return false;
		memcpy(one, p, len);
		one[len] = '\0';
		if (!is_hostport(one))
			return false;
		p = comma ? comma + 1 : NULL;
	}
	return true;
}

bool kvf_cfg_int_ok(const struct kvf_key *k, int64_t v)
{
	if (v < k->min || v > k->max)
		return false;
	if (k->form == KF_POW2)
		return (v & (v - 1)) == 0;
	if (k->form == KF_MTU)
		return v == 0 || v == 256 || v == 512 || v == 1024 ||
		       v == 2048 || v == 4096;
	return true;
}

bool kvf_cfg_str_ok(const struct kvf_key *k, const char *v)
{
	size_t n = strlen(v);

	if (n < (size_t)k->min || n > (size_t)k->max)
		return false;
	if (n == 0)
		return true;
	if (k->form == KF_HOST)
		return is_host(v, n);
	if (k->form == KF_HOSTPORT)
		return is_hostports(v);
	if (k->form == KF_LIST)
		return is_list(v);
	return true;
}

/* ---- nearest key ---- */

static size_t levenshtein(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[128];

	/* Names are short; anything longer is compared by its prefix only. */
	if (lb > 127)
		lb = 127;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t sub = diag + (a[i - 1] != b[j - 1]);
			size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;

			row[j] = sub < best ? sub : best;
			diag = up;
		}
	}
	return row[lb];
}

static const char *leaf(const char *full)
{
	const char *dot = strrchr(full, '.');

	return dot ? dot + 1 : full;
}

/*
 * The valid key nearest to an unknown dotted name. Besides the distance
 * between full names, a key whose last part matches exactly (or nearly)
 * is preferred: the usual mistake is a right key in the wrong group
 * (`engine { inflight_s = 3; }`), which a full-name distance ranks badly.
 */
const char *kvf_cfg_nearest_key(const char *full)
{
	const char *best = keys[0].name;
	size_t best_d = SIZE_MAX;

	for (size_t i = 0; i < NKEYS; i++) {
		size_t d = levenshtein(full, keys[i].name);
		size_t dl = levenshtein(leaf(full), leaf(keys[i].name)) + 2;

		if (dl < d)
			d = dl;
		if (d < best_d) {
			best_d = d;
			best = keys[i].name;
		}
	}
	return best;
}

/* Groups in table order: the first of equally near ones wins. */
void kvf_cfg_nearest_group(const char *g, char *out, size_t len)
{
	size_t best_d = SIZE_MAX;

	for (size_t i = 0; i < NKEYS; i++) {
		char grp[64];
		size_t n = (size_t)(strchr(keys[i].name, '.') - keys[i].name);
		size_t d;

		snprintf(grp, sizeof(grp), "%.*s", (int)n, keys[i].name);
		d = levenshtein(g, grp);
		if (d < best_d) {
			best_d = d;
			snprintf(out, len, "%s", grp);
		}
	}
}
