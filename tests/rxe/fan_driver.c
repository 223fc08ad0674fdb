/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fan_driver: one kvferry engine standing in for one rank of a room across
 * ranks, for the RDMA suite (tests/rxe/scenarios/fan.sh). Host memory, a
 * pool of --buffers buffers x --pool pages of --page-bytes; request i (room
 * id --first-id + i) moves --pages pages, entry j of its list holding
 * source page kvt_src_block(i, j) (pattern.h), so every side can check
 * every byte without talking to the others.
 *
 *   --role prefill [--receivers N]   fan-out sender to N decode ranks
 *                                    (kvf_sender_create_fanout); the same
 *                                    source pages to each, in two chunks
 *   --role prefill --part K --parts M  one of M prefill ranks feeding a
 *                                    fan-in decode: its list is part K of
 *                                    the request's entries (contiguous)
 *   --role decode [--dummy]          a decode rank of a fan-out; a dummy
 *                                    asks for no data (kvf_receiver_init_dummy)
 *                                    and checks that none of its pool changed
 *   --role decode --peers A,B,...    a fan-in decode fed by those prefill
 *                                    ranks, part k to peer k
 *
 * A decode checks every byte of its pages on SUCCESS (and that a dummy's
 * pool is untouched). --stop-on-fail: after the first failed room, create
 * no more rooms (a prefill creates and aborts the next --window ids, so
 * that a decode's ROOM_INFO parked for them hears ABORT), finish the live
 * ones and exit. One line per terminal room:
 *
 *   room 3 id=0x1003 SUCCESS t=123.4 checked=65536 bad=0
 *   room 4 id=0x1004 FAILED reason=peer_lost t=... detail="..."
 *
 * then "driver: role=... rooms=N ok=N failed=N bad_bytes=N checked_bytes=N
 * released=N created=N first_fail=T seconds=S". Exit: 0 every room
 * terminal and released (and no bad byte), 2 timeout, 1 setup error or a
 * bad byte.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "pattern.h"

#define MAX_BUFS 16
#define MAX_SETS 8
#define MAX_PEERS 8
#define POISON 0xddu

struct opts {
	const char *role, *config, *ready_file, *peers[MAX_PEERS];
	const char *sets[MAX_SETS];
	size_t nsets;
	uint32_t npeers, rooms, window, buffers, pages, receivers, part, parts;
	uint64_t page_bytes, first_id;
	bool dummy, stop_on_fail;
	double timeout_s;
};

struct room {
	kvf_room h;
	uint8_t st; /* 0 none, 1 live, 2 terminal not released, 3 released */
	bool sent, extra;
};

struct run {
	struct opts o;
	kvf_engine *eng;
	bool prefill;
	uint8_t *buf[MAX_BUFS];
	uint32_t pool;
	struct room *rooms;
	uint32_t next, ok, failed, released, live;
	uint64_t bad, checked;
	double t0, first_fail;
	bool stopping;
};

static void usage(void)
{
	fprintf(stderr, "usage: fan_driver --role prefill|decode --config FILE [--set K=V]...\n"
		"  [--rooms R (20)] [--window W (4)] [--buffers B (4)] [--pages P (8)]\n"
		"  [--page-bytes S (16384)] [--first-id ID (0x1000)] [--receivers N (1)]\n"
		"  [--part K --parts M] [--dummy] [--peers A,B] [--stop-on-fail]\n"
		"  [--timeout S (120)] [--ready-file PATH] | --now\n");
	exit(1);
}

static void split_peers(struct opts *o, char *s)
{
	for (char *p = strtok(s, ","); p && o->npeers < MAX_PEERS; p = strtok(NULL, ","))
		o->peers[o->npeers++] = p;
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .rooms = 20, .window = 4, .buffers = 4, .pages = 8, .receivers = 1,
			    .parts = 1, .page_bytes = 16384, .first_id = 0x1000, .timeout_s = 120 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--now")) {
			printf("%.6f\n", kvt_mono());
			exit(0);
		} else if (!strcmp(a, "--dummy")) {
			o->dummy = true;
			continue;
		} else if (!strcmp(a, "--stop-on-fail")) {
			o->stop_on_fail = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--role")) o->role = v;
		else if (!strcmp(a, "--config")) o->config = v;
		else if (!strcmp(a, "--set") && o->nsets < MAX_SETS) o->sets[o->nsets++] = v;
		else if (!strcmp(a, "--ready-file")) o->ready_file = v;
		else if (!strcmp(a, "--peers")) split_peers(o, argv[i]);
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--window")) o->window = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--buffers")) o->buffers = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pages")) o->pages = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--page-bytes")) o->page_bytes = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--first-id")) o->first_id = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--receivers")) o->receivers = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--part")) o->part = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--parts")) o->parts = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--timeout")) o->timeout_s = strtod(v, NULL);
		else usage();
	}
	if (!o->role || !o->config || !o->window || !o->pages || !o->buffers ||
	    o->buffers > MAX_BUFS || !o->parts || o->part >= o->parts || o->pages % o->parts ||
	    (o->npeers > 1 && o->pages % o->npeers))
		usage();
}

/* Part k of m of a request's entries: [first, first + n). */
static void part_of(uint32_t pages, uint32_t k, uint32_t m, uint32_t *first, uint32_t *n)
{
	*n = pages / m;
	*first = k * *n;
}

static int setup_pool(struct run *u)
{
	void *bufs[MAX_BUFS];
	uint64_t sizes[MAX_BUFS];
	int rc;

	u->pool = u->o.window * 2 * u->o.pages + 1;
	for (uint32_t b = 0; b < u->o.buffers; b++) {
		size_t len = (size_t)u->pool * u->o.page_bytes;

		u->buf[b] = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
		if (!u->buf[b])
			return -ENOMEM;
		if (u->prefill) {
			uint64_t *w = (uint64_t *)u->buf[b];

			for (uint32_t p = 0; p < u->pool; p++)
				for (uint64_t x = 0; x < u->o.page_bytes / 8; x++)
					w[p * (u->o.page_bytes / 8) + x] = kvt_word(b, p, x);
		} else {
			memset(u->buf[b], POISON, len);
		}
		bufs[b] = u->buf[b];
		sizes[b] = u->o.page_bytes;
	}
	rc = kvf_pool_register(u->eng, u->o.buffers, bufs, sizes, u->pool);
	if (rc)
		printf("driver: SETUP FAILED: kvf_pool_register: %s\n", strerror(-rc));
	return rc;
}

/* Decode: every byte of request i's pages (or, a dummy, of the pool). */
static void check(struct run *u, uint32_t i, uint64_t *checked, uint64_t *bad)
{
	uint64_t words = u->o.page_bytes / 8;

	for (uint32_t b = 0; b < u->o.buffers; b++) {
		const uint64_t *w = (const uint64_t *)u->buf[b];

		if (u->o.dummy) {
			uint64_t poison;

			memset(&poison, POISON, sizeof(poison));
			for (uint64_t x = 0; x < (uint64_t)u->pool * words; x++)
				*bad += (w[x] != poison) * 8;
			*checked += (uint64_t)u->pool * u->o.page_bytes;
			continue;
		}
		for (uint32_t j = 0; j < u->o.pages; j++) {
			uint32_t d = kvt_dst_block(i, j, u->o.pages, u->pool);
			uint32_t s = kvt_src_block(i, j, u->o.pages, u->pool);

			for (uint64_t x = 0; x < words; x++)
				*bad += (w[d * words + x] != kvt_word(b, s, x)) * 8;
			*checked += u->o.page_bytes;
		}
	}
}

static int create_decode(struct run *u, uint32_t i, kvf_room *h)
{
	uint32_t items[4096], first, n;
	struct kvf_index_list l = { .region = 0, .items = items };
	uint64_t id = u->o.first_id + i;
	int rc;

	if (u->o.npeers > 1)
		rc = kvf_receiver_create_fanin(u->eng, id, u->o.peers, u->o.npeers, h);
	else
		rc = kvf_receiver_create(u->eng, id, u->o.npeers ? u->o.peers[0] : NULL, h);
	if (rc)
		return rc;
	for (uint32_t j = 0; j < u->o.pages && !u->o.dummy; j++) {
		items[j] = kvt_dst_block(i, j, u->o.pages, u->pool);
		for (uint32_t b = 0; b < u->o.buffers; b++)
			memset(u->buf[b] + (size_t)items[j] * u->o.page_bytes, POISON, u->o.page_bytes);
	}
	if (u->o.dummy)
		return kvf_receiver_init_dummy(u->eng, *h);
	if (u->o.npeers <= 1) {
		l.n = u->o.pages;
		return kvf_receiver_init_regions(u->eng, *h, &l, 1, NULL, 0);
	}
	for (uint32_t k = 0; k < u->o.npeers; k++) {
		part_of(u->o.pages, k, u->o.npeers, &first, &n);
		l.items = items + first;
		l.n = n;
		rc = kvf_receiver_init_part(u->eng, *h, k, &l, 1, NULL, 0);
		if (rc)
			return rc;
	}
	return 0;
}

static int create(struct run *u, uint32_t i)
{
	struct room *r = &u->rooms[i];
	int rc;

	if (u->prefill)
		rc = kvf_sender_create_fanout(u->eng, u->o.first_id + i, u->o.receivers, &r->h);
	else
		rc = create_decode(u, i, &r->h);
	if (rc && rc != -ECANCELED && rc != -ENOTCONN && rc != -ECONNREFUSED) {
		printf("driver: room %u: create/init: %s\n", i, strerror(-rc));
		return rc;
	}
	r->st = 1;
	u->live++;
	return 0;
}

/* Prefill: the request's part (all of it for a fan-out) to every receiver,
 * in two chunks; each non-dummy receiver's list must be that long. */
static void send_room(struct run *u, uint32_t i, struct room *r)
{
	uint32_t src[4096], first, n, half, nrecv = 0, count = 0;
	struct kvf_chunk_part p = { .region = 0, .src = src };
	int rc = 0;

	part_of(u->o.pages, u->o.part, u->o.parts, &first, &n);
	kvf_sender_receivers(u->eng, r->h, &nrecv, NULL);
	for (uint32_t k = 0; k < nrecv && !rc; k++) {
		rc = kvf_sender_peer_count_k(u->eng, r->h, k, 0, &count);
		if (!rc && count && count != n) {
			printf("driver: room %u: receiver %u asked for %u pages, not %u\n", i, k,
			       count, n);
			kvf_abort(u->eng, r->h);
			return;
		}
	}
	for (uint32_t j = 0; j < n; j++)
		src[j] = kvt_src_block(i, first + j, u->o.pages, u->pool);
	half = n / 2;
	p.n = half;
	if (half)
		rc = kvf_sender_send_chunk(u->eng, r->h, &p, 1, 0);
	p.dst_offset = half;
	p.src = src + half;
	p.n = n - half;
	if (!rc)
		rc = kvf_sender_send_chunk(u->eng, r->h, &p, 1, KVF_SEND_LAST);
	if (rc && rc != -ECANCELED)
		printf("driver: room %u: send_chunk: %s\n", i, strerror(-rc));
	r->sent = true;
}

static const char *token(const char *s)
{
	static char t[64];
	size_t k = 0;

	for (; s[k] && k + 1 < sizeof(t); k++)
		t[k] = s[k] == ' ' || s[k] == '-' ? '_' : s[k];
	t[k] = '\0';
	return t;
}

static void report(struct run *u, uint32_t i, struct room *r, int st)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;
	uint64_t checked = 0, bad = 0;
	double t = kvt_mono();

	if (r->extra) {
		r->st = 2;
		return;
	}
	if (st == KVF_SUCCESS) {
		if (!u->prefill)
			check(u, i, &checked, &bad);
		u->ok++;
		u->bad += bad;
		u->checked += checked;
		printf("room %u id=%#" PRIx64 " SUCCESS t=%.6f checked=%" PRIu64 " bad=%" PRIu64 "\n",
		       i, u->o.first_id + i, t, checked, bad);
	} else {
		kvf_failure(u->eng, r->h, &fl);
		u->failed++;
		if (!u->first_fail)
			u->first_fail = t;
		printf("room %u id=%#" PRIx64 " FAILED reason=%s t=%.6f detail=\"%s\"\n", i,
		       u->o.first_id + i, token(kvf_fail_reason_str(fl.reason)), t, fl.detail);
		if (u->o.stop_on_fail)
			u->stopping = true;
	}
	r->st = 2;
}

/* One pass over the live rooms: send, report, release. */
static void turn(struct run *u, uint32_t upto)
{
	for (uint32_t i = 0; i < upto; i++) {
		struct room *r = &u->rooms[i];
		int st;

		if (r->st == 0 || r->st == 3)
			continue;
		st = kvf_poll(u->eng, r->h);
		if (r->st == 1 && u->prefill && !r->sent && st == KVF_WAITING_FOR_INPUT)
			send_room(u, i, r);
		if (r->st == 1 && (st == KVF_SUCCESS || st == KVF_FAILED))
			report(u, i, r, st);
		if (r->st == 2 && (!r->extra || kvt_mono() - u->first_fail > 5) &&
		    kvf_release(u->eng, r->h) == 0) {
			r->st = 3;
			u->live--;
			u->released += !r->extra;
		}
	}
}

/* Stopping prefill, as an engine that learned a rank is gone: its rooms
 * still BOOTSTRAPPING wait for that rank, which will not come (the
 * bootstrap deadline would fail them, later), so they are aborted; the
 * rooms past it fail by themselves. The next window's ids are created and
 * aborted too, so that a decode's ROOM_INFO parked for one of them hears
 * ABORT now, and kept a few seconds for ROOM_INFOs still on the way. */
static void abort_next(struct run *u)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < u->next; i++) {
		if (u->rooms[i].st == 1 && kvf_poll(u->eng, u->rooms[i].h) == KVF_BOOTSTRAPPING) {
			kvf_abort(u->eng, u->rooms[i].h);
			n++;
		}
	}
	printf("driver: stopping t=%.6f: %u rooms still bootstrapping aborted, the next %u ids "
	       "aborted\n", kvt_mono(), n, u->o.window);
	for (uint32_t k = 0; k < u->o.window && u->next < u->o.rooms; k++, u->next++) {
		struct room *r = &u->rooms[u->next];

		if (kvf_sender_create_fanout(u->eng, u->o.first_id + u->next, u->o.receivers,
					     &r->h))
			continue;
		kvf_abort(u->eng, r->h);
		r->st = 1;
		r->extra = true;
		u->live++;
	}
}

static int loop(struct run *u)
{
	bool aborted_next = false;

	for (;;) {
		kvf_progress(u->eng);
		while (!u->stopping && u->next < u->o.rooms && u->live < u->o.window)
			if (create(u, u->next++))
				return 1;
		if (u->o.ready_file && u->next == u->o.window) {
			FILE *f = fopen(u->o.ready_file, "w");

			if (f)
				fclose(f);
			u->o.ready_file = NULL;
		}
		turn(u, u->next);
		if (u->stopping && u->prefill && !aborted_next) {
			abort_next(u);
			aborted_next = true;
		}
		if (u->live == 0 && (u->next == u->o.rooms || u->stopping))
			return 0;
		if (kvt_mono() - u->t0 > u->o.timeout_s) {
			printf("driver: TIMEOUT after %.0f s, %u rooms live:\n", u->o.timeout_s, u->live);
			fflush(stdout);
			kvf_dump(u->eng, stdout);
			return 2;
		}
	}
}

int main(int argc, char **argv)
{
	static struct run u;
	char err[512];
	int rc, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, &u.o);
	u.prefill = !strcmp(u.o.role, "prefill");
	u.rooms = calloc(u.o.rooms, sizeof(*u.rooms));
	if (!u.rooms)
		return 1;
	rc = kvf_engine_open_with(u.o.config, u.o.sets, u.o.nsets, err, sizeof(err), &u.eng);
	if (rc) {
		printf("driver: SETUP FAILED: kvf_engine_open_with: %s: %s\n", strerror(-rc), err);
		return 1;
	}
	if (setup_pool(&u)) {
		kvf_engine_close(u.eng);
		return 1;
	}
	u.t0 = kvt_mono();
	printf("driver: role=%s%s start t=%.6f rooms=%u window=%u %u buffers x %u pages x %" PRIu64
	       " bytes, receivers=%u part=%u/%u peers=%u\n", u.o.role, u.o.dummy ? " (dummy)" : "",
	       u.t0, u.o.rooms, u.o.window, u.o.buffers, u.o.pages, u.o.page_bytes,
	       u.o.receivers, u.o.part, u.o.parts, u.o.npeers);
	ret = loop(&u);
	printf("driver: role=%s rooms=%u ok=%u failed=%u bad_bytes=%" PRIu64 " checked_bytes=%" PRIu64
	       " released=%u created=%u first_fail=%.6f seconds=%.3f\n", u.o.role, u.o.rooms, u.ok,
	       u.failed, u.bad, u.checked, u.released, u.next, u.first_fail, kvt_mono() - u.t0);
	fflush(stdout);
	kvf_engine_close(u.eng);
	for (uint32_t b = 0; b < u.o.buffers; b++)
		free(u.buf[b]);
	free(u.rooms);
	return ret ? ret : u.bad ? 1 : 0;
}
