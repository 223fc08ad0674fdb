/* SPDX-License-Identifier: Apache-2.0 */
/* An override "group.key=value" as a one-setting configuration text
 * (config_override.c); the loader (config.c) parses that text as a file. */
#ifndef KVF_CONFIG_OVERRIDE_H
#define KVF_CONFIG_OVERRIDE_H

#include <stddef.h>

#include "config/config_keys.h"

/*
 * Split ovr at its first '=' (blanks around the key and the value are
 * dropped) and build "group = { key = VALUE\n; };" in a malloc'd *text,
 * with *key the key's row. VALUE is the value as written, except that a
 * string key's value not starting with '"' is taken bare and quoted.
 * Returns 0, -ENOMEM, or -EINVAL with why (no location) saying what is
 * wrong: no '=', no key, an unknown key (with the nearest one), nothing
 * after '=' for an integer key.
 */
int kvf_cfg_override_text(const char *ovr, const struct kvf_key **key, char **text,
			  char *why, size_t whylen);

#endif
