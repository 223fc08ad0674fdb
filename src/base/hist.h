/* SPDX-License-Identifier: Apache-2.0 */
/* The room path's own observability numbers: histograms and the counters
 * beyond struct kvf_stats. A leaf: the state machine records into them
 * without seeing metrics.h's snapshots and renderers, which read them. */
#ifndef KVF_HIST_H
#define KVF_HIST_H

#include <stdint.h>

#include <kvferry/kvferry.h>

/* A histogram with fixed bounds (kvf_hist_bounds): bucket[i] counts the
 * values <= bound i and > bound i - 1; the last bucket is +Inf. */
#define KVF_HIST_BUCKETS 14
struct kvf_hist {
	uint64_t count;
	double sum;
	uint64_t bucket[KVF_HIST_BUCKETS];
};
enum kvf_hist_kind { KVF_HIST_SECONDS, KVF_HIST_BYTES, KVF_HIST_WAIT };
/* KVF_HIST_BUCKETS - 1 finite upper bounds, increasing. */
const double *kvf_hist_bounds(enum kvf_hist_kind kind);
void kvf_hist_add(struct kvf_hist *h, enum kvf_hist_kind kind, double v);

/* What the engine counts for observability beyond struct kvf_stats.
 * Scheduler thread only. */
struct kvf_obs_counters {
	uint64_t fail_by_role[2][KVF_STATS_REASONS];
	uint64_t quiesce_expiries;     /* quiesce deadlines that passed (teardowns) */
	uint64_t bytes_sent;           /* sender: bytes of the rooms handed to the transport */
	uint64_t bytes_landed;         /* receiver: bytes of the rooms whose data landed */
	uint64_t chunks_completed;     /* sender: signaled writes completed successfully */
	uint64_t reconnects;           /* receiver: a peer's ROOM_INFO went on a new connection */
	struct kvf_hist xfer_s[2];     /* per role: send (init) to SUCCESS */
	struct kvf_hist room_bytes[2]; /* per role: bytes of each successful room */
	struct kvf_hist land_wait;     /* receiver: seconds from the poller taking a
	                                  room's last write to the scheduler applying it */
};

#endif
