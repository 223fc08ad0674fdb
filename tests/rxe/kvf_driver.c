/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvf_driver: one kvferry engine (prefill or decode) on the public API, for
 * the RDMA suite's scenario scripts. It runs rooms with the block layout of
 * pattern.h (so fake_peer and another kvf_driver agree on it), checks every
 * destination byte on the decode side, and prints one line per room when it
 * becomes terminal, with its failure and the CLOCK_MONOTONIC time (the clock
 * of kvferry's log lines):
 *
 *   room 3 id=0x1003 SUCCESS from=TRANSFERRING t=123.456789 bad_words=0
 *   room 4 id=0x1004 FAILED reason=peer_lost wc_status=-1 err=104
 *        from=TRANSFERRING t=123.5 detail="connection 1 to the peer is gone (...)"
 *   (one line each)
 * then "driver: role=... rooms=N ok=N failed=N bad_words=N released=N
 * seconds=S gbit=G" and "driver: failures: REASON=N ...".
 *
 *   kvf_driver --role prefill|decode [--config F] [--set KEY=VALUE]...
 *     [--print-listen] [--rooms N (8)]
 *     [--first-id ID (0x1000)] [--buffers B (4)] [--block-size S (16384)]
 *     [--blocks-per-room K (4)] [--pool-blocks P (window*K)] [--window W
 *     (rooms)] [--timeout S (60)] [--ready-file PATH] [--stop-on-lost S]
 *   kvf_driver --now       print CLOCK_MONOTONIC seconds and exit
 *
 * --config and --set: the engine is opened with kvf_engine_open_with, the
 * file (if any) plus each --set "group.key=value" override in order; at
 * least one of them is needed. A config error is printed as the library
 * gives it ("override 1: unknown key ...").
 * --print-listen: print "driver: listen HOST:PORT" (kvf_engine_listen_addr,
 * "[v6]:port" for IPv6) and write "HOST:PORT" into the --ready-file, so a
 * peer can take an ephemeral port (rdma.listen_port = 0) from there.
 * --stop-on-lost S: once a room fails with "peer lost", create no new rooms;
 * rooms still live S seconds later are reported "STUCK" (and aborted so the
 * driver can exit). Without it, every room is run.
 * --linger S: after the summary, keep the engine progressing S more seconds
 * (its /metrics and /rooms stay up for the scenario to read).
 * --ready-file: written once the pool is registered and the first window of
 * rooms is created (a prefill is then ready for its peer).
 * Exit: 0 all rooms terminal and released, 2 timeout, 1 setup error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvferry/kvferry.h>

#include "pattern.h"

#define MAX_SETS 32

struct opts {
	const char *role, *config, *ready_file;
	const char *sets[MAX_SETS];
	size_t nsets;
	bool print_listen;
	char listen[96];   /* "host:port" of our listener, --print-listen */
	uint32_t rooms, nbufs, bpr, pool_blocks, window;
	uint64_t block_size, first_id;
	double timeout_s, stop_on_lost, linger;
};

struct room {
	kvf_room h;
	uint8_t st;        /* 0 not created, 1 live, 2 terminal (unreleased), 3 released */
	int last;          /* last non-terminal state seen */
	double created;
};

static void usage(void)
{
	fprintf(stderr, "usage: kvf_driver --role prefill|decode [--config F] [--set KEY=VALUE]...\n"
		"  [--print-listen] [--rooms N] [--first-id ID]\n"
		"  [--buffers B] [--block-size S] [--blocks-per-room K] [--pool-blocks P]\n"
		"  [--window W] [--timeout S] [--ready-file PATH] [--stop-on-lost S] [--linger S]\n"
		"       kvf_driver --now\n");
	exit(1);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.rooms = 8, .nbufs = 4, .bpr = 4, .block_size = 16384,
			   .first_id = 0x1000, .timeout_s = 60};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--now")) {
			printf("%.6f\n", kvt_mono());
			exit(0);
		}
		if (!strcmp(a, "--print-listen")) {
			o->print_listen = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--role")) o->role = v;
		else if (!strcmp(a, "--config")) o->config = v;
		else if (!strcmp(a, "--set") && o->nsets < MAX_SETS) o->sets[o->nsets++] = v;
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--first-id")) o->first_id = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--buffers")) o->nbufs = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--block-size")) o->block_size = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--blocks-per-room")) o->bpr = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pool-blocks")) o->pool_blocks = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--window")) o->window = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--timeout")) o->timeout_s = atof(v);
		else if (!strcmp(a, "--ready-file")) o->ready_file = v;
		else if (!strcmp(a, "--stop-on-lost")) o->stop_on_lost = atof(v);
		else if (!strcmp(a, "--linger")) o->linger = atof(v);
		else usage();
	}
	if (!o->role || (!o->config && !o->nsets) || (strcmp(o->role, "prefill") && strcmp(o->role, "decode")))
		usage();
	if (!o->window || o->window > o->rooms)
		o->window = o->rooms;
	if (!o->pool_blocks)
		o->pool_blocks = o->window * o->bpr;
	if (!o->rooms || !o->nbufs || !o->bpr || o->bpr > 4096 || o->block_size < 8 ||
	    o->block_size % 8 || (uint64_t)o->window * o->bpr > o->pool_blocks)
		usage();
}

/* "work completion error" -> "work_completion_error" */
static const char *token(const char *s)
{
	static char buf[64];
	size_t i;

	for (i = 0; s[i] && i + 1 < sizeof(buf); i++)
		buf[i] = s[i] == ' ' ? '_' : s[i];
	buf[i] = '\0';
	return buf;
}

/* The engine from --config and --set; with --print-listen, where it listens. */
static int open_engine(struct opts *o, kvf_engine **eng)
{
	char err[512], host[64];
	uint16_t port;
	int rc = kvf_engine_open_with(o->config, o->sets, o->nsets, err, sizeof(err), eng);

	if (rc) {
		printf("driver: SETUP FAILED: kvf_engine_open_with(%s, %zu overrides): %s: %s\n",
		       o->config ? o->config : "no file", o->nsets, strerror(-rc), err);
		return rc;
	}
	if (!o->print_listen)
		return 0;
	rc = kvf_engine_listen_addr(*eng, host, sizeof(host), &port);
	if (rc) {
		printf("driver: SETUP FAILED: kvf_engine_listen_addr: %s\n", strerror(-rc));
		kvf_engine_close(*eng);
		return rc;
	}
	snprintf(o->listen, sizeof(o->listen), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	printf("driver: listen %s\n", o->listen);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	kvf_engine *eng = NULL;
	struct room *rooms;
	uint8_t **bufs;
	uint64_t *bs;
	bool prefill, stopping = false;
	uint32_t next = 0, ok = 0, failed = 0, released = 0, bad_total = 0, stuck = 0;
	uint32_t by_reason[KVF_FAIL_NUM] = {0};
	double t0, lost_at = 0, secs;
	int rc, ret = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, &o);
	prefill = !strcmp(o.role, "prefill");
	rooms = calloc(o.rooms, sizeof(*rooms));
	bufs = calloc(o.nbufs, sizeof(*bufs));
	bs = calloc(o.nbufs, sizeof(*bs));
	if (!rooms || !bufs || !bs)
		return 1;
	rc = open_engine(&o, &eng);
	if (rc)
		return 1;
	for (uint32_t k = 0; k < o.nbufs; k++) {
		size_t len = (size_t)o.block_size * o.pool_blocks;

		bs[k] = o.block_size;
		if (posix_memalign((void **)&bufs[k], 4096, len))
			return 1;
		for (uint32_t b = 0; b < o.pool_blocks; b++) {
			uint64_t *w = (uint64_t *)(bufs[k] + (size_t)b * o.block_size);

			for (uint64_t x = 0; x < o.block_size / 8; x++)
				w[x] = prefill ? kvt_word(k, b, x) : 0;
		}
	}
	rc = kvf_pool_register(eng, o.nbufs, (void *const *)bufs, bs, o.pool_blocks);
	if (rc) {
		printf("driver: SETUP FAILED: kvf_pool_register: %s\n", strerror(-rc));
		kvf_engine_close(eng);
		return 1;
	}
	t0 = kvt_mono();
	printf("driver: role=%s start t=%.6f rooms=%u buffers=%u block_size=%" PRIu64
	       " blocks_per_room=%u pool_blocks=%u window=%u\n", o.role, t0, o.rooms, o.nbufs,
	       o.block_size, o.bpr, o.pool_blocks, o.window);
	for (;;) {
		uint32_t blocks[4096];
		bool all_done = true;

		kvf_progress(eng);
		/* create while the window allows */
		while (!stopping && next < o.rooms &&
		       (next < o.window || rooms[next - o.window].st == 3)) {
			struct room *r = &rooms[next];
			uint64_t id = o.first_id + next;

			if (prefill) {
				rc = kvf_sender_create(eng, id, &r->h);
			} else {
				for (uint32_t k = 0; k < o.nbufs; k++)
					for (uint32_t j = 0; j < o.bpr; j++)
						memset(bufs[k] + (size_t)kvt_dst_block(next, j, o.bpr, o.pool_blocks) *
							       o.block_size, 0xdd, o.block_size);
				rc = kvf_receiver_create(eng, id, NULL, &r->h);
				for (uint32_t j = 0; !rc && j < o.bpr; j++)
					blocks[j] = kvt_dst_block(next, j, o.bpr, o.pool_blocks);
				if (!rc) {
					rc = kvf_receiver_init(eng, r->h, blocks, o.bpr);
					if (rc == -ECANCELED || rc == -ENOTCONN || rc == -EHOSTUNREACH)
						rc = 0; /* failed at once: reported when polled */
					else if (rc)
						printf("driver: kvf_receiver_init(room %u): %s\n", next,
						       strerror(-rc));
					rc = 0;
				}
			}
			if (rc) {
				printf("driver: creating room %u: %s\n", next, strerror(-rc));
				ret = 1;
				goto out;
			}
			r->st = 1;
			r->last = KVF_BOOTSTRAPPING;
			r->created = kvt_mono();
			next++;
			if (next == o.window && o.ready_file) {
				FILE *f = fopen(o.ready_file, "w");

				if (f) {
					if (o.listen[0])
						fprintf(f, "%s\n", o.listen);
					fclose(f);
				}
				printf("driver: ready t=%.6f\n", kvt_mono());
			}
		}
		for (uint32_t i = 0; i < next; i++) {
			struct room *r = &rooms[i];
			int st;

			if (r->st == 3)
				continue;
			all_done = false;
			st = kvf_poll(eng, r->h);
			if (r->st == 1 && prefill && st == KVF_WAITING_FOR_INPUT) {
				r->last = st;
				for (uint32_t j = 0; j < o.bpr; j++)
					blocks[j] = kvt_src_block(i, j, o.bpr, o.pool_blocks);
				rc = kvf_sender_send(eng, r->h, blocks, o.bpr);
				if (rc && rc != -ECANCELED && rc != -EMSGSIZE && rc != -ERANGE)
					printf("driver: kvf_sender_send(room %u): %s\n", i, strerror(-rc));
				st = kvf_poll(eng, r->h);
			}
			if (r->st == 1 && st != KVF_SUCCESS && st != KVF_FAILED) {
				r->last = st;
				continue;
			}
			if (r->st == 1) {
				struct kvf_failure f = KVF_FAILURE_INIT;
				double t = kvt_mono();

				r->st = 2;
				if (st == KVF_SUCCESS) {
					uint32_t bad = 0;

					if (!prefill) {
						for (uint32_t k = 0; k < o.nbufs; k++)
							for (uint32_t j = 0; j < o.bpr; j++) {
								uint32_t db = kvt_dst_block(i, j, o.bpr, o.pool_blocks);
								uint32_t sb = kvt_src_block(i, j, o.bpr, o.pool_blocks);
								const uint64_t *w = (const uint64_t *)(bufs[k] +
									(size_t)db * o.block_size);

								for (uint64_t x = 0; x < o.block_size / 8; x++)
									bad += w[x] != kvt_word(k, sb, x);
							}
					}
					bad_total += bad;
					ok++;
					printf("room %u id=%#" PRIx64 " SUCCESS from=%s created=%.6f t=%.6f "
					       "bad_words=%u\n", i, o.first_id + i, kvf_poll_str(r->last),
					       r->created, t, bad);
				} else {
					kvf_failure(eng, r->h, &f);
					failed++;
					by_reason[f.reason < KVF_FAIL_NUM ? f.reason : 0]++;
					printf("room %u id=%#" PRIx64 " FAILED reason=%s wc_status=%d err=%d "
					       "from=%s created=%.6f t=%.6f detail=\"%s\"\n", i, o.first_id + i,
					       token(kvf_fail_reason_str(f.reason)), f.wc_status, f.err,
					       kvf_poll_str(r->last), r->created, t, f.detail);
					if (f.reason == KVF_FAIL_PEER_LOST && o.stop_on_lost > 0 && !stopping) {
						stopping = true;
						lost_at = t;
					}
				}
			}
			/* terminal: hand the slot back once quiescent */
			if (kvf_release(eng, r->h) == 0) {
				r->st = 3;
				released++;
			}
		}
		if (stopping && kvt_mono() - lost_at > o.stop_on_lost) {
			for (uint32_t i = 0; i < next; i++) {
				struct room *r = &rooms[i];

				if (r->st != 1)
					continue;
				stuck++;
				printf("room %u id=%#" PRIx64 " STUCK state=%s %.1f s after the first peer "
				       "loss (aborted by the driver)\n", i, o.first_id + i,
				       kvf_poll_str(kvf_poll(eng, r->h)), kvt_mono() - lost_at);
				kvf_abort(eng, r->h);
				r->st = 2;
			}
			/* give released rooms a moment to quiesce, then stop */
			double until = kvt_mono() + 5;

			while (kvt_mono() < until) {
				bool left = false;

				kvf_progress(eng);
				for (uint32_t i = 0; i < next; i++) {
					if (rooms[i].st == 2 && kvf_release(eng, rooms[i].h) == 0) {
						rooms[i].st = 3;
						released++;
					}
					left |= rooms[i].st == 2;
				}
				if (!left)
					break;
			}
			break;
		}
		if (all_done && (next == o.rooms || stopping))
			break;
		if (kvt_mono() - t0 > o.timeout_s) {
			printf("driver: TIMEOUT after %.0f s; live rooms:\n", o.timeout_s);
			fflush(stdout);
			kvf_dump(eng, stdout);
			ret = 2;
			break;
		}
	}
out:
	secs = kvt_mono() - t0;
	printf("driver: role=%s rooms=%u ok=%u failed=%u stuck=%u bad_words=%u released=%u "
	       "created=%u seconds=%.3f gbit=%.4f end=%.6f\n", o.role, o.rooms, ok, failed, stuck,
	       bad_total, released, next, secs,
	       (double)ok * o.nbufs * o.bpr * (double)o.block_size * 8 / secs / 1e9, kvt_mono());
	printf("driver: failures:");
	for (int k = 1; k < KVF_FAIL_NUM; k++)
		if (by_reason[k])
			printf(" %s=%u", token(kvf_fail_reason_str((enum kvf_fail_reason)k)), by_reason[k]);
	printf("\n");
	fflush(stdout);
	for (double until = kvt_mono() + o.linger; kvt_mono() < until;) {
		struct timespec ms = { .tv_nsec = 1000000 };

		kvf_progress(eng);
		nanosleep(&ms, NULL);
	}
	kvf_engine_close(eng);
	return ret;
}
