/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader: the file's bytes (NUL check), the pre-scan of
 * literals libconfig 1.5 would misread (config_scan.c), libconfig's parse,
 * each key against its row of the key table (config_keys.c), the rules
 * between keys (check_cross, the only place for them), and one error
 * message naming file:line for whatever is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "config_keys.h"
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

/* ---- error reporting ---- */

struct loader {
	const char *name;       /* stands for the file in messages */
	struct kvf_config cfg;  /* filled here, copied out only on success */
	const config_setting_t *seen[KVF_CFG_NKEYS]; /* where each key was set */
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

	kvf_cfg_expected(k, want, sizeof(want));
	describe(s, got, sizeof(got));
	return FAIL(ld, s, "%s: expected %s, got %s", k->name, want, got);
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
	kvf_cfg_set_int(&ld->cfg, k, v);
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

	kvf_cfg_expected(k, want, sizeof(want));
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
	kvf_cfg_set_str(&ld->cfg, k, v);
	return 0;
}

static int parse_level(struct loader *ld, const config_setting_t *s,
		       const struct kvf_key *k)
{
	enum kvf_log_level lvl;

	if (config_setting_type(s) != CONFIG_TYPE_STRING ||
	    kvf_log_level_parse(config_setting_get_string(s), &lvl) != 0)
		return fail_expected(ld, s, k);
	kvf_cfg_set_int(&ld->cfg, k, lvl);
	return 0;
}

static int parse_key(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	ld->seen[k - kvf_cfg_keys] = s;
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
		    kvf_cfg_nearest_key(full));
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
		k = kvf_cfg_key_find(full);
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

	if (kvf_cfg_group_known(name)) {
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
	kvf_cfg_nearest_group(name, near, sizeof(near));
	return FAIL(ld, s, "unknown group '%s' (did you mean '%s'?)", name, near);
}

/* ---- checks across keys ---- */

static const config_setting_t *seen(const struct loader *ld, const char *name)
{
	return ld->seen[kvf_cfg_key_find(name) - kvf_cfg_keys];
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
 * check -> after: n = 0: 1 -> 1; n = 1: 64 -> 64; n = 64..127: 128 -> 128;
 * n = 128: 192 -> 0; n = 1000: 1,024 -> 0; n = 100 KiB: 102,464 -> 0. No
 * value kvferry takes is longer than 127 bytes, so a longer piece is
 * refused here, before libconfig reads it: a failed load leaks at most one
 * 128-byte buffer.
 */
static int on_string(struct loader *ld, const struct kvf_scan_item *it)
{
	const struct kvf_key *k = it->key[0] ? kvf_cfg_key_find(it->key) : NULL;

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
	k = it->key[0] ? kvf_cfg_key_find(it->key) : NULL;
	if (!k)  /* not a key's value: the walk over libconfig's tree reports it */
		return 0;
	kvf_cfg_expected(k, want, sizeof(want));
	return fail_at(ld, ld->name, it->line, "%s: expected %s, got %.*s%s",
		       k->name, want, it->len > 40 ? 40 : (int)it->len, it->text,
		       it->len > 40 ? "..." : "");
}

/* ---- load ---- */

static void log_effective(const struct kvf_config *cfg)
{
	kvf_dbg(MOD, "rdma group %s", cfg->rdma_enabled ? "present" : "absent");
	for (size_t i = 0; i < KVF_CFG_NKEYS; i++) {
		const struct kvf_key *k = &kvf_cfg_keys[i];
		const void *f = (const char *)cfg + k->off;

		if (k->type == KT_STR)
			kvf_dbg(MOD, "%s = \"%s\" (%s; %s)", k->name,
				/* a secret: never in a log */
				k->off == offsetof(struct kvf_config, auth_token) && *(const char *)f ?
				"<set>" : (const char *)f,
				kvf_cfg_side_name(k->side), k->phase);
		else if (k->type == KT_I32)
			kvf_dbg(MOD, "%s = %d (%s; %s)", k->name, *(const int32_t *)f,
				kvf_cfg_side_name(k->side), k->phase);
		else if (k->type == KT_U32)
			kvf_dbg(MOD, "%s = %u (%s; %s)", k->name, *(const uint32_t *)f,
				kvf_cfg_side_name(k->side), k->phase);
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
