/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An override ("rdma.listen_port=0", given in code) turned into the text of
 * a one-setting configuration, "rdma = { listen_port = 0\n; };", which the
 * loader (config.c) then reads exactly as it reads a file: the scan for
 * literals libconfig 1.5 would misread, libconfig's parse, the key's row.
 * Only the split and that text are here; no value is judged here.
 */
#define _POSIX_C_SOURCE 200809L
#include "config/config_override.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int why_fmt(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int why_fmt(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* [*s, *e) without the blanks at either end. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && blank(**s))
		(*s)++;
	while (*e > *s && blank((*e)[-1]))
		(*e)--;
}

static bool is_string_key(const struct kvf_key *k)
{
	return k->type == KT_STR || k->type == KT_LEVEL;
}

/*
 * The value as a libconfig literal: a string key's bare value is quoted
 * (only '"' and '\' need escaping inside libconfig's quotes); anything else
 * is passed as written. Returns the malloc'd text of the whole setting.
 */
static char *setting_text(const struct kvf_key *k, const char *v, size_t n)
{
	size_t glen = strcspn(k->name, "."), cap = 2 * n + strlen(k->name) + 32;
	char *text = malloc(cap), *p;

	if (!text)
		return NULL;
	p = text + sprintf(text, "%.*s = { %s = ", (int)glen, k->name, k->name + glen + 1);
	if (is_string_key(k) && (n == 0 || v[0] != '"')) {
		*p++ = '"';
		for (size_t i = 0; i < n; i++) {
			if (v[i] == '"' || v[i] == '\\')
				*p++ = '\\';
			*p++ = v[i];
		}
		*p++ = '"';
	} else {
		memcpy(p, v, n);
		p += n;
	}
	/* The newline ends a '#' or '//' comment the value may carry, so it
	 * cannot swallow the closing brace. */
	strcpy(p, "\n; };");
	return text;
}

int kvf_cfg_override_text(const char *ovr, const struct kvf_key **key, char **text,
			  char *why, size_t whylen)
{
	const char *eq = strchr(ovr, '='), *ks = ovr, *ke = eq, *vs, *ve;
	char name[128], want[128];
	const struct kvf_key *k;

	if (!eq)
		return why_fmt(why, whylen, "expected \"group.key=value\" (no '=')");
	trim(&ks, &ke);
	if (ks == ke)
		return why_fmt(why, whylen, "expected \"group.key=value\" (no key before '=')");
	snprintf(name, sizeof(name), "%.*s", (int)(ke - ks), ks);
	k = (size_t)(ke - ks) < sizeof(name) ? kvf_cfg_key_find(name) : NULL;
	if (!k)
		return why_fmt(why, whylen, "unknown key '%.64s%s' (did you mean '%s'?)", name,
			       strlen(name) > 64 ? "..." : "", kvf_cfg_nearest_key(name));
	vs = eq + 1;
	ve = vs + strlen(vs);
	trim(&vs, &ve);
	if (vs == ve && !is_string_key(k)) {
		kvf_cfg_expected(k, want, sizeof(want));
		return why_fmt(why, whylen, "%s: expected %s, got nothing", k->name, want);
	}
	*text = setting_text(k, vs, (size_t)(ve - vs));
	if (!*text)
		return -ENOMEM;
	*key = k;
	return 0;
}
