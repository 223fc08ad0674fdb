/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/config/config_override.c and the loader's override path
 * (src/config/config.c): overrides "group.key=value" on top of a file or alone,
 * read through the file's own checks, named "override N" in errors. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

static char err[512];

static void quiet(void)
{
	/* Errors are logged too; keep the test output to the failures. */
	if (!freopen("/dev/null", "w", stderr))
		kvf_log_set_level(KVF_LOG_ERROR);
}

TestSuite(override, .init = quiet);

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int load(const char *file, const char *const *ovr, size_t n, struct kvf_config *cfg)
{
	err[0] = '\0';
	return kvf_config_load_string_overrides(file, "kvferry.conf", ovr, n, cfg, err,
						sizeof(err));
}

static void expect_ok(const char *file, const char *const *ovr, size_t n, struct kvf_config *cfg)
{
	int rc = load(file, ovr, n, cfg);

	cr_assert_eq(rc, 0, "rc %d: %s", rc, err);
}

/* Fails with -EINVAL and exactly this message. */
static void expect_err(const char *file, const char *const *ovr, size_t n, const char *msg)
{
	struct kvf_config cfg;
	int rc = load(file, ovr, n, &cfg);

	cr_assert_eq(rc, -EINVAL, "rc %d, loaded (override 0: %s)", rc, n ? ovr[0] : "-");
	cr_assert_str_eq(err, msg);
}

static void expect_err1(const char *ovr, const char *msg)
{
	expect_err(NULL, &ovr, 1, msg);
}

/* ---- values ---- */

Test(override, overrides_alone_make_a_config_without_a_file)
{
	const char *o[] = { "rdma.device=mlx5_3", "rdma.listen_port=0",
			    "rdma.listen_addr=10.0.0.1" };
	struct kvf_config c, d;

	expect_ok(NULL, o, N(o), &c);
	cr_expect(c.rdma_enabled, "an rdma.* override turns the transport on");
	cr_expect_str_eq(c.device, "mlx5_3");
	cr_expect_eq(c.listen_port, 0);
	cr_expect_str_eq(c.listen_addr, "10.0.0.1");
	kvf_config_defaults(&d);
	cr_expect_eq(c.sq_depth, d.sq_depth);
	cr_expect_str_eq(c.engine_id, d.engine_id);
}

Test(override, nothing_at_all_gives_the_defaults)
{
	struct kvf_config c, d;

	expect_ok(NULL, NULL, 0, &c);
	kvf_config_defaults(&d);
	cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0);
	cr_assert(!c.rdma_enabled);
}

Test(override, a_non_rdma_override_leaves_the_transport_off)
{
	const char *o[] = { "engine.max_rooms=64" };
	struct kvf_config c;

	expect_ok(NULL, o, N(o), &c);
	cr_expect(!c.rdma_enabled);
	cr_expect_eq(c.max_rooms, 64);
}

Test(override, an_override_beats_the_file_and_a_later_one_beats_it)
{
	const char *file = "rdma = { device = \"rxe0\"; listen_port = 18600; };\n"
			   "engine = { id = \"from-file\"; };\n";
	const char *o[] = { "rdma.device=mlx5_3", "engine.id=first", "engine.id=second" };
	struct kvf_config c;

	expect_ok(file, o, N(o), &c);
	cr_expect_str_eq(c.device, "mlx5_3");
	cr_expect_eq(c.listen_port, 18600, "a key no override names keeps the file's value");
	cr_expect_str_eq(c.engine_id, "second");
}

Test(override, integers_take_libconfig_literals)
{
	const char *o[] = { "engine.max_rooms=0x40", "deadlines.inflight_s = 30L ",
			    "rdma.listen_port=0 # ephemeral", "rdma.gid_index=-1",
			    "heartbeat.misses=3 // comment" };
	struct kvf_config c;

	expect_ok(NULL, o, N(o), &c);
	cr_expect_eq(c.max_rooms, 64);
	cr_expect_eq(c.inflight_s, 30);
	cr_expect_eq(c.listen_port, 0);
	cr_expect_eq(c.gid_index, -1);
	cr_expect_eq(c.heartbeat_misses, 3);
}

Test(override, strings_bare_or_quoted)
{
	const char *o[] = { " rdma.device = mlx5_0 ", "engine.id=42",
			    "rdma.auth_token=a\"b\\c d", "rdma.peer=\"10.0.0.1:\" \"18515\"",
			    "log.level=debug", "rdma.listen_addr=" };
	struct kvf_config c;

	expect_ok(NULL, o, N(o), &c);
	cr_expect_str_eq(c.device, "mlx5_0", "blanks around key and value dropped");
	cr_expect_str_eq(c.engine_id, "42", "a bare value is a string for a string key");
	cr_expect_str_eq(c.auth_token, "a\"b\\c d", "bare: taken as is, quotes included");
	cr_expect_str_eq(c.peer, "10.0.0.1:18515", "quoted: libconfig's string syntax");
	cr_expect_eq(c.log_level, KVF_LOG_DEBUG);
	cr_expect_str_eq(c.listen_addr, "");
}

Test(override, quoted_escapes_are_libconfigs)
{
	const char *o[] = { "engine.id=\"a\\\"b\\x41\"" };
	struct kvf_config c;

	expect_ok(NULL, o, N(o), &c);
	cr_expect_str_eq(c.engine_id, "a\"bA");
}

/* ---- errors ---- */

Test(override, unknown_key_is_named_with_the_nearest)
{
	const char *o[] = { "rdma.device=x", "rdma.devcie=mlx5_3" };

	expect_err(NULL, o, N(o),
		   "override 1: unknown key 'rdma.devcie' (did you mean 'rdma.device'?)");
	expect_err1("peer=10.0.0.1:1",
		    "override 0: unknown key 'peer' (did you mean 'rdma.peer'?)");
	expect_err1("rdma.listen_port.x=0",
		    "override 0: unknown key 'rdma.listen_port.x' (did you mean 'rdma.listen_port'?)");
	expect_err1("rdma=0", "override 0: unknown key 'rdma' (did you mean 'rdma.mtu'?)");
}

Test(override, bad_value_names_the_key_and_the_index)
{
	const char *o[] = { "engine.id=ok", "rdma.listen_port=70000" };

	expect_err(NULL, o, N(o), "override 1: rdma.listen_port: expected an integer in "
		   "[0, 65535], got 70000");
	expect_err1("rdma.listen_port=\"0\"", "override 0: rdma.listen_port: expected an "
		    "integer in [0, 65535], got \"0\"");
	expect_err1("rdma.listen_port=1.5", "override 0: rdma.listen_port: expected an "
		    "integer in [0, 65535], got a float (1.5)");
	expect_err1("engine.ring_size=100", "override 0: engine.ring_size: expected a power "
		    "of two in [64, 4194304], got 100");
	expect_err1("rdma.peer=10.0.0.1:0", "override 0: rdma.peer: expected \"\" or "
		    "\"host:port\" with port in [1, 65535], got \"10.0.0.1:0\"");
	expect_err1("log.level=loud", "override 0: log.level: expected one of \"error\", "
		    "\"warn\", \"info\", \"debug\", got \"loud\"");
	expect_err1("engine.id=", "override 0: engine.id: expected a non-empty string of "
		    "at most 127 bytes, got \"\"");
}

Test(override, a_literal_libconfig_would_wrap_is_refused)
{
	expect_err1("engine.max_rooms=4294967297", "override 0: engine.max_rooms: expected "
		    "an integer in [1, 1048576], got 4294967297");
	expect_err1("rdma.listen_port=0x100004853", "override 0: rdma.listen_port: expected "
		    "an integer in [0, 65535], got 0x100004853");
	expect_err1("rdma.gid_index=0xFFFFFFFF", "override 0: rdma.gid_index: expected an "
		    "integer in [-1, 255], got 0xFFFFFFFF");
}

Test(override, a_long_string_is_refused_before_libconfig)
{
	char o[300];
	const char *op = o;

	snprintf(o, sizeof(o), "engine.id=%0200d", 7);
	expect_err(NULL, &op, 1, "override 0: engine.id: expected a non-empty string of at "
		   "most 127 bytes, got a string of 200 bytes (longer than 127)");
}

Test(override, malformed_overrides)
{
	expect_err1("rdma.listen_port", "override 0: expected \"group.key=value\" (no '=')");
	expect_err1(" =5", "override 0: expected \"group.key=value\" (no key before '=')");
	expect_err1("rdma.listen_port=", "override 0: rdma.listen_port: expected an integer "
		    "in [0, 65535], got nothing");
	expect_err1("rdma.listen_port=abc", "override 0: rdma.listen_port: expected an integer "
		    "in [0, 65535], got 'abc' (not one libconfig value: syntax error)");
	expect_err1("rdma.listen_port=1 /* open", "override 0: rdma.listen_port: expected an "
		    "integer in [0, 65535], got '1 /* open' (not one libconfig value: syntax "
		    "error)");
}

Test(override, a_value_cannot_smuggle_in_other_settings)
{
	struct kvf_config c;
	const char *o[] = { "rdma.listen_port=1; signal_every = 4" };
	const char *p[] = { "rdma.listen_port=1; }; engine = { id = \"x\"" };

	cr_assert_eq(load(NULL, o, 1, &c), -EINVAL);
	cr_expect_str_eq(err, "override 0: rdma.listen_port: expected an integer in [0, 65535], "
			 "got '1; signal_every = 4' (not one libconfig value: more than one "
			 "setting)");
	cr_assert_eq(load(NULL, p, 1, &c), -EINVAL);
	cr_expect(strstr(err, "override 0: rdma.listen_port: ") &&
		  strstr(err, "(not one libconfig value: more than one setting)"), "%s", err);
}

Test(override, a_string_keys_bad_value_is_not_echoed)
{
	struct kvf_config c;
	const char *o[] = { "rdma.auth_token=\"s3cret" };

	cr_assert_eq(load(NULL, o, 1, &c), -EINVAL);
	cr_expect(!strstr(err, "s3cret"), "a secret in the message: %s", err);
	cr_expect_str_eq(err, "override 0: rdma.auth_token: expected a string of at most 127 "
			 "bytes; the value is not one libconfig string (syntax error)");
}

Test(override, null_arguments)
{
	struct kvf_config c;
	const char *o[] = { "engine.id=a", NULL };

	cr_expect_eq(load(NULL, NULL, 1, &c), -EINVAL);
	cr_expect_eq(load(NULL, o, 1, NULL), -EINVAL);
	cr_expect_eq(load(NULL, o, 2, &c), -EINVAL);
	cr_expect_str_eq(err, "override 1: NULL instead of \"group.key=value\"");
}

Test(override, a_failed_load_leaves_cfg_alone)
{
	struct kvf_config c, before;
	const char *o[] = { "engine.id=changed", "rdma.listen_port=-1" };

	memset(&c, 0x5a, sizeof(c));
	before = c;
	cr_assert_eq(load(NULL, o, N(o), &c), -EINVAL);
	cr_expect_eq(memcmp(&c, &before, sizeof(c)), 0);
}

/* ---- the file's errors and the rules between keys ---- */

Test(override, the_files_errors_still_name_file_and_line)
{
	const char *o[] = { "engine.id=a" };

	expect_err("engine = {\n max_rooms = 0; };", o, N(o), "kvferry.conf:2: "
		   "engine.max_rooms: expected an integer in [1, 1048576], got 0");
}

Test(override, cross_key_rules_see_the_final_values)
{
	const char *fix[] = { "rdma.signal_every=16" };
	const char *brk[] = { "rdma.signal_every=64" };
	const char *brk2[] = { "engine.id=x", "rdma.sq_depth=32" };
	struct kvf_config c;

	/* The file alone breaks the rule; the override mends it. */
	expect_ok("rdma = { sq_depth = 32; };", fix, N(fix), &c);
	cr_expect_eq(c.signal_every, 16);
	cr_expect_eq(c.sq_depth, 32);
	/* The file is fine alone; the override breaks it, and is named. */
	expect_err("rdma = {\n sq_depth = 32;\n signal_every = 16; };", brk, N(brk),
		   "override 0: rdma.signal_every: expected at most rdma.sq_depth (32), got 64");
	expect_err("rdma = { signal_every = 64; };", brk2, N(brk2),
		   "override 1: rdma.signal_every: expected at most rdma.sq_depth (32), got 64");
	/* Without a file too. */
	expect_err(NULL, brk2, N(brk2),
		   "override 1: rdma.signal_every: expected at most rdma.sq_depth (32), got 64");
}

/* ---- from a file on disk ---- */

Test(override, file_on_disk_plus_overrides)
{
	char path[] = "/tmp/kvf-override-XXXXXX";
	const char *o[] = { "rdma.listen_port=0" };
	struct kvf_config c;
	int fd = mkstemp(path), rc;
	FILE *f;

	cr_assert(fd >= 0);
	f = fdopen(fd, "w");
	cr_assert(f);
	fputs("rdma = { listen_addr = \"10.0.0.1\"; listen_port = 18515; };\n", f);
	fclose(f);
	rc = kvf_config_load_overrides(path, o, N(o), &c, err, sizeof(err));
	unlink(path);
	cr_assert_eq(rc, 0, "%s", err);
	cr_expect_eq(c.listen_port, 0);
	cr_expect_str_eq(c.listen_addr, "10.0.0.1");
	cr_expect_eq(kvf_config_load_overrides("/nonexistent/kvf.conf", o, N(o), &c, err,
					       sizeof(err)), -ENOENT);
	cr_expect_eq(kvf_config_load_overrides(NULL, o, N(o), &c, err, sizeof(err)), 0);
}
