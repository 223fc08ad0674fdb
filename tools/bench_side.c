/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One side of the bench (prefill or decode): its engine, its pool, and
 * the loop that creates, drives and releases its rooms. Rooms
 * [0, rooms) are the timed pass: nothing is poisoned or checked there.
 * Rooms [rooms, rooms + verify_rooms) are the verify pass, started only
 * once the timed pass is over on this side: the decode poisons each
 * room's destination blocks before it and checks every word after
 * SUCCESS (--verify inline does that in the timed pass instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int alloc_pool(const struct opts *o, struct side *s)
{
	uint64_t *bs = calloc(o->nbufs, sizeof(*bs));
	int rc;

	s->nblocks = o->window * bench_part_blocks(o);
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
				w[x] = s->prefill ? bench_pattern(o, k, b, x) : 0;
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

static void poison(const struct opts *o, struct side *s, uint32_t i)
{
	for (uint32_t k = 0; k < o->nbufs; k++)
		for (uint32_t j = 0; j < o->bpr; j++)
			memset(s->bufs[k] + bench_room_block(o, i, j, false) * o->block_size, 0xdd,
			       o->block_size);
}

static int create_receiver(const struct opts *o, struct side *s, uint32_t i)
{
	int rc;

	if (i >= o->rooms || o->verify == VERIFY_INLINE)
		poison(o, s, i);
	rc = kvf_receiver_create(s->eng, bench_room_id(o, i), NULL, &s->rooms[i]);
	for (uint32_t j = 0; !rc && j < o->bpr; j++)
		s->blocks[j] = bench_room_block(o, i, j, false);
	if (!rc)
		rc = kvf_receiver_init(s->eng, s->rooms[i], s->blocks, o->bpr);
	return rc == -ECANCELED ? 0 : rc; /* failed at once (connect): counted when polled */
}

/* Create the next room if its partition is free (and, for the first room
 * of the verify pass, once the timed pass is over). */
static int create_next(const struct opts *o, struct side *s)
{
	uint32_t i = s->next;
	int rc;

	if (i >= s->total || (i >= o->window && s->state[i - o->window] != 2) ||
	    (i == o->rooms && s->done < o->rooms))
		return 0;
	s->t[i].create = bench_now_ns();
	if (s->prefill)
		rc = kvf_sender_create(s->eng, bench_room_id(o, i), &s->rooms[i]);
	else
		rc = create_receiver(o, s, i);
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
				bench_room_block(o, i, j, false) * o->block_size);
			uint32_t src = bench_room_block(o, i, j, true);

			for (uint64_t x = 0; x < o->block_size / 8; x++)
				bad += w[x] != bench_pattern(o, k, src, x);
		}
	}
	return bad;
}

static void send_room(const struct opts *o, struct side *s, struct stamps *st, uint32_t i)
{
	for (uint32_t j = 0; j < o->bpr; j++)
		s->blocks[j] = bench_room_block(o, i, j, true);
	s->t[i].send = bench_now_ns();
	if (st->send && i < st->n)
		__atomic_store_n(&st->send[i], s->t[i].send, __ATOMIC_RELEASE);
	/* A prefill-side abort goes right after the writes are posted, while
	 * they are still in flight. */
	if (kvf_sender_send(s->eng, s->rooms[i], s->blocks, o->bpr) == 0 && should_abort(o, s, i))
		kvf_abort(s->eng, s->rooms[i]);
}

static void finish_room(const struct opts *o, struct side *s, uint32_t i, int st)
{
	bool timed = i < o->rooms;

	s->state[i] = 2;
	s->t[i].release = bench_now_ns();
	*(timed ? &s->done : &s->vdone) += 1;
	if (st != KVF_SUCCESS) {
		*(timed ? &s->failed : &s->vfailed) += 1;
		return;
	}
	*(timed ? &s->ok : &s->vok) += 1;
	if ((!timed || o->verify == VERIFY_INLINE) && !s->prefill)
		s->bad_words += verify(o, s, i);
}

/* Drive one live room: send when it is time, abort when asked, finish it
 * when terminal and quiescent. */
static void step_room(const struct opts *o, struct side *s, struct stamps *stp, uint32_t i)
{
	int st = kvf_poll(s->eng, s->rooms[i]);

	/* Mid-transfer: the sender once its writes are posted, the receiver
	 * once its ROOM_INFO is out. */
	if (should_abort(o, s, i) &&
	    (st == KVF_TRANSFERRING || (!s->prefill && st == KVF_WAITING_FOR_INPUT)))
		kvf_abort(s->eng, s->rooms[i]);
	if (s->prefill && st == KVF_WAITING_FOR_INPUT) {
		send_room(o, s, stp, i);
		return;
	}
	if (st != KVF_SUCCESS && st != KVF_FAILED)
		return;
	if (st == KVF_SUCCESS && !s->t[i].success) {
		struct kvf_room_stats rs = KVF_ROOM_STATS_INIT;

		s->t[i].success = bench_now_ns();
		if (!s->prefill && !kvf_room_stats(s->eng, s->rooms[i], &rs))
			s->t[i].landed = rs.last_chunk_ns;
	}
	if (kvf_release(s->eng, s->rooms[i]) != 0)
		return; /* not quiescent yet */
	finish_room(o, s, i, st);
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

int bench_drive(const struct opts *o, struct side *s, struct stamps *st)
{
	int rc;

	if (!s->eng)
		return 0;
	s->applied = kvf_progress(s->eng);
	while ((rc = create_next(o, s)) > 0)
		;
	if (rc < 0)
		return rc;
	for (uint32_t i = s->next > o->window ? s->next - o->window : 0; i < s->next; i++) {
		if (s->state[i] != 1)
			continue;
		note_failure(s, i);
		step_room(o, s, st, i);
	}
	return 0;
}

bool bench_side_done(const struct opts *o, const struct side *s, bool timed)
{
	if (!s->eng)
		return true;
	return timed ? s->done >= o->rooms : s->vdone >= o->verify_rooms;
}

/* --rails N: the engine opened on every device of its config is opened
 * again on the first N of them ("rdma.devices=a,b" after the other sets). */
static int open_rails(const char *cfg, const char **sets, size_t nsets, const struct opts *o,
		      struct side *s, char *err, size_t errlen)
{
	struct kvf_rail_stats rs[8];
	static char devs[2][8 * 64 + 16]; /* per side: kept for the engine's life */
	char *list = devs[s->prefill];
	int n;

	for (int i = 0; i < 8; i++)
		rs[i] = (struct kvf_rail_stats)KVF_RAIL_STATS_INIT;
	n = kvf_engine_rails(s->eng, rs, 8);
	if (n < (int)o->rails) {
		snprintf(err, errlen, "--rails %u: the engine has %d (rdma.devices)", o->rails, n);
		return -EINVAL;
	}
	if (n == (int)o->rails)
		return 0;
	strcpy(list, "rdma.devices=");
	for (uint32_t i = 0; i < o->rails; i++)
		snprintf(list + strlen(list), sizeof(devs[0]) - strlen(list), "%s%s", i ? "," : "",
			 rs[i].device);
	kvf_engine_close(s->eng);
	s->eng = NULL;
	sets[nsets] = list;
	return kvf_engine_open_with(cfg, sets, nsets + 1, err, errlen, &s->eng);
}

int bench_open_side(const char *cfg, bool prefill, const struct opts *o, struct side *s)
{
	const char *sets[BENCH_MAX_SETS + 1];
	size_t nsets = prefill ? o->npsets : o->ndsets;
	char err[512];
	int rc;

	memcpy(sets, prefill ? o->psets : o->dsets, nsets * sizeof(*sets));
	memset(s, 0, sizeof(*s));
	s->prefill = prefill;
	s->total = o->rooms + o->verify_rooms;
	rc = kvf_engine_open_with(cfg, sets, nsets, err, sizeof(err), &s->eng);
	if (!rc && o->rails)
		rc = open_rails(cfg, sets, nsets, o, s, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "kvferry-bench: %s engine: %s\n", prefill ? "prefill" : "decode", err);
		return rc;
	}
	s->rooms = calloc(s->total, sizeof(*s->rooms));
	s->state = calloc(s->total, 1);
	s->t = calloc(s->total, sizeof(*s->t));
	s->blocks = calloc(o->bpr, sizeof(*s->blocks));
	if (!s->rooms || !s->state || !s->t || !s->blocks)
		return -ENOMEM;
	rc = alloc_pool(o, s);
	if (rc)
		fprintf(stderr, "kvferry-bench: pool registration: %s\n", strerror(-rc));
	return rc;
}

/* Send times of the timed rooms. With --stamps, a file both processes map
 * (one CLOCK_MONOTONIC, as both run on one host): the prefill clears it at
 * start (it starts first) and stores each room's send time before posting
 * its writes; the decode reads it at SUCCESS, which comes after them. */
int bench_stamps_open(const struct opts *o, bool prefill, struct stamps *st)
{
	size_t len = (size_t)o->rooms * sizeof(uint64_t);
	int fd;

	st->n = o->rooms;
	if (!o->stamps) {
		st->send = calloc(o->rooms, sizeof(uint64_t));
		return st->send ? 0 : -ENOMEM;
	}
	fd = open(o->stamps, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		fprintf(stderr, "kvferry-bench: --stamps %s: %s\n", o->stamps, strerror(errno));
		return -errno;
	}
	st->send = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (st->send == MAP_FAILED) {
		st->send = NULL;
		return -errno;
	}
	st->mapped = true;
	if (prefill)
		memset(st->send, 0, len);
	return 0;
}
