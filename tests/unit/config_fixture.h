/* SPDX-License-Identifier: Apache-2.0 */
/* What the config suites share: quiet logs (TestSuite(name, .init =
 * config_quiet)), loading text as "kvferry.conf", and the three checks on
 * the result. err holds the loader's message. Included by one test file
 * each: the definitions are static. */
#ifndef KVF_CONFIG_FIXTURE_H
#define KVF_CONFIG_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "base/log.h"

static char err[512];

static inline void config_quiet(void)
{
	/* Errors are logged too; keep the test output to the failures. */
	if (!freopen("/dev/null", "w", stderr))
		kvf_log_set_level(KVF_LOG_ERROR);
}

static inline int load(const char *text, struct kvf_config *cfg)
{
	err[0] = '\0';
	return kvf_config_load_string(text, "kvferry.conf", cfg, err, sizeof(err));
}

/* Loading text fails with -EINVAL and exactly this message. */
static inline void expect_err(const char *text, const char *msg)
{
	struct kvf_config cfg;
	int rc = load(text, &cfg);

	cr_assert_eq(rc, -EINVAL, "loaded %s", text);
	cr_assert_str_eq(err, msg, "for:\n%s", text);
}

/* Loading text fails and the message contains part. */
static inline void expect_err_has(const char *text, const char *part)
{
	struct kvf_config cfg;
	int rc = load(text, &cfg);

	cr_assert_eq(rc, -EINVAL, "loaded %s", text);
	cr_assert(strstr(err, part), "message '%s' lacks '%s'", err, part);
}

static inline void expect_ok(const char *text, struct kvf_config *cfg)
{
	int rc = load(text, cfg);

	cr_assert_eq(rc, 0, "rc %d: %s (for %s)", rc, err, text);
}

#endif
