/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry-bench's figures: bandwidth and rooms/s of the timed pass, room
 * latency percentiles, CPU time per GB of the scheduler thread (the one
 * calling kvf_progress: this tool's main thread) and of the transport's
 * completion pollers (threads named "kvf-poller"), the report (text or
 * --json) and the progress line.
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of one thread of this process by its tid: Linux's per-thread
 * CPU clock id, as glibc's pthread_getcpuclockid builds it (CPUCLOCK_SCHED
 * | CPUCLOCK_PERTHREAD_MASK). */
static uint64_t tid_cpu_ns(long tid)
{
	return clock_ns((clockid_t)((~(clockid_t)tid << 3) | 6));
}

static bool is_poller(const char *tid)
{
	char path[300], name[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = 0;
	fclose(f);
	return !strncmp(name, "kvf-poller", 10);
}

void bench_cpu_mark(struct cpu_mark *m, const struct side *p, const struct side *ds)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	for (int k = 0; k < 2; k++) {
		const struct side *s = k ? ds : p;

		memset(&m->st[k], 0, sizeof(m->st[k]));
		m->st[k].size = sizeof(m->st[k]);
		if (!s->eng || kvf_stats(s->eng, &m->st[k]))
			m->st[k].size = 0;
	}

	m->sched_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	m->process_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	m->poller_ns = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] != '.' && is_poller(e->d_name))
			m->poller_ns += tid_cpu_ns(atol(e->d_name));
	}
	if (d)
		closedir(d);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank p50, p99, p99.9 of v[0..n) (sorted here), in place. */
static void percentiles(double *v, uint32_t n, double out[3])
{
	static const double ps[3] = { 0.50, 0.99, 0.999 };

	qsort(v, n, sizeof(*v), cmp_double);
	for (int k = 0; k < 3; k++)
		out[k] = n ? v[(size_t)ceil(ps[k] * n) - 1] : -1;
}

static uint64_t send_time(const struct side *s, const struct stamps *st, uint32_t i)
{
	if (s->prefill)
		return s->t[i].send;
	return st->send && i < st->n ? __atomic_load_n(&st->send[i], __ATOMIC_ACQUIRE) : 0;
}

static void latencies(const struct opts *o, const struct side *s, const struct stamps *st,
		      struct figures *f)
{
	double *a = calloc(o->rooms + 1, sizeof(double)), *b = calloc(o->rooms + 1, sizeof(double));
	double *c = calloc(o->rooms + 1, sizeof(double)), *d = calloc(o->rooms + 1, sizeof(double));

	f->nsend = f->ncycle = f->nland = 0;
	for (uint32_t i = 0; a && b && c && d && i < o->rooms; i++) {
		const struct room_times *t = &s->t[i];
		uint64_t snd = send_time(s, st, i);

		if (t->success && snd && t->success >= snd)
			a[f->nsend++] = (double)(t->success - snd) / 1e3;
		if (t->success && t->release)
			b[f->ncycle++] = (double)(t->release - t->create) / 1e3;
		if (t->success && snd && t->landed >= snd && t->success >= t->landed) {
			c[f->nland] = (double)(t->landed - snd) / 1e3;
			d[f->nland++] = (double)(t->success - t->landed) / 1e3;
		}
	}
	percentiles(a, f->nsend, f->lat_send);
	percentiles(b, f->ncycle, f->lat_cycle);
	percentiles(c, f->nland, f->lat_land);
	percentiles(d, f->nland, f->lat_handoff);
	free(a);
	free(b);
	free(c);
	free(d);
}

/* The first timed room's send, or t0 without send stamps: where the
 * bandwidth interval starts. Before it the decode connected to the prefill
 * (rdma_cm, HELLO) and sent the first ROOM_INFO, once per run; perftest's
 * and ucx_perftest's intervals start after their connection too. */
static uint64_t first_send(const struct opts *o, const struct side *s, const struct stamps *st,
			   uint64_t t0, uint64_t t1)
{
	uint64_t first = UINT64_MAX;

	for (uint32_t i = 0; i < o->rooms; i++) {
		uint64_t t = send_time(s, st, i);

		if (t >= t0 && t < t1 && t < first)
			first = t;
	}
	return first == UINT64_MAX ? t0 : first;
}

void bench_figures(const struct opts *o, const struct side *s, const struct stamps *st,
		   const struct cpu_mark *c0, const struct cpu_mark *c1, uint64_t t0,
		   uint64_t t1, struct figures *f)
{
	double gb;

	f->secs_all = (double)(t1 - t0) / 1e9;
	f->secs = (double)(t1 - first_send(o, s, st, t0, t1)) / 1e9;
	f->bytes = (double)s->ok * o->bpr * o->nbufs * (double)o->block_size;
	f->gbps = f->bytes * 8 / f->secs / 1e9;
	f->rooms_per_s = s->done / f->secs;
	f->cpu.sched_ns = c1->sched_ns - c0->sched_ns;
	f->cpu.poller_ns = c1->poller_ns - c0->poller_ns;
	f->cpu.process_ns = c1->process_ns - c0->process_ns;
	gb = f->bytes / 1e9;
	f->sched_s_per_gb = gb > 0 ? (double)f->cpu.sched_ns / 1e9 / gb : 0;
	f->poller_s_per_gb = gb > 0 ? (double)f->cpu.poller_ns / 1e9 / gb : 0;
	latencies(o, s, st, f);
	for (int k = 0; k < 2; k++) {
		const struct kvf_stats *a = &c0->st[k], *b = &c1->st[k];
		double n = o->rooms;

		f->per_room[k][0] = a->size ? (double)(b->wrs_posted - a->wrs_posted) / n : -1;
		f->per_room[k][1] = a->size ? (double)(b->doorbells - a->doorbells) / n : -1;
		f->per_room[k][2] = a->size ? (double)(b->completions - a->completions) / n : -1;
		f->per_room[k][3] = a->size ? (double)(b->poller_sleeps - a->poller_sleeps) / n : -1;
		f->per_room[k][4] = a->size ? (double)(b->events - a->events) / n : -1;
		f->per_room[k][5] = a->size ? (double)(b->info_bytes_rx - a->info_bytes_rx) / n : -1;
	}
}

static const char *layout_name(enum bench_layout l)
{
	return l == LAYOUT_SGLANG ? "sglang" : l == LAYOUT_CONTIGUOUS ? "contiguous" : "rotated";
}

/* "rails": [{"rail": 0, "device": "mlx5_0", "bytes": N, "writes": N}, ...] of
 * the side that wrote (the prefill, when this process has it). */
static void print_rails(const struct side *s)
{
	struct kvf_rail_stats rs[8];
	int n;

	for (int i = 0; i < 8; i++)
		rs[i] = (struct kvf_rail_stats)KVF_RAIL_STATS_INIT;
	n = s->eng ? kvf_engine_rails(s->eng, rs, 8) : 0;
	printf("\"rails\": [");
	for (int i = 0; i < n && i < 8; i++)
		printf("%s{\"rail\": %u, \"device\": \"%s\", \"bytes\": %" PRIu64 ", \"writes\": %"
		       PRIu64 "}", i ? ", " : "", rs[i].rail, rs[i].device, rs[i].bytes, rs[i].writes);
	printf("], ");
}

static void print_json(const struct opts *o, const struct side *s, const struct side *w,
		       const struct figures *f)
{
	printf("{\"rooms\": %u, \"ok\": %u, \"failed\": %u, \"bad_words\": %u, "
	       "\"bytes\": %.0f, \"seconds\": %.3f, \"seconds_with_setup\": %.3f, "
	       "\"gbit_per_s\": %.4f, "
	       "\"rooms_per_s\": %.1f, \"buffers\": %u, \"block_size\": %" PRIu64
	       ", \"blocks_per_room\": %u, \"window\": %u, \"layout\": \"%s\", "
	       "\"side\": \"%s\", \"verify_rooms\": %u, \"verify_ok\": %u, \"verify_failed\": %u, ",
	       o->rooms, s->ok, s->failed, s->bad_words, f->bytes, f->secs, f->secs_all, f->gbps,
	       f->rooms_per_s, o->nbufs, o->block_size, o->bpr, o->window, layout_name(o->layout),
	       s->prefill ? "prefill" : "decode", o->verify_rooms, s->vok, s->vfailed);
	print_rails(w);
	printf("\"send_to_success_us\": {\"n\": %u, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f}, "
	       "\"room_cycle_us\": {\"n\": %u, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f}, ",
	       f->nsend, f->lat_send[0], f->lat_send[1], f->lat_send[2], f->ncycle,
	       f->lat_cycle[0], f->lat_cycle[1], f->lat_cycle[2]);
	printf("\"send_to_landed_us\": {\"n\": %u, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f}, "
	       "\"landed_to_success_us\": {\"n\": %u, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f}, ",
	       f->nland, f->lat_land[0], f->lat_land[1], f->lat_land[2], f->nland,
	       f->lat_handoff[0], f->lat_handoff[1], f->lat_handoff[2]);
	for (int k = 0; k < 2; k++)
		printf("\"%s_per_room\": {\"wrs\": %.2f, \"doorbells\": %.2f, \"completions\": %.2f, "
		       "\"poller_sleeps\": %.2f, \"events\": %.2f, \"room_info_bytes\": %.1f}, ",
		       k ? "decode" : "prefill", f->per_room[k][0], f->per_room[k][1],
		       f->per_room[k][2], f->per_room[k][3], f->per_room[k][4], f->per_room[k][5]);
	printf("\"cpu_s\": {\"scheduler\": %.3f, \"pollers\": %.3f, \"process\": %.3f}, "
	       "\"cpu_s_per_gb\": {\"scheduler\": %.3f, \"pollers\": %.3f}}\n",
	       (double)f->cpu.sched_ns / 1e9, (double)f->cpu.poller_ns / 1e9,
	       (double)f->cpu.process_ns / 1e9, f->sched_s_per_gb, f->poller_s_per_gb);
}

static void print_text(const struct opts *o, const struct side *s, const struct figures *f)
{
	printf("  %.0f bytes in %.3f s from the first send (%.3f s with the setup): %.3f Gb/s, "
	       "%.1f rooms/s\n", f->bytes, f->secs, f->secs_all, f->gbps, f->rooms_per_s);
	if (f->nsend)
		printf("  LAST send -> SUCCESS (%s): p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%u rooms)\n",
		       s->prefill ? "prefill" : "decode", f->lat_send[0], f->lat_send[1],
		       f->lat_send[2], f->nsend);
	if (f->nland)
		printf("  of which send -> decode poller took the write: p50 %.1f us, p99 %.1f us; "
		       "-> SUCCESS (ring, scheduler thread): p50 %.1f us, p99 %.1f us\n",
		       f->lat_land[0], f->lat_land[1], f->lat_handoff[0], f->lat_handoff[1]);
	if (f->ncycle)
		printf("  room cycle (%s create -> release): p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n",
		       s->prefill ? "prefill" : "decode", f->lat_cycle[0], f->lat_cycle[1],
		       f->lat_cycle[2]);
	printf("  CPU: scheduler thread %.3f s (%.3f s/GB), pollers %.3f s (%.3f s/GB), "
	       "process %.3f s\n", (double)f->cpu.sched_ns / 1e9, f->sched_s_per_gb,
	       (double)f->cpu.poller_ns / 1e9, f->poller_s_per_gb, (double)f->cpu.process_ns / 1e9);
	for (int k = 0; k < 2; k++)
		if (f->per_room[k][0] >= 0)
			printf("  %s per room: %.2f WRs, %.2f doorbells, %.2f completions, "
			       "%.2f poller sleeps, %.2f events, %.1f ROOM_INFO bytes received\n",
			       k ? "decode" : "prefill", f->per_room[k][0], f->per_room[k][1],
			       f->per_room[k][2], f->per_room[k][3], f->per_room[k][4],
			       f->per_room[k][5]);
	if (o->verify == VERIFY_PASS)
		printf("  verify pass (untimed): %u rooms ok, %u failed, %u mismatched 8-byte words\n",
		       s->vok, s->vfailed, s->bad_words);
}

void bench_report(const struct opts *o, const struct side *p, const struct side *d,
		  const struct figures *f)
{
	const struct side *s = d->eng ? d : p;

	if (o->json) {
		print_json(o, s, p->eng ? p : s, f);
		return;
	}
	printf("kvferry-bench: %u rooms (%u buffers x %u blocks of %" PRIu64 " B each, %s layout)\n",
	       o->rooms, o->nbufs, o->bpr, o->block_size, layout_name(o->layout));
	if (p->eng)
		printf("  prefill: %u ok, %u failed\n", p->ok, p->failed);
	if (d->eng)
		printf("  decode:  %u ok, %u failed, %u mismatched 8-byte words\n", d->ok,
		       d->failed, d->bad_words);
	if (s->first_failure.reason)
		printf("  first failure: %s: %s\n", kvf_fail_reason_str(s->first_failure.reason),
		       s->first_failure.detail);
	print_text(o, s, f);
}

/* One line on stderr: rewritten in place on a terminal, else every 5 s. */
void bench_progress(const struct opts *o, const struct side *s, uint64_t t0, bool final)
{
	static uint64_t last;
	uint64_t now = bench_now_ns();
	bool tty = isatty(2);
	double secs = (double)(now - t0) / 1e9;
	double bytes = (double)s->ok * o->bpr * o->nbufs * (double)o->block_size;

	if (!o->progress || (!final && now - last < (tty ? 1 : 5) * 1000000000ull))
		return;
	last = now;
	fprintf(stderr, "%skvferry-bench: %s %u/%u rooms, verify %u/%u, %.1f s, %.3f Gb/s%s",
		tty ? "\r" : "", s->prefill ? "prefill" : "decode", s->done, o->rooms, s->vdone,
		o->verify_rooms, secs, secs > 0 ? bytes * 8 / secs / 1e9 : 0.0,
		tty && !final ? "  " : "\n");
}

/* --latencies FILE: one line per timed room: index, LAST send -> SUCCESS
 * and whole cycle in us (-1 where not known). */
int bench_write_latencies(const struct opts *o, const struct side *s, const struct stamps *st)
{
	FILE *f;

	if (!o->lat_out)
		return 0;
	f = fopen(o->lat_out, "w");
	if (!f) {
		perror(o->lat_out);
		return -1;
	}
	fprintf(f, "# room send_to_success_us cycle_us\n");
	for (uint32_t i = 0; i < o->rooms; i++) {
		const struct room_times *t = &s->t[i];
		uint64_t snd = send_time(s, st, i);

		fprintf(f, "%u %.1f %.1f\n", i,
			t->success && snd && t->success >= snd ? (double)(t->success - snd) / 1e3 : -1.0,
			t->success && t->release ? (double)(t->release - t->create) / 1e3 : -1.0);
	}
	return fclose(f);
}
