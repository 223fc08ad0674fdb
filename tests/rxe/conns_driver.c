/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conns_driver: many connections to one prefill (issue 42, "no fixed cap on
 * connections"; tests/rxe/scenarios/conns.sh). Host memory, one buffer of
 * --pages pages of 4 KiB per room, every byte checked (pattern.h).
 *
 *   --role prefill --rooms R      one engine: sender rooms for ids
 *                                 --first-id .. + R - 1, each sent from its
 *                                 pool of --src-pool pages as soon as its
 *                                 receiver asks
 *   --role decode --engines E --index K
 *                                 E engines in this process, engine e the
 *                                 receiver of room id --first-id + K + e,
 *                                 each its own peer connection
 *                                 (rdma.qps_per_peer QPs) to the prefill;
 *                                 at most --window of them connecting at once
 *
 * Both sides sample kvf_stats and /proc/self/status (VmPin: the memory the
 * NIC pinned, VmRSS) before the first connection and at the most
 * connections, and print them in the summary line:
 *
 *   driver: role=... rooms=N ok=N failed=N bad_bytes=N checked_bytes=N
 *     conns_live_max=N conns_held=N conns_over_max=N pin0_kb=N pin_kb=N
 *     rss0_kb=N rss_kb=N frame_kb=N setup_s=S seconds=S
 *
 * frame_kb: the frame memory its engines registered (kvf_stats
 * frame_bytes: the rails' shared receive queues, send frames and AUTH
 * pages), the most seen.
 *
 * With --done-file the prefill creates it once every room is terminal and
 * the connections counted (the decodes hold theirs until then, so the
 * prefill sees them all at once); the decodes wait for it before closing.
 * --expect-conns N (prefill): once every room is terminal, wait up to 30 s
 * more for N connections at once before the done file (a room needs one
 * QP of its peer's group; the others may still be connecting).
 * --until-s S (prefill): after S seconds the rooms not terminal are aborted
 * and counted failed (the cap mode, whose refused peers never come).
 * --doomed A:B (prefill): the receivers of room indexes A .. B-1 may be
 * killed (the storm mode): one of them that fails (its peer lost) is cut,
 * not failed; once every other room is terminal those not terminal yet are
 * aborted and cut too; then, with --expect-conns N,
 * the prefill also waits up to 90 s for its connections to fall back to N
 * (the killed peers' torn down) and prints that count as conns_end.
 * --die-ms MS (decode): SIGKILL itself MS after its last engine's room
 * asked for its connection (the storm's peers killed mid-setup: a shell's
 * kill comes too late in a loaded guest).
 * Decode: lat_p50_s / lat_max_s, each engine's time from its open to its
 * room's SUCCESS (a connection's setup, with one small room).
 * Exit: 0 every room SUCCESS (or, with --allow-fail, terminal) and no bad
 * byte, 2 timeout, 1 otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvferry/kvferry.h>

#include "pattern.h"

#define PAGE 4096u
#define MAX_SETS 16

struct opts {
	const char *role, *config, *done_file, *ready_file, *sets[MAX_SETS];
	size_t nsets;
	uint32_t rooms, engines, index, pages, src_pool, window, expect_conns;
	uint64_t first_id;
	double timeout_s, until_s, die_ms;
	uint32_t doomed_a, doomed_b;
	bool allow_fail;
};

struct side {
	kvf_engine *eng;
	uint8_t *buf;
	kvf_room room;
	uint8_t st; /* 0 none, 1 live, 2 terminal */
	bool sent;
	double t_open, lat; /* decode: its open; open to SUCCESS, -1 none */
};

struct mem {
	long pin_kb, rss_kb;
};

struct run {
	struct opts o;
	bool prefill;
	struct side *s; /* decode: one per engine; prefill: s[0] is the engine */
	kvf_room *rooms; /* prefill */
	uint8_t *rst;    /* prefill: per room, as side.st */
	bool *rsent;
	uint32_t opened, ok, failed, live, cut;
	uint64_t bad, checked, live_max, live_now, held, over_max;
	struct mem m0, m;
	uint64_t frame_bytes;
	double t0, t_setup;
};

static void usage(void)
{
	fprintf(stderr, "usage: conns_driver --role prefill|decode --config FILE [--set K=V]...\n"
		"  [--rooms R] [--engines E --index K] [--pages P (4)] [--src-pool N (64)]\n"
		"  [--first-id ID (0x5000)] [--window W (8)] [--timeout S (150)]\n"
		"  [--done-file PATH] [--ready-file PATH] [--until-s S] [--allow-fail]\n"
		"  [--expect-conns N] [--doomed A:B]\n");
	exit(1);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.rooms = 1, .engines = 1, .pages = 4, .src_pool = 64,
			   .first_id = 0x5000, .window = 8, .timeout_s = 150};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--allow-fail")) {
			o->allow_fail = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--role")) o->role = v;
		else if (!strcmp(a, "--config")) o->config = v;
		else if (!strcmp(a, "--set") && o->nsets < MAX_SETS) o->sets[o->nsets++] = v;
		else if (!strcmp(a, "--done-file")) o->done_file = v;
		else if (!strcmp(a, "--expect-conns")) o->expect_conns = (uint32_t)atol(v);
		else if (!strcmp(a, "--ready-file")) o->ready_file = v;
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--engines")) o->engines = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--index")) o->index = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pages")) o->pages = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--src-pool")) o->src_pool = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--first-id")) o->first_id = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--window")) o->window = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--timeout")) o->timeout_s = strtod(v, NULL);
		else if (!strcmp(a, "--until-s")) o->until_s = strtod(v, NULL);
		else if (!strcmp(a, "--die-ms")) o->die_ms = strtod(v, NULL);
		else if (!strcmp(a, "--doomed") && sscanf(v, "%u:%u", &o->doomed_a, &o->doomed_b) == 2);
		else usage();
	}
	if (!o->role || !o->config || !o->pages || !o->src_pool || !o->window || !o->engines ||
	    !o->rooms)
		usage();
}

static void read_mem(struct mem *m)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*m = (struct mem){0};
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmPin: %ld", &m->pin_kb);
		sscanf(line, "VmRSS: %ld", &m->rss_kb);
	}
	if (f)
		fclose(f);
}

static int open_engine(struct run *u, uint32_t e, kvf_engine **out)
{
	const char *ov[MAX_SETS + 1];
	char id[64], err[256];
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < u->o.nsets; i++)
		ov[n++] = u->o.sets[i];
	snprintf(id, sizeof(id), "engine.id=conns-%s%u", u->prefill ? "p" : "d", u->o.index + e);
	ov[n++] = id;
	rc = kvf_engine_open_with(u->o.config, ov, n, err, sizeof(err), out);
	if (rc)
		printf("driver: SETUP FAILED: engine %u: %s\n", e, err);
	return rc;
}

/* A pool of n pages: the prefill's filled with the pattern, a decode's
 * poisoned. */
static int pool(struct side *s, uint32_t n, bool fill)
{
	void *bufs[1];
	uint64_t size = PAGE;

	s->buf = aligned_alloc(PAGE, (size_t)n * PAGE);
	if (!s->buf)
		return -ENOMEM;
	for (uint32_t p = 0; p < n; p++)
		for (uint64_t x = 0; x < PAGE / 8; x++)
			((uint64_t *)s->buf)[p * (PAGE / 8) + x] = fill ? kvt_word(0, p, x) : ~0ull;
	bufs[0] = s->buf;
	return kvf_pool_register(s->eng, 1, bufs, &size, n);
}

static void sample(struct run *u)
{
	struct kvf_stats st = KVF_STATS_INIT;
	uint64_t live = 0, held = 0, over = 0, frames = 0;
	uint32_t n = u->prefill ? 1 : u->opened;

	for (uint32_t e = 0; e < n; e++) {
		if (kvf_stats(u->s[e].eng, &st))
			continue;
		live += st.conns_live;
		held += st.conns_held;
		over += st.conns_over_max;
		frames += st.frame_bytes;
	}
	u->held = held;
	u->over_max = over;
	u->live_now = live;
	if (frames > u->frame_bytes)
		u->frame_bytes = frames;
	if (live > u->live_max || (live == u->live_max && live)) {
		u->live_max = live;
		read_mem(&u->m);
	}
}

static void report(struct run *u, uint32_t i, int st, kvf_engine *eng, kvf_room h)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;

	if (st == KVF_SUCCESS) {
		u->ok++;
		return;
	}
	kvf_failure(eng, h, &fl);
	u->failed++;
	printf("room %u id=%#" PRIx64 " FAILED reason=%s detail=\"%s\"\n", i, u->o.first_id + i,
	       kvf_fail_reason_str(fl.reason), fl.detail);
}

/* Prefill: room i's pages, from its pool. */
static void send_room(struct run *u, uint32_t i)
{
	uint32_t src[64];
	int rc;

	for (uint32_t j = 0; j < u->o.pages; j++)
		src[j] = kvt_src_block(i, j, u->o.pages, u->o.src_pool);
	rc = kvf_sender_send(u->s[0].eng, u->rooms[i], src, u->o.pages);
	if (rc && rc != -ECANCELED)
		printf("driver: room %u: send: %s\n", i, strerror(-rc));
	u->rsent[i] = true;
}

static bool doomed(const struct run *u, uint32_t i)
{
	return i >= u->o.doomed_a && i < u->o.doomed_b;
}

/* --doomed: once only the doomed rooms are live, they are aborted and
 * released uncounted (their receivers were killed). */
static void cut_doomed(struct run *u)
{
	for (uint32_t i = 0; i < u->o.rooms; i++)
		if (u->rst[i] == 1 && !doomed(u, i))
			return;
	for (uint32_t i = 0; i < u->o.rooms; i++) {
		if (u->rst[i] != 1)
			continue;
		kvf_abort(u->s[0].eng, u->rooms[i]);
		kvf_release(u->s[0].eng, u->rooms[i]);
		u->rst[i] = 2;
		u->live--;
		u->cut++;
	}
}

static void prefill_turn(struct run *u)
{
	kvf_engine *eng = u->s[0].eng;

	kvf_progress(eng);
	for (uint32_t i = 0; i < u->o.rooms; i++) {
		int st;

		if (u->rst[i] != 1)
			continue;
		st = kvf_poll(eng, u->rooms[i]);
		if (!u->rsent[i] && st == KVF_WAITING_FOR_INPUT)
			send_room(u, i);
		if (st == KVF_FAILED && doomed(u, i))
			u->cut++;
		else if (st == KVF_SUCCESS || st == KVF_FAILED)
			report(u, i, st, eng, u->rooms[i]);
		if (st == KVF_SUCCESS || st == KVF_FAILED) {
			kvf_release(eng, u->rooms[i]);
			u->rst[i] = 2;
			u->live--;
		}
	}
	if (u->o.doomed_b)
		cut_doomed(u);
}

static int prefill_setup(struct run *u)
{
	int rc = open_engine(u, 0, &u->s[0].eng);
	FILE *f;

	if (!rc)
		rc = pool(&u->s[0], u->o.src_pool, true);
	for (uint32_t i = 0; !rc && i < u->o.rooms; i++) {
		rc = kvf_sender_create(u->s[0].eng, u->o.first_id + i, &u->rooms[i]);
		u->rst[i] = 1;
		u->live++;
	}
	if (rc)
		printf("driver: SETUP FAILED: %s\n", strerror(-rc));
	read_mem(&u->m0);
	if (!rc && u->o.ready_file && (f = fopen(u->o.ready_file, "w")))
		fclose(f);
	return rc;
}

/* Prefill: until every room is terminal (or --until-s, then the rest
 * aborted), then the connections counted once more and --done-file. */
static int prefill_run(struct run *u)
{
	double last = 0;
	bool aborted = false;
	FILE *f;

	while (u->live) {
		double now = kvt_mono();

		if (now - u->t0 > u->o.timeout_s)
			return 2;
		if (u->o.until_s && now - u->t0 > u->o.until_s && !aborted) {
			for (uint32_t i = 0; i < u->o.rooms; i++)
				if (u->rst[i] == 1)
					kvf_abort(u->s[0].eng, u->rooms[i]);
			aborted = true;
		}
		prefill_turn(u);
		if (now - last > 0.2) {
			sample(u);
			last = now;
		}
		kvf_engine_wait(u->s[0].eng, 5);
	}
	u->t_setup = kvt_mono() - u->t0;
	sample(u);
	/* A room needs one QP of its peer's group; the others may still be
	 * connecting: give them 30 s more before the decodes let go. */
	for (double end = kvt_mono() + 30; u->live_max < u->o.expect_conns && kvt_mono() < end;) {
		kvf_progress(u->s[0].eng);
		sample(u);
		kvf_engine_wait(u->s[0].eng, 5);
	}
	/* The killed peers' connections: gone by their auth timeout or their
	 * heartbeat misses. */
	for (double end = kvt_mono() + 90; u->o.doomed_b && u->live_now > u->o.expect_conns &&
	     kvt_mono() < end;) {
		kvf_progress(u->s[0].eng);
		sample(u);
		kvf_engine_wait(u->s[0].eng, 20);
	}
	if (u->o.done_file && (f = fopen(u->o.done_file, "w")))
		fclose(f);
	return 0;
}

static int decode_open(struct run *u, uint32_t e)
{
	struct side *s = &u->s[e];
	uint32_t blocks[64];
	int rc = open_engine(u, e, &s->eng);

	s->t_open = kvt_mono();
	s->lat = -1;
	if (!rc)
		rc = pool(s, u->o.pages, false);
	if (!rc)
		rc = kvf_receiver_create(s->eng, u->o.first_id + u->o.index + e, NULL, &s->room);
	for (uint32_t j = 0; j < u->o.pages; j++)
		blocks[j] = j;
	if (!rc)
		rc = kvf_receiver_init(s->eng, s->room, blocks, u->o.pages);
	if (rc && rc != -ECANCELED && rc != -ENOTCONN && rc != -ECONNREFUSED) {
		printf("driver: engine %u: %s\n", e, strerror(-rc));
		return rc;
	}
	s->st = 1;
	u->live++;
	return 0;
}

static void decode_check(struct run *u, uint32_t e)
{
	const uint64_t *w = (const uint64_t *)u->s[e].buf;
	uint32_t i = u->o.index + e;

	for (uint32_t j = 0; j < u->o.pages; j++) {
		uint32_t src = kvt_src_block(i, j, u->o.pages, u->o.src_pool);

		for (uint64_t x = 0; x < PAGE / 8; x++)
			u->bad += (w[j * (PAGE / 8) + x] != kvt_word(0, src, x)) * 8;
		u->checked += PAGE;
	}
}

static void decode_turn(struct run *u)
{
	for (uint32_t e = 0; e < u->opened; e++) {
		struct side *s = &u->s[e];
		int st;

		kvf_progress(s->eng);
		if (s->st != 1)
			continue;
		st = kvf_poll(s->eng, s->room);
		if (st != KVF_SUCCESS && st != KVF_FAILED)
			continue;
		if (st == KVF_SUCCESS) {
			decode_check(u, e);
			s->lat = kvt_mono() - s->t_open;
		}
		report(u, u->o.index + e, st, s->eng, s->room);
		kvf_release(s->eng, s->room);
		s->st = 2;
		u->live--;
	}
}

/* Decode: open the engines, --window connecting at once; when every room
 * is terminal, hold the connections until --done-file. */
static int decode_run(struct run *u)
{
	double last = 0;

	read_mem(&u->m0);
	while (u->opened < u->o.engines || u->live) {
		double now = kvt_mono();

		if (now - u->t0 > u->o.timeout_s)
			return 2;
		while (u->opened < u->o.engines && u->live < u->o.window)
			if (decode_open(u, u->opened++))
				return 1;
		if (u->o.die_ms && u->opened == u->o.engines &&
		    (now - u->s[u->opened - 1].t_open) * 1000 > u->o.die_ms)
			raise(SIGKILL);
		decode_turn(u);
		if (now - last > 0.2) {
			sample(u);
			last = now;
		}
		usleep(1000);
	}
	u->t_setup = kvt_mono() - u->t0;
	sample(u);
	while (u->o.done_file && access(u->o.done_file, F_OK)) {
		if (kvt_mono() - u->t0 > u->o.timeout_s)
			return 2;
		decode_turn(u);
		usleep(20000);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Decode: the median and the most of the engines' open-to-SUCCESS times. */
static void latencies(const struct run *u, double *p50, double *max)
{
	double *v = calloc(u->opened + 1, sizeof(*v));
	uint32_t n = 0;

	*p50 = *max = 0;
	for (uint32_t e = 0; v && !u->prefill && e < u->opened; e++)
		if (u->s[e].lat >= 0)
			v[n++] = u->s[e].lat;
	if (n) {
		qsort(v, n, sizeof(*v), cmp_double);
		*p50 = v[n / 2];
		*max = v[n - 1];
	}
	free(v);
}

int main(int argc, char **argv)
{
	double p50, max;
	struct run u = {0};
	uint32_t n;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, &u.o);
	u.prefill = !strcmp(u.o.role, "prefill");
	n = u.prefill ? 1 : u.o.engines;
	u.s = calloc(n, sizeof(*u.s));
	u.rooms = calloc(u.o.rooms, sizeof(*u.rooms));
	u.rst = calloc(u.o.rooms, 1);
	u.rsent = calloc(u.o.rooms, sizeof(*u.rsent));
	if (!u.s || !u.rooms || !u.rst || !u.rsent || u.o.pages > 64)
		return 1;
	u.t0 = kvt_mono();
	if (u.prefill) {
		rc = prefill_setup(&u);
		u.opened = 1;
		if (!rc)
			rc = prefill_run(&u);
	} else {
		rc = decode_run(&u);
	}
	latencies(&u, &p50, &max);
	printf("driver: role=%s rooms=%u ok=%u failed=%u bad_bytes=%" PRIu64 " checked_bytes=%"
	       PRIu64 " conns_live_max=%" PRIu64 " conns_held=%" PRIu64 " conns_over_max=%" PRIu64
	       " pin0_kb=%ld pin_kb=%ld rss0_kb=%ld rss_kb=%ld frame_kb=%" PRIu64
	       " setup_s=%.2f seconds=%.2f lat_p50_s=%.3f lat_max_s=%.3f cut=%u conns_end=%" PRIu64
	       "\n",
	       u.o.role, u.prefill ? u.o.rooms : u.o.engines, u.ok, u.failed, u.bad, u.checked,
	       u.live_max, u.held, u.over_max, u.m0.pin_kb, u.m.pin_kb, u.m0.rss_kb, u.m.rss_kb,
	       u.frame_bytes / 1024, u.t_setup, kvt_mono() - u.t0, p50, max, u.cut, u.live_now);
	for (uint32_t e = 0; e < u.opened; e++)
		kvf_engine_close(u.s[e].eng);
	if (rc)
		return rc;
	if (u.bad || (!u.o.allow_fail && u.failed))
		return 1;
	return 0;
}
