/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-scan of a configuration text: numbers tokenized as libconfig
 * 1.5's lexer does, so the loader can refuse what libconfig would wrap.
 * See config_scan.h for the token rules. */
#include "config/config_scan.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_xdigit(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static size_t count_digits(const char *s)
{
	size_t n = 0;

	while (is_digit(s[n]))
		n++;
	return n;
}

static size_t sign(const char *s)
{
	return s[0] == '-' || s[0] == '+';
}

/* L(L)? */
static size_t suffix_l(const char *s)
{
	return s[0] != 'L' ? 0 : s[1] == 'L' ? 2 : 1;
}

/* [-+]?[0-9]+ */
static size_t match_int(const char *s)
{
	size_t sg = sign(s), d = count_digits(s + sg);

	return d ? sg + d : 0;
}

/* 0[Xx][0-9A-Fa-f]+ (no sign: "-0x5" is "-0" then the name "x5") */
static size_t match_hex(const char *s)
{
	size_t n = 2;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return 0;
	while (is_xdigit(s[n]))
		n++;
	return n > 2 ? n : 0;
}

/* [eE][-+]?[0-9]+, all or nothing */
static size_t match_exp(const char *s)
{
	size_t sg, d;

	if (s[0] != 'e' && s[0] != 'E')
		return 0;
	sg = sign(s + 1);
	d = count_digits(s + 1 + sg);
	return d ? 1 + sg + d : 0;
}

/* [-+]?[0-9]*\.[0-9]*(exp)? | [-+]?[0-9]+(\.[0-9]*)?exp */
static size_t match_float(const char *s)
{
	size_t n = sign(s), d = count_digits(s + n), e;

	n += d;
	if (s[n] == '.') {
		n++;
		n += count_digits(s + n);
		return n + match_exp(s + n);
	}
	e = d ? match_exp(s + n) : 0;
	return e ? n + e : 0;
}

size_t kvf_scan_number(const char *s, enum kvf_num_kind *kind)
{
	size_t i = match_int(s), h = match_hex(s), f = match_float(s);
	size_t i64 = i && suffix_l(s + i) ? i + suffix_l(s + i) : 0;
	size_t h64 = h && suffix_l(s + h) ? h + suffix_l(s + h) : 0;
	/* flex: the longest match wins, ties go to the earlier rule; in
	 * scanner.l that is float, integer, integer64, hex, hex64 (no two of
	 * them can tie here, but keep the order anyway). */
	const size_t len[] = { f, i, i64, h, h64 };
	static const enum kvf_num_kind kinds[] = { KVF_NUM_FLOAT, KVF_NUM_INT,
		KVF_NUM_INT64, KVF_NUM_HEX, KVF_NUM_HEX64 };
	size_t best = 0;

	*kind = KVF_NUM_NONE;
	for (size_t r = 0; r < sizeof(len) / sizeof(len[0]); r++)
		if (len[r] > best) {
			best = len[r];
			*kind = kinds[r];
		}
	return best;
}

/*
 * What libconfig 1.5 does with each (as measured against the installed
 * library): {integer} (int)strtol, so 4294967297 -> 1 and
 * 99999999999999999999 -> -1; {integer64} atoll, saturating; {hex}
 * (int)strtoul, so 0xFFFFFFFF -> -1; {hex64} (long long)strtoull, so
 * 0x8000000000000000L -> INT64_MIN. The strto* call stops where the
 * token ends (or before its L suffix); if it does not, the two readings
 * disagree and the literal is refused too.
 */
bool kvf_scan_wraps(const char *s, size_t n, enum kvf_num_kind kind)
{
	unsigned long long u = 0;
	long long v = 0;
	char *end = (char *)s;

	errno = 0;
	if (kind == KVF_NUM_INT || kind == KVF_NUM_INT64)
		v = strtoll(s, &end, 10);
	else if (kind == KVF_NUM_HEX || kind == KVF_NUM_HEX64)
		u = strtoull(s, &end, 16);
	else
		return false;  /* a float: stored as written, near enough */
	if (errno || end + suffix_l(end) != s + n)
		return true;
	if (kind == KVF_NUM_INT)
		return v < INT32_MIN || v > INT32_MAX;
	if (kind == KVF_NUM_HEX)
		return u > INT32_MAX;
	return kind == KVF_NUM_HEX64 && u > INT64_MAX;
}

/* ---- the walk ---- */

struct scan {
	const char *p;
	unsigned line;
	size_t depth;       /* open brackets of any kind; only counted */
	bool in_group;      /* the depth-1 bracket is a '{' */
	char group[64];     /* its setting's name */
	char last[64];      /* the last name seen */
	char key[64];       /* the name before the last '=' or ':' */
};

/* '#' or '//' to the end of the line; '/' '*' to its closing pair. */
static void skip_comment(struct scan *sc)
{
	if (sc->p[0] != '/' || sc->p[1] != '*') {
		while (*sc->p && *sc->p != '\n')
			sc->p++;
		return;
	}
	for (sc->p += 2; *sc->p && !(sc->p[0] == '*' && sc->p[1] == '/'); sc->p++)
		sc->line += *sc->p == '\n';
	if (*sc->p)
		sc->p += 2;
}

/* A value directly in a top-level { } group belongs to "group.key". */
static void set_key(const struct scan *sc, struct kvf_scan_item *it)
{
	if (sc->depth == 1 && sc->in_group && sc->key[0])
		snprintf(it->key, sizeof(it->key), "%s.%s", sc->group, sc->key);
}

/* Bytes one escape in a string stands for, and how many it spans. */
static size_t escape_len(const char *p)
{
	if (p[1] == 'x' || p[1] == 'X')
		return is_xdigit(p[2]) && is_xdigit(p[3]) ? 4 : 1;
	return p[1] && strchr("nrtf\\\"", p[1]) ? 2 : 1;
}

/* One "..." piece, as libconfig's STRING state reads it; its length is
 * the bytes it stands for (each escape is one). */
static int string(struct scan *sc, kvf_scan_fn fn, void *arg)
{
	struct kvf_scan_item it = { .what = KVF_SCAN_STRING, .line = sc->line,
				    .text = sc->p };

	for (sc->p++; *sc->p && *sc->p != '"'; it.len++) {
		size_t n = *sc->p == '\\' ? escape_len(sc->p) : 1;

		for (; n && *sc->p; n--)
			sc->line += *sc->p++ == '\n';
	}
	if (*sc->p)
		sc->p++;
	set_key(sc, &it);
	return fn(arg, &it);
}

static bool is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*';
}

static bool is_name_char(char c)
{
	return is_name_start(c) || is_digit(c) || c == '_' || c == '-';
}

/* A name; kept truncated (no key is that long, so it cannot match one). */
static void take_name(struct scan *sc)
{
	size_t n = 0;

	while (is_name_char(*sc->p)) {
		if (n < sizeof(sc->last) - 1)
			sc->last[n++] = *sc->p;
		sc->p++;
	}
	sc->last[n] = '\0';
}

static void punct(struct scan *sc)
{
	char c = *sc->p++;

	if (c == '\n') {
		sc->line++;
	} else if (c == '=' || c == ':') {
		snprintf(sc->key, sizeof(sc->key), "%s", sc->last);
	} else if (c == '{' || c == '(' || c == '[') {
		if (sc->depth == 0) {
			sc->in_group = c == '{';
			snprintf(sc->group, sizeof(sc->group), "%s", sc->key);
		}
		sc->key[0] = '\0';
		if (sc->depth < SIZE_MAX)
			sc->depth++;
	} else if ((c == '}' || c == ')' || c == ']') && sc->depth > 0) {
		sc->depth--;
	} else if (c == ';' || c == ',') {
		sc->key[0] = '\0';
	}
}

static int number(struct scan *sc, kvf_scan_fn fn, void *arg)
{
	struct kvf_scan_item it = { .what = KVF_SCAN_NUMBER, .line = sc->line,
				    .text = sc->p };

	it.len = kvf_scan_number(sc->p, &it.kind);
	if (it.len == 0) {  /* a lone sign: libconfig's TOK_GARBAGE */
		sc->p++;
		return 0;
	}
	sc->p += it.len;
	set_key(sc, &it);
	return fn(arg, &it);
}

static int at_sign(struct scan *sc, kvf_scan_fn fn, void *arg)
{
	struct kvf_scan_item it = { .what = KVF_SCAN_INCLUDE, .line = sc->line };

	sc->p++;
	take_name(sc);
	/* libconfig takes @include only at the start of a line; anywhere else
	 * it is a syntax error. Either way it is not a configuration. */
	return strcmp(sc->last, "include") == 0 ? fn(arg, &it) : 0;
}

int kvf_scan_text(const char *text, kvf_scan_fn fn, void *arg)
{
	struct scan sc = { .p = text, .line = 1 };
	int rc = 0;

	while (rc == 0 && *sc.p) {
		char c = *sc.p;

		if (c == '#' || (c == '/' && (sc.p[1] == '/' || sc.p[1] == '*')))
			skip_comment(&sc);
		else if (c == '"')
			rc = string(&sc, fn, arg);
		else if (is_digit(c) || c == '-' || c == '+' || c == '.')
			rc = number(&sc, fn, arg);
		else if (c == '@')
			rc = at_sign(&sc, fn, arg);
		else if (is_name_start(c))
			take_name(&sc);
		else
			punct(&sc);
	}
	return rc;
}
