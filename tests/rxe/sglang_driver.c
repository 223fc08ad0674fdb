/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sglang_driver: one kvferry engine (prefill or decode) moving an
 * SGLang-shaped request stream on the public API, for the RDMA suite
 * (tests/rxe/scenarios/sglang.sh). Three regions on each side:
 *
 *   kv     2 x LAYERS buffers (K and V per layer), an item is a page of 16
 *          tokens (--page-bytes per buffer)
 *   aux    three buffers of different item sizes (16, 256, 4096 bytes: an
 *          output token id, logprobs, a hidden state), a row per request
 *   state  two buffers (8192 and 1024 bytes: conv and SSM state), a row
 *          per request
 *
 * Request i (room id first_id + i) has a random length of 1..16 x
 * --max-pages tokens and a random decode_prefix_len (whole pages, at most
 * the request's: the decode holds those pages already). Both sides derive
 * them from --seed; the decode also sends them as user data (64 bytes) and
 * the prefill reads them from there (kvf_sender_user_data) and checks the
 * rest of the bytes. The decode allocates its pages at random from a free
 * list, fills the prefix pages with a marker and poisons the others, and
 * sends one list per region (no kv list when the prefix is the whole
 * request). The prefill sends the pages after the prefix in 1..6 chunks
 * (kvf_sender_send_chunk, one chunk per room per loop, --chunk-gap-ms
 * apart), aux and state with the LAST chunk, which sometimes carries no
 * page at all; for some requests aux and state go one chunk earlier and
 * LAST has no part at all (its write-with-immediate is a zero-length
 * write). On SUCCESS the decode checks every byte of every region the
 * room touched, and that the prefix pages are untouched.
 *
 * --abort-every K: the prefill aborts request i when i % K == K - 1, right
 * after its first chunk; the decode aborts it when i % K == K - 2, once it
 * waited --chunk-gap-ms after its ROOM_INFO. --stop-on-lost S as
 * kvf_driver's, and also once the last connection went down: a prefill
 * whose live rooms all wait for a ROOM_INFO has none that can fail "peer
 * lost" when its decode dies (they would wait out deadlines.bootstrap_s).
 * Per terminal room one line:
 *
 *   room 3 id=0x1003 SUCCESS pages=7 prefix=2 chunks=4 last_pages=0 bare_last=0 from=TRANSFERRING
 *        t=123.4 checked=458752 bad=0
 *   room 4 id=0x1004 FAILED reason=local_abort from=TRANSFERRING t=... detail="..."
 *
 * then "driver: role=... rooms=N ok=N failed=N stuck=N bad_bytes=N
 * checked_bytes=N released=N created=N seconds=S", "driver: staging
 * role=... staged_bytes=N staged_chunks=N stage_waits=N slots_busy=N
 * kv_sent_bytes=N" (kvf_stats; kv_sent_bytes: the kv bytes of the chunks the
 * prefill handed over) and "driver: failures: REASON=N ...". Exit: 0 all rooms terminal and released, 2 timeout, 1
 * setup error.
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

#define MAX_SETS 16
#define TOKENS_PER_PAGE 16u
#define MAX_CHUNKS 6u
#define USER_LEN 64u
#define USER_MAGIC 0x73676c6eu /* "sgln" */
#define NAUX 3u
#define NSTATE 2u

static const uint64_t aux_sizes[NAUX] = { 16, 256, 4096 };
static const uint64_t state_sizes[NSTATE] = { 8192, 1024 };

struct opts {
	const char *role, *config, *ready_file;
	const char *sets[MAX_SETS];
	size_t nsets;
	uint32_t rooms, window, layers, max_pages, abort_every;
	uint64_t page_bytes, first_id, seed;
	double timeout_s, stop_on_lost, chunk_gap_s;
};

/* What both sides know of request i. */
struct req {
	uint32_t pages;    /* ceil(tokens / 16) */
	uint32_t prefix;   /* pages the decode holds already */
	uint32_t tokens;
	uint32_t nchunks;  /* prefill: chunks of KV pages (LAST may be empty) */
	bool bare_last;    /* aux and state go with the chunk before LAST, which
	                      is then no part at all: the write-with-immediate
	                      alone, zero bytes */
	uint32_t cut[MAX_CHUNKS + 1]; /* chunk c: entries cut[c]..cut[c + 1] */
};

struct room {
	kvf_room h;
	uint8_t st;        /* 0 not created, 1 live, 2 terminal, 3 released */
	int last;
	bool aborted;
	struct req q;
	uint32_t sent;     /* prefill: chunks posted */
	double next_at;    /* prefill: the next chunk not before; decode: abort at */
	uint32_t *pages;   /* decode: q.pages pages, the prefix first */
	uint32_t row;      /* decode: its aux and state row */
};

struct mem {
	uint8_t *kv[64], *aux[NAUX], *state[NSTATE];
	uint64_t kv_sizes[64];
	uint32_t kv_pages, rows, nkv;
	uint32_t kv_id, aux_id, state_id;
};

static void usage(void)
{
	fprintf(stderr, "usage: sglang_driver --role prefill|decode [--config F] [--set KEY=VALUE]...\n"
		"  [--rooms N (500)] [--window W (16)] [--layers L (16)] [--page-bytes B (2048)]\n"
		"  [--max-pages P (12)] [--seed S (1)] [--first-id ID (0x5000)] [--timeout S (300)]\n"
		"  [--chunk-gap-ms G (0)] [--abort-every K (0)] [--ready-file PATH]\n"
		"  [--stop-on-lost S]\n");
	exit(1);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .rooms = 500, .window = 16, .layers = 16, .page_bytes = 2048,
			    .max_pages = 12, .seed = 1, .first_id = 0x5000, .timeout_s = 300 };
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];

		if (!strcmp(a, "--role")) o->role = v;
		else if (!strcmp(a, "--config")) o->config = v;
		else if (!strcmp(a, "--set") && o->nsets < MAX_SETS) o->sets[o->nsets++] = v;
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--window")) o->window = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--layers")) o->layers = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--page-bytes")) o->page_bytes = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--max-pages")) o->max_pages = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--first-id")) o->first_id = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--timeout")) o->timeout_s = atof(v);
		else if (!strcmp(a, "--chunk-gap-ms")) o->chunk_gap_s = atof(v) / 1000;
		else if (!strcmp(a, "--abort-every")) o->abort_every = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--ready-file")) o->ready_file = v;
		else if (!strcmp(a, "--stop-on-lost")) o->stop_on_lost = atof(v);
		else usage();
	}
	if (!o->role || (!o->config && !o->nsets) ||
	    (strcmp(o->role, "prefill") && strcmp(o->role, "decode")) || !o->rooms ||
	    !o->window || !o->layers || 2 * o->layers > 64 || !o->max_pages || o->max_pages > 64 ||
	    o->page_bytes < 8 || o->page_bytes % 8 || o->abort_every == 1)
		usage();
	if (o->window > o->rooms)
		o->window = o->rooms;
}

/* Request i's length, prefix and chunk plan: the same on both sides. */
static struct req plan(const struct opts *o, uint32_t i)
{
	uint64_t r = kvt_mix(o->seed * 0x9e3779b97f4a7c15ull ^ i), r2 = kvt_mix(r);
	struct req q = { 0 };
	uint32_t n;

	q.tokens = 1 + (uint32_t)(r % (TOKENS_PER_PAGE * o->max_pages));
	q.pages = (q.tokens + TOKENS_PER_PAGE - 1) / TOKENS_PER_PAGE;
	/* one request in eight is all prefix: the LAST chunk carries aux and
	 * state only, and the decode asks for no kv */
	q.prefix = (r >> 40) % 8 == 0 ? q.pages : (uint32_t)((r >> 20) % q.pages);
	n = q.pages - q.prefix;
	q.nchunks = 1 + (uint32_t)(r2 % MAX_CHUNKS);
	/* random cut points; one plan in four leaves the LAST chunk without
	 * pages (all of them went before it) */
	for (uint32_t c = 1; c < q.nchunks; c++)
		q.cut[c] = n ? (uint32_t)(kvt_mix(r2 + c) % (n + 1)) : 0;
	q.cut[q.nchunks] = n;
	for (uint32_t c = 1; c < q.nchunks; c++)
		for (uint32_t d = c + 1; d < q.nchunks; d++)
			if (q.cut[d] < q.cut[c]) {
				uint32_t t = q.cut[c];

				q.cut[c] = q.cut[d];
				q.cut[d] = t;
			}
	if (q.nchunks > 1 && (r2 >> 32) % 4 == 0) {
		q.cut[q.nchunks - 1] = n;
		q.bare_last = (r2 >> 48) % 2 == 0;
	}
	return q;
}

/* Contents. KV page j of request i in buffer b; aux/state row of request i. */
static uint64_t kv_word(uint32_t b, uint32_t i, uint32_t j, uint64_t x)
{
	return kvt_word(b, i * 64 + j, x);
}
static uint64_t marker(uint32_t b, uint32_t page, uint64_t x)
{
	return kvt_word(b ^ 0x5a5a, 0x100000 + page, x);
}

static void fill(uint8_t *p, uint64_t bytes, uint64_t (*f)(uint32_t, uint32_t, uint32_t, uint64_t),
		 uint32_t b, uint32_t i, uint32_t j)
{
	uint64_t *w = (uint64_t *)p;

	for (uint64_t x = 0; x < bytes / 8; x++)
		w[x] = f(b, i, j, x);
}

static uint64_t row_word(uint32_t b, uint32_t i, uint32_t unused, uint64_t x)
{
	(void)unused;
	return kvt_word(100 + b, i, x);
}

static uint64_t marker_word(uint32_t b, uint32_t page, uint32_t unused, uint64_t x)
{
	(void)unused;
	return marker(b, page, x);
}

/* Bytes of p that differ from f's words. */
static uint64_t check(const uint8_t *p, uint64_t bytes,
		      uint64_t (*f)(uint32_t, uint32_t, uint32_t, uint64_t), uint32_t b, uint32_t i,
		      uint32_t j)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t bad = 0;

	for (uint64_t x = 0; x < bytes / 8; x++)
		bad += w[x] != f(b, i, j, x) ? 8 : 0;
	return bad;
}

static int reg(kvf_engine *eng, const char *name, uint32_t nbufs, uint32_t nitems, uint8_t **bufs,
	       const uint64_t *sizes, uint32_t *id)
{
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	int rc;

	for (uint32_t k = 0; k < nbufs; k++)
		if (posix_memalign((void **)&bufs[k], 4096, sizes[k] * nitems))
			return -ENOMEM;
	d.name = name;
	d.nbufs = nbufs;
	d.nitems = nitems;
	d.bufs = (void *const *)bufs;
	d.item_size = sizes;
	rc = kvf_region_register(eng, &d, id);
	if (rc)
		printf("driver: SETUP FAILED: kvf_region_register(%s): %s\n", name, strerror(-rc));
	return rc;
}

static int regions(kvf_engine *eng, const struct opts *o, bool prefill, struct mem *m)
{
	m->nkv = 2 * o->layers;
	m->rows = o->window;
	/* the decode's pool is larger and handed out at random */
	m->kv_pages = o->window * o->max_pages + (prefill ? 0 : 64);
	for (uint32_t k = 0; k < m->nkv; k++)
		m->kv_sizes[k] = o->page_bytes;
	if (reg(eng, "kv", m->nkv, m->kv_pages, m->kv, m->kv_sizes, &m->kv_id) ||
	    reg(eng, "aux", NAUX, m->rows, m->aux, aux_sizes, &m->aux_id) ||
	    reg(eng, "state", NSTATE, m->rows, m->state, state_sizes, &m->state_id))
		return -1;
	return 0;
}

/* "local abort" -> "local_abort" */
static const char *token(const char *s)
{
	static char buf[64];
	size_t i;

	for (i = 0; s[i] && i + 1 < sizeof(buf); i++)
		buf[i] = s[i] == ' ' ? '_' : s[i];
	buf[i] = '\0';
	return buf;
}

/* ------------------------------------------------------------ decode */

struct pool {
	uint32_t *free;
	uint32_t n;
	uint64_t rng;
};

static uint32_t take_page(struct pool *p)
{
	uint32_t k, page;

	p->rng = kvt_mix(p->rng + 1);
	k = (uint32_t)(p->rng % p->n);
	page = p->free[k];
	p->free[k] = p->free[--p->n];
	return page;
}

/* Pages, poison and marker, user data, lists: the room's ROOM_INFO. */
static int decode_init(kvf_engine *eng, const struct opts *o, struct mem *m, struct pool *pl,
		       struct room *r, uint32_t i)
{
	uint32_t user[USER_LEN / 4], n = r->q.pages - r->q.prefix, nl = 0;
	struct kvf_index_list l[3];

	r->pages = malloc(r->q.pages * sizeof(uint32_t));
	if (!r->pages)
		return -ENOMEM;
	for (uint32_t j = 0; j < r->q.pages; j++) {
		r->pages[j] = take_page(pl);
		for (uint32_t b = 0; b < m->nkv; b++) {
			uint8_t *p = m->kv[b] + r->pages[j] * o->page_bytes;

			if (j < r->q.prefix)
				fill(p, o->page_bytes, marker_word, b, r->pages[j], 0);
			else
				memset(p, 0xdd, o->page_bytes);
		}
	}
	r->row = o->window - 1 - i % o->window;
	for (uint32_t b = 0; b < NAUX; b++)
		memset(m->aux[b] + r->row * aux_sizes[b], 0xdd, aux_sizes[b]);
	for (uint32_t b = 0; b < NSTATE; b++)
		memset(m->state[b] + r->row * state_sizes[b], 0xdd, state_sizes[b]);
	user[0] = USER_MAGIC;
	user[1] = r->q.prefix * TOKENS_PER_PAGE; /* decode_prefix_len, in tokens */
	user[2] = r->q.tokens;
	user[3] = i;
	for (uint32_t k = 4; k < USER_LEN / 4; k++)
		user[k] = (uint32_t)kvt_mix(i * 31 + k);
	if (n)
		l[nl++] = (struct kvf_index_list){ m->kv_id, n, r->pages + r->q.prefix };
	l[nl++] = (struct kvf_index_list){ m->aux_id, 1, &r->row };
	l[nl++] = (struct kvf_index_list){ m->state_id, 1, &r->row };
	return kvf_receiver_init_regions(eng, r->h, l, nl, user, USER_LEN);
}

/* Every byte the room owns: what was sent, and the prefix untouched. */
static uint64_t decode_check(const struct opts *o, const struct mem *m, const struct room *r,
			     uint32_t i, uint64_t *checked)
{
	uint64_t bad = 0;

	for (uint32_t j = 0; j < r->q.pages; j++)
		for (uint32_t b = 0; b < m->nkv; b++) {
			const uint8_t *p = m->kv[b] + r->pages[j] * o->page_bytes;

			bad += j < r->q.prefix ? check(p, o->page_bytes, marker_word, b, r->pages[j], 0)
					       : check(p, o->page_bytes, kv_word, b, i, j);
			*checked += o->page_bytes;
		}
	for (uint32_t b = 0; b < NAUX; b++) {
		bad += check(m->aux[b] + r->row * aux_sizes[b], aux_sizes[b], row_word, b, i, 0);
		*checked += aux_sizes[b];
	}
	for (uint32_t b = 0; b < NSTATE; b++) {
		bad += check(m->state[b] + r->row * state_sizes[b], state_sizes[b], row_word,
			     NAUX + b, i, 0);
		*checked += state_sizes[b];
	}
	return bad;
}

/* ------------------------------------------------------------ prefill */

/* The user data: our plan's numbers, and the bytes the decode made. */
static bool prefill_user_ok(kvf_engine *eng, const struct room *r, uint32_t i)
{
	uint32_t user[USER_LEN / 4], len = 0;

	if (kvf_sender_user_data(eng, r->h, user, sizeof(user), &len) || len != USER_LEN ||
	    user[0] != USER_MAGIC || user[1] != r->q.prefix * TOKENS_PER_PAGE ||
	    user[2] != r->q.tokens || user[3] != i)
		return false;
	for (uint32_t k = 4; k < USER_LEN / 4; k++)
		if (user[k] != (uint32_t)kvt_mix(i * 31 + k))
			return false;
	return true;
}

/* The next chunk of room i: its pages (written into our pool now, as a
 * forward pass would), and with LAST the aux and state rows. */
static int prefill_chunk(kvf_engine *eng, const struct opts *o, struct mem *m, struct room *r,
			 uint32_t i)
{
	uint32_t c = r->sent, from = r->q.cut[c], to = r->q.cut[c + 1], np = 0;
	uint32_t src[64], row = i % o->window;
	struct kvf_chunk_part p[3];
	bool last = c + 1 == r->q.nchunks;
	bool rows = r->q.bare_last ? c + 2 == r->q.nchunks : last;

	for (uint32_t e = from; e < to; e++) {
		uint32_t j = r->q.prefix + e;

		src[e - from] = row * o->max_pages + j;
		for (uint32_t b = 0; b < m->nkv; b++)
			fill(m->kv[b] + src[e - from] * o->page_bytes, o->page_bytes, kv_word, b, i, j);
	}
	if (to > from)
		p[np++] = (struct kvf_chunk_part){ m->kv_id, from, to - from, src };
	if (rows) {
		for (uint32_t b = 0; b < NAUX; b++)
			fill(m->aux[b] + row * aux_sizes[b], aux_sizes[b], row_word, b, i, 0);
		for (uint32_t b = 0; b < NSTATE; b++)
			fill(m->state[b] + row * state_sizes[b], state_sizes[b], row_word, NAUX + b,
			     i, 0);
		p[np++] = (struct kvf_chunk_part){ m->aux_id, 0, 1, &row };
		p[np++] = (struct kvf_chunk_part){ m->state_id, 0, 1, &row };
	}
	r->sent++;
	r->next_at = kvt_mono() + o->chunk_gap_s;
	return kvf_sender_send_chunk(eng, r->h, p, np, last ? KVF_SEND_LAST : 0);
}

/* ------------------------------------------------------------ main loop */

struct run {
	struct opts o;
	struct mem m;
	struct pool pl;
	kvf_engine *eng;
	struct room *rooms;
	bool prefill, stopping, had_conn;
	uint32_t next, ok, failed, released, stuck, user_bad;
	uint32_t by_reason[KVF_FAIL_NUM];
	uint64_t bad_bytes, checked;
	uint64_t kv_sent;  /* prefill: kv bytes of the chunks handed to the engine */
	double t0, lost_at, conns_checked;
};

static int create(struct run *u)
{
	struct room *r = &u->rooms[u->next];
	uint32_t i = u->next;
	int rc;

	r->q = plan(&u->o, i);
	if (u->prefill) {
		rc = kvf_sender_create(u->eng, u->o.first_id + i, &r->h);
	} else {
		rc = kvf_receiver_create(u->eng, u->o.first_id + i, NULL, &r->h);
		if (!rc) {
			rc = decode_init(u->eng, &u->o, &u->m, &u->pl, r, i);
			if (rc == -ECANCELED || rc == -ENOTCONN || rc == -EHOSTUNREACH)
				rc = 0; /* failed at once: reported when polled */
			else if (rc)
				printf("driver: kvf_receiver_init_regions(room %u): %s\n", i,
				       strerror(-rc));
			rc = 0;
		}
	}
	if (rc) {
		printf("driver: creating room %u: %s\n", i, strerror(-rc));
		return rc;
	}
	r->st = 1;
	r->last = KVF_BOOTSTRAPPING;
	u->next++;
	if (u->next == u->o.window && u->o.ready_file) {
		FILE *f = fopen(u->o.ready_file, "w");

		if (f)
			fclose(f);
		printf("driver: ready t=%.6f\n", kvt_mono());
	}
	return 0;
}

/* The room's own work this turn: a chunk, an abort. */
static void work(struct run *u, struct room *r, uint32_t i, int st)
{
	uint32_t k = u->o.abort_every;

	if (u->prefill && st >= KVF_WAITING_FOR_INPUT && st != KVF_SUCCESS &&
	    r->sent < r->q.nchunks && kvt_mono() >= r->next_at) {
		uint32_t count = 0;
		int rc;

		if (r->sent == 0) {
			kvf_sender_peer_count(u->eng, r->h, u->m.kv_id, &count);
			if (!prefill_user_ok(u->eng, r, i) || count != r->q.pages - r->q.prefix) {
				u->user_bad++;
				printf("driver: room %u: user data or kv count (%u) not the plan's\n", i,
				       count);
			}
		}
		uint32_t np = r->q.cut[r->sent + 1] - r->q.cut[r->sent];

		rc = prefill_chunk(u->eng, &u->o, &u->m, r, i);
		if (!rc)
			u->kv_sent += (uint64_t)np * u->m.nkv * u->o.page_bytes;
		if (rc && rc != -ECANCELED)
			printf("driver: kvf_sender_send_chunk(room %u, chunk %u): %s\n", i, r->sent - 1,
			       strerror(-rc));
		if (k && i % k == k - 1 && !r->aborted) {
			kvf_abort(u->eng, r->h);
			r->aborted = true;
		}
	}
	if (!u->prefill && k && i % k == k - 2 && !r->aborted && st == KVF_WAITING_FOR_INPUT) {
		if (!r->next_at)
			r->next_at = kvt_mono() + u->o.chunk_gap_s;
		if (kvt_mono() >= r->next_at) {
			kvf_abort(u->eng, r->h);
			r->aborted = true;
		}
	}
}

static void terminal(struct run *u, struct room *r, uint32_t i, int st)
{
	double t = kvt_mono();

	r->st = 2;
	if (st == KVF_SUCCESS) {
		uint64_t checked = 0, bad = u->prefill ? 0 : decode_check(&u->o, &u->m, r, i, &checked);

		u->ok++;
		u->bad_bytes += bad;
		u->checked += checked;
		printf("room %u id=%#" PRIx64 " SUCCESS pages=%u prefix=%u chunks=%u last_pages=%u "
		       "bare_last=%d from=%s t=%.6f checked=%" PRIu64 " bad=%" PRIu64 "\n", i,
		       u->o.first_id + i, r->q.pages, r->q.prefix, r->q.nchunks,
		       r->q.cut[r->q.nchunks] - r->q.cut[r->q.nchunks - 1], r->q.bare_last,
		       kvf_poll_str(r->last), t, checked, bad);
		return;
	}
	struct kvf_failure f = KVF_FAILURE_INIT;

	kvf_failure(u->eng, r->h, &f);
	u->failed++;
	u->by_reason[f.reason < KVF_FAIL_NUM ? f.reason : 0]++;
	printf("room %u id=%#" PRIx64 " FAILED reason=%s from=%s aborted_here=%d chunks_sent=%u "
	       "t=%.6f detail=\"%s\"\n", i, u->o.first_id + i, token(kvf_fail_reason_str(f.reason)),
	       kvf_poll_str(r->last), r->aborted, r->sent, t, f.detail);
	if (f.reason == KVF_FAIL_PEER_LOST && u->o.stop_on_lost > 0 && !u->stopping) {
		u->stopping = true;
		u->lost_at = t;
	}
}

static void release(struct run *u, struct room *r)
{
	if (kvf_release(u->eng, r->h))
		return;
	r->st = 3;
	u->released++;
	if (!u->prefill && r->pages) {
		for (uint32_t j = 0; j < r->q.pages; j++)
			u->pl.free[u->pl.n++] = r->pages[j];
		free(r->pages);
		r->pages = NULL;
	}
}

/* One turn over the live rooms; true when none is left. */
static bool turn(struct run *u)
{
	bool all_done = true;

	for (uint32_t i = 0; i < u->next; i++) {
		struct room *r = &u->rooms[i];
		int st;

		if (r->st == 3)
			continue;
		all_done = false;
		st = kvf_poll(u->eng, r->h);
		if (r->st == 1 && st != KVF_FAILED && st != KVF_SUCCESS) {
			work(u, r, i, st);
			st = kvf_poll(u->eng, r->h);
		}
		if (r->st == 1 && st != KVF_SUCCESS && st != KVF_FAILED) {
			r->last = st;
			continue;
		}
		if (r->st == 1)
			terminal(u, r, i, st);
		release(u, r);
	}
	return all_done;
}

/* --stop-on-lost: a connection was up and none is now (checked every 100 ms). */
static void watch_conns(struct run *u)
{
	struct kvf_stats st = KVF_STATS_INIT;
	double now = kvt_mono();

	if (u->o.stop_on_lost <= 0 || u->stopping || now - u->conns_checked < 0.1)
		return;
	u->conns_checked = now;
	kvf_stats(u->eng, &st);
	if (st.conns_live)
		u->had_conn = true;
	else if (u->had_conn) {
		u->stopping = true;
		u->lost_at = now;
		printf("driver: no connection left at t=%.6f\n", now);
	}
}

/* --stop-on-lost: what is still live S seconds after the first loss is
 * STUCK (aborted so the driver can end). */
static void stop(struct run *u)
{
	double until;

	for (uint32_t i = 0; i < u->next; i++) {
		struct room *r = &u->rooms[i];

		if (r->st != 1)
			continue;
		u->stuck++;
		printf("room %u id=%#" PRIx64 " STUCK state=%s %.1f s after the first peer loss\n", i,
		       u->o.first_id + i, kvf_poll_str(kvf_poll(u->eng, r->h)),
		       kvt_mono() - u->lost_at);
		kvf_abort(u->eng, r->h);
		r->st = 2;
	}
	for (until = kvt_mono() + 5; kvt_mono() < until;) {
		bool left = false;

		kvf_progress(u->eng);
		for (uint32_t i = 0; i < u->next; i++) {
			if (u->rooms[i].st == 2)
				release(u, &u->rooms[i]);
			left |= u->rooms[i].st == 2;
		}
		if (!left)
			break;
	}
}

/* Staging (KVF_TEST_STAGE_REGIONS, docs/design.md): what went through the
 * slots, and whether every slot is back once the rooms are released (the
 * transport returns them in its progress: up to 5 s of it). */
static void staging_line(struct run *u)
{
	struct kvf_stats st = KVF_STATS_INIT;
	double end = kvt_mono() + 5;

	do {
		kvf_progress(u->eng);
		kvf_stats(u->eng, &st);
	} while (st.stage_slots_busy && kvt_mono() < end);
	printf("driver: staging role=%s staged_bytes=%" PRIu64 " staged_chunks=%" PRIu64
	       " stage_waits=%" PRIu64 " slots_busy=%" PRIu64 " kv_sent_bytes=%" PRIu64 "\n",
	       u->o.role, st.staged_bytes, st.staged_chunks, st.stage_waits, st.stage_slots_busy,
	       u->kv_sent);
}

int main(int argc, char **argv)
{
	static struct run u;
	char err[512];
	int rc, ret = 0;
	double secs;

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
	if (regions(u.eng, &u.o, u.prefill, &u.m)) {
		kvf_engine_close(u.eng);
		return 1;
	}
	u.pl.free = malloc(u.m.kv_pages * sizeof(uint32_t));
	if (!u.pl.free)
		return 1;
	for (uint32_t p = 0; p < u.m.kv_pages; p++)
		u.pl.free[u.pl.n++] = p;
	u.pl.rng = u.o.seed;
	u.t0 = kvt_mono();
	printf("driver: role=%s start t=%.6f rooms=%u window=%u kv=%u buffers x %" PRIu64
	       " bytes x %u pages, aux=%u buffers, state=%u buffers\n", u.o.role, u.t0, u.o.rooms,
	       u.o.window, u.m.nkv, u.o.page_bytes, u.m.kv_pages, NAUX, NSTATE);
	for (;;) {
		bool all_done;

		kvf_progress(u.eng);
		while (!u.stopping && u.next < u.o.rooms &&
		       (u.next < u.o.window || u.rooms[u.next - u.o.window].st == 3))
			if (create(&u)) {
				ret = 1;
				goto out;
			}
		all_done = turn(&u);
		watch_conns(&u);
		if (u.stopping && kvt_mono() - u.lost_at > u.o.stop_on_lost) {
			stop(&u);
			break;
		}
		if (all_done && (u.next == u.o.rooms || u.stopping))
			break;
		if (kvt_mono() - u.t0 > u.o.timeout_s) {
			printf("driver: TIMEOUT after %.0f s; live rooms:\n", u.o.timeout_s);
			fflush(stdout);
			kvf_dump(u.eng, stdout);
			ret = 2;
			break;
		}
	}
out:
	secs = kvt_mono() - u.t0;
	printf("driver: role=%s rooms=%u ok=%u failed=%u stuck=%u bad_bytes=%" PRIu64
	       " checked_bytes=%" PRIu64 " user_bad=%u released=%u created=%u seconds=%.3f\n",
	       u.o.role, u.o.rooms, u.ok, u.failed, u.stuck, u.bad_bytes, u.checked, u.user_bad,
	       u.released, u.next, secs);
	staging_line(&u);
	printf("driver: failures:");
	for (int k = 1; k < KVF_FAIL_NUM; k++)
		if (u.by_reason[k])
			printf(" %s=%u", token(kvf_fail_reason_str((enum kvf_fail_reason)k)),
			       u.by_reason[k]);
	printf("\n");
	fflush(stdout);
	kvf_engine_close(u.eng);
	return ret;
}
