/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader. One key table drives everything: the defaults,
 * the parse, the range checks, the key list the docs test compares with
 * docs/config.md, and the debug dump of the effective values. Adding a key
 * means adding one row here, one field in struct kvf_config, one row in
 * docs/config.md and one line in config/kvferry.conf; the unit test fails
 * until all four agree.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "config_scan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOD "config"

enum key_type {
	KT_U32,   /* uint32_t field */
	KT_I32,   /* int32_t field */
	KT_STR,   /* char[KVF_CFG_STR] field */
	KT_LEVEL, /* enum kvf_log_level field, written as a string */
};

/* Checks beyond the type and [min, max]; each has its own "expected" text. */
enum key_form {
	KF_PLAIN,
	KF_POW2,     /* integer: a power of two */
	KF_MTU,      /* integer: 0 or an IB MTU in bytes */
	KF_HOST,     /* string: "" or an IP address or host name */
	KF_HOSTPORT, /* string: "" or host:port */
};

enum key_side { SIDE_PREFILL, SIDE_DECODE, SIDE_BOTH };

static const char *const side_names[] = {
	[SIDE_PREFILL] = "prefill",
	[SIDE_DECODE] = "decode",
	[SIDE_BOTH] = "both",
};

struct kvf_key {
	const char *name;      /* full dotted name, "group.key" */
	enum key_type type;
	enum key_form form;
	enum key_side side;
	const char *phase;     /* the room phase it affects (docs, debug dump) */
	int64_t def;           /* default, integer keys */
	const char *def_s;     /* default, string keys */
	int64_t min, max;      /* integers: the range; strings: length range */
	size_t off;            /* offsetof(struct kvf_config, field) */
};

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
	/* KV blocks one room may name */
	{ .name = "engine.max_blocks_per_room", U32_FIELD(max_blocks_per_room),
	  .side = SIDE_BOTH, .phase = "init()/send()", .def = 65536, .min = 1,
	  .max = 1 << 24 },
	/* how long an ABORT for a not-yet-created room is kept */
	{ .name = "engine.tombstone_ttl_s", U32_FIELD(tombstone_ttl_s),
	  .side = SIDE_BOTH, .phase = "room creation", .def = 60, .min = 1,
	  .max = DAY },
	/* tombstones kept at most (oldest evicted, counted) */
	{ .name = "engine.max_tombstones", U32_FIELD(max_tombstones),
	  .side = SIDE_BOTH, .phase = "room creation", .def = 65536, .min = 1,
	  .max = 1 << 24 },
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
	/* sender: from send() to the last completion */
	{ .name = "deadlines.inflight_s", U32_FIELD(inflight_s),
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

	/* verbs device name, "" = first device with an ACTIVE port */
	{ .name = "rdma.device", STR_FIELD(device), .side = SIDE_BOTH,
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
	/* rdma_cm port to listen on */
	{ .name = "rdma.listen_port", U32_FIELD(listen_port),
	  .side = SIDE_PREFILL, .phase = PH_CONN, .def = 18515, .min = 1,
	  .max = 65535 },
	/* default prefill peer "host:port" for receivers, "" = none */
	{ .name = "rdma.peer", STR_FIELD(peer), .form = KF_HOSTPORT,
	  .side = SIDE_DECODE, .phase = PH_CONN, .def_s = "" },
	/* local address outgoing connections start from, "" = routing picks */
	{ .name = "rdma.source_addr", STR_FIELD(source_addr), .form = KF_HOST,
	  .side = SIDE_DECODE, .phase = PH_CONN, .def_s = "" },
	/* shared token checked in HELLO, "" = no check */
	{ .name = "rdma.auth_token", STR_FIELD(auth_token), .side = SIDE_BOTH,
	  .phase = PH_CONN, .def_s = "" },
	/* RC queue pairs per peer connection */
	{ .name = "rdma.qps_per_peer", U32_FIELD(qps_per_peer),
	  .side = SIDE_DECODE, .phase = PH_CONN, .def = 1, .min = 1, .max = 64 },
	/* send queue entries per QP */
	{ .name = "rdma.sq_depth", U32_FIELD(sq_depth), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 1024, .min = 16, .max = 32768 },
	/* receive queue entries per QP (frames, write-with-imm) */
	{ .name = "rdma.rq_depth", U32_FIELD(rq_depth), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 256, .min = 16, .max = 32768 },
	/* scatter-gather entries per RDMA WRITE (Mooncake's default, and the
	 * most a write's gather list holds: KVF_CFG_MAX_SGE) */
	{ .name = "rdma.max_sge", U32_FIELD(max_sge), .side = SIDE_PREFILL,
	  .phase = PH_XFER, .def = 4, .min = 1, .max = KVF_CFG_MAX_SGE },
	/* signal one send work request in N */
	{ .name = "rdma.signal_every", U32_FIELD(signal_every),
	  .side = SIDE_PREFILL, .phase = PH_XFER, .def = 64, .min = 1,
	  .max = 4096 },
	/* ACK timeout 4.096 us * 2^n; 0 (= infinite) refused */
	{ .name = "rdma.qp_timeout", U32_FIELD(qp_timeout), .side = SIDE_BOTH,
	  .phase = PH_XFER, .def = 14, .min = 1, .max = 31 },
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
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

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

static const struct kvf_key *key_find(const char *full)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, full) == 0)
			return &keys[i];
	return NULL;
}

/* A group is known when some key's name starts with "group.". */
static bool group_known(const char *g)
{
	size_t n = strlen(g);

	for (size_t i = 0; i < NKEYS; i++)
		if (strncmp(keys[i].name, g, n) == 0 && keys[i].name[n] == '.')
			return true;
	return false;
}

/* ---- defaults ---- */

static void *field(struct kvf_config *cfg, const struct kvf_key *k)
{
	return (char *)cfg + k->off;
}

static void key_set_int(struct kvf_config *cfg, const struct kvf_key *k,
			int64_t v)
{
	if (k->type == KT_U32)
		*(uint32_t *)field(cfg, k) = (uint32_t)v;
	else if (k->type == KT_I32)
		*(int32_t *)field(cfg, k) = (int32_t)v;
	else
		*(enum kvf_log_level *)field(cfg, k) = (enum kvf_log_level)v;
}

static void key_set_str(struct kvf_config *cfg, const struct kvf_key *k,
			const char *s)
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
			key_set_str(cfg, &keys[i], keys[i].def_s);
		else
			key_set_int(cfg, &keys[i], keys[i].def);
	}
	cfg->rdma_enabled = false;
}

/* ---- error reporting ---- */

struct loader {
	const char *name;       /* stands for the file in messages */
	struct kvf_config cfg;  /* filled here, copied out only on success */
	const config_setting_t *seen[NKEYS]; /* where each key was set */
	const config_setting_t *root;        /* libconfig's tree, once parsed */
	char *err;
	size_t errlen;
};

/* Writes "file:line: msg" (no ":line" when line is 0), logs it, -EINVAL. */
static int fail_at(struct loader *ld, const char *file, unsigned line,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail_at(struct loader *ld, const char *file, unsigned line,
		   const char *fmt, ...)
{
	char msg[512], where[256];
	va_list ap;

	if (line)
		snprintf(where, sizeof(where), "%s:%u", file, line);
	else
		snprintf(where, sizeof(where), "%s", file);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kvf_err(MOD, "%s: %s", where, msg);
	if (ld->err && ld->errlen)
		snprintf(ld->err, ld->errlen, "%s: %s", where, msg);
	return -EINVAL;
}

static const char *src_file(const struct loader *ld, const config_setting_t *s)
{
	/* libconfig sets a file only for settings read via config_read_file;
	 * we read from memory, so it is always our name. */
	const char *f = s ? config_setting_source_file(s) : NULL;

	return f ? f : ld->name;
}

#define FAIL(ld, s, ...) \
	fail_at((ld), src_file((ld), (s)), config_setting_source_line(s), __VA_ARGS__)

/* What a key accepts, as said in messages: "an integer in [1, 86400]". */
static void expected(const struct kvf_key *k, char *buf, size_t len)
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

/* What the file has instead, as said in messages. */
static void describe(const config_setting_t *s, char *buf, size_t len)
{
	const char *str;

	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		snprintf(buf, len, "%lld", (long long)config_setting_get_int64(s));
		break;
	case CONFIG_TYPE_FLOAT:
		snprintf(buf, len, "a float (%g)", config_setting_get_float(s));
		break;
	case CONFIG_TYPE_BOOL:
		snprintf(buf, len, "a boolean (%s)",
			 config_setting_get_bool(s) ? "true" : "false");
		break;
	case CONFIG_TYPE_STRING:
		str = config_setting_get_string(s);
		if (strlen(str) < 64)
			snprintf(buf, len, "\"%s\"", str);
		else
			snprintf(buf, len, "a string of %zu bytes", strlen(str));
		break;
	case CONFIG_TYPE_GROUP:
		snprintf(buf, len, "a group");
		break;
	case CONFIG_TYPE_ARRAY:
		snprintf(buf, len, "an array");
		break;
	default:
		snprintf(buf, len, "a list");
		break;
	}
}

static int fail_expected(struct loader *ld, const config_setting_t *s,
			 const struct kvf_key *k)
{
	char want[128], got[96];

	expected(k, want, sizeof(want));
	describe(s, got, sizeof(got));
	return FAIL(ld, s, "%s: expected %s, got %s", k->name, want, got);
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
static const char *nearest_key(const char *full)
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

/* The group nearest to an unknown group name (groups in table order). */
static void nearest_group(const char *g, char *out, size_t len)
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

/* ---- host and host:port ---- */

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

/* ---- one key ---- */

static bool int_ok(const struct kvf_key *k, int64_t v)
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

static int parse_int(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	int t = config_setting_type(s);
	int64_t v;

	/* Either width: libconfig makes "5L" an int64 and "5" an int. */
	if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
		return fail_expected(ld, s, k);
	v = config_setting_get_int64(s);
	if (!int_ok(k, v))
		return fail_expected(ld, s, k);
	key_set_int(&ld->cfg, k, v);
	return 0;
}

static bool str_ok(const struct kvf_key *k, const char *v)
{
	size_t n = strlen(v);

	if (n < (size_t)k->min || n > (size_t)k->max)
		return false;
	if (n == 0)
		return true;
	if (k->form == KF_HOST)
		return is_host(v, n);
	if (k->form == KF_HOSTPORT)
		return is_hostport(v);
	return true;
}

static int fail_too_long(struct loader *ld, const char *file, unsigned line,
			 const struct kvf_key *k, size_t n)
{
	char want[128];

	expected(k, want, sizeof(want));
	return fail_at(ld, file, line, "%s: expected %s, got a string of %zu bytes "
		       "(longer than %d)", k->name, want, n, KVF_CFG_STR - 1);
}

static int parse_str(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	const char *v;

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return fail_expected(ld, s, k);
	v = config_setting_get_string(s);
	if (strlen(v) > (size_t)k->max)
		return fail_too_long(ld, src_file(ld, s),
				     (unsigned)config_setting_source_line(s), k, strlen(v));
	if (!str_ok(k, v))
		return fail_expected(ld, s, k);
	key_set_str(&ld->cfg, k, v);
	return 0;
}

static int parse_level(struct loader *ld, const config_setting_t *s,
		       const struct kvf_key *k)
{
	enum kvf_log_level lvl;

	if (config_setting_type(s) != CONFIG_TYPE_STRING ||
	    kvf_log_level_parse(config_setting_get_string(s), &lvl) != 0)
		return fail_expected(ld, s, k);
	key_set_int(&ld->cfg, k, lvl);
	return 0;
}

static int parse_key(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	ld->seen[k - keys] = s;
	switch (k->type) {
	case KT_STR:
		return parse_str(ld, s, k);
	case KT_LEVEL:
		return parse_level(ld, s, k);
	default:
		return parse_int(ld, s, k);
	}
}

/* ---- groups ---- */

static int unknown_key(struct loader *ld, const config_setting_t *s,
		       const char *full)
{
	return FAIL(ld, s, "unknown key '%s' (did you mean '%s'?)", full,
		    nearest_key(full));
}

static int parse_group(struct loader *ld, const config_setting_t *g)
{
	const char *gname = config_setting_name(g);

	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		char full[256];
		const struct kvf_key *k;
		int rc;

		snprintf(full, sizeof(full), "%s.%s", gname, config_setting_name(s));
		k = key_find(full);
		rc = k ? parse_key(ld, s, k) : unknown_key(ld, s, full);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_top(struct loader *ld, const config_setting_t *s)
{
	const char *name = config_setting_name(s);
	bool is_group = config_setting_type(s) == CONFIG_TYPE_GROUP;
	char near[64];

	if (group_known(name)) {
		if (!is_group) {
			char got[96];

			describe(s, got, sizeof(got));
			return FAIL(ld, s, "%s: expected a group { ... }, got %s",
				    name, got);
		}
		if (strcmp(name, "rdma") == 0)
			ld->cfg.rdma_enabled = true;
		return parse_group(ld, s);
	}
	if (!is_group)  /* a key written outside its group */
		return unknown_key(ld, s, name);
	nearest_group(name, near, sizeof(near));
	return FAIL(ld, s, "unknown group '%s' (did you mean '%s'?)", name, near);
}

/* ---- checks across keys ---- */

static const config_setting_t *seen(const struct loader *ld, const char *name)
{
	return ld->seen[key_find(name) - keys];
}

/* The line of a group's "name = {", or 0 when the file has no such group. */
static unsigned group_line(const struct loader *ld, const char *key)
{
	char grp[64];
	const config_setting_t *g;

	snprintf(grp, sizeof(grp), "%.*s", (int)strcspn(key, "."), key);
	g = config_setting_get_member(ld->root, grp);
	return g ? (unsigned)config_setting_source_line(g) : 0;
}

/*
 * Report a rule between keys at the line of the key that broke it: of the
 * keys in the rule (NULL-terminated), the one the file sets last, as the
 * value read last is the one that made the set inconsistent. The defaults
 * obey every rule, so at least one of them is set; should none be, the
 * line of the first key's group.
 */
static int fail_cross(struct loader *ld, const char *const *names,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail_cross(struct loader *ld, const char *const *names,
		      const char *fmt, ...)
{
	const config_setting_t *at = NULL;
	unsigned line;
	char msg[384];
	va_list ap;

	for (const char *const *n = names; *n; n++) {
		const config_setting_t *s = seen(ld, *n);

		if (s && (!at || config_setting_source_line(s) > config_setting_source_line(at)))
			at = s;
	}
	line = at ? (unsigned)config_setting_source_line(at) : group_line(ld, names[0]);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail_at(ld, src_file(ld, at), line, "%s", msg);
}

#define RULE(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Every rule between keys is here, and only here. */
static int check_cross(struct loader *ld)
{
	const struct kvf_config *c = &ld->cfg;

	/* With selective signalling the send queue frees only on a signalled
	 * completion: a full queue of unsignalled work would never drain. */
	if (c->signal_every > c->sq_depth)
		return fail_cross(ld, RULE("rdma.signal_every", "rdma.sq_depth"),
				  "rdma.signal_every: expected at most rdma.sq_depth "
				  "(%u), got %u", c->sq_depth, c->signal_every);
	return 0;
}

/* ---- integer literals libconfig 1.5 would wrap (config_scan.h) ---- */

/*
 * libconfig 1.5 leaks the string token it holds when it meets a syntax
 * error (its grammar has no %destructor for a discarded token), once per
 * failed load, in 64-byte steps. valgrind "definitely lost" for
 * kvf_config_load_string('engine = { id = 1 "<n bytes>" };'), before this
 * check -> after: n = 1: 64 -> 64; n = 64..127: 128 -> 128; n = 128: 192 -> 0;
 * n = 1000: 1,024 -> 0; n = 100 KiB: 102,464 -> 0. No value kvferry takes
 * is longer than 127 bytes, so a longer piece is refused here, before
 * libconfig reads it: a failed load leaks at most one 128-byte buffer.
 */
static int on_string(struct loader *ld, const struct kvf_scan_item *it)
{
	const struct kvf_key *k = it->key[0] ? key_find(it->key) : NULL;

	if (it->len <= KVF_CFG_STR - 1)
		return 0;
	if (k && k->type == KT_STR)
		return fail_too_long(ld, ld->name, it->line, k, it->len);
	return fail_at(ld, ld->name, it->line, "a string of %zu bytes: no "
		       "kvferry value is longer than %d", it->len, KVF_CFG_STR - 1);
}

static int on_literal(void *arg, const struct kvf_scan_item *it)
{
	struct loader *ld = arg;
	const struct kvf_key *k;
	char want[128];

	/* One file is the whole configuration (design.md); an include would
	 * also escape the scan. */
	if (it->what == KVF_SCAN_INCLUDE)
		return fail_at(ld, ld->name, it->line, "@include is not supported: "
			       "the configuration is one file");
	if (it->what == KVF_SCAN_STRING)
		return on_string(ld, it);
	if (!kvf_scan_wraps(it->text, it->len, it->kind))
		return 0;
	k = it->key[0] ? key_find(it->key) : NULL;
	if (!k)  /* not a key's value: the walk over libconfig's tree reports it */
		return 0;
	expected(k, want, sizeof(want));
	return fail_at(ld, ld->name, it->line, "%s: expected %s, got %.*s%s",
		       k->name, want, it->len > 40 ? 40 : (int)it->len, it->text,
		       it->len > 40 ? "..." : "");
}

/* ---- load ---- */

static void log_effective(const struct kvf_config *cfg)
{
	kvf_dbg(MOD, "rdma group %s", cfg->rdma_enabled ? "present" : "absent");
	for (size_t i = 0; i < NKEYS; i++) {
		const struct kvf_key *k = &keys[i];
		const void *f = (const char *)cfg + k->off;

		if (k->type == KT_STR)
			kvf_dbg(MOD, "%s = \"%s\" (%s; %s)", k->name,
				/* a secret: never in a log */
				k->off == offsetof(struct kvf_config, auth_token) && *(const char *)f ?
				"<set>" : (const char *)f,
				side_names[k->side], k->phase);
		else if (k->type == KT_I32)
			kvf_dbg(MOD, "%s = %d (%s; %s)", k->name, *(const int32_t *)f,
				side_names[k->side], k->phase);
		else if (k->type == KT_U32)
			kvf_dbg(MOD, "%s = %u (%s; %s)", k->name, *(const uint32_t *)f,
				side_names[k->side], k->phase);
		else
			kvf_dbg(MOD, "%s = %d (0 error .. 3 debug)", k->name,
				(int)*(const enum kvf_log_level *)f);
	}
}

static int syntax_error(struct loader *ld, const config_t *c)
{
	const char *f = config_error_file(c);

	return fail_at(ld, f ? f : ld->name, (unsigned)config_error_line(c),
		       "%s", config_error_text(c));
}

static int load_text(const char *text, const char *name, struct kvf_config *out,
		     char *err, size_t errlen)
{
	struct loader *ld = calloc(1, sizeof(*ld));
	const config_setting_t *root;
	config_t c;
	int rc;

	if (!ld)
		return -ENOMEM;
	ld->name = name ? name : "<string>";
	ld->err = err;
	ld->errlen = errlen;
	kvf_config_defaults(&ld->cfg);
	rc = kvf_scan_text(text, on_literal, ld);
	if (rc)
		goto out_free;

	config_init(&c);
	if (!config_read_string(&c, text)) {
		rc = syntax_error(ld, &c);
		goto out_destroy;
	}
	root = config_root_setting(&c);
	ld->root = root;
	for (int i = 0; rc == 0 && i < config_setting_length(root); i++)
		rc = parse_top(ld, config_setting_get_elem(root, (unsigned)i));
	if (rc == 0)
		rc = check_cross(ld);
	if (rc == 0) {
		/* memcpy, not assignment: padding too, so configs memcmp. */
		memcpy(out, &ld->cfg, sizeof(*out));
		log_effective(out);
	}
out_destroy:
	config_destroy(&c);
out_free:
	free(ld);
	return rc;
}

int kvf_config_load_string(const char *text, const char *name,
			   struct kvf_config *cfg, char *err, size_t errlen)
{
	if (!text || !cfg)
		return -EINVAL;
	return load_text(text, name, cfg, err, errlen);
}

/* Whole file into memory, NUL-terminated; -errno from the open or the read. */
static int read_all(const char *path, char **out, size_t *outlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	if (!f)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap += 65536;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);

		len += n;
		if (n == 0) {
			rc = ferror(f) ? -(errno ? errno : EIO) : 0;
			break;
		}
	}
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}

/* libconfig reads up to the first NUL and silently drops the rest: a file
 * with one in it is refused, at the NUL's offset and line. */
static int check_no_nul(const char *path, const char *text, size_t len,
			char *err, size_t errlen)
{
	const char *nul = memchr(text, '\0', len);
	struct loader ld = { .err = err, .errlen = errlen };
	unsigned line = 1;

	if (!nul)
		return 0;
	for (const char *p = text; p < nul; p++)
		line += *p == '\n';
	return fail_at(&ld, path, line, "NUL byte at offset %zu: a configuration "
		       "file is text", (size_t)(nul - text));
}

int kvf_config_load(const char *path, struct kvf_config *cfg, char *err,
		    size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!path || !cfg)
		return -EINVAL;
	/* Read it ourselves rather than config_read_file(): we get the real
	 * errno for a missing file, the text for kvf_scan_text(), and its
	 * length for the NUL check. */
	rc = read_all(path, &text, &len);
	if (rc) {
		kvf_err(MOD, "%s: %s", path, strerror(-rc));
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = check_no_nul(path, text, len, err, errlen);
	if (rc == 0)
		rc = load_text(text, path, cfg, err, errlen);
	free(text);
	return rc;
}
