/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry-bench's command line (usage in bench_main.c's header). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void usage(const char *why)
{
	if (why)
		fprintf(stderr, "kvferry-bench: %s\n", why);
	fprintf(stderr, "usage: kvferry-bench [--prefill-config F] [--decode-config F] [--rooms N]\n"
		"  [--prefill-set KEY=VALUE]... [--decode-set KEY=VALUE]...\n"
		"  [--buffers N] [--block-size B] [--blocks-per-room N] [--window N] [--seed N]\n"
		"  [--layout rotated|contiguous|sglang] [--verify pass|inline|off] [--verify-rooms N]\n"
		"  [--stamps FILE] [--latencies FILE] [--no-progress] [--idle-yield] [--wait]\n"
		"  [--abort-every N --abort-side prefill|decode] [--rails N] [--timeout S] [--json]\n");
	exit(2);
}

static unsigned long num(const char *opt, const char *v)
{
	char *end;
	unsigned long x = strtoul(v, &end, 0);

	if (!*v || *end) {
		fprintf(stderr, "kvferry-bench: %s wants a whole number, not \"%s\"\n", opt, v);
		usage(NULL);
	}
	return x;
}

static enum bench_layout layout(const char *v)
{
	if (!strcmp(v, "rotated"))
		return LAYOUT_ROTATED;
	if (!strcmp(v, "contiguous"))
		return LAYOUT_CONTIGUOUS;
	if (!strcmp(v, "sglang"))
		return LAYOUT_SGLANG;
	fprintf(stderr, "kvferry-bench: --layout %s: not rotated, contiguous or sglang\n", v);
	usage(NULL);
	return LAYOUT_ROTATED;
}

static int verify_mode(const char *v)
{
	if (!strcmp(v, "pass") || !strcmp(v, "on"))
		return VERIFY_PASS;
	if (!strcmp(v, "inline"))
		return VERIFY_INLINE;
	if (!strcmp(v, "off"))
		return VERIFY_OFF;
	fprintf(stderr, "kvferry-bench: --verify %s: not pass (on), inline or off\n", v);
	usage(NULL);
	return VERIFY_OFF;
}

/* One option with a value; 0 if a is not one of them. */
static int take(struct opts *o, const char *a, const char *v)
{
	if (!strcmp(a, "--prefill-config")) o->pcfg = v;
	else if (!strcmp(a, "--decode-config")) o->dcfg = v;
	else if (!strcmp(a, "--prefill-set") && o->npsets < BENCH_MAX_SETS) o->psets[o->npsets++] = v;
	else if (!strcmp(a, "--decode-set") && o->ndsets < BENCH_MAX_SETS) o->dsets[o->ndsets++] = v;
	else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)num(a, v);
	else if (!strcmp(a, "--buffers")) o->nbufs = (uint32_t)num(a, v);
	else if (!strcmp(a, "--block-size")) o->block_size = num(a, v);
	else if (!strcmp(a, "--blocks-per-room")) o->bpr = (uint32_t)num(a, v);
	else if (!strcmp(a, "--window")) o->window = (uint32_t)num(a, v);
	else if (!strcmp(a, "--seed")) o->seed = num(a, v);
	else if (!strcmp(a, "--abort-every")) o->abort_every = (uint32_t)num(a, v);
	else if (!strcmp(a, "--abort-side")) o->abort_decode = !strcmp(v, "decode");
	else if (!strcmp(a, "--timeout")) o->timeout_s = atof(v);
	else if (!strcmp(a, "--layout")) o->layout = layout(v);
	else if (!strcmp(a, "--verify")) o->verify = verify_mode(v);
	else if (!strcmp(a, "--verify-rooms")) o->verify_rooms = (uint32_t)num(a, v);
	else if (!strcmp(a, "--stamps")) o->stamps = v;
	else if (!strcmp(a, "--latencies")) o->lat_out = v;
	else if (!strcmp(a, "--rails")) o->rails = (uint32_t)num(a, v);
	else return 0;
	return 1;
}

void bench_parse(int argc, char **argv, struct opts *o)
{
	bool vr = false;

	*o = (struct opts){ .rooms = 1000, .nbufs = 64, .bpr = 16, .window = 32,
			    .block_size = 16384, .seed = 1, .timeout_s = 120,
			    .verify = VERIFY_PASS, .progress = true };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) { o->json = 1; continue; }
		if (!strcmp(a, "--no-progress")) { o->progress = false; continue; }
		if (!strcmp(a, "--idle-yield")) { o->idle_yield = true; continue; }
		if (!strcmp(a, "--wait")) { o->wait = true; continue; }
		if (!v)
			usage("an option without its value");
		vr |= !strcmp(a, "--verify-rooms");
		if (!take(o, a, v)) {
			fprintf(stderr, "kvferry-bench: unknown option %s\n", a);
			usage(NULL);
		}
		i++;
	}
	if (!vr)
		o->verify_rooms = o->rooms;
	if (o->verify != VERIFY_PASS)
		o->verify_rooms = 0;
	if (!o->pcfg && !o->npsets && !o->dcfg && !o->ndsets)
		usage("neither side has a config (--prefill-config, --decode-config, --*-set)");
	if (!o->rooms || !o->nbufs || !o->window || !o->bpr)
		usage("--rooms, --buffers, --window and --blocks-per-room must be > 0");
	if (o->block_size < 8 || o->block_size % 8)
		usage("--block-size must be a multiple of 8");
}
