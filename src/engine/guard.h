/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a caller can do wrong that the library sees cheaply, and refuses
 * instead of corrupting a queue pair:
 *  - an engine used in a child after fork(): the child shares the parent's
 *    verbs objects (the same kernel QPs, CQs and MRs through inherited fds)
 *    but has none of its threads (poller, HTTP). At fork every open
 *    engine's transport is swapped for one that refuses (-ECHILD) and never
 *    touches the shared objects, so the child can close the engine (its
 *    memory; the transport's is left, it is the parent's) and the parent's
 *    connections go on untouched.
 *  - kvf_progress / kvf_engine_wait entered by a second thread while a
 *    first is in one: -EBUSY, counted (kvf_stats.calls_concurrent).
 */
#ifndef KVF_GUARD_H
#define KVF_GUARD_H

struct kvf_engine;

/* Track eng for fork (once per engine, at creation); untrack at close. */
void kvf_guard_track(struct kvf_engine *eng);
void kvf_guard_untrack(struct kvf_engine *eng);
/* Enter / leave the scheduler's machinery (progress, wait). Enter returns
 * 0, -ECHILD (a child after fork; logged once) or -EBUSY (another thread
 * is in it; counted). Leave only after an enter that returned 0. */
int kvf_guard_enter(struct kvf_engine *eng, const char *what);
void kvf_guard_leave(struct kvf_engine *eng);

#endif
