/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for the configuration loader, through the engine's
 * own entry point: each input is written to a file and loaded with
 * kvf_config_load(). (The loader takes no override strings.)
 *
 * Beyond "no crash, no sanitizer report", it checks what the loader
 * promises: the result is 0 or -EINVAL; every -EINVAL message starts with
 * "path:LINE: " with LINE >= 1; a file with a NUL byte never loads; a
 * loaded configuration obeys the ranges and the rule between keys. Run it with scripts/fuzz.sh config SECONDS.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pwrite, ftruncate, mkstemp */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_report.h"
#include "config/config.h"

static char path[] = "/tmp/kvf_fuzz_config_XXXXXX";
static int fd = -1;

static void remove_file(void)
{
	unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fd = mkstemp(path);
	if (fd < 0) {
		perror("fuzz_config: mkstemp");
		exit(1);
	}
	atexit(remove_file);
	return 0;
}

static void broken(const char *what, const char *detail)
{
	char msg[768];

	snprintf(msg, sizeof(msg), "fuzz_config: %s: '%s'", what, detail);
	fuzz_broken(msg);
}

static void check_message(const char *err)
{
	size_t n = strlen(path);

	if (strncmp(err, path, n) != 0 || err[n] != ':' || err[n + 1] < '1' ||
	    err[n + 1] > '9') {
		broken("-EINVAL without file:line", err);
	}
}

static bool in(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v >= lo && v <= hi;
}

/* A few ranges a wrapped or clamped literal would break. */
static void check_config(const struct kvf_config *c)
{
	bool ok = in(c->listen_port, 0, 65535) && in(c->max_rooms, 1, 1u << 20) &&
		  in(c->ring_size, 64, 1u << 22) && !(c->ring_size & (c->ring_size - 1)) &&
		  in(c->port_num, 1, 255) && c->gid_index >= -1 && c->gid_index <= 255 &&
		  in(c->max_sge, 1, KVF_CFG_MAX_SGE) && c->signal_every <= c->sq_depth &&
		  in(c->qp_timeout, 1, 31) && in(c->bootstrap_s, 1, 86400) &&
		  memchr(c->engine_id, '\0', KVF_CFG_STR) && c->engine_id[0] &&
		  memchr(c->auth_token, '\0', KVF_CFG_STR) &&
		  memchr(c->peer, '\0', KVF_CFG_STR);

	if (!ok)
		broken("loaded a configuration out of range", c->engine_id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvf_config cfg;
	char err[512] = "";
	int rc;

	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
		perror("fuzz_config: writing the input");
		abort();
	}
	rc = kvf_config_load(path, &cfg, err, sizeof(err));
	if (rc == 0 && memchr(data, '\0', size))
		broken("loaded a file with a NUL byte", "");
	if (rc == 0)
		check_config(&cfg);
	else if (rc == -EINVAL)
		check_message(err);
	else if (rc != -ENOMEM)
		broken("unexpected return", strerror(-rc));
	return 0;
}
