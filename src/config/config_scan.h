/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pre-scan of a configuration text, before libconfig 1.5 parses it.
 *
 * libconfig 1.5 stores a plain integer as (int)strtol(): "4294967297"
 * becomes 1 and passes a range check. The loader (config.c) therefore
 * walks the text first, tokenizing numbers exactly as libconfig's lexer
 * (lib/scanner.l) does, and refuses a literal whose stored value would not
 * be the written one. To agree with libconfig the scanner follows flex's
 * rule: at each point the longest match among these wins (libconfig 1.5's
 * definitions):
 *
 *   name       [A-Za-z*][-A-Za-z0-9_*]*
 *   integer    [-+]?[0-9]+
 *   integer64  [-+]?[0-9]+L(L)?
 *   hex        0[Xx][0-9A-Fa-f]+
 *   hex64      0[Xx][0-9A-Fa-f]+L(L)?
 *   float      [-+]?[0-9]*\.[0-9]*([eE][-+]?[0-9]+)?
 *            | [-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+
 *
 * so "4294985811listen_addr" is the integer 4294985811 then a name, "5l" is
 * 5 then the name "l", and "1e" is 1 then "e". Comments (#, //, / * * /)
 * are skipped as the lexer skips them; strings are measured, so the loader
 * can refuse a long one before libconfig 1.5 could leak it.
 */
#ifndef KVF_CONFIG_SCAN_H
#define KVF_CONFIG_SCAN_H

#include <stdbool.h>
#include <stddef.h>

enum kvf_num_kind {
	KVF_NUM_NONE,   /* no numeric token here */
	KVF_NUM_INT,    /* {integer}: libconfig keeps (int)strtol() */
	KVF_NUM_INT64,  /* {integer64}: atoll(), saturating */
	KVF_NUM_HEX,    /* {hex}: (int)strtoul(, 16) */
	KVF_NUM_HEX64,  /* {hex64}: (long long)strtoull(, 16) */
	KVF_NUM_FLOAT,  /* {float}: atof(), not ours to judge */
};

/*
 * The numeric token libconfig's lexer takes at s: its length (0 with
 * KVF_NUM_NONE when s starts no number). Reads only up to the first byte
 * that cannot extend a match, so a NUL-terminated s is safe.
 */
size_t kvf_scan_number(const char *s, enum kvf_num_kind *kind);

/* Would libconfig 1.5 store, for the token [s, s+n) of this kind, a value
 * other than the one written (wrapped to 32 bits, or saturated)? */
bool kvf_scan_wraps(const char *s, size_t n, enum kvf_num_kind kind);

enum kvf_scan_what {
	KVF_SCAN_NUMBER,  /* a numeric literal */
	KVF_SCAN_STRING,  /* one "..." piece (adjacent pieces are separate) */
	KVF_SCAN_INCLUDE, /* an @include directive */
};

struct kvf_scan_item {
	enum kvf_scan_what what;
	unsigned line;          /* 1-based, as libconfig counts */
	const char *text;       /* the literal as written (NUMBER, STRING) */
	size_t len;             /* NUMBER: bytes written; STRING: bytes it
	                         * stands for, escapes decoded */
	enum kvf_num_kind kind;
	/* "group.key" when the literal is the whole value of a setting of a
	 * top-level { } group, the only place kvferry has keys; else "". */
	char key[128];
};

/* Called for each item; a nonzero return stops the walk. */
typedef int (*kvf_scan_fn)(void *arg, const struct kvf_scan_item *it);

/*
 * Walk the NUL-terminated text and call fn for every numeric literal, every
 * string piece and every @include. Any bytes are accepted: nesting is only counted, never
 * stored, so no depth is too deep.
 * Returns 0, or fn's first nonzero return.
 */
int kvf_scan_text(const char *text, kvf_scan_fn fn, void *arg);

#endif
