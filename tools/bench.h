/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry-bench's parts (tools/bench_*.c): options, block layouts, one
 * side's room loop (prefill or decode), the clocks and the report. The
 * tool uses the public API only (include/kvferry/kvferry.h).
 */
#ifndef KVF_BENCH_H
#define KVF_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#define BENCH_MAX_SETS 32

enum bench_layout {
	LAYOUT_ROTATED,    /* the room's partition, rotated differently per side */
	LAYOUT_CONTIGUOUS, /* the partition in order on both sides: every run merges */
	LAYOUT_SGLANG,     /* half the pages one contiguous run, half scattered */
};

struct opts {
	const char *pcfg, *dcfg;
	const char *psets[BENCH_MAX_SETS], *dsets[BENCH_MAX_SETS];
	size_t npsets, ndsets;
	uint32_t rooms, nbufs, bpr, window;
	uint64_t block_size, seed;
	uint32_t abort_every;
	int abort_decode;
	double timeout_s;
	int json;
	enum bench_layout layout;
	/* pass: an untimed pass after the timed one checks every word of its
	 * rooms; inline: the timed rooms are checked as they finish (the
	 * figure then includes the checks); off */
	enum { VERIFY_OFF, VERIFY_PASS, VERIFY_INLINE } verify;
	uint32_t verify_rooms; /* rooms in the verify pass (default: --rooms) */
	const char *stamps;    /* file shared by the two processes: send times */
	const char *lat_out;   /* per-room latencies, one line each */
	bool progress;
	bool idle_yield;        /* sched_yield() after a turn with nothing applied */
	bool wait;              /* kvf_engine_wait after a turn with nothing applied */
	uint32_t rails;         /* --rails N: the first N devices of rdma.devices, 0 all */
};

/* Per-room times (CLOCK_MONOTONIC ns; 0 = not yet). landed: the decode's
 * poller took the room's last write (kvf_room_stats' last_chunk_ns, on the
 * engine's clock, which the bench leaves monotonic). */
struct room_times {
	uint64_t create, send, landed, success, release;
};

struct side {
	kvf_engine *eng;
	bool prefill;
	uint8_t **bufs;
	uint32_t nblocks;      /* per buffer */
	kvf_room *rooms;       /* per room index, timed pass then verify pass */
	uint32_t *blocks;      /* scratch block list, blocks-per-room long */
	uint8_t *state;        /* 0 = not created, 1 = live, 2 = released */
	struct room_times *t;  /* per room index */
	uint32_t total;        /* rooms in both passes */
	uint32_t next;         /* next room index to create */
	uint32_t done, ok, failed;     /* timed pass */
	uint32_t vdone, vok, vfailed;  /* verify pass */
	uint32_t bad_words;
	struct kvf_failure first_failure;
	int applied;           /* events the last kvf_progress applied */
};

/* The LAST send's time of each room, written by the prefill and read by
 * the decode: memory in one process, a shared file across two. */
struct stamps {
	uint64_t *send; /* per room index */
	uint32_t n;
	bool mapped;
};

/* bench_opts.c */
void bench_parse(int argc, char **argv, struct opts *o);

/* bench_layout.c */
uint64_t bench_room_id(const struct opts *o, uint32_t i);
uint32_t bench_part_blocks(const struct opts *o);
uint32_t bench_room_block(const struct opts *o, uint32_t i, uint32_t j, bool src);
uint64_t bench_pattern(const struct opts *o, uint32_t buf, uint32_t block, uint64_t word);
uint64_t bench_mix(uint64_t x);

/* bench_side.c */
uint64_t bench_now_ns(void);
int bench_open_side(const char *cfg, bool prefill, const struct opts *o, struct side *s);
int bench_drive(const struct opts *o, struct side *s, struct stamps *st);
bool bench_side_done(const struct opts *o, const struct side *s, bool timed);
int bench_stamps_open(const struct opts *o, bool prefill, struct stamps *st);

/* bench_wait.c: sleep until either engine has work (at most 100 ms).
 * Returns 0 or -errno. */
int bench_idle_wait(const struct side *p, const struct side *d);

/* bench_report.c */
struct cpu_mark {
	uint64_t sched_ns, poller_ns, process_ns;
	struct kvf_stats st[2]; /* prefill, decode (.size 0: no such side) */
};
void bench_cpu_mark(struct cpu_mark *m, const struct side *p, const struct side *d);
struct figures {
	/* secs: from the first timed room's send to the last room's end (the
	 * interval of gbps and rooms_per_s); secs_all: from before the first
	 * room, with the connection's setup */
	double secs, secs_all, bytes, gbps, rooms_per_s;
	double lat_send[3], lat_cycle[3]; /* p50, p99, p99.9 in us; -1 = none */
	/* the decode's split of lat_send: send -> its poller took the write,
	 * then -> SUCCESS seen (the ring and the scheduler thread) */
	double lat_land[3], lat_handoff[3];
	uint32_t nsend, ncycle, nland;
	double sched_s_per_gb, poller_s_per_gb;
	/* per timed room, prefill and decode: WRs, doorbells, completions,
	 * poller sleeps, events applied; -1 for a side not in this process */
	double per_room[2][6];
	struct cpu_mark cpu;
};
void bench_figures(const struct opts *o, const struct side *s, const struct stamps *st,
		   const struct cpu_mark *c0, const struct cpu_mark *c1, uint64_t t0,
		   uint64_t t1, struct figures *f);
void bench_report(const struct opts *o, const struct side *p, const struct side *d,
		  const struct figures *f);
void bench_progress(const struct opts *o, const struct side *s, uint64_t t0, bool final);
int bench_write_latencies(const struct opts *o, const struct side *s, const struct stamps *st);

#endif
