/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry-bench: the main job. Moves KV blocks from a prefill engine to a
 * decode engine over real RDMA, room by room, checks every destination byte
 * against its source, and prints the throughput (and JSON with --json).
 *
 *   one process, both roles:
 *     kvferry-bench --prefill-config P.conf --decode-config D.conf [opts]
 *   two processes (start prefill first; same --seed and shape on both):
 *     kvferry-bench --prefill-config P.conf [opts]
 *     kvferry-bench --decode-config D.conf [opts]
 *
 * Either side may instead (or also) be set from code: --prefill-set KEY=VALUE
 * and --decode-set KEY=VALUE (repeatable) are overrides of that side's
 * config ("rdma.listen_port=0"; docs/config.md, Overrides); a side with
 * overrides and no config file starts from the defaults.
 *
 * Options: --rooms N (1000)  --buffers N (64: layers x K/V)
 *   --block-size BYTES (16384)  --blocks-per-room N (16)  --window N (32
 *   rooms in flight)  --seed N  --abort-every N (abort every Nth room on the
 *   side given by --abort-side prefill|decode)  --timeout S (120)  --json
 *
 * Both sides derive the same room ids and block lists from --seed: room i
 * uses partition i % window of each pool, so a partition is reused only
 * after its previous room was released. The source block b of buffer k
 * holds pattern(k, b); the decode side poisons its destination blocks
 * before each room and checks them after SUCCESS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvferry/kvferry.h>

#define MAX_SETS 32

struct opts {
	const char *pcfg, *dcfg;
	const char *psets[MAX_SETS], *dsets[MAX_SETS]; /* --prefill-set, --decode-set */
	size_t npsets, ndsets;
	uint32_t rooms, nbufs, bpr, window;
	uint64_t block_size, seed;
	uint32_t abort_every;
	int abort_decode;
	double timeout_s;
	int json;
};

struct side {
	kvf_engine *eng;
	bool prefill;
	uint8_t **bufs;
	uint32_t nblocks;
	kvf_room *rooms;       /* per room index */
	uint32_t *blocks;      /* scratch block list, blocks-per-room long */
	uint8_t *state;        /* 0 = not created, 1 = live, 2 = released */
	uint32_t next;         /* next room index to create */
	uint32_t done, ok, failed, bad_bytes;
	struct kvf_failure first_failure;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t room_id(const struct opts *o, uint32_t i)
{
	return mix(o->seed * 1000003u + i) >> 1;
}

/* Block j of room i on one side: a random permutation inside the room's
 * partition, different for source and destination. */
static uint32_t room_block(const struct opts *o, uint32_t i, uint32_t j, bool src)
{
	uint32_t part = i % o->window, base = part * o->bpr;
	uint32_t rot = (uint32_t)(mix(o->seed ^ ((uint64_t)i << 1 | src)) % o->bpr);
	/* rotation then stride 1: distinct blocks, runs that are contiguous
	 * sometimes and wrap other times, so both merged and split writes occur */
	return base + (j + rot) % o->bpr;
}

static uint64_t pattern(const struct opts *o, uint32_t buf, uint32_t block, uint64_t word)
{
	return mix(o->seed ^ (uint64_t)buf << 40 ^ (uint64_t)block << 20 ^ word);
}

static int alloc_pool(const struct opts *o, struct side *s)
{
	uint64_t *bs = calloc(o->nbufs, sizeof(*bs));
	int rc;

	s->nblocks = o->window * o->bpr;
	s->bufs = calloc(o->nbufs, sizeof(*s->bufs));
	if (!bs || !s->bufs)
		return -ENOMEM;
	for (uint32_t k = 0; k < o->nbufs; k++) {
		bs[k] = o->block_size;
		if (posix_memalign((void **)&s->bufs[k], 4096, o->block_size * s->nblocks))
			return -ENOMEM;
		for (uint32_t b = 0; b < s->nblocks; b++) {
			uint64_t *w = (uint64_t *)(s->bufs[k] + b * o->block_size);

			for (uint64_t x = 0; x < o->block_size / 8; x++)
				w[x] = s->prefill ? pattern(o, k, b, x) : 0;
		}
	}
	rc = kvf_pool_register(s->eng, o->nbufs, (void *const *)s->bufs, bs, s->nblocks);
	free(bs);
	return rc;
}

static bool should_abort(const struct opts *o, const struct side *s, uint32_t i)
{
	return o->abort_every && (i + 1) % o->abort_every == 0 && s->prefill == !o->abort_decode;
}

/* Create the next room if its partition is free. */
static int create_next(const struct opts *o, struct side *s)
{
	uint32_t i = s->next, *blocks = s->blocks;
	int rc;

	if (i >= o->rooms || (i >= o->window && s->state[i - o->window] != 2))
		return 0;
	if (s->prefill) {
		rc = kvf_sender_create(s->eng, room_id(o, i), &s->rooms[i]);
	} else {
		for (uint32_t k = 0; k < o->nbufs; k++)
			for (uint32_t j = 0; j < o->bpr; j++)
				memset(s->bufs[k] + room_block(o, i, j, false) * o->block_size, 0xdd,
				       o->block_size);
		rc = kvf_receiver_create(s->eng, room_id(o, i), NULL, &s->rooms[i]);
		for (uint32_t j = 0; !rc && j < o->bpr; j++)
			blocks[j] = room_block(o, i, j, false);
		if (!rc)
			rc = kvf_receiver_init(s->eng, s->rooms[i], blocks, o->bpr);
		if (rc == -ECANCELED)
			rc = 0; /* failed at once (e.g. connect): counted when polled */
	}
	if (rc)
		return rc;
	s->state[i] = 1;
	s->next++;
	return 1;
}

static uint32_t verify(const struct opts *o, const struct side *s, uint32_t i)
{
	uint32_t bad = 0;

	for (uint32_t k = 0; k < o->nbufs; k++) {
		for (uint32_t j = 0; j < o->bpr; j++) {
			const uint64_t *w = (const uint64_t *)(s->bufs[k] +
				room_block(o, i, j, false) * o->block_size);
			uint32_t src = room_block(o, i, j, true);

			for (uint64_t x = 0; x < o->block_size / 8; x++)
				bad += w[x] != pattern(o, k, src, x);
		}
	}
	return bad;
}

/* Drive one live room: send when it is time, abort when asked, finish it
 * when terminal and quiescent. */
static void step_room(const struct opts *o, struct side *s, uint32_t i)
{
	uint32_t *blocks = s->blocks;
	int st = kvf_poll(s->eng, s->rooms[i]);

	/* Mid-transfer: the sender once its writes are posted, the receiver
	 * once its ROOM_INFO is out. */
	if (should_abort(o, s, i) &&
	    (st == KVF_TRANSFERRING || (!s->prefill && st == KVF_WAITING_FOR_INPUT)))
		kvf_abort(s->eng, s->rooms[i]);
	if (s->prefill && st == KVF_WAITING_FOR_INPUT) {
		for (uint32_t j = 0; j < o->bpr; j++)
			blocks[j] = room_block(o, i, j, true);
		/* A prefill-side abort goes right after the writes are posted,
		 * while they are still in flight. */
		if (kvf_sender_send(s->eng, s->rooms[i], blocks, o->bpr) == 0 && should_abort(o, s, i))
			kvf_abort(s->eng, s->rooms[i]);
		return;
	}
	if (st != KVF_SUCCESS && st != KVF_FAILED)
		return;
	if (kvf_release(s->eng, s->rooms[i]) != 0)
		return; /* not quiescent yet */
	s->state[i] = 2;
	s->done++;
	if (st == KVF_SUCCESS) {
		s->ok++;
		if (!s->prefill)
			s->bad_bytes += verify(o, s, i);
	} else {
		s->failed++;
	}
}

/* The handle is stale after release; keep the failure of the first failed
 * room for the report before releasing. */
static void note_failure(struct side *s, uint32_t i)
{
	if (s->first_failure.reason == KVF_FAIL_NONE &&
	    kvf_poll(s->eng, s->rooms[i]) == KVF_FAILED) {
		s->first_failure.size = sizeof(s->first_failure);
		kvf_failure(s->eng, s->rooms[i], &s->first_failure);
	}
}

static int drive(const struct opts *o, struct side *s)
{
	int rc;

	if (!s->eng)
		return 0;
	kvf_progress(s->eng);
	while ((rc = create_next(o, s)) > 0)
		;
	if (rc < 0)
		return rc;
	for (uint32_t i = s->next > o->window ? s->next - o->window : 0; i < s->next; i++) {
		if (s->state[i] != 1)
			continue;
		note_failure(s, i);
		step_room(o, s, i);
	}
	return 0;
}

static int open_side(const char *cfg, bool prefill, const struct opts *o, struct side *s)
{
	const char *const *sets = prefill ? o->psets : o->dsets;
	size_t nsets = prefill ? o->npsets : o->ndsets;
	char err[512];
	int rc;

	memset(s, 0, sizeof(*s));
	s->prefill = prefill;
	rc = kvf_engine_open_with(cfg, sets, nsets, err, sizeof(err), &s->eng);
	if (rc) {
		fprintf(stderr, "kvferry-bench: %s engine: %s\n", prefill ? "prefill" : "decode", err);
		return rc;
	}
	s->rooms = calloc(o->rooms, sizeof(*s->rooms));
	s->state = calloc(o->rooms, 1);
	s->blocks = calloc(o->bpr, sizeof(*s->blocks));
	if (!s->rooms || !s->state || !s->blocks)
		return -ENOMEM;
	rc = alloc_pool(o, s);
	if (rc)
		fprintf(stderr, "kvferry-bench: pool registration: %s\n", strerror(-rc));
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: kvferry-bench [--prefill-config F] [--decode-config F] [--rooms N]\n"
		"  [--prefill-set KEY=VALUE]... [--decode-set KEY=VALUE]...\n"
		"  [--buffers N] [--block-size B] [--blocks-per-room N] [--window N] [--seed N]\n"
		"  [--abort-every N --abort-side prefill|decode] [--timeout S] [--json]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .rooms = 1000, .nbufs = 64, .bpr = 16, .window = 32,
			    .block_size = 16384, .seed = 1, .timeout_s = 120 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json")) { o->json = 1; continue; }
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--prefill-config")) o->pcfg = v;
		else if (!strcmp(a, "--decode-config")) o->dcfg = v;
		else if (!strcmp(a, "--prefill-set") && o->npsets < MAX_SETS) o->psets[o->npsets++] = v;
		else if (!strcmp(a, "--decode-set") && o->ndsets < MAX_SETS) o->dsets[o->ndsets++] = v;
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)atol(v);
		else if (!strcmp(a, "--buffers")) o->nbufs = (uint32_t)atol(v);
		else if (!strcmp(a, "--block-size")) o->block_size = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--blocks-per-room")) o->bpr = (uint32_t)atol(v);
		else if (!strcmp(a, "--window")) o->window = (uint32_t)atol(v);
		else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--abort-every")) o->abort_every = (uint32_t)atol(v);
		else if (!strcmp(a, "--abort-side")) o->abort_decode = !strcmp(v, "decode");
		else if (!strcmp(a, "--timeout")) o->timeout_s = atof(v);
		else usage();
	}
	if ((!o->pcfg && !o->npsets && !o->dcfg && !o->ndsets) || !o->rooms || !o->nbufs || !o->window || !o->bpr ||
	    o->block_size < 8 || o->block_size % 8)
		usage();
}

static void report(const struct opts *o, const struct side *p, const struct side *d, double secs)
{
	const struct side *s = d->eng ? d : p;
	double bytes = (double)s->ok * o->bpr * o->nbufs * (double)o->block_size;
	double gbps = bytes * 8 / secs / 1e9;

	if (o->json) {
		printf("{\"rooms\": %u, \"ok\": %u, \"failed\": %u, \"bad_words\": %u, "
		       "\"bytes\": %.0f, \"seconds\": %.3f, \"gbit_per_s\": %.4f, "
		       "\"rooms_per_s\": %.1f, \"buffers\": %u, \"block_size\": %" PRIu64
		       ", \"blocks_per_room\": %u}\n", o->rooms, s->ok, s->failed, s->bad_bytes,
		       bytes, secs, gbps, s->done / secs, o->nbufs, o->block_size, o->bpr);
		return;
	}
	printf("kvferry-bench: %u rooms (%u buffers x %u blocks of %" PRIu64 " B each)\n",
	       o->rooms, o->nbufs, o->bpr, o->block_size);
	if (p->eng)
		printf("  prefill: %u ok, %u failed\n", p->ok, p->failed);
	if (d->eng)
		printf("  decode:  %u ok, %u failed, %u mismatched 8-byte words\n", d->ok,
		       d->failed, d->bad_bytes);
	if (s->first_failure.reason)
		printf("  first failure: %s: %s\n", kvf_fail_reason_str(s->first_failure.reason),
		       s->first_failure.detail);
	printf("  %.0f bytes in %.3f s: %.3f Gb/s, %.1f rooms/s\n", bytes, secs, gbps,
	       s->done / secs);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct side p = { 0 }, d = { 0 };
	double t0, secs;
	int rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, &o);
	if (((o.pcfg || o.npsets) && open_side(o.pcfg, true, &o, &p)) ||
	    ((o.dcfg || o.ndsets) && open_side(o.dcfg, false, &o, &d)))
		return 1;
	t0 = now_s();
	while ((p.eng && p.done < o.rooms) || (d.eng && d.done < o.rooms)) {
		if ((rc = drive(&o, &p)) || (rc = drive(&o, &d))) {
			fprintf(stderr, "kvferry-bench: %s\n", strerror(-rc));
			break;
		}
		if (now_s() - t0 > o.timeout_s) {
			fprintf(stderr, "kvferry-bench: timeout after %.0f s; live rooms:\n", o.timeout_s);
			kvf_dump(p.eng ? p.eng : d.eng, stderr);
			rc = -ETIMEDOUT;
			break;
		}
	}
	secs = now_s() - t0;
	report(&o, &p, &d, secs);
	kvf_engine_close(p.eng);
	kvf_engine_close(d.eng);
	/* Only the rooms asked to abort may fail; every byte must match. */
	uint32_t aborts = o.abort_every ? o.rooms / o.abort_every : 0;

	if (rc || d.bad_bytes || p.failed > aborts || d.failed > aborts)
		return 1;
	return 0;
}
