/* SPDX-License-Identifier: Apache-2.0 */
/* Liveness: whether a connection's peer is alive, and when to tell it that
 * we are. Decisions only, from stamps the poller thread keeps; no device
 * (tests/unit/transfer/test_liveness.c). The verbs side is keepalive.c; the design,
 * and why it cannot pin a room, is docs/design.md "Liveness".
 *
 * - We are alive: the poller posts a HEARTBEAT on every established QP each
 *   heartbeat.interval_ms (kvf_live_keepalive says when), whatever the
 *   scheduler thread is doing. A stopped or dead process has no poller
 *   either, so its peers stop hearing it.
 * - The peer is alive: one of its SENDs reached us (a receive completed: any
 *   frame, or a write with immediate) within heartbeat.misses x interval of
 *   watched time. A send completion of ours does not count: the RC ACK of a
 *   stopped process comes from its NIC (the kernel's, on soft-RoCE), so it
 *   proves the host and the link, not the process. Those ACKs are counted
 *   (ka_acked) so that the loss says which it is.
 * - Watched time: the poller's own absence is not the peer's silence. A
 *   housekeeping round later than a present poller can be (the loop blocked
 *   on a full ring, starved of CPU, the process stopped and resumed) adds
 *   the excess to the presence's away total, and silence is measured without
 *   it. The scheduler makes no liveness decision at all, so a scheduler
 *   that was away sees no gap either: it finds the rooms' deadlines, which
 *   apply as always.
 *
 * Poller thread only. Times are CLOCK_MONOTONIC ns (clock.h); a stamp later
 * than the caller's now reads as no time passed. */
#ifndef KVF_LIVENESS_H
#define KVF_LIVENESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The poller's own presence, one per transport: watched time is its
 * clock (not src/engine/watch.h's struct kvf_watch, the rooms a user watches). */
struct kvf_presence {
	uint64_t last_ns;   /* the last housekeeping round */
	uint64_t away_ns;   /* absence so far: round gaps past expect_ns, added up */
	uint64_t expect_ns; /* the longest gap between rounds of a poller that runs */
};

/* One connection's. */
struct kvf_liveness {
	uint64_t heard_ns;      /* the peer was last heard */
	uint64_t heard_away_ns; /* the presence's away_ns then */
	uint64_t ka_due_ns;     /* our next keepalive is due */
	uint32_t ka_acked;      /* keepalives the peer's NIC acknowledged since it
	                           was last heard */
	bool ka_inflight;       /* posted, its completion not polled yet */
	bool ka_overdue;        /* one came due while the last was in flight */
};

enum kvf_ka_action {
	KVF_KA_WAIT = 0, /* none due */
	KVF_KA_SEND,     /* post one now */
	KVF_KA_LATE,     /* due, but the last one is still in flight (its SQ
	                    slot is the only one the poller has): none posted,
	                    the caller counts it; once per interval */
};

void kvf_presence_init(struct kvf_presence *w, uint64_t expect_ns, uint64_t now);
/* A housekeeping round at now. */
void kvf_presence_round(struct kvf_presence *w, uint64_t now);

/* The connection is established at now: heard then, the first keepalive
 * one interval later (our HELLO, the scheduler's, normally goes first). */
void kvf_live_start(struct kvf_liveness *l, const struct kvf_presence *w, uint64_t interval_ns,
		    uint64_t now);
/* A receive completed: the peer is heard. */
void kvf_live_heard(struct kvf_liveness *l, const struct kvf_presence *w, uint64_t now);
/* Watched time since the peer was last heard. */
uint64_t kvf_live_silence(const struct kvf_liveness *l, const struct kvf_presence *w, uint64_t now);
/* Whether silence passed limit_ns (misses x interval; 0: never lost). */
bool kvf_live_lost(const struct kvf_liveness *l, const struct kvf_presence *w, uint64_t limit_ns,
		   uint64_t now);
/* What the poller does about our keepalive now (interval_ns 0: never one). */
enum kvf_ka_action kvf_live_keepalive(struct kvf_liveness *l, uint64_t interval_ns, uint64_t now);
/* One was posted at now; its completion came (acked: successfully). */
void kvf_live_ka_posted(struct kvf_liveness *l, uint64_t interval_ns, uint64_t now);
void kvf_live_ka_done(struct kvf_liveness *l, bool acked, uint64_t now);

/* The loss in words, for the log and every room's failure: "nothing heard
 * for N ms (M heartbeats of I ms)", and when the peer's NIC kept
 * acknowledging our keepalives, that its host and link are up and its
 * process is not. Short enough for a room's failure detail. Returns
 * snprintf's count. */
int kvf_live_why(char *buf, size_t len, const struct kvf_liveness *l, uint64_t silence_ns,
		 uint32_t misses, uint32_t interval_ms);

#endif
