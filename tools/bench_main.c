/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry-bench: the main job. Moves KV blocks from a prefill engine to a
 * decode engine over real RDMA, room by room, and prints what a serving
 * engine feels: bandwidth, rooms/s, room latency percentiles (the LAST
 * send to SUCCESS on the decode, and the whole room cycle), CPU time per
 * GB of the scheduler thread and of the completion pollers (--json for
 * all of it as one line). Then, untimed, a verify pass checks every byte.
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
 * Options: --rooms N (1000 timed rooms)  --buffers N (64: layers x K/V)
 *   --block-size BYTES (16384)  --blocks-per-room N (16)  --window N (32
 *   rooms in flight)  --seed N  --layout rotated|contiguous|sglang (which
 *   blocks a room uses: bench_layout.c)  --verify pass|inline|off (pass:
 *   an untimed pass of --verify-rooms N rooms (default --rooms) checks every
 *   destination word; inline: the timed rooms are checked as they finish)  --stamps FILE (two processes: a file both map, so
 *   the decode knows each room's send time)  --latencies FILE (per room)
 *   --abort-every N (abort every Nth room on the side given by --abort-side
 *   prefill|decode)  --timeout S (120, both passes)  --no-progress  --json
 *   --idle-yield (sched_yield() after a loop turn where no engine applied
 *   an event, instead of spinning on: leaves the cores to the pollers)
 *   --wait (after such a turn, sleep until an engine has work:
 *   kvf_engine_wait, or both engines' fds in one poll(); bench_wait.c)
 *
 * The bandwidth and rooms/s are over the timed pass from the first room's
 * send (with --stamps, or on the prefill side) to the last room's end, as
 * perftest's figures are over its posts: the connection's setup and the
 * first ROOM_INFO, once a run, are left out ("seconds_with_setup" keeps
 * them). Without send stamps the interval starts before the first room.
 *
 * Exit status 0 when every room that was not asked to abort succeeded on
 * both passes and every checked word matched.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

static int run_pass(const struct opts *o, struct side *p, struct side *d, struct stamps *st,
		    bool timed, uint64_t t0)
{
	struct side *s = d->eng ? d : p;
	int rc;

	while (!bench_side_done(o, p, timed) || !bench_side_done(o, d, timed)) {
		if ((rc = bench_drive(o, p, st)) || (rc = bench_drive(o, d, st))) {
			fprintf(stderr, "kvferry-bench: %s\n", strerror(-rc));
			return rc;
		}
		bench_progress(o, s, t0, false);
		/* A serving engine's scheduler does other work between calls;
		 * this loop would only spin, taking a core from the pollers. */
		if (o->idle_yield && p->applied <= 0 && d->applied <= 0)
			sched_yield();
		if (o->wait && p->applied <= 0 && d->applied <= 0 && (rc = bench_idle_wait(p, d))) {
			fprintf(stderr, "kvferry-bench: waiting: %s\n", strerror(-rc));
			return rc;
		}
		if ((double)(bench_now_ns() - t0) / 1e9 > o->timeout_s) {
			fprintf(stderr, "kvferry-bench: timeout after %.0f s; live rooms:\n", o->timeout_s);
			kvf_dump(p->eng ? p->eng : d->eng, stderr);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

static bool side_ok(const struct side *s, uint32_t aborts, uint32_t vaborts)
{
	return s->failed <= aborts && s->vfailed <= vaborts && !s->bad_words;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct side p = { 0 }, d = { 0 };
	struct stamps st = { 0 };
	struct cpu_mark c0, c1;
	struct figures f;
	uint64_t t0, t1;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_parse(argc, argv, &o);
	if (((o.pcfg || o.npsets) && bench_open_side(o.pcfg, true, &o, &p)) ||
	    ((o.dcfg || o.ndsets) && bench_open_side(o.dcfg, false, &o, &d)) ||
	    bench_stamps_open(&o, p.eng != NULL, &st))
		return 1;
	bench_cpu_mark(&c0, &p, &d);
	t0 = bench_now_ns();
	rc = run_pass(&o, &p, &d, &st, true, t0);
	t1 = bench_now_ns();
	bench_cpu_mark(&c1, &p, &d);
	if (!rc)
		rc = run_pass(&o, &p, &d, &st, false, t0);
	bench_progress(&o, d.eng ? &d : &p, t0, true);
	bench_figures(&o, d.eng ? &d : &p, &st, &c0, &c1, t0, t1, &f);
	bench_report(&o, &p, &d, &f);
	if (bench_write_latencies(&o, d.eng ? &d : &p, &st))
		rc = -EIO;
	kvf_engine_close(p.eng);
	kvf_engine_close(d.eng);
	/* Only the rooms asked to abort may fail; every checked word must match. */
	uint32_t aborts = o.abort_every ? o.rooms / o.abort_every : 0;
	uint32_t vaborts = 0;

	for (uint32_t i = o.rooms; o.abort_every && i < o.rooms + o.verify_rooms; i++)
		vaborts += (i + 1) % o.abort_every == 0;
	return rc || !side_ok(&p, aborts, vaborts) || !side_ok(&d, aborts, vaborts);
}
