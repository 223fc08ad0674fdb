/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ranks_driver: one kvferry engine standing in for one rank of a model's
 * prefill or decode (issue 9), for the RDMA suite's scenarios. Its KV
 * region "kv" holds, for each layer of --layers A:B, a K and a V buffer
 * (geometry kind 0 and 1) of pages of --page-tokens tokens x this rank's
 * heads x --head-bytes bytes: rank R of --tp T holds heads [R x H/T,
 * (R + 1) x H/T) of the model's --heads H. Every byte of the global tensor
 * is a function of (layer, kind, token, global head, byte) (gval below),
 * the token being the page's index in the window's pool x page_tokens + t,
 * so the decode side checks what landed without talking to the prefill.
 * A room may join several ranks: a prefill's --receivers N makes it a
 * fan-out to N decode ranks (kvf_sender_create_fanout), a decode's --peer
 * given more than once a fan-in from those prefill ranks
 * (kvf_receiver_create_fanin), every sender covering the whole list and
 * writing what its geometry holds of it (its heads, its layers).
 *
 *   ranks_driver --role prefill|decode [--config F] [--set KEY=VALUE]...
 *     [--heads H (8)] [--tp T (1)] [--rank R (0)] [--layers A:B (0:2)]
 *     [--page-tokens P (16)] [--head-bytes HB (128)] [--rooms N (8)]
 *     [--pages K (4) per room] [--window W (rooms)] [--first-id ID (0x9000)]
 *     [--src TP:RANK:A:B]... [--no-geometry] [--expect-fail] [--check-at-end]
 *     [--serve S] [--receivers N (1)]
 *     [--timeout S (120)] [--ready-file PATH] [--linger S] [--linger-until PATH]
 *     [--peer HOST:PORT]...
 *
 * --src (decode): a sender rank feeding this decode (its TP size, rank and
 * layers), repeatable: a byte of ours is expected from the global tensor
 * when some sender holds its layer and head, and untouched (0xdd)
 * otherwise. Without --src: the prefill is TP 1 with our layers.
 * --peer (decode): the prefill to ask (default: the config's rdma.peer);
 * given k > 1 times, a fan-in room fed by those k prefill ranks, in the
 * order of their --src.
 * --receivers N (prefill): every room a fan-out to N decode ranks, each
 * sent the whole list (each decode rank's list is --pages long).
 * Room ids are --first-id + i on both sides; a fan-out or fan-in scenario
 * runs one driver per rank with its --tp/--rank/--layers and, on a decode,
 * one --src per sender rank.
 * --check-at-end (decode): check every room's bytes after the last one
 * landed, outside the timed part (every room its own pages: a bandwidth
 * figure not slowed by the checking).
 * --no-geometry: register the region without geometry (whole items by
 * position: the reference for the same bytes whole-block).
 * --expect-fail: every room must fail (a geometry the peer cannot take);
 * each failure's detail is printed. --serve S (prefill): create no room,
 * keep the engine up S seconds (a peer whose connection is refused).
 * Prints one line per terminal room and "driver: role=... ok=N failed=N
 * bad_bytes=N bytes=N seconds=S gbit=G", then keeps the engine progressing
 * --linger S more seconds (the peer's last rooms, a /metrics read), ended
 * early once the file --linger-until names exists. Exit 0: as expected, 1 setup
 * error or unexpected outcome, 2 timeout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kvferry/kvferry.h>

#include "pattern.h"

#define MAX_SETS 32
#define MAX_SRC 8
#define UNTOUCHED 0xdd

struct src_rank {
	uint32_t tp, rank, l0, l1;
};

struct opts {
	const char *role, *config, *ready_file, *linger_until, *peers[MAX_SRC];
	const char *sets[MAX_SETS];
	size_t nsets;
	uint32_t heads, tp, rank, l0, l1, ptok, hb, rooms, pages, window, nsrc, npeers, receivers;
	struct src_rank src[MAX_SRC];
	uint64_t first_id;
	bool no_geom, expect_fail, check_at_end;
	double serve, timeout_s, linger;
};

static struct opts o;
static uint8_t **bufs;     /* (layer - l0) x 2 + kind */
static uint32_t pool;      /* pages per buffer: window x pages */
static uint64_t page_bytes;

/* The global tensor: byte b of head h of token tok of (layer, kind). */
static uint8_t gval(uint32_t layer, uint32_t kind, uint64_t tok, uint32_t h, uint32_t b)
{
	uint64_t w = kvt_mix((uint64_t)(layer * 2 + kind) << 52 ^ tok << 20 ^ (uint64_t)h << 8 ^ b / 8);

	return (uint8_t)(w >> (b % 8 * 8));
}

static uint32_t my_heads(void) { return o.heads / o.tp; }
static uint32_t my_head0(void) { return o.rank * my_heads(); }

static void usage(void)
{
	fprintf(stderr, "usage: ranks_driver --role prefill|decode [--config F] [--set K=V]...\n"
		"  [--heads H] [--tp T] [--rank R] [--layers A:B] [--page-tokens P]\n"
		"  [--head-bytes HB] [--rooms N] [--pages K] [--window W] [--first-id ID]\n"
		"  [--src TP:RANK:A:B]... [--no-geometry] [--expect-fail] [--check-at-end]\n"
		"  [--serve S] [--receivers N]\n"
		"  [--timeout S] [--ready-file PATH] [--linger S] [--linger-until PATH]\n"
		"  [--peer HOST:PORT]...\n");
	exit(1);
}

static bool opt_flag(const char *a)
{
	if (!strcmp(a, "--no-geometry"))
		o.no_geom = true;
	else if (!strcmp(a, "--expect-fail"))
		o.expect_fail = true;
	else if (!strcmp(a, "--check-at-end"))
		o.check_at_end = true;
	else
		return false;
	return true;
}

static void opt_value(const char *a, const char *v)
{
	struct src_rank *s = &o.src[o.nsrc];

	if (!strcmp(a, "--layers")) {
		if (sscanf(v, "%u:%u", &o.l0, &o.l1) != 2)
			usage();
	}
	else if (!strcmp(a, "--role")) o.role = v;
	else if (!strcmp(a, "--peer") && o.npeers < MAX_SRC) o.peers[o.npeers++] = v;
	else if (!strcmp(a, "--receivers")) o.receivers = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--config")) o.config = v;
	else if (!strcmp(a, "--set") && o.nsets < MAX_SETS) o.sets[o.nsets++] = v;
	else if (!strcmp(a, "--heads")) o.heads = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--tp")) o.tp = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--rank")) o.rank = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--page-tokens")) o.ptok = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--head-bytes")) o.hb = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--rooms")) o.rooms = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--pages")) o.pages = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--window")) o.window = (uint32_t)strtoul(v, NULL, 0);
	else if (!strcmp(a, "--first-id")) o.first_id = strtoull(v, NULL, 0);
	else if (!strcmp(a, "--src") && o.nsrc < MAX_SRC &&
		 sscanf(v, "%u:%u:%u:%u", &s->tp, &s->rank, &s->l0, &s->l1) == 4) o.nsrc++;
	else if (!strcmp(a, "--serve")) o.serve = atof(v);
	else if (!strcmp(a, "--timeout")) o.timeout_s = atof(v);
	else if (!strcmp(a, "--ready-file")) o.ready_file = v;
	else if (!strcmp(a, "--linger")) o.linger = atof(v);
	else if (!strcmp(a, "--linger-until")) o.linger_until = v;
	else usage();
}

static void parse(int argc, char **argv)
{
	o = (struct opts){.heads = 8, .tp = 1, .l1 = 2, .ptok = 16, .hb = 128, .rooms = 8,
			  .pages = 4, .first_id = 0x9000, .timeout_s = 120, .receivers = 1};
	for (int i = 1; i < argc; i++) {
		if (opt_flag(argv[i]))
			continue;
		if (i + 1 >= argc)
			usage();
		opt_value(argv[i], argv[i + 1]);
		i++;
	}
	if (!o.role || (!o.config && !o.nsets) ||
	    (strcmp(o.role, "prefill") && strcmp(o.role, "decode")) || !o.tp ||
	    o.heads % o.tp || o.rank >= o.tp || o.l1 <= o.l0 || !o.ptok || !o.hb || !o.pages ||
	    o.pages > 4096 || !o.rooms || !o.receivers || (o.npeers > 1 && o.npeers != o.nsrc))
		usage();
	if (!o.window || o.window > o.rooms || o.check_at_end)
		o.window = o.rooms;
	if (!o.nsrc)
		o.src[o.nsrc++] = (struct src_rank){1, 0, o.l0, o.l1};
}

/* Whether some sender writes head h of layer l (decode side). */
static bool covered(uint32_t l, uint32_t h)
{
	for (uint32_t k = 0; k < o.nsrc; k++) {
		const struct src_rank *s = &o.src[k];
		uint32_t n = o.heads / s->tp;

		if (l >= s->l0 && l < s->l1 && h >= s->rank * n && h < (s->rank + 1) * n)
			return true;
	}
	return false;
}

/* Fill (prefill: the global tensor; decode: UNTOUCHED) or check (decode)
 * page pg of buffer (l, kind), the tensor's page being tpg. Returns the
 * bad bytes, and adds the expected landed bytes to *landed. */
static uint64_t page_do(uint32_t l, uint32_t kind, uint32_t pg, uint32_t tpg, int what,
			uint64_t *landed)
{
	uint8_t *p = bufs[(l - o.l0) * 2 + kind] + (size_t)pg * page_bytes;
	uint64_t bad = 0;

	if (what == 1) {
		memset(p, UNTOUCHED, page_bytes);
		return 0;
	}

	for (uint32_t t = 0; t < o.ptok; t++)
		for (uint32_t j = 0; j < my_heads(); j++) {
			uint32_t h = my_head0() + j;
			uint8_t *q = p + ((size_t)t * my_heads() + j) * o.hb;
			bool in = what == 2 && covered(l, h);

			for (uint32_t b = 0; b < o.hb; b++) {
				uint8_t want = what == 0 || in ?
					       gval(l, kind, (uint64_t)tpg * o.ptok + t, h, b) : UNTOUCHED;

				if (what == 2)
					bad += q[b] != want;
				else
					q[b] = want;
			}
			if (in && landed)
				*landed += o.hb;
		}
	return bad;
}

static uint64_t room_pages(uint32_t i, int what, uint64_t *landed)
{
	uint64_t bad = 0;

	for (uint32_t l = o.l0; l < o.l1; l++)
		for (uint32_t kind = 0; kind < 2; kind++)
			for (uint32_t j = 0; j < o.pages; j++) {
				uint32_t pg = kvt_dst_block(i, j, o.pages, pool);

				bad += page_do(l, kind, pg, kvt_src_block(i, j, o.pages, pool), what, landed);
			}
	return bad;
}

/* Region "kv": K and V of every layer, with this rank's geometry. */
static int register_kv(kvf_engine *eng)
{
	uint32_t nb = (o.l1 - o.l0) * 2;
	struct kvf_buf_geometry *g = calloc(nb, sizeof(*g));
	uint64_t *sz = calloc(nb, sizeof(*sz));
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	uint32_t id;
	int rc;

	bufs = calloc(nb, sizeof(*bufs));
	if (!g || !sz || !bufs)
		return -ENOMEM;
	for (uint32_t b = 0; b < nb; b++) {
		g[b] = (struct kvf_buf_geometry){.page_tokens = o.ptok, .heads = my_heads(),
						 .head0 = my_head0(), .head_bytes = o.hb,
						 .layer = o.l0 + b / 2, .kind = b % 2};
		sz[b] = page_bytes;
		if (posix_memalign((void **)&bufs[b], 4096, (size_t)page_bytes * pool))
			return -ENOMEM;
	}
	d.name = "kv";
	d.nbufs = nb;
	d.nitems = pool;
	d.bufs = (void *const *)bufs;
	d.item_size = sz;
	d.geom = o.no_geom ? NULL : g;
	rc = kvf_region_register(eng, &d, &id);
	free(g);
	free(sz);
	return rc;
}

struct run {
	kvf_engine *eng;
	kvf_room *h;
	uint8_t *st; /* 0 not created, 1 live, 2 terminal, 3 released */
	uint32_t next, ok, failed, released;
	uint64_t bad, landed;
};

static int create_room(struct run *r, bool prefill)
{
	uint32_t i = r->next, blocks[4096];
	int rc;

	if (prefill)
		return kvf_sender_create_fanout(r->eng, o.first_id + i, o.receivers, &r->h[i]);
	room_pages(i, 1, NULL);
	if (o.npeers > 1)
		rc = kvf_receiver_create_fanin(r->eng, o.first_id + i, o.peers, o.npeers, &r->h[i]);
	else
		rc = kvf_receiver_create(r->eng, o.first_id + i, o.npeers ? o.peers[0] : NULL,
					 &r->h[i]);
	for (uint32_t j = 0; !rc && j < o.pages; j++)
		blocks[j] = kvt_dst_block(i, j, o.pages, pool);
	if (!rc) {
		rc = kvf_receiver_init(r->eng, r->h[i], blocks, o.pages);
		if (rc)
			printf("driver: kvf_receiver_init(room %u): %s (reported when polled)\n", i,
			       strerror(-rc));
		rc = 0;
	}
	return rc;
}

/* Room i reached st (SUCCESS or FAILED): check, print. */
static void terminal(struct run *r, uint32_t i, int st, bool prefill)
{
	if (st == KVF_SUCCESS) {
		uint64_t bad = prefill || o.check_at_end ? 0 : room_pages(i, 2, &r->landed);

		r->bad += bad;
		r->ok++;
		printf("room %u id=%#" PRIx64 " SUCCESS t=%.6f bad_bytes=%" PRIu64 "\n", i,
		       o.first_id + i, kvt_mono(), bad);
	} else {
		struct kvf_failure f = KVF_FAILURE_INIT;

		kvf_failure(r->eng, r->h[i], &f);
		r->failed++;
		printf("room %u id=%#" PRIx64 " FAILED reason=%s t=%.6f detail=\"%s\"\n", i,
		       o.first_id + i, kvf_fail_reason_str(f.reason), kvt_mono(), f.detail);
	}
}

static void step_room(struct run *r, uint32_t i, bool prefill)
{
	int st = kvf_poll(r->eng, r->h[i]);

	if (r->st[i] == 1 && prefill && st == KVF_WAITING_FOR_INPUT) {
		uint32_t blocks[4096];
		int rc;

		for (uint32_t j = 0; j < o.pages; j++)
			blocks[j] = kvt_src_block(i, j, o.pages, pool);
		rc = kvf_sender_send(r->eng, r->h[i], blocks, o.pages);
		if (rc && rc != -ECANCELED)
			printf("driver: kvf_sender_send(room %u): %s\n", i, strerror(-rc));
		st = kvf_poll(r->eng, r->h[i]);
	}
	if (r->st[i] == 1 && (st == KVF_SUCCESS || st == KVF_FAILED)) {
		r->st[i] = 2;
		terminal(r, i, st, prefill);
	}
	if (r->st[i] == 2 && kvf_release(r->eng, r->h[i]) == 0) {
		r->st[i] = 3;
		r->released++;
	}
}

static void ready(void)
{
	FILE *f = o.ready_file ? fopen(o.ready_file, "w") : NULL;

	if (f)
		fclose(f);
	printf("driver: ready t=%.6f\n", kvt_mono());
}

/* Create rooms as the window allows, drive them to the end. Returns 0,
 * 2 on timeout, 1 on a creation error. */
static int run_rooms(struct run *r, bool prefill, double t0)
{
	for (;;) {
		bool all = true;

		kvf_progress(r->eng);
		while (r->next < o.rooms && (r->next < o.window || r->st[r->next - o.window] == 3)) {
			int rc = create_room(r, prefill);

			if (rc) {
				printf("driver: creating room %u: %s\n", r->next, strerror(-rc));
				return 1;
			}
			r->st[r->next++] = 1;
			if (r->next == o.window)
				ready();
		}
		for (uint32_t i = 0; i < r->next; i++) {
			if (r->st[i] == 3)
				continue;
			all = false;
			step_room(r, i, prefill);
		}
		if (all && r->next == o.rooms)
			return 0;
		if (kvt_mono() - t0 > o.timeout_s) {
			printf("driver: TIMEOUT after %.0f s\n", o.timeout_s);
			kvf_dump(r->eng, stdout);
			return 2;
		}
	}
}

/* The engine progressing SECS seconds, or until the file STOP (if any) exists. */
static void spin(kvf_engine *eng, double secs, const char *stop)
{
	for (double until = kvt_mono() + secs; kvt_mono() < until;) {
		struct timespec ms = {.tv_nsec = 1000000};

		kvf_progress(eng);
		nanosleep(&ms, NULL);
		if (stop && access(stop, F_OK) == 0)
			break;
	}
}

int main(int argc, char **argv)
{
	struct run r = {0};
	char err[512];
	bool prefill;
	double t0, secs;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv);
	prefill = !strcmp(o.role, "prefill");
	pool = o.window * o.pages;
	page_bytes = (uint64_t)o.ptok * my_heads() * o.hb;
	r.h = calloc(o.rooms, sizeof(*r.h));
	r.st = calloc(o.rooms, 1);
	if (!r.h || !r.st)
		return 1;
	ret = kvf_engine_open_with(o.config, o.sets, o.nsets, err, sizeof(err), &r.eng);
	if (ret) {
		printf("driver: SETUP FAILED: kvf_engine_open_with: %s: %s\n", strerror(-ret), err);
		return 1;
	}
	ret = register_kv(r.eng);
	if (ret) {
		printf("driver: SETUP FAILED: kvf_region_register: %s\n", strerror(-ret));
		kvf_engine_close(r.eng);
		return 1;
	}
	for (uint32_t p = 0; prefill && p < pool; p++)
		for (uint32_t l = o.l0; l < o.l1; l++)
			for (uint32_t kind = 0; kind < 2; kind++)
				page_do(l, kind, p, p, 0, NULL);
	printf("driver: role=%s tp=%u rank=%u heads=[%u,%u) layers=[%u,%u) page=%u tokens x %u "
	       "heads x %u B geometry=%s\n", o.role, o.tp, o.rank, my_head0(),
	       my_head0() + my_heads(), o.l0, o.l1, o.ptok, my_heads(), o.hb,
	       o.no_geom ? "none" : "yes");
	if (prefill && o.serve > 0) {
		ready();
		spin(r.eng, o.serve, NULL);
		kvf_engine_close(r.eng);
		return 0;
	}
	t0 = kvt_mono();
	ret = run_rooms(&r, prefill, t0);
	secs = kvt_mono() - t0;
	for (uint32_t i = 0; !prefill && o.check_at_end && i < r.next; i++)
		r.bad += room_pages(i, 2, &r.landed);
	printf("driver: role=%s rooms=%u ok=%u failed=%u bad_bytes=%" PRIu64 " released=%u "
	       "bytes=%" PRIu64 " seconds=%.3f gbit=%.4f\n", o.role, o.rooms, r.ok, r.failed, r.bad,
	       r.released, r.landed, secs, (double)r.landed * 8 / secs / 1e9);
	if (!ret && (o.expect_fail ? r.ok != 0 : r.failed != 0 || r.bad != 0))
		ret = 1;
	spin(r.eng, o.linger, o.linger_until);
	kvf_engine_close(r.eng);
	return ret;
}
