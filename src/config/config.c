/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader: the file's bytes (NUL check), the pre-scan of
 * literals libconfig 1.5 would misread (config_scan.c), libconfig's parse,
 * each key against its row of the key table (config_keys.c), then the
 * overrides given in code, each read the same way as a one-setting file
 * (config_override.c builds its text), the rules between keys on the final
 * values (check_cross, the only place for them), and one error message
 * naming file:line or "override N" for whatever is wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include "config/config.h"
#include "config/config_keys.h"
#include "config/config_override.h"
#include "config/config_scan.h"

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

/* Where a key got its value: src 0 = not set, 1 = the file (at line),
 * 2 + i = override i. A higher src, then a higher line, was read later. */
struct origin {
	size_t src;
	unsigned line;
};

struct loader {
	const char *file;       /* stands for the file in messages */
	const char *name;       /* the source being read: file, or "override N" */
	size_t src;             /* its struct origin src: 1 file, 2 + i override i */
	struct kvf_config cfg;  /* filled here, copied out only on success */
	struct origin seen[KVF_CFG_NKEYS];   /* where each key was set */
	const config_setting_t *root;        /* the file's tree, once parsed */
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

	if (ld->src > 1)
		line = 0; /* an override is one line: its index names it */
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

/* ---- one key ---- */

static int parse_int(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	int t = config_setting_type(s);
	int64_t v;

	/* Either width: libconfig makes "5L" an int64 and "5" an int. */
	if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
		return fail_expected(ld, s, k);
	v = config_setting_get_int64(s);
	if (!kvf_cfg_int_ok(k, v))
		return fail_expected(ld, s, k);
	kvf_cfg_set_int(&ld->cfg, k, v);
	return 0;
}

static int fail_too_long(struct loader *ld, const char *file, unsigned line,
			 const struct kvf_key *k, size_t n)
{
	char want[128];

	kvf_cfg_expected(k, want, sizeof(want));
	return fail_at(ld, file, line, "%s: expected %s, got a string of %zu bytes "
		       "(longer than %d)", k->name, want, n, KVF_CFG_STR - 1);
}

/* A list or array of strings, as one "a,b,c" (KF_LIST keys), into buf;
 * NULL when an element is not a string or it does not fit. */
static const char *join_list(const config_setting_t *s, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < config_setting_length(s); i++) {
		const char *e = config_setting_get_string_elem(s, i);
		int w = e ? snprintf(buf + at, len - at, "%s%s", i ? "," : "", e) : -1;

		if (w < 0 || (size_t)w >= len - at)
			return NULL;
		at += (size_t)w;
	}
	return buf;
}

static int parse_str(struct loader *ld, const config_setting_t *s,
		     const struct kvf_key *k)
{
	char joined[4 * KVF_CFG_STR];
	const char *v = NULL;
	int type = config_setting_type(s);

	if (type == CONFIG_TYPE_STRING)
		v = config_setting_get_string(s);
	else if (k->form == KF_LIST && (type == CONFIG_TYPE_LIST || type == CONFIG_TYPE_ARRAY))
		v = join_list(s, joined, sizeof(joined));
	if (!v)
		return fail_expected(ld, s, k);
	if (strlen(v) > (size_t)k->max)
		return fail_too_long(ld, src_file(ld, s),
				     (unsigned)config_setting_source_line(s), k, strlen(v));
	if (!kvf_cfg_str_ok(k, v))
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
	ld->seen[k - kvf_cfg_keys] = (struct origin){
		.src = ld->src, .line = (unsigned)config_setting_source_line(s) };
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

static struct origin seen(const struct loader *ld, const char *name)
{
	return ld->seen[kvf_cfg_key_find(name) - kvf_cfg_keys];
}

/* The line of a group's "name = {", or 0 when the file has no such group. */
static unsigned group_line(const struct loader *ld, const char *key)
{
	char grp[64];
	const config_setting_t *g;

	if (!ld->root)
		return 0;
	snprintf(grp, sizeof(grp), "%.*s", (int)strcspn(key, "."), key);
	g = config_setting_get_member(ld->root, grp);
	return g ? (unsigned)config_setting_source_line(g) : 0;
}

/*
 * Report a rule between keys where the key that broke it was set: of the
 * keys in the rule (NULL-terminated), the one set last (the last override
 * that sets one, else the file's last line), as the value read last is
 * the one that made the set inconsistent. The defaults obey every rule, so
 * at least one of them is set; should none be, the line of the first
 * key's group in the file.
 */
static int fail_cross(struct loader *ld, const char *const *names,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail_cross(struct loader *ld, const char *const *names,
		      const char *fmt, ...)
{
	struct origin at = { 0 };
	char msg[384], where[32];
	va_list ap;

	for (const char *const *n = names; *n; n++) {
		struct origin o = seen(ld, *n);

		if (o.src > at.src || (o.src == at.src && o.line > at.line))
			at = o;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at.src > 1) {
		snprintf(where, sizeof(where), "override %zu", at.src - 2);
		return fail_at(ld, where, 0, "%s", msg);
	}
	return fail_at(ld, ld->file, at.src ? at.line : group_line(ld, names[0]), "%s", msg);
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
	if (c->reconnect_backoff_max_ms < c->reconnect_backoff_ms)
		return fail_cross(ld, RULE("rdma.reconnect_backoff_max_ms",
					   "rdma.reconnect_backoff_ms"),
				  "rdma.reconnect_backoff_max_ms: expected at least "
				  "rdma.reconnect_backoff_ms (%u), got %u",
				  c->reconnect_backoff_ms, c->reconnect_backoff_max_ms);
	/* A decode's peer connection is qps_per_peer connections at once. */
	if (c->max_conns < c->qps_per_peer)
		return fail_cross(ld, RULE("rdma.max_conns", "rdma.qps_per_peer"),
				  "rdma.max_conns: expected at least rdma.qps_per_peer "
				  "(%u), got %u", c->qps_per_peer, c->max_conns);
	/* A frame holds at least an AUTH frame and a ROOM_INFO part. */
	if (c->frame_size && c->frame_size < 4096)
		return fail_cross(ld, RULE("rdma.frame_size"),
				  "rdma.frame_size: expected 0 (auto) or at least 4096, got %u",
				  c->frame_size);
	/* The shared receive queue starts with rq_depth frames. */
	if (c->srq_depth < c->rq_depth)
		return fail_cross(ld, RULE("rdma.srq_depth", "rdma.rq_depth"),
				  "rdma.srq_depth: expected at least rdma.rq_depth "
				  "(%u), got %u", c->rq_depth, c->srq_depth);
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

/* The file's text into ld (the tree stays in c for the cross checks). */
static int read_file_text(struct loader *ld, const char *text, config_t *c)
{
	int rc = kvf_scan_text(text, on_literal, ld);

	if (rc)
		return rc;
	if (!config_read_string(c, text))
		return syntax_error(ld, c);
	ld->root = config_root_setting(c);
	for (int i = 0; rc == 0 && i < config_setting_length(ld->root); i++)
		rc = parse_top(ld, config_setting_get_elem(ld->root, (unsigned)i));
	return rc;
}

/* An override's text that libconfig refused, or that holds more than the
 * one setting it names (the value was not one literal): named by its key. */
static int bad_override(struct loader *ld, const struct kvf_key *k, const char *ovr,
			const char *what)
{
	const char *v = strchr(ovr, '=') + 1;
	char want[128];

	kvf_cfg_expected(k, want, sizeof(want));
	if (k->type == KT_STR) /* may be a secret (rdma.auth_token): not echoed */
		return fail_at(ld, ld->name, 0, "%s: expected %s; the value is not one "
			       "libconfig string (%s)", k->name, want, what);
	return fail_at(ld, ld->name, 0, "%s: expected %s, got '%.40s%s' (not one libconfig "
		       "value: %s)", k->name, want, v, strlen(v) > 40 ? "..." : "", what);
}

/* Exactly the one group with the one key the override names? */
static bool one_setting(const config_setting_t *root, const struct kvf_key *k)
{
	const config_setting_t *g = config_setting_get_elem(root, 0);
	size_t glen = strcspn(k->name, ".");

	return config_setting_length(root) == 1 && config_setting_is_group(g) &&
	       strlen(config_setting_name(g)) == glen &&
	       !strncmp(config_setting_name(g), k->name, glen) &&
	       config_setting_length(g) == 1 &&
	       !strcmp(config_setting_name(config_setting_get_elem(g, 0)), k->name + glen + 1);
}

/* Override i, "group.key=value", read as a file of that one setting. */
static int apply_override(struct loader *ld, size_t i, const char *ovr)
{
	const struct kvf_key *k = NULL;
	char name[32], why[384];
	char *text = NULL;
	config_t c;
	int rc;

	snprintf(name, sizeof(name), "override %zu", i);
	ld->name = name;
	ld->src = 2 + i;
	if (!ovr)
		return fail_at(ld, name, 0, "NULL instead of \"group.key=value\"");
	rc = kvf_cfg_override_text(ovr, &k, &text, why, sizeof(why));
	if (rc)
		return rc == -EINVAL ? fail_at(ld, name, 0, "%s", why) : rc;
	rc = kvf_scan_text(text, on_literal, ld);
	if (rc == 0) {
		config_init(&c);
		if (!config_read_string(&c, text))
			rc = bad_override(ld, k, ovr, config_error_text(&c));
		else if (!one_setting(config_root_setting(&c), k))
			rc = bad_override(ld, k, ovr, "more than one setting");
		else
			rc = parse_top(ld, config_setting_get_elem(config_root_setting(&c), 0));
		config_destroy(&c);
	}
	free(text);
	return rc;
}

/* Defaults, then the file's text (if any), then the overrides in order,
 * then the rules between keys on the result. */
static int load_all(const char *text, const char *name, const char *const *ovr, size_t n,
		    struct kvf_config *out, char *err, size_t errlen)
{
	struct loader *ld = calloc(1, sizeof(*ld));
	config_t c;
	int rc = 0;

	if (!ld)
		return -ENOMEM;
	ld->file = ld->name = name ? name : text ? "<string>" : "<defaults>";
	ld->src = 1;
	ld->err = err;
	ld->errlen = errlen;
	kvf_config_defaults(&ld->cfg);
	config_init(&c);
	if (text)
		rc = read_file_text(ld, text, &c);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = apply_override(ld, i, ovr[i]);
	ld->name = ld->file;
	ld->src = 1;
	if (rc == 0)
		rc = check_cross(ld);
	if (rc == 0) {
		/* memcpy, not assignment: padding too, so configs memcmp. */
		memcpy(out, &ld->cfg, sizeof(*out));
		log_effective(out);
	}
	config_destroy(&c);
	free(ld);
	return rc;
}

int kvf_config_load_string(const char *text, const char *name,
			   struct kvf_config *cfg, char *err, size_t errlen)
{
	if (!text || !cfg)
		return -EINVAL;
	return load_all(text, name, NULL, 0, cfg, err, errlen);
}

int kvf_config_load_string_overrides(const char *text, const char *name,
				     const char *const *overrides, size_t n,
				     struct kvf_config *cfg, char *err, size_t errlen)
{
	if (!cfg || (n && !overrides))
		return -EINVAL;
	return load_all(text, name, overrides, n, cfg, err, errlen);
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

int kvf_config_load_overrides(const char *path, const char *const *overrides, size_t n,
			      struct kvf_config *cfg, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!cfg || (n && !overrides))
		return -EINVAL;
	if (!path)
		return load_all(NULL, NULL, overrides, n, cfg, err, errlen);
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
		rc = load_all(text, path, overrides, n, cfg, err, errlen);
	free(text);
	return rc;
}

int kvf_config_load(const char *path, struct kvf_config *cfg, char *err,
		    size_t errlen)
{
	if (!path)
		return -EINVAL;
	return kvf_config_load_overrides(path, NULL, 0, cfg, err, errlen);
}
