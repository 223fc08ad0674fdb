/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key table (config_keys.c): every configuration key with its type,
 * range, default, side and phase. The loader (config.c), the defaults, the
 * messages' "expected ..." text and the nearest-name hints all read it.
 */
#ifndef KVF_CONFIG_KEYS_H
#define KVF_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

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
	KF_LIST,     /* string: "" or "a,b,c" without blanks; in a file also a
	                list or array of strings, joined with commas */
};

enum key_side { SIDE_PREFILL, SIDE_DECODE, SIDE_BOTH };

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

/* Rows in the table (config_keys.c asserts it at compile time): the
 * loader keeps one slot per key. */
#define KVF_CFG_NKEYS 54

extern const struct kvf_key *const kvf_cfg_keys;

/* The row for a full dotted name, or NULL. */
const struct kvf_key *kvf_cfg_key_find(const char *full);
/* True when some key's name starts with "g.". */
bool kvf_cfg_group_known(const char *g);
/* "prefill", "decode" or "both". */
const char *kvf_cfg_side_name(enum key_side side);

/* Write v (already checked) into k's field of cfg. */
void kvf_cfg_set_int(struct kvf_config *cfg, const struct kvf_key *k, int64_t v);
/* Write s (already checked to fit KVF_CFG_STR) into k's field of cfg. */
void kvf_cfg_set_str(struct kvf_config *cfg, const struct kvf_key *k, const char *s);

/* Does v (integer keys) / s (string keys) pass k's range and form?
 * (KF_HOST: "" or an IP address or host name; KF_HOSTPORT: "" or
 * "host:port" / "[v6]:port" with port in [1, 65535].) */
bool kvf_cfg_int_ok(const struct kvf_key *k, int64_t v);
bool kvf_cfg_str_ok(const struct kvf_key *k, const char *s);

/* What a key accepts, as said in messages: "an integer in [1, 86400]". */
void kvf_cfg_expected(const struct kvf_key *k, char *buf, size_t len);
/* The valid key nearest to an unknown dotted name. */
const char *kvf_cfg_nearest_key(const char *full);
/* The group nearest to an unknown group name, into out. */
void kvf_cfg_nearest_group(const char *g, char *out, size_t len);

#endif
