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
 * --pace-ms M: create a room at most every M ms (a decode that outlives a
 *   peer's absence, for the reconnect scenario).
 * --follow S (prefill): create a room when the decode asks for it (its
 *   ROOM_INFO parked), not when the window has room; a room the decode went
 *   past is created and aborted ("passed=N" in the chaos line); after S s
 *   with nothing asked, on our own (the soak with teardowns).
 * "driver: conns connects=N backoffs=N held_max=N live=N": the engine's
 *   connection counters at the end (kvf_stats), and the most connections
 *   holding their buffers at once, sampled at each terminal room; then
 *   "driver: keepalives sent=N acked=N late=N" (the poller's HEARTBEATs).
 * --stall-ms N --stall-after K: once K rooms are terminal and some are in
 *   flight, stop calling the engine for N ms (a scheduler blocked in CUDA
 *   graph capture, a long prefill batch, a GC pause), once; "driver: stall begin/end" lines say
 *   when, the second with the keepalives the poller sent meanwhile.
 *   --timeout does not count the stall.
 * --hold-failed S: keep a FAILED room S seconds before releasing it (a
 *   serving engine's loop reaches a failed request later: its room id is
 *   still taken meanwhile, for the refused scenario).
 * --linger S: after the summary, keep the engine progressing S more seconds
 * (its /metrics and /rooms stay up for the scenario to read); --linger-until
 * PATH ends that early once the file PATH exists (the scenario has read).
 * --ready-file: written once the pool is registered and the first window of
 * rooms is created (a prefill is then ready for its peer).
 * Chaos options (scripts/chaos.sh, docs/chaos.md):
 * --abort-every N [--abort-at create|wait]: kvf_abort every Nth room (index
 *   % N == N - 1) right after creating it, or once it is past creation
 *   (prefill: WAITING_FOR_INPUT, after send(); decode: once init()ed).
 * --start-delay S: progress S seconds before creating the first room (a
 *   prefill then hears ROOM_INFOs and ABORTs before its rooms exist).
 * --kill-after N: SIGKILL this process once N rooms are terminal.
 * --deadline S: every room must be terminal S seconds after its creation;
 *   one terminal later than S + 1 s, or never, is "pinned". The summary
 *   line "driver: chaos ..." gives pinned and the worst lateness.
 * --clock-scale X: the engine's clock (kvf_engine_set_clock) runs X times
 *   faster than CLOCK_MONOTONIC: config deadlines are whole seconds, so
 *   deadlines.*_s = 1 with X = 20 is a 50 ms deadline.
 * --leak-check: "driver: leaks": fds open and malloc's bytes in use before
 *   the engine (after a first engine was opened and closed: the libraries'
 *   one-time setup) against after it is closed (fds, heap_bytes); and, for
 *   the reader, the heap once the first room was terminal against once the
 *   last was released (heap_run: high-water marks such as a send queue's
 *   grown array show there).
 * --sample-every N: "driver: sample" with RSS, fds and heap bytes every N
 *   terminal rooms (the soak): heap is the main arena's (mallinfo2, as
 *   --leak-check), heap_all every arena's (malloc_info; the poller thread's
 *   arena included); rss_trim_kb the RSS after malloc_trim(0), split into
 *   anon_kb, file_kb and shmem_kb; maps the mappings; conns the connections
 *   holding buffers (a reconnect shows as 2).
 * A hard alarm at --timeout + 60 s kills a driver that hangs anywhere.
 * Exit: 0 all rooms terminal and released, 2 timeout, 1 setup error.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <kvferry/kvferry.h>

#include "pattern.h"

#define MAX_SETS 32

struct opts {
	const char *role, *config, *ready_file, *linger_until;
	const char *sets[MAX_SETS];
	size_t nsets;
	bool print_listen;
	char listen[8 * 80]; /* "host:port[,...]" of our listeners, --print-listen */
	uint32_t rooms, nbufs, bpr, pool_blocks, window;
	uint64_t block_size, first_id;
	double timeout_s, stop_on_lost, linger;
	uint32_t abort_every, kill_after, sample_every;
	bool abort_at_create, leak_check;
	double start_delay, deadline, clock_scale, pace_ms, follow_s;
	double stall_ms, hold_failed;
	uint32_t stall_after;
};

/* What a process holds, from /proc and malloc. */
struct held {
	long fds, rss_kb;
	size_t heap;
};

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = -1; /* the DIR's own fd */

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2; /* . and .. */
}

static struct held held_now(void)
{
	struct held h = { .fds = count_fds() };
	struct mallinfo2 mi = mallinfo2();
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	h.rss_kb = res * (sysconf(_SC_PAGESIZE) / 1024);
	h.heap = mi.uordblks + mi.hblkhd;
	return h;
}

/* malloc_info's top-level figure after the last </heap>: TAG's size. */
static size_t info_size(const char *tail, const char *tag)
{
	const char *p = strstr(tail, tag);
	unsigned long long n = 0;

	if (p && sscanf(p + strlen(tag), " count=\"%*u\" size=\"%llu\"", &n) != 1)
		sscanf(p + strlen(tag), " size=\"%llu\"", &n);
	return (size_t)n;
}

/* Bytes in use in EVERY malloc arena: mallinfo2 counts the main arena only,
 * and what the engine's poller thread allocates lives in an arena of its
 * own. Arenas' memory less their free chunks (top included), plus mmaps. */
static size_t heap_all_arenas(void)
{
	char *buf = NULL, *tail;
	size_t len = 0, sys, fast, rest, mm;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return 0;
	malloc_info(0, m);
	fclose(m);
	tail = buf;
	for (char *p; (p = strstr(tail, "</heap>"));)
		tail = p + 7;
	sys = info_size(tail, "<system type=\"current\"");
	fast = info_size(tail, "<total type=\"fast\"");
	rest = info_size(tail, "<total type=\"rest\"");
	mm = info_size(tail, "<total type=\"mmap\"");
	free(buf);
	return sys > fast + rest ? sys - fast - rest + mm : mm;
}

static double clock_scale = 1;
static uint64_t scaled_clock(void *arg)
{
	(void)arg;
	return (uint64_t)(kvt_mono() * clock_scale * 1e9);
}

struct room {
	kvf_room h;
	uint8_t st;        /* 0 not created, 1 live, 2 terminal (unreleased), 3 released */
	int last;          /* last non-terminal state seen */
	double created;
	double done;       /* when it became terminal */
	bool aborted;
};

/* The driver's room table, resident from the start (MAP_POPULATE): calloc
 * would map it untouched and the soak's RSS would grow by its pages as rooms
 * reach them (4 MB at 100,000 rooms) with every heap figure flat. */
static size_t rooms_bytes(uint32_t n)
{
	return (size_t)(n ? n : 1) * sizeof(struct room); /* mmap refuses 0 bytes */
}

static struct room *rooms_table(uint32_t n)
{
	void *p = mmap(NULL, rooms_bytes(n), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void usage(void)
{
	fprintf(stderr, "usage: kvf_driver --role prefill|decode [--config F] [--set KEY=VALUE]...\n"
		"  [--print-listen] [--rooms N] [--first-id ID]\n"
		"  [--buffers B] [--block-size S] [--blocks-per-room K] [--pool-blocks P]\n"
		"  [--window W] [--timeout S] [--ready-file PATH] [--stop-on-lost S] [--linger S]\n"
		"  [--linger-until PATH]\n"
		"  [--abort-every N] [--abort-at create|wait] [--start-delay S] [--kill-after N]\n"
		"  [--deadline S] [--clock-scale X] [--leak-check] [--sample-every N] [--pace-ms M]\n"
		"  [--stall-ms N --stall-after K] [--follow S] [--hold-failed S]\n"
		"       kvf_driver --now\n");
	exit(1);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.rooms = 8, .nbufs = 4, .bpr = 4, .block_size = 16384,
			   .first_id = 0x1000, .timeout_s = 60, .clock_scale = 1};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--now")) {
			printf("%.6f\n", kvt_mono());
			exit(0);
		}
		if (!strcmp(a, "--print-listen") || !strcmp(a, "--leak-check")) {
			*(a[2] == 'p' ? &o->print_listen : &o->leak_check) = true;
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
		else if (!strcmp(a, "--linger-until")) o->linger_until = v;
		else if (!strcmp(a, "--abort-every")) o->abort_every = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--abort-at") && (!strcmp(v, "create") || !strcmp(v, "wait")))
			o->abort_at_create = !strcmp(v, "create");
		else if (!strcmp(a, "--start-delay")) o->start_delay = atof(v);
		else if (!strcmp(a, "--pace-ms")) o->pace_ms = atof(v);
		else if (!strcmp(a, "--follow")) o->follow_s = atof(v);
		else if (!strcmp(a, "--kill-after")) o->kill_after = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--deadline")) o->deadline = atof(v);
		else if (!strcmp(a, "--clock-scale")) o->clock_scale = atof(v);
		else if (!strcmp(a, "--sample-every")) o->sample_every = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--stall-ms")) o->stall_ms = atof(v);
		else if (!strcmp(a, "--stall-after")) o->stall_after = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--hold-failed")) o->hold_failed = atof(v);
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
	char err[512];
	int rc = kvf_engine_open_with(o->config, o->sets, o->nsets, err, sizeof(err), eng);

	if (rc) {
		printf("driver: SETUP FAILED: kvf_engine_open_with(%s, %zu overrides): %s: %s\n",
		       o->config ? o->config : "no file", o->nsets, strerror(-rc), err);
		return rc;
	}
	if (o->clock_scale != 1) {
		clock_scale = o->clock_scale;
		kvf_engine_set_clock(*eng, scaled_clock, NULL);
	}
	if (!o->print_listen)
		return 0;
	/* Every rail's listener ("host:port" with one device): the peer list a
	 * decode's rdma.peer takes as is. */
	rc = kvf_engine_endpoint(*eng, o->listen, sizeof(o->listen));
	if (rc) {
		printf("driver: SETUP FAILED: kvf_engine_endpoint: %s\n", strerror(-rc));
		kvf_engine_close(*eng);
		return rc;
	}
	printf("driver: listen %s\n", o->listen);
	return 0;
}

struct run {
	struct opts *o;
	kvf_engine *eng;
	struct room *rooms;
	uint8_t **bufs;
	bool prefill, stopping, ready, stalled;
	struct held base;  /* --leak-check: at the first terminal room */
	uint32_t next, lo, ok, failed, released, bad_total, stuck, terminal, aborted;
	uint32_t passed;     /* --follow: rooms the decode went past (aborted at creation) */
	double follow_since; /* --follow: when the prefill began waiting for room next */
	double follow_look;  /* --follow: when it last looked for later rooms asked */
	uint32_t pass_until; /* --follow: the rooms before it the decode went past */
	uint32_t last_count; /* terminal + created at the last turn */
	uint32_t by_reason[KVF_FAIL_NUM];
	double t0, lost_at;
	struct kvf_stats cs; /* the engine's counters at the last terminal room */
	uint64_t held_max;   /* most connections holding buffers at once */
};

static int alloc_bufs(struct run *R)
{
	struct opts *o = R->o;

	R->bufs = calloc(o->nbufs, sizeof(*R->bufs));
	if (!R->bufs)
		return -1;
	for (uint32_t k = 0; k < o->nbufs; k++) {
		size_t len = (size_t)o->block_size * o->pool_blocks;

		if (posix_memalign((void **)&R->bufs[k], 4096, len))
			return -1;
		for (uint32_t b = 0; b < o->pool_blocks; b++) {
			uint64_t *w = (uint64_t *)(R->bufs[k] + (size_t)b * o->block_size);

			for (uint64_t x = 0; x < o->block_size / 8; x++)
				w[x] = R->prefill ? kvt_word(k, b, x) : 0;
		}
	}
	return 0;
}

static void maybe_abort(struct run *R, uint32_t i)
{
	struct room *r = &R->rooms[i];

	if (!R->o->abort_every || i % R->o->abort_every != R->o->abort_every - 1 || r->aborted)
		return;
	r->aborted = true;
	R->aborted++;
	kvf_abort(R->eng, r->h);
}

static int create_one(struct run *R, uint32_t i)
{
	struct opts *o = R->o;
	struct room *r = &R->rooms[i];
	uint32_t blocks[4096];
	int rc;

	if (R->prefill)
		return kvf_sender_create(R->eng, o->first_id + i, &r->h);
	for (uint32_t k = 0; k < o->nbufs; k++)
		for (uint32_t j = 0; j < o->bpr; j++)
			memset(R->bufs[k] + (size_t)kvt_dst_block(i, j, o->bpr, o->pool_blocks) *
				       o->block_size, 0xdd, o->block_size);
	rc = kvf_receiver_create(R->eng, o->first_id + i, NULL, &r->h);
	if (rc)
		return rc;
	for (uint32_t j = 0; j < o->bpr; j++)
		blocks[j] = kvt_dst_block(i, j, o->bpr, o->pool_blocks);
	rc = kvf_receiver_init(R->eng, r->h, blocks, o->bpr);
	if (rc && rc != -ECANCELED && rc != -ENOTCONN && rc != -EHOSTUNREACH)
		printf("driver: kvf_receiver_init(room %u): %s\n", i, strerror(-rc));
	return 0; /* failed at once: reported when polled */
}

/* --ready-file: once the first window of rooms is created, or at once with
 * --start-delay (a peer then talks to us before our rooms exist). */
static void write_ready(struct run *R)
{
	struct opts *o = R->o;
	FILE *f;

	if (!o->ready_file || R->ready)
		return;
	R->ready = true;
	f = fopen(o->ready_file, "w");
	if (f) {
		if (o->listen[0])
			fprintf(f, "%s\n", o->listen);
		fclose(f);
	}
	printf("driver: ready t=%.6f\n", kvt_mono());
}

/* --follow: how far past the awaited room to look for one the decode asked for */
#define FOLLOW_SCAN 4096

/* Whether the decode asked for room i (its ROOM_INFO or ABORT is parked). */
static bool asked(struct run *R, uint32_t i)
{
	uint32_t len;

	return kvf_sender_pending(R->eng, R->o->first_id + i, NULL, 0, &len) != 0;
}

/* --follow S (prefill): create room i when the decode asks for it, as a
 * serving engine's prefill gets a request when its decode does, instead of
 * when our own window has room: two sides that each pace themselves drift
 * apart after a teardown and never meet again (docs/chaos.md, "The soak").
 * 1: create it; 0: not yet; -1: the decode went past it (after 0.5 s of
 * waiting, a later room, up to FOLLOW_SCAN past it, was asked for and this
 * one still is not: its ROOM_INFO died with a connection, or the decode's
 * room failed first); it and every room up to that later one are created
 * and aborted, as a router's cancel would. Past S seconds of waiting: created
 * anyway (a decode that is gone: the driver's --timeout ends the run). */
static int follow(struct run *R, uint32_t i)
{
	struct opts *o = R->o;
	double now = kvt_mono();
	bool later = false;

	if (!R->prefill || o->follow_s <= 0 || asked(R, i))
		return 1;
	if (i < R->pass_until)
		return -1; /* the decode is past it: found for an earlier room */
	if (!R->follow_since)
		R->follow_since = now;
	if (now - R->follow_since > o->follow_s) {
		printf("driver: follow: nothing asked for room %u in %.0f s (t=%.3f): creating it\n",
		       i, o->follow_s, now);
		return 1;
	}
	/* A teardown fails every decode room on the connection and the decode
	 * goes on: the next one asked can be hundreds of rooms past i. Looked
	 * for every 50 ms only, the lookups are what an idle loop can spare. */
	if (now - R->follow_look < 0.05)
		return 0;
	R->follow_look = now;
	for (uint32_t j = i + 1; j < o->rooms && j < i + FOLLOW_SCAN && !later; j++)
		if (asked(R, j)) {
			later = true;
			if (now - R->follow_since > 0.5)
				R->pass_until = j; /* every room before j, at once */
		}
	if (!later)
		return 0;
	return now - R->follow_since > 0.5 ? -1 : 0;
}

/* Create while the window allows. */
static int create_rooms(struct run *R)
{
	struct opts *o = R->o;

	while (!R->stopping && R->next < o->rooms &&
	       (R->next < o->window || R->rooms[R->next - o->window].st == 3)) {
		struct room *r = &R->rooms[R->next];
		int rc, go;

		if (o->pace_ms > 0 && R->next &&
		    kvt_mono() < R->rooms[R->next - 1].created + o->pace_ms / 1000)
			break;
		go = follow(R, R->next);
		if (go == 0)
			break;
		R->follow_since = 0;
		rc = create_one(R, R->next);

		if (rc) {
			printf("driver: creating room %u: %s\n", R->next, strerror(-rc));
			return rc;
		}
		r->st = 1;
		r->last = KVF_BOOTSTRAPPING;
		r->created = kvt_mono();
		if (o->abort_at_create)
			maybe_abort(R, R->next);
		if (go < 0 && !r->aborted) {
			r->aborted = true;
			R->aborted++;
			R->passed++;
			kvf_abort(R->eng, r->h);
		}
		R->next++;
		if (R->next == o->window)
			write_ready(R);
	}
	return 0;
}

static uint32_t check_bytes(struct run *R, uint32_t i)
{
	struct opts *o = R->o;
	uint32_t bad = 0;

	for (uint32_t k = 0; k < o->nbufs; k++)
		for (uint32_t j = 0; j < o->bpr; j++) {
			uint32_t db = kvt_dst_block(i, j, o->bpr, o->pool_blocks);
			uint32_t sb = kvt_src_block(i, j, o->bpr, o->pool_blocks);
			const uint64_t *w = (const uint64_t *)(R->bufs[k] + (size_t)db * o->block_size);

			for (uint64_t x = 0; x < o->block_size / 8; x++)
				bad += w[x] != kvt_word(k, sb, x);
		}
	return bad;
}

/* /proc/self/status's KEY (kB), -1 when absent. */
static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/* Lines of /proc/self/maps: a mapping nobody unmaps (a QP's queues) adds one. */
static long count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int ch;

	while (f && (ch = getc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

/* rss_trim_kb: RSS once malloc_trim gave back the free pages malloc keeps
 * (a thread's arena keeps what it freed as it likes: RSS alone wanders by
 * tens of MB with heap_all flat); anon_kb and file_kb split it (file pages
 * are code and data of the libraries, paged in as paths first run). */
static void print_sample(struct run *R)
{
	struct held h = held_now();
	size_t all = heap_all_arenas();
	struct kvf_stats st = KVF_STATS_INIT;

	malloc_trim(0);
	kvf_stats(R->eng, &st);
	printf("driver: sample rooms=%u rss_kb=%ld rss_trim_kb=%ld anon_kb=%ld file_kb=%ld "
	       "shmem_kb=%ld maps=%ld conns=%" PRIu64 " fds=%ld heap=%zu heap_all=%zu t=%.3f\n",
	       R->terminal, h.rss_kb, held_now().rss_kb, status_kb("RssAnon"), status_kb("RssFile"),
	       status_kb("RssShmem"), count_maps(), st.conns_held, h.fds, h.heap, all,
	       kvt_mono() - R->t0);
}

/* The engine's connection counters; the most connections holding their
 * buffers at once (a reconnect storm shows there). */
static void sample_conns(struct run *R)
{
	struct kvf_stats st = KVF_STATS_INIT;

	if (kvf_stats(R->eng, &st))
		return;
	R->cs = st;
	if (st.conns_held > R->held_max)
		R->held_max = st.conns_held;
}

static void on_terminal(struct run *R, uint32_t i, int st)
{
	struct room *r = &R->rooms[i];
	struct kvf_failure f = KVF_FAILURE_INIT;
	double t = kvt_mono();

	r->st = 2;
	r->done = t;
	R->terminal++;
	sample_conns(R);
	if (R->terminal == 1 && R->o->leak_check)
		R->base = held_now();
	if (st == KVF_SUCCESS) {
		uint32_t bad = R->prefill ? 0 : check_bytes(R, i);

		R->bad_total += bad;
		R->ok++;
		printf("room %u id=%#" PRIx64 " SUCCESS from=%s created=%.6f t=%.6f bad_words=%u\n",
		       i, R->o->first_id + i, kvf_poll_str(r->last), r->created, t, bad);
	} else {
		kvf_failure(R->eng, r->h, &f);
		R->failed++;
		R->by_reason[f.reason < KVF_FAIL_NUM ? f.reason : 0]++;
		printf("room %u id=%#" PRIx64 " FAILED reason=%s wc_status=%d err=%d from=%s "
		       "created=%.6f t=%.6f detail=\"%s\"\n", i, R->o->first_id + i,
		       token(kvf_fail_reason_str(f.reason)), f.wc_status, f.err,
		       kvf_poll_str(r->last), r->created, t, f.detail);
		if (f.reason == KVF_FAIL_PEER_LOST && R->o->stop_on_lost > 0 && !R->stopping) {
			R->stopping = true;
			R->lost_at = t;
		}
	}
	if (R->o->sample_every && R->terminal % R->o->sample_every == 0)
		print_sample(R);
	if (R->o->kill_after && R->terminal == R->o->kill_after) {
		printf("driver: SIGKILL self after %u terminal rooms t=%.6f\n", R->terminal, t);
		fflush(stdout);
		raise(SIGKILL);
	}
}

/* "driver: rail K dev=D state=S bytes=N writes=N wr_errors=N lost=N" a rail. */
static void rails_lines(const struct run *R)
{
	struct kvf_rail_stats rs[8];
	int n;

	for (int i = 0; i < 8; i++)
		rs[i] = (struct kvf_rail_stats)KVF_RAIL_STATS_INIT;
	n = kvf_engine_rails(R->eng, rs, 8);
	for (int i = 0; i < n && i < 8; i++)
		printf("driver: rail %u dev=%s state=%s bytes=%" PRIu64 " writes=%" PRIu64
		       " wr_errors=%" PRIu64 " lost=%" PRIu64 " live=%" PRIu64 "\n", rs[i].rail,
		       rs[i].device, kvf_rail_state_str((int)rs[i].state), rs[i].bytes,
		       rs[i].writes, rs[i].wr_errors, rs[i].conns_lost, rs[i].conns_live);
}

static void conns_line(const struct run *R)
{
	rails_lines(R);
	printf("driver: conns connects=%" PRIu64 " backoffs=%" PRIu64 " held_max=%" PRIu64
	       " live=%" PRIu64 "\n", R->cs.connects, R->cs.connect_backoffs, R->held_max,
	       R->cs.conns_live);
	printf("driver: keepalives sent=%" PRIu64 " acked=%" PRIu64 " late=%" PRIu64 "\n",
	       R->cs.keepalives_sent, R->cs.keepalives_acked, R->cs.keepalives_late);
	printf("driver: auth ok=%" PRIu64 " dropped=%" PRIu64, R->cs.auth_ok, R->cs.auth_dropped);
	for (unsigned r = 0; r < KVF_AUTH_NUM; r++)
		if (R->cs.auth_refused[r])
			printf(" refused:%s=%" PRIu64, token(kvf_auth_refusal_str(r)),
			       R->cs.auth_refused[r]);
	printf("\n");
}

static void poll_room(struct run *R, uint32_t i)
{
	struct opts *o = R->o;
	struct room *r = &R->rooms[i];
	uint32_t blocks[4096];
	int st = kvf_poll(R->eng, r->h), rc;

	if (r->st == 1 && R->prefill && st == KVF_WAITING_FOR_INPUT) {
		r->last = st;
		for (uint32_t j = 0; j < o->bpr; j++)
			blocks[j] = kvt_src_block(i, j, o->bpr, o->pool_blocks);
		rc = kvf_sender_send(R->eng, r->h, blocks, o->bpr);
		if (rc && rc != -ECANCELED && rc != -EMSGSIZE && rc != -ERANGE)
			printf("driver: kvf_sender_send(room %u): %s\n", i, strerror(-rc));
		if (!o->abort_at_create)
			maybe_abort(R, i);
		st = kvf_poll(R->eng, r->h);
	} else if (r->st == 1 && !R->prefill && !o->abort_at_create && st != KVF_BOOTSTRAPPING) {
		maybe_abort(R, i);
		st = kvf_poll(R->eng, r->h);
	}
	if (r->st == 1 && st != KVF_SUCCESS && st != KVF_FAILED) {
		r->last = st;
		return;
	}
	if (r->st == 1)
		on_terminal(R, i, st);
	if (st == KVF_FAILED && kvt_mono() - r->done < o->hold_failed)
		return; /* --hold-failed: its id stays taken a while */
	/* terminal: hand the slot back once quiescent */
	if (kvf_release(R->eng, r->h) == 0) {
		r->st = 3;
		R->released++;
	}
}

/* --stop-on-lost: rooms still live S seconds after the first peer loss are
 * STUCK (aborted so the driver can exit); released ones get 5 s. */
static void stop_stuck(struct run *R)
{
	for (uint32_t i = 0; i < R->next; i++) {
		struct room *r = &R->rooms[i];

		if (r->st != 1)
			continue;
		R->stuck++;
		printf("room %u id=%#" PRIx64 " STUCK state=%s %.1f s after the first peer "
		       "loss (aborted by the driver)\n", i, R->o->first_id + i,
		       kvf_poll_str(kvf_poll(R->eng, r->h)), kvt_mono() - R->lost_at);
		kvf_abort(R->eng, r->h);
		r->st = 2;
	}
	for (double until = kvt_mono() + 5; kvt_mono() < until;) {
		bool left = false;

		kvf_progress(R->eng);
		for (uint32_t i = 0; i < R->next; i++) {
			if (R->rooms[i].st == 2 && kvf_release(R->eng, R->rooms[i].h) == 0) {
				R->rooms[i].st = 3;
				R->released++;
			}
			left |= R->rooms[i].st == 2;
		}
		if (!left)
			break;
	}
}

/* --stall-ms: the scheduler goes away once, with rooms in flight: nothing
 * calls the engine (no progress, no poll) for that long. A sleep, not a
 * busy loop: what matters to the engine is that its thread is elsewhere,
 * and a 2-vCPU guest needs its CPUs for the pollers. */
static void maybe_stall(struct run *R)
{
	struct opts *o = R->o;
	double t0 = kvt_mono(), until = t0 + o->stall_ms / 1000;
	struct kvf_stats a = KVF_STATS_INIT, b = KVF_STATS_INIT;
	struct timespec left;

	/* with rooms in flight, as promised: on a loaded guest the turn that
	 * reaches stall_after can find every created room terminal */
	if (o->stall_ms <= 0 || R->stalled || R->terminal < o->stall_after ||
	    R->next <= R->terminal)
		return;
	R->stalled = true;
	kvf_stats(R->eng, &a); /* a read, not progress: nothing moves */
	printf("driver: stall begin t=%.6f terminal=%u created=%u ms=%.0f\n", t0, R->terminal,
	       R->next, o->stall_ms);
	for (double now = t0; now < until; now = kvt_mono()) {
		left.tv_sec = (time_t)(until - now);
		left.tv_nsec = (long)((until - now - (double)left.tv_sec) * 1e9);
		nanosleep(&left, NULL); /* again if a signal cut it short */
	}
	kvf_stats(R->eng, &b);
	/* What the poller did while the scheduler was away */
	printf("driver: stall end t=%.6f ms=%.0f keepalives_sent=%" PRIu64 " keepalives_acked=%"
	       PRIu64 " keepalives_late=%" PRIu64 "\n", kvt_mono(), (kvt_mono() - t0) * 1000,
	       b.keepalives_sent - a.keepalives_sent, b.keepalives_acked - a.keepalives_acked,
	       b.keepalives_late - a.keepalives_late);
}

/* 0 all done, 1 stopped, 2 timed out, -1 a room could not be created. */
static int run_rooms(struct run *R)
{
	struct opts *o = R->o;

	if (o->start_delay > 0 || (R->prefill && o->follow_s > 0))
		write_ready(R); /* --follow: nothing is created before the decode asks */
	for (double until = kvt_mono() + o->start_delay; kvt_mono() < until;)
		kvf_progress(R->eng);
	for (;;) {
		uint32_t was = R->terminal + R->next;

		if (kvf_progress(R->eng) == 0 && was == R->last_count) {
			/* nothing moved: let the pollers of a 2-vCPU guest run */
			struct timespec pause = { .tv_nsec = 50000 };

			nanosleep(&pause, NULL);
		}
		R->last_count = was;
		if (create_rooms(R))
			return -1;
		while (R->lo < R->next && R->rooms[R->lo].st == 3)
			R->lo++;
		for (uint32_t i = R->lo; i < R->next; i++)
			if (R->rooms[i].st != 3)
				poll_room(R, i);
		maybe_stall(R);
		if (R->stopping && kvt_mono() - R->lost_at > o->stop_on_lost) {
			stop_stuck(R);
			return 1;
		}
		if (R->lo == R->next && (R->next == o->rooms || R->stopping))
			return 0;
		if (kvt_mono() - R->t0 > o->timeout_s + o->start_delay + o->stall_ms / 1000) {
			printf("driver: TIMEOUT after %.0f s; live rooms:\n", o->timeout_s);
			fflush(stdout);
			kvf_dump(R->eng, stdout);
			return 2;
		}
	}
}

/* Pinned: not terminal by created + --deadline + 1 s: terminal later, or
 * still live past it. One still live and not yet past it (the driver's
 * --timeout came first) is "unfinished", not pinned. */
static void chaos_line(struct run *R)
{
	uint32_t pinned = 0, unfinished = 0;
	double worst = 0, life = 0;

	for (uint32_t i = 0; i < R->next; i++) {
		struct room *r = &R->rooms[i];
		double late = (r->done ? r->done : kvt_mono()) - (r->created + R->o->deadline);

		if (late > worst)
			worst = late;
		if (r->done && r->done - r->created > life)
			life = r->done - r->created;
		unfinished += !r->done && late <= 1;
		if (late > 1) {
			pinned++;
			printf("room %u id=%#" PRIx64 " PINNED %s %.3f s past its deadline\n", i,
			       R->o->first_id + i, r->done ? "terminal" : "still live", late);
		}
	}
	printf("driver: chaos role=%s rooms=%u created=%u ok=%u failed=%u aborted=%u passed=%u "
	       "pinned=%u unfinished=%u worst_late=%.3f worst_life=%.3f bad_words=%u\n",
	       R->o->role, R->o->rooms, R->next, R->ok, R->failed, R->aborted, R->passed, pinned,
	       unfinished, worst > 0 ? worst : 0, life, R->bad_total);
}

static void summary(struct run *R)
{
	double secs = kvt_mono() - R->t0;
	struct opts *o = R->o;

	printf("driver: role=%s rooms=%u ok=%u failed=%u stuck=%u bad_words=%u released=%u "
	       "created=%u seconds=%.3f gbit=%.4f end=%.6f\n", o->role, o->rooms, R->ok, R->failed,
	       R->stuck, R->bad_total, R->released, R->next, secs,
	       (double)R->ok * o->nbufs * o->bpr * (double)o->block_size * 8 / secs / 1e9,
	       kvt_mono());
	printf("driver: failures:");
	for (int k = 1; k < KVF_FAIL_NUM; k++)
		if (R->by_reason[k])
			printf(" %s=%u", token(kvf_fail_reason_str((enum kvf_fail_reason)k)),
			       R->by_reason[k]);
	printf("\n");
	sample_conns(R);
	conns_line(R);
	if (o->deadline > 0)
		chaos_line(R);
	fflush(stdout);
}

/* tests/rxe/leak_shim.c when it is preloaded (chaos.sh does): start
 * recording allocations, or print "driver: leak_objects total=N OBJ=B/N..."
 * of those still allocated. Nothing without the shim. */
static void leak_shim_call(const char *fn)
{
	void (*start)(void) = NULL;
	void (*report)(FILE *, const char *) = NULL;

	if (!strcmp(fn, "kvf_leak_start"))
		*(void **)&start = dlsym(RTLD_DEFAULT, fn);
	else
		*(void **)&report = dlsym(RTLD_DEFAULT, fn);
	if (start)
		start();
	if (report)
		report(stdout, "driver: leak_objects");
}

/* --leak-check: the libraries' one-time allocations (verbs providers,
 * rdma_cm) are made by a first engine, so the second is measured alone. */
static void warm_up(struct opts *o)
{
	kvf_engine *eng = NULL;
	bool pl = o->print_listen;

	o->print_listen = false;
	if (open_engine(o, &eng) == 0)
		kvf_engine_close(eng);
	o->print_listen = pl;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct run R = { .o = &o };
	struct held before = { 0 }, after = { 0 };
	size_t heap_growth = 0;
	uint64_t *bs;
	int rc, ret = 0;

	/* A buffer of our own: stdio's, allocated at the first line, would be
	 * the leak shim's one block of the driver still held at the end. */
	static char outbuf[BUFSIZ];

	setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
	parse(argc, argv, &o);
	/* never hang the suite */
	alarm((unsigned)(o.timeout_s + o.start_delay + o.stall_ms / 1000) + 60);
	R.prefill = !strcmp(o.role, "prefill");
	R.rooms = rooms_table(o.rooms);
	bs = calloc(o.nbufs, sizeof(*bs));
	if (!R.rooms || !bs)
		return 1;
	if (o.leak_check) {
		warm_up(&o);
		before = held_now();
		leak_shim_call("kvf_leak_start");
	}
	if (open_engine(&o, &R.eng) || alloc_bufs(&R))
		return 1;
	for (uint32_t k = 0; k < o.nbufs; k++)
		bs[k] = o.block_size;
	rc = kvf_pool_register(R.eng, o.nbufs, (void *const *)R.bufs, bs, o.pool_blocks);
	if (rc) {
		printf("driver: SETUP FAILED: kvf_pool_register: %s\n", strerror(-rc));
		kvf_engine_close(R.eng);
		return 1;
	}
	R.t0 = kvt_mono();
	printf("driver: role=%s start t=%.6f rooms=%u buffers=%u block_size=%" PRIu64
	       " blocks_per_room=%u pool_blocks=%u window=%u\n", o.role, R.t0, o.rooms, o.nbufs,
	       o.block_size, o.bpr, o.pool_blocks, o.window);
	if (o.sample_every)
		print_sample(&R);
	rc = run_rooms(&R);
	ret = rc < 0 ? 1 : rc == 2 ? 2 : 0;
	if (o.leak_check) {
		after = held_now();
		heap_growth = after.heap > R.base.heap && R.terminal ? after.heap - R.base.heap : 0;
	}
	summary(&R);
	for (double until = kvt_mono() + o.linger; kvt_mono() < until;) {
		struct timespec ms = { .tv_nsec = 1000000 };

		kvf_progress(R.eng);
		nanosleep(&ms, NULL);
		if (o.linger_until && access(o.linger_until, F_OK) == 0)
			break;
	}
	kvf_engine_close(R.eng);
	for (uint32_t k = 0; k < o.nbufs; k++)
		free(R.bufs[k]);
	free(R.bufs);
	if (o.leak_check) {
		struct held closed = held_now();

		printf("driver: leaks fds=%ld heap_bytes=%lld heap_run=%zu fds_start=%ld heap_start=%zu "
		       "heap_first=%zu heap_last=%zu rss_kb_first=%ld rss_kb_last=%ld\n",
		       closed.fds - before.fds, (long long)closed.heap - (long long)before.heap,
		       heap_growth, before.fds, before.heap, R.base.heap, after.heap, R.base.rss_kb,
		       after.rss_kb);
		leak_shim_call("kvf_leak_report");
	}
	munmap(R.rooms, rooms_bytes(o.rooms));
	free(bs);
	return ret;
}
