/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room-engine benchmark, no network: full sender lifecycles (create,
 * ROOM_INFO from the ring, send, completion from the ring, SUCCESS, release)
 * per second, with 1 thousand and with 1 million other rooms live, and the
 * ratio of the costs per lifecycle (goal <= 1.5).
 *
 *   bench_engine [--live N] [--lifecycles K] [--json]
 *     --live N: one run with N background rooms (for callgrind:
 *       valgrind --tool=callgrind --collect-atstart=no \
 *         --toggle-collect=run_lifecycles bench_engine --live 1000 --lifecycles 100000
 *       then instructions / K = instructions per lifecycle; goal <= 2000)
 *   without --live: both runs, the ratio, and JSON with --json.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "engine/engine.h"
#include "base/ring.h"

enum { BATCH = 64, NBLOCKS = 8 };

/* The transport a lifecycle needs, doing nothing: one signaled write. */
static int null_post(void *t, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
		     uint32_t nparts, const uint32_t *imm)
{
	return 1;
}
static int null_cancel(void *t, uint32_t conn, uint64_t wr_id) { return 0; }
static int null_abort(void *t, uint32_t conn, uint64_t id, uint8_t role, uint16_t why) { return 0; }
static int null_ack(void *t, uint32_t conn, uint64_t id) { return 0; }
static void null_teardown(void *t, uint32_t conn, const char *why) {}

static const struct kvf_transport_ops null_ops = {
	.post_chunk = null_post,
	.cancel_writes = null_cancel,
	.send_abort = null_abort,
	.send_abort_ack = null_ack,
	.teardown = null_teardown,
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* Room ids are random 63-bit numbers, as SGLang's bootstrap_room. */
static uint64_t rand_id(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state >> 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_engine: %s: %s\n", what, strerror(-rc));
	exit(1);
}

static struct kvf_peer_info *make_info(uint64_t id)
{
	struct kvf_peer_info *pi = kvf_peer_info_alloc(NBLOCKS);

	if (!pi)
		die("malloc", -ENOMEM);
	pi->room_id = id;
	pi->recv_handle = 0x100000001ull;
	pi->peer = 1;
	pi->nlists = 1;
	pi->nids = NBLOCKS;
	memcpy(pi->lists[0].name, "kv", 3);
	pi->lists[0].n = NBLOCKS;
	for (uint32_t i = 0; i < NBLOCKS; i++)
		pi->ids[i] = i;
	return pi;
}

/* K lifecycles, BATCH rooms at a time, as a scheduler loop would do them.
 * Named for callgrind's --toggle-collect. */
__attribute__((noinline)) void run_lifecycles(kvf_engine *eng, uint64_t k);
__attribute__((noinline)) void run_lifecycles(kvf_engine *eng, uint64_t k)
{
	static const uint32_t src[NBLOCKS] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct kvf_ring *ring = kvf_engine_ring(eng);
	kvf_room h[BATCH];

	for (uint64_t done = 0; done < k; done += BATCH) {
		for (int i = 0; i < BATCH; i++) {
			uint64_t id = rand_id();
			int rc = kvf_sender_create(eng, id, &h[i]);

			if (rc)
				die("create", rc);
			struct kvf_event ev = { .kind = KVF_EV_PEER_INFO, .key = id, .peer = 1,
						.data = make_info(id) };
			kvf_ring_push(ring, &ev);
		}
		kvf_progress(eng);
		for (int i = 0; i < BATCH; i++) {
			int rc = kvf_sender_send(eng, h[i], src, NBLOCKS);

			if (rc)
				die("send", rc);
			struct kvf_event ev = { .kind = KVF_EV_WC, .peer = 1,
						.key = kvf_wr_id(KVF_WR_DATA, (uint32_t)(h[i].v >> 32),
								 (uint32_t)h[i].v) };
			kvf_ring_push(ring, &ev);
		}
		kvf_progress(eng);
		for (int i = 0; i < BATCH; i++) {
			if (kvf_poll(eng, h[i]) != KVF_SUCCESS)
				die("not SUCCESS", -EIO);
			int rc = kvf_release(eng, h[i]);

			if (rc)
				die("release", rc);
		}
	}
}

static kvf_engine *engine_with_live(uint32_t live)
{
	static uint64_t buf[64];
	void *bufs[1] = { buf };
	uint64_t bs[1] = { 8 };
	struct kvf_config cfg;
	kvf_engine *eng;
	kvf_room h;
	int rc;

	kvf_config_defaults(&cfg);
	cfg.max_rooms = live + BATCH;
	cfg.summary_interval_s = 0;
	cfg.log_level = KVF_LOG_ERROR;
	kvf_log_set_level(cfg.log_level);
	rc = kvf_engine_create(&cfg, &null_ops, NULL, &eng);
	if (rc)
		die("engine", rc);
	rc = kvf_pool_register(eng, 1, bufs, bs, NBLOCKS);
	if (rc)
		die("pool", rc);
	/* Background rooms: live, each with its bootstrap deadline armed. */
	for (uint32_t i = 0; i < live; i++) {
		rc = kvf_sender_create(eng, rand_id(), &h);
		if (rc)
			die("background room", rc);
	}
	return eng;
}

/* ns per lifecycle: best of a few repetitions (the machine is shared). */
static double measure(uint32_t live, uint64_t k, int reps, int warm)
{
	kvf_engine *eng = engine_with_live(live);
	double best = 1e30;

	if (warm)
		run_lifecycles(eng, k / 10);
	for (int r = 0; r < reps; r++) {
		double t0 = now_s();

		run_lifecycles(eng, k);
		double ns = (now_s() - t0) * 1e9 / (double)k;

		if (ns < best)
			best = ns;
	}
	kvf_engine_close(eng);
	return best;
}

int main(int argc, char **argv)
{
	uint64_t k = 1000000;
	long live = -1;
	int json = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--live") && i + 1 < argc)
			live = atol(argv[++i]);
		else if (!strcmp(argv[i], "--lifecycles") && i + 1 < argc)
			k = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: %s [--live N] [--lifecycles K] [--json]\n", argv[0]);
			return 2;
		}
	}
	k = (k + BATCH - 1) / BATCH * BATCH;
	if (live >= 0) {
		double ns = measure((uint32_t)live, k, 1, 0); /* callgrind: count K exactly */

		printf("live %ld: %.1f ns per lifecycle, %.0f lifecycles/s\n", live, ns, 1e9 / ns);
		return 0;
	}
	double small = measure(1000, k, 5, 1);
	double big = measure(1000000, k, 5, 1);

	/* With --json the table goes to stderr, so one run gives both. */
	FILE *out = json ? stderr : stdout;

	if (json) {
		printf("{\"lifecycles\": %llu, \"ns_per_lifecycle_1k_live\": %.1f, "
		       "\"ns_per_lifecycle_1m_live\": %.1f, \"lifecycles_per_s_1k\": %.0f, "
		       "\"lifecycles_per_s_1m\": %.0f, \"ratio_1m_over_1k\": %.3f, \"goal\": 1.5}\n",
		       (unsigned long long)k, small, big, 1e9 / small, 1e9 / big, big / small);
	}
	fprintf(out, "room engine, %llu lifecycles, best of 5\n", (unsigned long long)k);
	fprintf(out, "  1,000 live rooms:     %7.1f ns per lifecycle  (%.0f lifecycles/s)\n",
		small, 1e9 / small);
	fprintf(out, "  1,000,000 live rooms: %7.1f ns per lifecycle  (%.0f lifecycles/s)\n",
		big, 1e9 / big);
	fprintf(out, "  ratio 1M / 1K: %.3f (goal <= 1.5)\n", big / small);
	return 0;
}
